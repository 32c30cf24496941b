"""A model read from metric files and checked: each metric compiles alone (its references, aggregates, filter
and time dimension). ``load_model`` is lenient — a metric that does not compile is left out with a warning, and
so, in turn, the metrics built on it; ``validate_files`` is strict and reports every problem as
``file:line: message``."""

from __future__ import annotations

from ba_mcp.errors import ToolFailure
from ba_mcp.metrics.compile import probe_query
from ba_mcp.metrics.model import Model, read_model

Grains = dict[str, dict[str, str]]  # dialect -> time grain -> SQL (the registry's, for dialects without DATE_TRUNC)


def load_model(sources: list[tuple[str, str]], dialects: dict[str, str], grains: Grains | None = None) -> Model:
    model, problems = read_model(sources, dialects, strict=False, grains=grains)
    model.warnings = [*problems, *_check_metrics(model)]
    return model


def validate_files(
    sources: list[tuple[str, str]], dialects: dict[str, str], grains: Grains | None = None
) -> tuple[Model, list[str]]:
    model, problems = read_model(sources, dialects, strict=True, grains=grains)
    problems += _check_metrics(model)
    model.warnings = list(problems)
    return model, problems


def _check_metrics(model: Model) -> list[str]:
    problems: list[str] = []
    changed = True
    while changed:
        changed = False
        for name in list(model.metrics):
            metric = model.metrics[name]
            try:
                probe_query(model, name)
            except ToolFailure as exc:
                problems.append(f"{metric.where}: metric {name}: {exc.message}")
            except RecursionError:
                problems.append(f"{metric.where}: metric {name}: its expression nests too deeply")
            else:
                continue
            del model.metrics[name]
            changed = True
    return problems
