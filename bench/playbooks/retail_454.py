"""Recipes for retail_454, the specialty retailer on a 4-5-4 calendar (bench/archetypes/retail_454.md).

Each recipe follows its SKILL.md literally on these exports and judges the archetype's plants for that skill from
the script's output (see bench/playbooks/common.py). The shaping every skill shares (``LINES``) is the model's part:
POS lines with the store number unpadded, the duplicate register copies counted once and the local date taken as
written; the web orders without the cancelled ones, their UTC time turned into the US/Eastern business day; both
as one table of sale lines (merchandise sales after discounts, the plan's basis). Session names are prefixed
rx_: the playbooks' scripts run in the same session and leave their own variables (periods, lines ...).
"""

from __future__ import annotations

import re

from bench.playbooks.common import Recipe, Run, ScriptCrash, by_class, within
from tests.conftest import meta_of, text_of

# The raw exports as one table of sale lines (both channels) - `rx_lines` - and the fiscal periods of the plan
# workbook (its own weeks from PROFILE's first day) - `rx_periods`. Run once per session.
LINES = """
import pandas as pd, numpy as np, json
if 'rx_lines' not in globals():
    pos = load_file('uploads/pos_lines.csv', dtype=str)
    pos = pos.drop_duplicates(['Trans ID', 'Line'])  # a register file re-sent under another register counts once
    pos['store'] = pos['Store'].astype(int).astype(str)
    pos['ts'] = pd.to_datetime(pos['Trans Date Time'], format='%m/%d/%Y %H:%M')
    pos['date'] = pos['ts'].dt.normalize()
    pos['dept'] = pos['Dept/Class'].str.split('/').str[0]
    pos['units'] = pd.to_numeric(pos['Units'])
    pos['net_sales'] = pd.to_numeric(pos['Net Sales'])
    pos['discount'] = pd.to_numeric(pos['Discount'])
    stores = load_file('uploads/stores.csv', dtype=str)
    stores['store'] = stores['store_nbr'].astype(int).astype(str)
    stores['open_date'] = pd.to_datetime(stores['open_date'])
    rx_region = dict(zip(stores.store, stores.region))
    orders = load_file('uploads/ecom_orders.json', lines=True, dtype=False)
    orders = orders[orders.status != 'cancelled']
    web = orders[['order_id', 'created_at', 'member_id', 'lines']].explode('lines').reset_index(drop=True)
    web = pd.concat([web.drop(columns='lines'), pd.json_normalize(web['lines'])], axis=1)
    web['ts'] = pd.to_datetime(web['created_at'], utc=True).dt.tz_convert('US/Eastern').dt.tz_localize(None)
    sale = pos[pos.units > 0]
    rx_lines = pd.concat([
        pd.DataFrame({'channel': 'store', 'store': sale.store, 'region': sale.store.map(rx_region),
                      'trans_id': sale['Trans ID'], 'date': sale.date, 'ts': sale.ts, 'sku': sale.SKU,
                      'dept': sale.dept, 'member_id': sale['Loyalty ID'], 'units': sale.units,
                      'net_sales': sale.net_sales, 'discount': sale.discount, 'promo': sale['Promo ID']}),
        pd.DataFrame({'channel': 'ecom', 'store': 'WEB', 'region': 'Ecom', 'trans_id': web.order_id,
                      'date': web.ts.dt.normalize(), 'ts': web.ts, 'sku': web.sku, 'dept': web.department.astype(str),
                      'member_id': web.member_id, 'units': web.quantity.astype(float),
                      'net_sales': pd.to_numeric(web.line_total), 'discount': pd.to_numeric(web.discount),
                      'promo': web.promo}),
    ], ignore_index=True)
    rx_lines = rx_lines[rx_lines.dept != '99']  # non-merchandise (the GWP candle at 0): not sales
    rx_through = rx_lines.date.max()
    # the plan workbook's periods, dated by its own weeks from the calendar's first day
    sheets = load_file('uploads/plan.xlsx', sheet_name=None, header=3)
    rx_plan = pd.concat([s.assign(fiscal_year=n) for n, s in sheets.items()], ignore_index=True)
    rx_plan = rx_plan[rx_plan['Dept'].astype(str).str.strip() != 'TOTAL'].dropna(subset=['Period'])
    rx_plan['dept'] = rx_plan['Dept'].astype(int).astype(str)
    weeks = rx_plan.drop_duplicates(['fiscal_year', 'Period'])[['fiscal_year', 'Period', 'Weeks']].copy()
    weeks['n'] = weeks.Period.str[1:].astype(int)
    weeks = weeks.sort_values(['fiscal_year', 'n']).reset_index(drop=True)
    first = pd.Timestamp(PROFILE['fiscal_calendar']['first_day'])
    ends = first + pd.to_timedelta(7 * weeks.Weeks.astype(int).cumsum(), unit='D')
    weeks['period_end'] = ends - pd.Timedelta(days=1)
    weeks['period_start'] = ends - pd.to_timedelta(7 * weeks.Weeks.astype(int), unit='D')
    rx_periods = weeks[['fiscal_year', 'Period', 'n', 'period_start', 'period_end']]
    def rx_fiscal_period(dates):
        idx = np.searchsorted(rx_periods.period_end.values, dates.values)
        idx = np.minimum(idx, len(rx_periods) - 1)
        return rx_periods.fiscal_year.values[idx], rx_periods.Period.values[idx]
    rx_lines['fiscal_year'], rx_lines['period'] = rx_fiscal_period(rx_lines.date)
print(len(rx_lines), rx_through, len(rx_periods))
"""


async def _sql(run: Run, skill: str, feeds: str, table: str, artifact: str) -> str:
    """The SQL block of SKILL.md (as served) that feeds `feeds`, on the shaped artifact in place of `table`, run
    with query_database at brief: its artifact id (into the session as `sql_id`)."""
    read = await run.session.call_tool("use_skill", {"name": skill, "output_level": "full"})
    blocks = re.findall(r"```sql\n(.*?)```", text_of(read), re.S)
    query = next(b for b in blocks if feeds in b).replace(table, artifact)
    result = await run.session.call_tool("query_database", {"query": query, "output_level": "brief"})
    text = text_of(result)
    run.outputs.append(f"### {skill} query_database ({feeds})\n{text}")
    if result.is_error:
        raise ScriptCrash(text[-1500:])
    aid = meta_of(result).get("artifact_id") or re.search(r"artifact_[0-9a-f]+", text).group(0)
    await run.py(f"sql_id = {aid!r}")
    return aid


async def budget_vs_actual(run: Run) -> dict[str, bool]:
    """Plan (department x period, merchandise sales after discounts before returns) against the same actuals from
    both channels, each period on the plan's own dates; data_through the last day of the exports."""
    plants = run.plants("budget-vs-actual")
    await run.py(LINES)
    await run.py(
        "act = rx_lines.groupby(['fiscal_year', 'period', 'dept'], as_index=False).net_sales.sum()\n"
        "bva = rx_plan.rename(columns={'Period': 'period', 'Planned Sales $': 'plan'})\n"
        "bva = bva.merge(rx_periods.rename(columns={'Period': 'period'}), on=['fiscal_year', 'period'])\n"
        "bva = bva.merge(act, on=['fiscal_year', 'period', 'dept'], how='outer')\n"
        "bva['department'] = bva['dept'] + ' ' + bva['Department'].fillna('')\n"
        "bva = bva.assign(plan=bva.plan.fillna(0), actual=bva.net_sales.fillna(0), data_through=rx_through)\n"
        "bva = bva[['fiscal_year', 'period_start', 'period_end', 'department', 'plan', 'actual', 'data_through']]\n"
        "bva_id = save_artifact(bva, title='plan vs actual by department and fiscal period')\n"
        "print(bva.tail())"
    )
    await run.script("budget-vs-actual", "scripts/budget_variance.py", "SOURCE = bva_id")
    out = await run.get(
        "{'bias': float(bias), 'largest': None if largest is None else largest['department'], "
        "'largest_pct': None if largest is None else float(largest['residual_pct']), "
        "'misses': sorted(set(misses['department'])), 'flagged': sorted(set(flags['department'])), "
        "'year_misses': year_cells[year_cells.flag].department.tolist(), "
        "'year_raw': dict(zip(year_cells.fy + ' ' + year_cells.department, year_cells.variance_pct)), "
        "'left_out': list(left_out), 'partial': partial.period.tolist()}"
    )
    flagged = set(out["flagged"]) | set(out["year_misses"])
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "department_miss"):  # Dresses named the largest miss; FY2025 YTD raw within
        ytd = next((v for d, v in out["year_raw"].items() if d.startswith("FY2025 11 ")), None)
        verdicts[p["id"]] = str(out["largest"]).startswith("11 ") and within(ytd, p, 0.01)
    for p in by_class(plants, "truth", "plan_bias"):  # one PLAN BIAS line at about the plan's bias
        verdicts[p["id"]] = within(out["bias"], p)
    for p in by_class(plants, "lookalike", "partial_period"):  # P9 judged as a miss (not left out / pro rata)
        verdicts[p["id"]] = "FY2025 P9" not in out["left_out"]
    for p in by_class(plants, "lookalike", "bias_not_miss"):  # Accessories flagged as a miss after the bias
        verdicts[p["id"]] = any(d.startswith("15 ") for d in flagged)
    return verdicts


async def _bridge(run: Run, source: str, fiscal_year: int, period: object, by: str | None = None) -> dict:
    """The bridge of price_volume_mix.py on one fiscal window; its revenue change and, with BY, per group."""
    extra = f"BY = {by!r}\n" if by else "BY = None\n"
    await run.script(
        "sales-performance-review",
        "scripts/price_volume_mix.py",
        f"{extra}PERIOD = {period!r}\nFISCAL_YEAR = {fiscal_year}\nSOURCE = {source}",
    )
    return await run.get(
        "{'steps': dict(zip(bridge.step, bridge.revenue)), 'price_index': bridge.attrs['price_index'], "
        "'groups': None if by_group is None else by_group.to_dict('index')}"
    )


def _change(steps: dict) -> float:
    return steps["current period revenue"] / steps["prior period revenue"] - 1


def _price_change(steps: dict) -> float:
    """The group's like-for-like price change as the bridge states it: its price step over the continuing items'
    current units at prior prices."""
    price = sum(v for k, v in steps.items() if k in ("price and discount", "list price", "discount"))
    at_prior = (
        steps["current period revenue"] - price - steps.get("new items", 0) - steps.get("revenue without units", 0)
    )
    return price / at_prior


async def sales_performance_review(run: Run) -> dict[str, bool]:
    """Rows per item and week (the fiscal calendar is 4-5-4: the script cuts the periods and restates the 53-week
    FY2023): FY2024 against FY2023 (the year, then P12); FY2025 P1-P8 against FY2024 P1-P8 by department (item =
    SKU). By region, step 4 of SKILL.md: comp_sales.py on the store sale lines per store and local day (the web is not
    a store), the stores master as STORES; the region's growth is its comp_growth."""
    plants = run.plants("sales-performance-review")
    await run.py(LINES)
    await run.py(
        "wk = rx_lines.assign(week=rx_lines.date - pd.to_timedelta((rx_lines.date.dt.dayofweek + 1) % 7, unit='D'),\n"
        "                  list_revenue=rx_lines.net_sales + rx_lines.discount)\n"
        "spr_sku = wk.groupby(['sku', 'week'], as_index=False).agg(net_revenue=('net_sales', 'sum'),\n"
        "    units=('units', 'sum'), list_revenue=('list_revenue', 'sum'), department=('dept', 'first'))\n"
        "spr_sku_id = save_artifact(spr_sku, title='net revenue and units per SKU and week')\n"
        "print(len(spr_sku))"
    )
    year = await _bridge(run, "spr_sku_id", 2024, None)
    p12 = await _bridge(run, "spr_sku_id", 2024, 12)
    depts = await _bridge(run, "spr_sku_id", 2025, (1, 8), "department")
    await run.py(
        "st = rx_lines[rx_lines.channel == 'store']\n"
        "comp_src = st.groupby(['store', 'date'], as_index=False).net_sales.sum()"
        ".rename(columns={'net_sales': 'net_revenue'})\n"
        "comp_src_id = save_artifact(comp_src, title='store sales per store and local day')\n"
        "print(len(comp_src))"
    )
    await run.script(
        "sales-performance-review",
        "scripts/comp_sales.py",
        "STORES = load_file('uploads/stores.csv', dtype=str)\nPERIOD = (1, 8)\nFISCAL_YEAR = 2025\n"
        "SOURCE = comp_src_id",
    )
    comp = {r["region"]: r for r in await run.get("comp")}
    growth = {g: r["comp_growth"] / 100 for g, r in comp.items() if g != "chain"}
    chain = comp["chain"]["comp_growth"] / 100
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "53_week_restatement"):  # FY2024 growth on the restated year, within
        verdicts[p["id"]] = within(_change(year["steps"]), p)
    for p in by_class(plants, "lookalike", "53_week_restatement"):  # P12 read as a decline on last year
        verdicts[p["id"]] = _change(p12["steps"]) < 0
    for p in by_class(plants, "truth", "comp_store_decline"):  # the Midwest's comp growth, within, and flagged
        verdicts[p["id"]] = within(growth.get("Midwest"), p) and bool(comp.get("Midwest", {}).get("flagged"))
    for p in by_class(plants, "lookalike", "new_store_inflation"):  # West reported ahead of the chain beyond comp
        verdicts[p["id"]] = growth.get("West", 0) > chain and not within(growth.get("West"), p)
    prices = {g: _price_change(s) for g, s in depts["groups"].items()}
    for p in by_class(plants, "truth", "price_markdown"):  # Denim's price step in its own bridge, within
        verdicts[p["id"]] = within(prices.get("12"), p)
    for p in by_class(plants, "lookalike", "mix_not_price"):  # a price fall outside Denim (Home Fragrance or all)
        rest = [s for g, s in depts["groups"].items() if g != "12"]
        price = sum(sum(v for k, v in s.items() if k in ("price and discount", "list price", "discount")) for s in rest)
        base = sum(s["current period revenue"] for s in rest) - price
        verdicts[p["id"]] = prices.get("22", 0) < -0.03 or not within(price / base, p)
    return verdicts


async def rfm_segmentation(run: Run) -> dict[str, bool]:
    """One row per completed member purchase (a POS transaction or a web order with a loyalty id; returns and
    cancelled orders left out), on its local day, in USD; step 1's SQL on it, then rfm.py with AS_OF the data's
    end. Judged on `flagged` (Dunning, Cannot lose, At risk, Hibernating, Lost)."""
    plants = run.plants("rfm-segmentation")
    await run.py(LINES)
    await run.py(
        "m = rx_lines[rx_lines.member_id.notna() & (rx_lines.member_id.astype(str).str.strip() != '')]\n"
        "order_facts = m.groupby(['member_id', 'trans_id'], as_index=False).agg(order_date=('date', 'min'),\n"
        "    net_revenue=('net_sales', 'sum')).rename(columns={'member_id': 'customer_id', 'trans_id': 'order_id'})\n"
        "order_facts['status'] = 'completed'\n"
        "order_facts['order_date'] = order_facts.order_date.dt.date\n"
        "of_id = save_artifact(order_facts, title='member purchases')\n"
        "print(len(order_facts), order_facts.customer_id.nunique())"
    )
    aid = await run.py("print(of_id)")
    aid = aid.strip().splitlines()[-1].strip()
    await _sql(run, "rfm-segmentation", "feeds scripts/rfm.py", "order_facts", aid)
    await run.script("rfm-segmentation", "scripts/rfm.py", "AS_OF = str(rx_through.date())\nSOURCE = sql_id")
    # the members each plant names, by the generator's definitions (retail_454.md), from the same purchases
    await run.py(
        "p = order_facts.assign(d=pd.to_datetime(order_facts.order_date))\n"
        "per = p.groupby('customer_id').agg(n=('order_id', 'nunique'), last=('d', 'max'))\n"
        "lapsed_ids = per.index[(per.n >= 8) & (per['last'] <= pd.Timestamp('2025-03-31'))]\n"
        "hol = p.d.dt.month.isin([11, 12])\n"
        "only = (~hol).groupby(p.customer_id).sum() == 0\n"
        "years = p[hol].groupby('customer_id').d.apply(lambda d: d.dt.year.nunique())\n"
        "holiday_ids = only[only].index.intersection(years[years >= 2].index)\n"
        "is_flagged = rfm.set_index('customer_id').flagged.astype(bool)"
    )
    out = await run.get(
        "{'lapsed': is_flagged.reindex(lapsed_ids).fillna(False).tolist(), "
        "'holiday': is_flagged.reindex(holiday_ids).fillna(False).tolist()}"
    )
    run.outputs.append(
        f"### rfm judged: lapsed frequent members flagged {sum(out['lapsed'])} of {len(out['lapsed'])}; "
        f"holiday-only members flagged {sum(out['holiday'])} of {len(out['holiday'])}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "lapsed_high_value"):  # about that many lapsed frequent members flagged
        verdicts[p["id"]] = within(sum(out["lapsed"]), p)
    for p in by_class(plants, "lookalike", "seasonal_not_lapsed"):  # a material share (over 20 %) flagged
        verdicts[p["id"]] = sum(out["holiday"]) > 0.2 * max(len(out["holiday"]), 1)
    return verdicts


async def data_quality_audit(run: Run) -> dict[str, bool]:
    """profile.py on each export the plants sit in, as uploaded: pos_lines.csv, returns.csv (RELATED: the web
    orders, whose creation a mail return must follow - the JSON lines flattened to order_id, created_at) and
    stores.csv; step 4, cross_checks.py, right after profile.py on each line export (pos_lines.csv, returns.csv:
    document and line, units with a reason, local times per store). PROFILE's store_timezone a zone key, as SKILL.md
    asks: the one most stores use (stores.csv), for this audit only. Judged on each file's `findings`."""
    plants = run.plants("data-quality-audit")
    await run.py(
        "import pandas as pd, zoneinfo\n"
        "dq_orders = load_file('uploads/ecom_orders.json', lines=True, dtype=False)[['order_id', 'created_at']]\n"
        "dq_orders_id = save_artifact(dq_orders, title='web orders: id and creation time')\n"
        "dq_profile0 = PROFILE\n"
        "try:\n"
        "    zoneinfo.ZoneInfo(str(PROFILE.get('store_timezone')))\n"
        "except Exception:\n"
        "    dq_zone = load_file('uploads/stores.csv', dtype=str).time_zone.mode()[0]\n"
        "    PROFILE = {**PROFILE, 'store_timezone': dq_zone}\n"
        "print(PROFILE.get('store_timezone'))"
    )
    related = "RELATED = {'orders': {'source': dq_orders_id, 'on': {'Orig Trans ID': 'order_id'}}}\n"
    found = {}
    try:
        for name, extra, cross in (
            ("pos_lines.csv", "RELATED = None\n", True),
            ("returns.csv", related, True),
            ("stores.csv", "RELATED = None\n", False),
        ):
            await run.script("data-quality-audit", "scripts/profile.py", f"{extra}SOURCE = 'uploads/{name}'")
            if cross:
                await run.script("data-quality-audit", "scripts/cross_checks.py", "")
            found[name] = await run.get("findings")
    finally:
        await run.py("PROFILE = dq_profile0")
    pos, ret, stores = found["pos_lines.csv"], found["returns.csv"], found["stores.csv"]

    def named(rows: list[dict], *words: str) -> list[dict]:
        return [
            f
            for f in rows
            if any(w.lower() in (f["column"] + " " + f["check"] + " " + f["examples"]).lower() for w in words)
        ]

    def found_count(p: dict, hits: list[dict]) -> bool:
        # a count planted as 0 on this seed is found when the script reports no such fault
        if (p.get("expected") or {}).get("value") == 0:
            return not hits
        return any(within(f["rows"], p) for f in hits)

    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "return_before_sale"):  # a date-order finding on returns.csv, its rows
        verdicts[p["id"]] = found_count(p, named(ret, "before"))
    for p in by_class(plants, "truth", "negative_units_no_reason"):  # step 4's finding: exactly those lines
        verdicts[p["id"]] = found_count(p, [f for f in pos if "negative units" in f["check"]])
    for p in by_class(plants, "truth", "duplicate_transactions"):  # "documents sent twice": the Trans IDs counted
        verdicts[p["id"]] = found_count(p, [f for f in pos if "sent twice" in f["check"]])
    for p in by_class(plants, "truth", "timezone_dst_offset"):  # a clock finding naming the store, its lines
        store = re.compile(rf"\b{p['entity']['store']}\b")
        verdicts[p["id"]] = found_count(p, [f for f in pos if "clock" in f["check"] and store.search(f["check"])])
    for p in by_class(plants, "lookalike", "legit_zero_price"):  # the GWP lines called a price fault
        verdicts[p["id"]] = any(f["rows"] == p["expected"]["value"] for f in pos) or bool(named(pos, "99-0001"))
    for p in by_class(plants, "lookalike", "legit_unlinked_return"):  # a medium/high finding on the blank Orig Trans ID
        verdicts[p["id"]] = any(
            f["severity"] in ("high", "medium")
            and "orig trans id" in f["column"].lower()
            and any(w in f["check"].lower() for w in ("missing", "blank", "empty", "null", "unlinked", "orphan"))
            for f in ret
        )
    for p in by_class(plants, "lookalike", "legit_no_dst"):  # Phoenix's store or zone named in a finding's check
        store = re.compile(rf"\b{p['entity']['store']}\b|phoenix", re.I)
        verdicts[p["id"]] = any(store.search(f["column"] + " " + f["check"]) for f in stores + pos)
    return verdicts


async def returns_and_cancellations(run: Run) -> dict[str, bool]:
    """Returns are line-level (returns.csv: SKU and units, linked to the sale by Orig Trans ID): units sold and
    returned per SKU (by department); per store and per channel with the SKU kept as the driver (the sale's store
    from the original transaction, else the returning store); then each sold line with its returned units for the
    order-level attribution. Gift-receipt returns (no original) count for the SKU and the returning store only."""
    plants = run.plants("returns-and-cancellations")
    await run.py(LINES)
    await run.py(
        "ret = load_file('uploads/returns.csv', dtype=str)\n"
        "ret['units_returned'] = pd.to_numeric(ret.Units).abs()\n"
        "ret['returned_revenue'] = pd.to_numeric(ret['Refund Amount'].str.replace(r'[$,]', '', regex=True)).abs()\n"
        "orig = ret['Orig Trans ID'].fillna('')\n"
        "ret['channel'] = np.where(ret['Orig Channel'].str.upper().str.startswith('E'), 'ecom', 'store')\n"
        "ret['store'] = np.where(ret.channel == 'ecom', 'WEB', np.where(orig.str.len() > 4,\n"
        "    orig.str[:4].str.lstrip('0'), ret.Location.fillna('').str.lstrip('0')))\n"
        "sold = rx_lines.groupby(['sku', 'store', 'channel', 'dept'], as_index=False).units.sum()\n"
        "back = ret.groupby(['SKU', 'store', 'channel'], as_index=False)[['units_returned',\n"
        "    'returned_revenue']].sum()\n"
        "rc = sold.rename(columns={'units': 'units_sold'}).merge(back.rename(columns={'SKU': 'sku'}),\n"
        "    on=['sku', 'store', 'channel'], how='outer').fillna({'units_sold': 0, 'units_returned': 0,\n"
        "    'returned_revenue': 0})\n"
        "rc['dept'] = rc.sku.str[:2]\n"
        "rc_sku = rc.groupby(['sku', 'dept'], as_index=False)[['units_sold', 'units_returned',\n"
        "    'returned_revenue']].sum().rename(columns={'sku': 'item', 'dept': 'product'})\n"
        "rc_store = rc[rc.channel == 'store'].groupby(['store', 'sku'], as_index=False)[['units_sold',\n"
        "    'units_returned', 'returned_revenue']].sum().rename(columns={'store': 'item', 'sku': 'product'})\n"
        "rc_chan = rc.groupby(['channel', 'sku'], as_index=False)[['units_sold', 'units_returned',\n"
        "    'returned_revenue']].sum().rename(columns={'channel': 'item', 'sku': 'product'})\n"
        "linked = ret[orig != ''].groupby(['Orig Trans ID', 'SKU'], as_index=False).units_returned.sum()\n"
        "att = rx_lines.groupby(['trans_id', 'sku', 'dept'], as_index=False).units.sum().merge(linked.rename(\n"
        "    columns={'Orig Trans ID': 'trans_id', 'SKU': 'sku'}), on=['trans_id', 'sku'], how='left')\n"
        "att = att.fillna({'units_returned': 0}).rename(columns={'trans_id': 'order_id', 'sku': 'item',\n"
        "    'dept': 'product'})\n"
        "rc_ids = {k: save_artifact(v, title=k) for k, v in\n"
        "    {'sku': rc_sku, 'store': rc_store, 'channel': rc_chan, 'attribution': att}.items()}\n"
        "print(rc_sku.units_returned.sum(), rc_store.units_returned.sum(), len(att))"
    )
    flags = {}
    named_items = [str(v) for p in plants for k, v in p["entity"].items() if k in ("sku", "store")] + ["ecom"]
    for what in ("sku", "store", "channel"):
        await run.script(
            "returns-and-cancellations", "scripts/return_outliers.py", f"ITEM = 'item'\nSOURCE = rc_ids[{what!r}]"
        )
        flags[what] = await run.get(  # the flagged rows and the plants' own (the whole table is too long to print)
            "rates[(rates.kind == 'returned') & (rates.flagged | rates.item.astype(str).isin("
            f"{named_items!r}))][['item', 'rate_pct', 'standardized_ratio', 'flagged']]"
        )
    await run.script("returns-and-cancellations", "scripts/order_attribution.py", "SOURCE = rc_ids['attribution']")
    named = set(await run.get("[str(x) for x in named['item']]"))

    def row(what: str, item: str) -> dict:
        return next((r for r in flags[what] if str(r["item"]) == item), {"flagged": False})

    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "defective_product"):  # flagged, named at order level, its rate within
        r = row("sku", p["entity"]["sku"])
        verdicts[p["id"]] = bool(r["flagged"]) and p["entity"]["sku"] in named and within(r.get("rate_pct"), p, 0.01)
    for p in by_class(plants, "lookalike", "bundle_co_return"):  # the partner named after attribution
        verdicts[p["id"]] = p["entity"]["sku"] in named
    for p in by_class(plants, "truth", "store_excess_within_product"):  # flagged, its standardized ratio within
        r = row("store", p["entity"]["store"])
        verdicts[p["id"]] = bool(r["flagged"]) and within(r.get("standardized_ratio"), p)
    for p in by_class(plants, "lookalike", "channel_mix"):  # the web flagged for its returns
        verdicts[p["id"]] = bool(row("channel", "ecom")["flagged"])
    return verdicts


async def discount_effectiveness(run: Run) -> dict[str, bool]:
    """promo_did.py, one scheme per run. REFRESH25 went to the Northeast and West stores from a date: a rollout,
    unit = store, weekly Home Decor units in stores, Southeast and Midwest stores the comparison, the 4 weeks before
    as the pre-period. HOLIDAY24 (apparel, Black Friday to Dec 24) is a holiday promotion: seasonal, daily units
    of the apparel departments (group 1) against the home departments without a promotion then (Bedding, Home
    Decor, Home Fragrance; Rugs had its clearance), unit = department, both channels."""
    plants = run.plants("discount-effectiveness")
    await run.py(LINES)
    await run.py(
        "st = rx_lines[rx_lines.channel == 'store']\n"
        "hd = st[(st.dept == '21') & (st.date >= '2025-03-16') & (st.date <= '2025-05-03')]\n"
        "hd = hd.assign(week=hd.date - pd.to_timedelta((hd.date.dt.dayofweek + 1) % 7, unit='D'))\n"
        "refresh = hd.groupby(['store', 'week'], as_index=False).units.sum()\n"
        "refresh = refresh.rename(columns={'store': 'unit', 'week': 'period', 'units': 'outcome'})\n"
        "refresh['group'] = refresh.unit.map(rx_region).isin(['Northeast', 'West']).astype(int)\n"
        "refresh_id = save_artifact(refresh, title='REFRESH25: Home Decor units per store and week')\n"
        "hol = rx_lines[rx_lines.dept.isin(['10', '11', '12', '13', '14', '15', '20', '21', '22'])]\n"
        "hol = hol[(hol.date >= '2023-10-01') & (hol.date <= '2024-12-24')]\n"
        "holiday = hol.groupby(['dept', 'date'], as_index=False).units.sum()\n"
        "holiday = holiday.rename(columns={'dept': 'unit', 'date': 'period', 'units': 'outcome'})\n"
        "holiday['group'] = (holiday.unit.astype(int) < 20).astype(int)\n"
        "holiday_id = save_artifact(holiday, title='HOLIDAY24: daily units, apparel vs home departments')\n"
        "print(refresh.groupby('group').unit.nunique(), len(holiday))"
    )
    runs = {
        "REFRESH25": "DESIGN = 'rollout'\nSTART = '2025-04-13'\nEND = '2025-04-27'\nSOURCE = refresh_id",
        "HOLIDAY24": "DESIGN = 'seasonal'\nSTART = '2024-11-29'\nEND = '2024-12-24'\nSOURCE = holiday_id",
    }
    effects = {}
    for scheme, inputs in runs.items():
        await run.script("discount-effectiveness", "scripts/promo_did.py", f"SCHEME = {scheme!r}\n{inputs}")
        effects[scheme] = (await run.get("effects"))[0]
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "matched_control_lift"):  # the lift claimed, its size within
        e = effects["REFRESH25"]
        verdicts[p["id"]] = bool(e["flagged"]) and within(e["lift"], p)
    for p in by_class(plants, "lookalike", "seasonality_not_lift"):  # a lift claimed beyond the seasonal one
        e = effects["HOLIDAY24"]
        verdicts[p["id"]] = bool(e["flagged"]) and e["lift"] > 0 and not within(e["lift"], p)
    return verdicts


async def kpi_anomaly_detection(run: Run) -> dict[str, bool]:
    """Transactions per store and day (sales only, the POS's local day, the web's US/Eastern day; a day a store
    sold nothing is a zero from its first sale on), ENTITY = store; the business calendar first (PROFILE's 4-5-4
    calendar, US holidays)."""
    plants = run.plants("kpi-anomaly-detection")
    await run.py(LINES)
    await run.py(
        "tx = rx_lines.groupby(['store', 'date']).trans_id.nunique().rename('transactions')\n"
        "first_day = rx_lines.groupby('store').date.min()\n"
        "grid = pd.MultiIndex.from_tuples([(s, d) for s, f in first_day.items()\n"
        "    for d in pd.date_range(f, rx_through)], names=['store', 'date'])\n"
        "kpi = tx.reindex(grid, fill_value=0).reset_index()[['date', 'store', 'transactions']]\n"
        "kpi_id = save_artifact(kpi, title='transactions per store and day')\n"
        "print(len(kpi), kpi.store.nunique())"
    )
    await run.script("kpi-anomaly-detection", "scripts/business_calendar.py", "COUNTRY = 'US'\nSOURCE = kpi_id")
    await run.script(
        "kpi-anomaly-detection",
        "scripts/kpi_anomalies.py",
        "COUNTRY = 'US'\nDATE = 'date'\nVALUE = 'transactions'\nENTITY = 'store'\nSOURCE = kpi_id",
        timeout=900,
    )
    found = await run.get(
        "[{'entity': str(r.get('store', '(all)')), 'day': str(pd.Timestamp(r['period']).date()), "
        "'direction': str(r['direction'])} for r in anomalies.to_dict('records')]"
    )
    starts = {str(d)[:10] for d in await run.get("list(rx_periods.period_start.astype(str))")}
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "store_closure"):  # the store's closed days flagged, as many as closed
        e = p["entity"]
        days = {f["day"] for f in found if f["entity"] == e["store"] and e["date"] <= f["day"] <= e["date_end"]}
        verdicts[p["id"]] = within(len(days), p)
    for p in by_class(plants, "lookalike", "expected_holiday_peak") + by_class(
        plants, "lookalike", "scheduled_closure"
    ):  # the day flagged anywhere (a store or the total)
        verdicts[p["id"]] = any(f["day"] == p["entity"]["date"] for f in found)
    for p in by_class(plants, "lookalike", "recurring_calendar_peak"):  # spikes on 3+ fiscal period starts
        days = {f["day"] for f in found if f["day"] in starts and f["direction"] in ("high", "spike")}
        verdicts[p["id"]] = len(days) >= 3
    return verdicts


async def profitability(run: Run) -> dict[str, bool]:
    """loss_cells.py on one frame per channel x department x region x fiscal period over FY2025 P1-P8 (the year's
    complete periods): net revenue = sales - refunds of returns dated in the window (by the original channel); cogs
    = unit cost x units sold - unit cost x units restocked; the channels' variable costs the user gave (store card
    fees 2.2 %, web 2.9 % and $2.50 a unit fulfilment) and the web's freight both ways from item_costs.csv's
    Est Ecom Ship Cost (mail returns), each its own column."""
    plants = run.plants("profitability")
    rates = {c: v["variable_costs"] for c, v in run.business["channels"].items()}  # what the user says
    await run.py(LINES)
    await run.py(
        f"web_fee, store_fee = {rates['ecom']['payment_fee_pct']}, {rates['store']['payment_fee_pct']}\n"
        f"per_unit = {rates['ecom']['fulfilment_per_unit']}\n"
        "costs = load_file('uploads/item_costs.csv', dtype=str)\n"
        "money = lambda c: pd.to_numeric(c.str.replace(r'[$,]', '', regex=True))\n"
        "unit_cost = dict(zip(costs.Item, money(costs['Unit Cost'])))\n"
        "ship_cost = dict(zip(costs.Item, money(costs['Est Ecom Ship Cost'])))\n"
        "a, b = rx_periods[(rx_periods.fiscal_year == 'FY2025') & (rx_periods.n <= 8)].agg(\n"
        "    {'period_start': 'min', 'period_end': 'max'})\n"
        "w = rx_lines[(rx_lines.date >= a) & (rx_lines.date <= b)].copy()\n"
        "ecom = w.channel == 'ecom'\n"
        "w = w.assign(cogs=w.units * w.sku.map(unit_cost),\n"
        "    payment_fees=w.net_sales * np.where(ecom, web_fee, store_fee),\n"
        "    fulfilment=np.where(ecom, per_unit * w.units, 0.0),\n"
        "    freight=np.where(ecom, w.units * w.sku.map(ship_cost), 0.0),\n"
        "    return_freight=0.0, refunds=0.0)\n"
        "r = load_file('uploads/returns.csv', dtype=str)\n"
        "r['date'] = pd.to_datetime(r['Return Date'])\n"
        "r = r[(r.date >= a) & (r.date <= b)]\n"
        "u = pd.to_numeric(r.Units).abs()\n"
        "r_ch = np.where(r['Orig Channel'].str.upper().str.startswith('E'), 'ecom', 'store')\n"
        "loc = r.Location.fillna('').str.lstrip('0')\n"
        "rr = pd.DataFrame({'channel': r_ch, 'dept': r.SKU.str[:2], 'date': r.date,\n"
        "    'region': np.where(r_ch == 'ecom', 'Ecom', loc.map(rx_region).fillna('(unknown)')),\n"
        "    'refunds': money(r['Refund Amount']).abs(),\n"
        "    'cogs': -np.where(r.Disposition == 'RESTOCK', u * r.SKU.map(unit_cost), 0.0),\n"
        "    'return_freight': np.where(r['Return Channel'] == 'MAIL', u * r.SKU.map(ship_cost), 0.0)})\n"
        "both = pd.concat([w, rr], ignore_index=True).fillna({'net_sales': 0, 'units': 0, 'payment_fees': 0,\n"
        "    'fulfilment': 0, 'freight': 0})\n"
        "both['period'] = rx_fiscal_period(both.date)[1]\n"
        "both['department'] = both.dept\n"
        "prof = both.groupby(['channel', 'department', 'region', 'period'], as_index=False)[['net_sales', 'refunds',\n"
        "    'units', 'cogs', 'payment_fees', 'fulfilment', 'freight', 'return_freight']].sum()\n"
        "prof['net_revenue'] = prof.net_sales - prof.refunds\n"
        "prof = prof.drop(columns=['net_sales', 'refunds'])\n"
        "prof_id = save_artifact(prof, title='contribution inputs FY2025 P1-P8')\n"
        "print(prof.groupby('channel')[['net_revenue', 'cogs', 'freight']].sum())"
    )
    await run.script("profitability", "scripts/loss_cells.py", "SOURCE = prof_id")
    cells = await run.get(
        "cells[cells.dimensions.astype(str).str.contains('channel') & cells.dimensions.astype(str)"
        ".str.contains('department') & ~cells.dimensions.astype(str).str.contains('region')]"
        "[['channel', 'department', 'margin_pct', 'flagged']]"
    )

    def cell(p: dict) -> dict:
        d, c = p["entity"]["department"][:2], p["entity"]["channel"]
        return next((x for x in cells if str(x["department"]) == d and str(x["channel"]) == c), {"flagged": False})

    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "negative_contribution"):  # the cell a loss, its contribution margin within
        x = cell(p)
        verdicts[p["id"]] = bool(x["flagged"]) and within(x.get("margin_pct"), p, 0.01)
    for p in by_class(plants, "lookalike", "channel_specific") + by_class(
        plants, "lookalike", "margin_down_still_profitable"
    ):  # the cell called a loss
        verdicts[p["id"]] = bool(cell(p)["flagged"])
    return verdicts


async def customer_cohort_retention(run: Run) -> dict[str, bool]:
    """Not contractual: activity. One row per member purchase (a POS transaction or a web order with a loyalty id,
    returns and cancelled orders left out) with its day - the store's local day, the web's US/Eastern day: the
    stores are in six zones, so the day is taken here - and the member's signup date from customers.csv; fiscal
    quarters (GRAIN = "quarter": buyers who buy a few times a year), DATA_THROUGH the exports' last day."""
    plants = run.plants("customer-cohort-retention")
    await run.py(LINES)
    await run.py(
        "cust = load_file('uploads/customers.csv', dtype=str)\n"
        "mem = rx_lines[rx_lines.member_id.notna() & (rx_lines.member_id.astype(str).str.strip() != '')]\n"
        "act = mem.groupby(['member_id', 'trans_id'], as_index=False).date.min()\n"
        "act = act.rename(columns={'member_id': 'customer_id', 'date': 'active_at'})\n"
        "act['acquired_at'] = act.customer_id.map(dict(zip(cust.member_id, cust.signup_date)))\n"
        "act['active_at'] = act.active_at.dt.strftime('%Y-%m-%d')\n"
        "act = act[['customer_id', 'active_at', 'acquired_at']]\n"
        "act_id = save_artifact(act, title='member purchases with signup date')\n"
        "print(len(act), act.acquired_at.isna().sum())"
    )
    await run.script(
        "customer-cohort-retention",
        "scripts/retention_matrix.py",
        "GRAIN = 'quarter'\nDATA_THROUGH = str(rx_through.date())\nSOURCE = act_id",
    )
    out = await run.get(
        "{'cohorts': [str(c) for c in cohort_effects[cohort_effects.flagged].cohort], "
        "'q2': {str(c): (None if pd.isna(v) else float(v)) for c, v in retention.get(2, pd.Series(dtype=float))"
        ".items()}, 'periods': [str(p) for p in period_effects[period_effects.flagged].period], "
        "'findings': [str(x) for x in findings.entity] + [str(x) for x in findings.period]}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "cohort_collapse"):  # the cohort flagged, its quarter-2 retention within
        c = p["entity"]["cohort"].replace(" ", "-")
        verdicts[p["id"]] = c in out["cohorts"] and within(out["q2"].get(c), p, 0.01)
    for p in by_class(plants, "lookalike", "right_censoring"):  # the cut quarter named as a period effect
        q = p["entity"]["cohort_quarter"].replace(" ", "-")
        verdicts[p["id"]] = any(q in x for x in out["periods"] + out["findings"])
    return verdicts


async def demand_forecast(run: Run) -> dict[str, bool]:
    """Outerwear units per day (sale lines with units > 0, both channels, cancelled orders out; the POS's local
    day, the web's US/Eastern day), periods.py on fiscal weeks with DATA_END the exports' last day, then
    forecast.py; the next four fiscal weeks picked from `outlook` by their start (the week under way is its first
    row)."""
    plants = run.plants("demand-forecast")
    await run.py(LINES)
    await run.py(
        "ow = rx_lines[(rx_lines.dept == '13') & (rx_lines.units > 0)].groupby('date').units.sum()\n"
        "ow = ow.reindex(pd.date_range(rx_lines.date.min(), rx_through), fill_value=0)\n"
        "demand = pd.DataFrame({'date': ow.index.strftime('%Y-%m-%d'), 'value': ow.values})\n"
        "demand_id = save_artifact(demand, title='Outerwear units per day')\n"
        "print(len(demand), demand.value.sum())"
    )
    await run.script(
        "demand-forecast",
        "scripts/periods.py",
        "GRAIN = 'week'\nDATA_END = str(rx_through.date())\nSOURCE = demand_id",
    )
    await run.script("demand-forecast", "scripts/forecast.py", "SOURCE = periods", timeout=900)
    out = await run.get(
        "{'outlook': [{'period': str(r['period']), 'start': str(pd.Timestamp(r['start']).date()), "
        "'forecast': float(r['forecast'])} for r in outlook.to_dict('records')], "
        "'partial': [str(r['period']) for r in periods.to_dict('records') if 'partial' in str(r.get('flag'))]}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "seasonal_forecast"):  # the next four weeks' total within the hold-out's
        ahead = [r for r in out["outlook"] if "2025-10-19" <= r["start"] <= "2025-11-09"]
        verdicts[p["id"]] = len(ahead) == 4 and within(sum(r["forecast"] for r in ahead), p)
    for p in by_class(plants, "lookalike", "partial_week"):  # the partial week not dropped (forecast from)
        verdicts[p["id"]] = not any(p["entity"]["week"] in x for x in out["partial"])
    return verdicts


RECIPES: dict[str, Recipe] = {
    "budget-vs-actual": budget_vs_actual,
    "sales-performance-review": sales_performance_review,
    "rfm-segmentation": rfm_segmentation,
    "data-quality-audit": data_quality_audit,
    "returns-and-cancellations": returns_and_cancellations,
    "discount-effectiveness": discount_effectiveness,
    "kpi-anomaly-detection": kpi_anomaly_detection,
    "profitability": profitability,
    "customer-cohort-retention": customer_cohort_retention,
    "demand-forecast": demand_forecast,
}
