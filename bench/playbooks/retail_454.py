"""Recipes for retail_454, the specialty retailer on a 4-5-4 calendar (bench/archetypes/retail_454.md).

Each recipe follows its SKILL.md literally on these exports and judges the archetype's plants for that skill from
the script's output (see bench/playbooks/common.py). The shaping every skill shares (``LINES``) is the model's part:
POS lines with the store number unpadded, the duplicate register copies counted once and the local date taken as
written; the web orders without the cancelled ones, their UTC time turned into the US/Eastern business day; both
as one table of sale lines (merchandise sales after discounts, the plan's basis) and one of POS return lines.
"""

from __future__ import annotations

from bench.playbooks.common import Recipe, Run, by_class, within

# The raw exports as one table of sale lines (both channels) - `lines` - and the fiscal periods of the plan
# workbook (its own weeks from PROFILE's first day) - `periods`. Run once per session.
LINES = """
import pandas as pd, numpy as np, json
if 'lines' not in globals():
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
    region = dict(zip(stores.store, stores.region))
    orders = load_file('uploads/ecom_orders.json', lines=True, dtype=False)
    orders = orders[orders.status != 'cancelled']
    web = orders[['order_id', 'created_at', 'member_id', 'lines']].explode('lines').reset_index(drop=True)
    web = pd.concat([web.drop(columns='lines'), pd.json_normalize(web['lines'])], axis=1)
    web['ts'] = pd.to_datetime(web['created_at'], utc=True).dt.tz_convert('US/Eastern').dt.tz_localize(None)
    sale = pos[pos.units > 0]
    lines = pd.concat([
        pd.DataFrame({'channel': 'store', 'store': sale.store, 'region': sale.store.map(region),
                      'trans_id': sale['Trans ID'], 'date': sale.date, 'ts': sale.ts, 'sku': sale.SKU,
                      'dept': sale.dept, 'member_id': sale['Loyalty ID'], 'units': sale.units,
                      'net_sales': sale.net_sales, 'discount': sale.discount, 'promo': sale['Promo ID']}),
        pd.DataFrame({'channel': 'ecom', 'store': 'WEB', 'region': 'Ecom', 'trans_id': web.order_id,
                      'date': web.ts.dt.normalize(), 'ts': web.ts, 'sku': web.sku, 'dept': web.department.astype(str),
                      'member_id': web.member_id, 'units': web.quantity.astype(float),
                      'net_sales': pd.to_numeric(web.line_total), 'discount': pd.to_numeric(web.discount),
                      'promo': web.promo}),
    ], ignore_index=True)
    lines = lines[lines.dept != '99']  # non-merchandise (the GWP candle at 0): not sales
    pos_returns = pos[pos.units < 0]
    data_through = lines.date.max()
    # the plan workbook's periods, dated by its own weeks from the calendar's first day
    sheets = load_file('uploads/plan.xlsx', sheet_name=None, header=3)
    plan = pd.concat([s.assign(fiscal_year=n) for n, s in sheets.items()], ignore_index=True)
    plan = plan[plan['Dept'].astype(str).str.strip() != 'TOTAL'].dropna(subset=['Period'])
    plan['dept'] = plan['Dept'].astype(int).astype(str)
    weeks = plan.drop_duplicates(['fiscal_year', 'Period'])[['fiscal_year', 'Period', 'Weeks']].copy()
    weeks['n'] = weeks.Period.str[1:].astype(int)
    weeks = weeks.sort_values(['fiscal_year', 'n']).reset_index(drop=True)
    first = pd.Timestamp(PROFILE['fiscal_calendar']['first_day'])
    ends = first + pd.to_timedelta(7 * weeks.Weeks.astype(int).cumsum(), unit='D')
    weeks['period_end'] = ends - pd.Timedelta(days=1)
    weeks['period_start'] = ends - pd.to_timedelta(7 * weeks.Weeks.astype(int), unit='D')
    periods = weeks[['fiscal_year', 'Period', 'n', 'period_start', 'period_end']]
    def fiscal_period(dates):
        idx = np.searchsorted(periods.period_end.values, dates.values)
        idx = np.minimum(idx, len(periods) - 1)
        return periods.fiscal_year.values[idx], periods.Period.values[idx]
    lines['fiscal_year'], lines['period'] = fiscal_period(lines.date)
print(len(lines), data_through, len(periods))
"""


async def budget_vs_actual(run: Run) -> dict[str, bool]:
    """Plan (department x period, merchandise sales after discounts before returns) against the same actuals from
    both channels, each period on the plan's own dates; data_through the last day of the exports."""
    plants = run.plants("budget-vs-actual")
    await run.py(LINES)
    await run.py(
        "act = lines.groupby(['fiscal_year', 'period', 'dept'], as_index=False).net_sales.sum()\n"
        "bva = plan.rename(columns={'Period': 'period', 'Planned Sales $': 'plan'})\n"
        "bva = bva.merge(periods.rename(columns={'Period': 'period'}), on=['fiscal_year', 'period'])\n"
        "bva = bva.merge(act, on=['fiscal_year', 'period', 'dept'], how='outer')\n"
        "bva['department'] = bva['dept'] + ' ' + bva['Department'].fillna('')\n"
        "bva = bva.assign(plan=bva.plan.fillna(0), actual=bva.net_sales.fillna(0), data_through=data_through)\n"
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


RECIPES: dict[str, Recipe] = {
    "budget-vs-actual": budget_vs_actual,
}
