"""``ba-mcp demo``: start the server as a subprocess, talk to it as a real MCP client over stdio, and
print each call with the observation the model would read."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

SAMPLES = Path(__file__).parent / "samples"
_RULE = "─" * 78

DEMO_QUERIES = [
    (
        "SELECT year(order_date) AS year, category, round(sum(net_revenue)) AS revenue, "
        "round(100 * sum(gross_margin) / sum(net_revenue), 1) AS margin_pct FROM order_facts "
        "WHERE status = 'completed' GROUP BY ALL ORDER BY year, revenue DESC",
        "standard",
    ),
    (
        "SELECT monthname(order_date) AS month, count(DISTINCT order_id) AS orders FROM order_facts "
        "WHERE year(order_date) = 2025 GROUP BY month(order_date), 1 ORDER BY month(order_date)",
        "full",
    ),
    (
        "SELECT channel_name, count(*) AS orders, round(100 * avg((status = 'returned')::INT), 2) AS return_rate_pct "
        "FROM orders JOIN channels USING (channel_id) GROUP BY ALL ORDER BY return_rate_pct DESC",
        "full",
    ),
]


async def run_demo(workspace: Path | None, config: Path | None, emit: Callable[[str], None]) -> int:
    """Run the demo session; ``emit`` receives each printed block (the CLI passes print)."""

    def show(title: str, body: str) -> None:
        emit(f"{_RULE}\n▶ {title}\n{_RULE}\n{body.rstrip()}\n")

    tmp = None
    if workspace is None:
        tmp = tempfile.mkdtemp(prefix="ba-mcp-demo-")
        workspace = Path(tmp)
    uploads = workspace / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    if not (uploads / "sales_2025.csv").exists():
        shutil.copy(SAMPLES / "sales_2025.csv", uploads / "sales_2025.csv")
    args = ["-m", "ba_mcp", "serve"] + (["--config", str(config)] if config else [])
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")}
    env["BA_MCP_WORKSPACE"] = str(workspace)
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    print(f"ba-mcp demo: server = {sys.executable} {' '.join(args)}", file=sys.stderr)
    print("ba-mcp demo: connecting over stdio …", file=sys.stderr)
    try:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            show(
                "initialize",
                f"server {init.server_info.name} {init.server_info.version}, protocol {init.protocol_version}\n"
                + textwrap.indent(init.instructions or "", "  "),
            )
            tools = await session.list_tools()
            show("tools/list", "\n".join(f"- {t.name}: {t.title}" for t in tools.tools))
            await _call(show, session, "file_reader", {"path": "upload_sales_2025", "output_level": "brief"})
            result = await _call(show, session, "file_reader", {"path": "upload_sales_2025"})
            artifact = _meta(result).get("artifact_id")
            await _call(
                show,
                session,
                "file_reader",
                {"path": "uploads/sales_2025.csv", "offset": 100, "nrows": 5, "output_level": "full"},
            )
            if artifact:
                contents = await session.read_resource(f"artifact://{artifact}")
                text = getattr(contents.contents[0], "text", "")
                show(f"resources/read artifact://{artifact}", "\n".join(text.splitlines()[:6]) + "\n…")
                await _call(show, session, "file_reader", {"path": artifact, "offset": 230, "output_level": "full"})
            await _call(show, session, "file_reader", {"path": "../../etc/passwd"})
            schema = await session.read_resource("db://demo/schema")
            text = getattr(schema.contents[0], "text", "")
            show("resources/read db://demo/schema", "\n".join(text.splitlines()[:14]) + "\n…")
            for query, level in DEMO_QUERIES:
                await _call(show, session, "query_database", {"query": query, "output_level": level})
            top = await _call(
                show,
                session,
                "query_database",
                {
                    "query": "SELECT customer_id, segment, round(sum(net_revenue), 2) AS revenue FROM order_facts "
                    "WHERE status = 'completed' GROUP BY ALL ORDER BY revenue DESC",
                    "max_rows": 20,
                    "output_level": "brief",
                },
            )
            top_id = _meta(top).get("artifact_id")
            if top_id:
                await _call(
                    show,
                    session,
                    "query_database",
                    {
                        "query": f"SELECT segment, count(*) AS customers, round(sum(revenue)) AS revenue FROM {top_id} "
                        "GROUP BY ALL ORDER BY revenue DESC",
                        "output_level": "full",
                    },
                )
            await _call(
                show,
                session,
                "query_database",
                {
                    "query": "SELECT region, round(sum(revenue)) AS revenue FROM upload_sales_2025 "
                    "GROUP BY 1 ORDER BY 2 DESC",
                    "output_level": "full",
                },
            )
            await _call(show, session, "query_database", {"query": "DROP TABLE orders"})
            await _metrics_demo(show, session)
            await _python_demo(show, session)
            await _skills_demo(show, session)
            files = await session.read_resource("ba://files")
            show("resources/read ba://files", getattr(files.contents[0], "text", ""))
            metrics = await session.read_resource("ba://metrics")
            lines = getattr(metrics.contents[0], "text", "").splitlines()  # whole lines: their widths vary
            show("resources/read ba://metrics", "\n".join(lines[:40]) + ("\n…" if len(lines) > 40 else ""))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print("ba-mcp demo: done", file=sys.stderr)
    return 0


PYTHON_TRANSFORM = """\
# monthly net revenue by category, 2025, with month-over-month growth
monthly = load_artifact("{aid}")
pivot = monthly.pivot_table(index="month", columns="category", values="revenue", aggfunc="sum")
growth = pivot.pct_change().mul(100).round(1)
print(f"{{len(monthly)}} rows loaded; categories: {{', '.join(pivot.columns)}}")
growth.tail(3)
"""

PYTHON_CHART = """\
import matplotlib.pyplot as plt
ax = pivot.plot(figsize=(8, 4), marker="o")
ax.set_title("Net revenue by category, 2025")
ax.set_xlabel("month")
ax.set_ylabel("net revenue")
best = pivot.sum().idxmax()
save_artifact(pivot, title="monthly net revenue by category, 2025")
"""


async def _python_demo(show: Callable[[str, str], None], session: ClientSession) -> None:
    """run_python: load a query result, transform it with pandas, chart it, and the import guardrail."""
    monthly = await _call(
        show,
        session,
        "query_database",
        {
            "query": "SELECT month(order_date) AS month, category, round(sum(net_revenue)) AS revenue "
            "FROM order_facts WHERE status = 'completed' AND year(order_date) = 2025 GROUP BY ALL ORDER BY ALL",
            "output_level": "brief",
        },
    )
    aid = _meta(monthly).get("artifact_id")
    if not aid:
        return
    await _call(show, session, "run_python", {"code": PYTHON_TRANSFORM.format(aid=aid)})
    chart = await _call(show, session, "run_python", {"code": PYTHON_CHART})
    saved = re.search(r"artifact_[0-9a-f]{12}", chart.content[0].text if chart.content else "")
    if saved:
        await _call(
            show,
            session,
            "query_database",
            {"query": f"SELECT * FROM {saved.group(0)} ORDER BY month DESC LIMIT 2", "output_level": "full"},
        )
    await _call(
        show,
        session,
        "save_analysis",
        {
            "name": "monthly-revenue",
            "steps": "last:4",
            "parameters": {"year": 2025},
            "description": "Net revenue by month and category, with a chart",
            "overwrite": True,
        },
    )
    await _call(show, session, "run_python", {"code": "import subprocess"})


async def _metrics_demo(show: Callable[[str, str], None], session: ClientSession) -> None:
    """Metrics: the catalog, agreed metrics by a dimension (with their definitions), and a refused where."""
    catalog = await session.read_resource("metrics://catalog")
    show("resources/read metrics://catalog", getattr(catalog.contents[0], "text", ""))
    await _call(
        show,
        session,
        "query_metrics",
        {"metrics": ["net_revenue", "margin_pct", "average_order_value"], "dimensions": ["region"]},
    )
    await _call(
        show,
        session,
        "query_metrics",
        {"metrics": ["net_revenue"], "dimensions": ["channel"], "where": ["channel = 'online'; DROP TABLE orders"]},
    )


async def _skills_demo(show: Callable[[str, str], None], session: ClientSession) -> None:
    """Skills: the prompts they become, and one followed as a model would: load it, run its metrics query, read
    its script and run that on the query's artifact."""
    prompts = await session.list_prompts()
    if not prompts.prompts:
        return
    show(
        "prompts/list (one per skill)",
        "\n".join(f"- /{p.name}: {(p.description or '')[:90]}…" for p in prompts.prompts),
    )
    name, script = "sales-performance-review", "scripts/price_volume_mix.py"
    await _call(show, session, "use_skill", {"name": name, "output_level": "brief"})
    skill_md = await session.read_resource(f"skill://{name}/SKILL.md")
    text = getattr(skill_md.contents[0], "text", "")
    step = re.search(rf"```query_metrics feeds {re.escape(script)}\n(.*?)```", text, re.S)
    if step is None:
        return
    bridge = await _call(show, session, "query_metrics", {**json.loads(step.group(1)), "output_level": "brief"})
    aid = _meta(bridge).get("artifact_id")
    code = await session.call_tool("use_skill", {"name": name, "path": script, "output_level": "full"})
    first = getattr(code.content[0], "text", "") if code.content and not code.is_error else ""
    body = first.split("\n", 2)[2] if first.count("\n") >= 2 else ""
    if aid and body:
        await _call(show, session, "run_python", {"code": f"SOURCE = {aid!r}\n" + body.split('"""', 2)[2].strip()})


async def _call(show: Callable[[str, str], None], session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, arguments)
    lines = []
    for block in result.content:
        if block.type == "text":
            lines.append(block.text)
        elif block.type == "image":
            lines.append(f"[image: {block.mime_type}]")
        elif block.type == "resource_link":
            lines.append(f"[resource link: {block.uri}]")
    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    show(f"tools/call {tool}({shown})" + ("  → error" if result.is_error else ""), "\n".join(lines))
    return result


def _meta(result: Any) -> dict[str, Any]:
    """The machine-readable metadata of a result (under _meta; the model reads the text)."""
    from ba_mcp.server import META_KEY

    return dict((result.meta or {}).get(META_KEY) or {})
