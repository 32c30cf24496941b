"""Recipes for the DE/FR/UK industrial distributor (bench/archetypes/b2b_multicurrency.md).

Each recipe follows its SKILL.md literally on these exports and judges the archetype's plants for that skill from
the script's output (see bench/playbooks/common.py). The shaping every recipe shares (``LINES``) reads the two SAP
invoice exports as business-profile reported them (cp1252, ';', day-first dates, decimal comma, trailing minus,
a dot thousands separator), stacks them, drops the DE01 lines the EN export repeats (document + item) and adds the
EUR amount at the posting month's AVG rate (GBP per 1 EUR: divided), the product group, segment, region and the
fiscal year (April start, named by its end year).
"""

from __future__ import annotations

from bench.playbooks.common import Recipe, Run, by_class, within

LINES = """
import numpy as np, pandas as pd
if 'lines' not in globals():
    def _amount(s):
        s = s.astype(str).str.strip()
        neg = s.str.endswith('-')
        v = pd.to_numeric(s.str.rstrip('-').str.replace('.', '', regex=False).str.replace(',', '.', regex=False))
        return v.where(~neg, -v)
    cols = ['document_number', 'item', 'company_code', 'customer', 'posting_date', 'material', 'quantity', 'unit',
            'currency', 'net_amount']
    de = load_file('uploads/invoices_de.csv', sep=';', encoding='cp1252', dtype=str).set_axis(cols, axis=1)
    de['posting_date'] = pd.to_datetime(de.posting_date, format='%d.%m.%Y')
    de['net_amount'] = _amount(de.net_amount)
    en = load_file('uploads/invoices_fr_uk.csv', dtype=str).set_axis(cols, axis=1)
    en['posting_date'] = pd.to_datetime(en.posting_date)
    en['net_amount'] = pd.to_numeric(en.net_amount)
    stacked = pd.concat([de, en], ignore_index=True)
    lines = stacked.drop_duplicates(['document_number', 'item']).copy()
    lines['quantity'] = pd.to_numeric(lines.quantity)
    fx = load_file('uploads/fx_rates.csv')
    avg = fx[fx['Rate Type'] == 'AVG'].rename(columns={'Rate (GBP per 1 EUR)': 'rate'})
    lines['month'] = lines.posting_date.dt.strftime('%Y-%m')
    gbp = lines.month.map(avg[avg.Currency == 'GBP'].set_index('Month').rate)
    lines['rate'] = np.where(lines.currency == 'GBP', gbp, 1.0)
    lines['amount_eur'] = lines.net_amount / lines.rate
    customers = load_file('uploads/customers.csv', dtype=str)
    lines['segment'] = lines.customer.map(customers.set_index('Customer').Segment)
    prices = load_file('uploads/price_list.csv')
    groups = prices.drop_duplicates('Material').set_index('Material')['Product Group']
    prefix = {m.split('-')[0]: g for m, g in groups.items()}
    lines['rebate'] = lines.material.str.startswith('REB-')
    lines['product_group'] = lines.material.map(groups).fillna(
        lines.material.str.replace('REB-', '').str[:3].map(prefix))
    lines['region'] = lines.company_code.map({'DE01': 'Germany', 'FR01': 'France', 'GB01': 'United Kingdom'})
    fy = lines.posting_date.dt.year + (lines.posting_date.dt.month >= 4)
    lines['fiscal_year'] = 'FY' + fy.astype(str)
    # net invoiced product lines: no rebate settlements, no free samples
    sales = lines[~lines.rebate & (lines.net_amount != 0)].copy()
print(len(lines), len(sales), sales.fiscal_year.value_counts().to_dict())
"""

# the partners' reseller agreements (customer master): the contracts PROFILE's "contractual" stands for
AGREEMENTS = """
agreements = customers[customers.Segment == 'Partner'].rename(
    columns={'Customer': 'customer_id', 'Account Created': 'started_at'})[['customer_id', 'started_at']]
agreements = agreements.assign(status='active', plan='reseller agreement', cancelled_at=None, pause_until=None)
print(len(agreements))
"""


def share_flagged(customers: list[str], flagged: set[str]) -> float:
    return sum(c in flagged for c in customers) / len(customers) if customers else 0.0


async def ab_test_readout(run: Run) -> dict[str, bool]:
    """The experiment export fed as it is (one row per quote, account_id the unit from PROFILE)."""
    plants = run.plants("ab-test-readout")
    await run.py("ab = load_file('uploads/pricing_test.csv', dtype={'account_id': str})\nprint(ab.shape)")
    await run.script("ab-test-readout", "scripts/ab_readout.py", "SOURCE = ab")
    r = await run.get("{'srm_p': float(srm_p), 'srm_finding': bool(srm_finding), 'significant': bool(significant)}")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "sample-ratio mismatch"):  # the account split reported as a finding, p close
        verdicts[p["id"]] = r["srm_finding"] and within(r["srm_p"], p)
    for p in by_class(plants, "lookalike", "wrong unit + SRM"):  # treatment called a significant winner
        verdicts[p["id"]] = r["significant"]
    return verdicts


async def customer_lifetime_value(run: Run) -> dict[str, bool]:
    """One row per invoice (document) with its gross margin in EUR (net revenue - standard cost x units); PROFILE is
    contractual (the user's "mixed"), so STATES = the partners' reseller agreements from the customer master."""
    plants = run.plants("customer-lifetime-value")
    await run.py(
        LINES + AGREEMENTS + "costs = load_file('uploads/item_costs.csv')\n"
        "cost = sales.merge(costs.rename(columns={'Material': 'material', 'Fiscal Year': 'fiscal_year'}),\n"
        "    on=['material', 'fiscal_year'], how='left')['Standard Cost EUR'].fillna(0).to_numpy()\n"
        "clv_lines = sales.assign(margin=sales.amount_eur - cost * sales.quantity.fillna(0))\n"
        "clv_orders = clv_lines.groupby(['customer', 'document_number'], as_index=False).agg(\n"
        "    order_date=('posting_date', 'min'), margin=('margin', 'sum'), revenue=('amount_eur', 'sum'))\n"
        "clv_orders = clv_orders.rename(columns={'customer': 'customer_id'})\n"
        "clv_src = save_artifact(clv_orders[['customer_id', 'order_date', 'margin']], title='orders with margin')\n"
        "clv_states = save_artifact(agreements, title='reseller agreements')\n"
        "fy26 = clv_lines[clv_lines.fiscal_year == 'FY2026']\n"
        "direct_ratio = float(fy26[fy26.segment == 'Direct'].amount_eur.sum() / "
        "fy26[fy26.segment == 'Direct'].margin.sum())\n"
        "print(len(clv_orders), direct_ratio)"
    )
    await run.script(
        "customer-lifetime-value",
        "scripts/clv.py",
        "SOURCE = clv_src\nSTATES = clv_states\nYEARS = 1",
    )
    r = await run.get(
        "{'direct': float(clv[clv.customer_id.map(customers.set_index('Customer').Segment) == 'Direct']"
        ".next_year_margin.mean()), 'ratio': direct_ratio, 'partners_bgnbd': int((clv.stream == 'non-contractual')"
        "[clv.customer_id.map(customers.set_index('Customer').Segment) == 'Partner'].sum())}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "non-contractual CLV"):
        # the direct accounts' mean next-year margin, in revenue by their FY2026 revenue/margin ratio (the plant is
        # revenue, the playbook values margin), within the plant's tolerance
        verdicts[p["id"]] = within(r["direct"] * r["ratio"], p)
    for p in by_class(plants, "lookalike", "wrong stream"):  # partners valued by the direct accounts' BG/NBD
        verdicts[p["id"]] = r["partners_bgnbd"] > 0
    return verdicts


async def budget_vs_actual(run: Run) -> dict[str, bool]:
    """The plan's cells (region x product group x fiscal month, subtotal rows dropped) beside the actual net
    invoiced product lines in EUR by the plan's own period start and end; data_through the last posting day."""
    plants = run.plants("budget-vs-actual")
    await run.py(
        LINES + "plan = load_file('uploads/budget_fy2026.xlsx', sheet_name=0, header=3)\n"
        "plan = plan[plan['Product group'].notna() & plan.Region.isin(['Germany', 'France', 'United Kingdom'])]\n"
        "months = [c for c in plan.columns if str(c).startswith('P')]\n"
        "plan = plan.melt(id_vars=['Region', 'Product group'], value_vars=months, var_name='p', value_name='plan')\n"
        "plan['period_start'] = pd.to_datetime(plan.p.str.split(' ').str[1], format='%b-%y')\n"
        "plan['period_end'] = plan.period_start + pd.offsets.MonthEnd(0)\n"
        "plan = plan.rename(columns={'Region': 'region', 'Product group': 'category'}).drop(columns='p')\n"
        "act = sales[sales.fiscal_year == 'FY2026'].assign(\n"
        "    period_start=lambda d: d.posting_date.dt.to_period('M').dt.start_time)\n"
        "act = act.groupby(['region', 'product_group', 'period_start'], as_index=False).amount_eur.sum()\n"
        "act = act.rename(columns={'product_group': 'category', 'amount_eur': 'actual'})\n"
        "bva = plan.merge(act, on=['region', 'category', 'period_start'], how='outer')\n"
        "bva['period_end'] = bva.period_start + pd.offsets.MonthEnd(0)\n"
        "bva[['plan', 'actual']] = bva[['plan', 'actual']].fillna(0)\n"
        "bva['data_through'] = lines.posting_date.max()\n"
        "bva = bva[['period_start', 'period_end', 'region', 'category', 'plan', 'actual', 'data_through']]\n"
        "bva_src = save_artifact(bva, title='budget vs actual FY2026')\n"
        "print(bva.groupby('region')[['plan', 'actual']].sum())"
    )
    await run.script("budget-vs-actual", "scripts/budget_variance.py", "SOURCE = bva_src")
    r = await run.get(
        "{'bias': float(bias), 'largest': None if largest is None else {k: str(largest[k]) for k in "
        "['region', 'category', 'quarter']}, 'year': year_cells[['region', 'category', 'variance', 'flag']]"
        ".to_dict('records'), 'misses': misses[['region', 'category', 'quarter']].to_dict('records'), "
        "'timing': [t[0] for t in timing]}"
    )
    year = {(c["region"], c["category"]): c for c in r["year"]}
    named = {(m["region"], m["category"]) for m in r["misses"]} | {
        (c["region"], c["category"]) for c in r["year"] if c["flag"]
    }
    largest = (r["largest"]["region"], r["largest"]["category"]) if r["largest"] else None
    verdicts: dict[str, bool] = {}
    truth_cells = set()
    for p in by_class(plants, "truth", "plan bias"):  # one bias line; its plan-over-actual % within tolerance
        verdicts[p["id"]] = r["bias"] != 0 and within(100 * (1 / (1 + r["bias"]) - 1), p)
    for p in by_class(plants, "truth", "genuine shortfall"):  # named the LARGEST MISS, FY raw variance close
        cell = (p["entity"]["region"], p["entity"]["product_group"])
        truth_cells.add(cell)
        verdicts[p["id"]] = largest == cell and cell in year and within(year[cell]["variance"], p)
    timing_cells = []
    for p in by_class(plants, "lookalike", "timing shift"):  # the late-booked cell named the largest miss or a miss
        cell = (p["entity"]["region"], p["entity"]["product_group"])
        timing_cells.append(cell)
        verdicts[p["id"]] = largest == cell or cell in named
    for p in by_class(plants, "lookalike", "uniform stretch"):  # any other cell reported as a miss
        verdicts[p["id"]] = bool(named - truth_cells - set(timing_cells))
    return verdicts


async def sales_performance_review(run: Run) -> dict[str, bool]:
    """One row per SKU x fiscal year x currency (FY2025, FY2026: net invoiced product lines in local currency, units,
    list revenue from the PR00 price list of that year), BY product group; FX = the AVG rates per fiscal year, GBP per
    1 EUR (local_per_reporting)."""
    plants = run.plants("sales-performance-review")
    await run.py(
        LINES + "two = sales[sales.fiscal_year.isin(['FY2025', 'FY2026'])]\n"
        "lp = prices.rename(columns={'Material': 'material', 'Currency': 'currency', 'Fiscal Year': 'fiscal_year'})\n"
        "two = two.merge(lp[['material', 'currency', 'fiscal_year', 'List Price']], how='left',\n"
        "    on=['material', 'currency', 'fiscal_year'])\n"
        "two['list_revenue'] = two['List Price'] * two.quantity\n"
        "spr = two.groupby(['material', 'fiscal_year', 'product_group', 'currency'], as_index=False).agg(\n"
        "    net_revenue=('net_amount', 'sum'), units=('quantity', 'sum'), list_revenue=('list_revenue', 'sum'))\n"
        "rates = avg.rename(columns={'Currency': 'currency'}).assign(\n"
        "    period=lambda d: 'FY' + (d.Month.str[:4].astype(int) + (d.Month.str[5:].astype(int) >= 4)).astype(str))\n"
        "spr_fx = save_artifact(rates[['currency', 'rate', 'period']], title='AVG rates, GBP per 1 EUR')\n"
        "spr_src = save_artifact(spr, title='SKU x fiscal year x currency')\nprint(spr.shape)"
    )
    await run.script(
        "sales-performance-review",
        "scripts/price_volume_mix.py",
        "FX = spr_fx\nFX_DIRECTION = 'local_per_reporting'\nBY = 'product_group'\nSOURCE = spr_src",
    )
    r = await run.get(
        "{'by_currency': None if by_currency is None else by_currency.reset_index().to_dict('records'), "
        "'by_group': by_group.reset_index().rename(columns={'index': 'group'}).to_dict('records')}"
    )
    gbp = next((c for c in r["by_currency"] or [] if c["currency"] == "GBP"), None)
    groups = {g["group"]: g for g in r["by_group"]}
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "fx translation"):  # the GBP FX translation line, in EUR, close
        verdicts[p["id"]] = gbp is not None and within(gbp["fx_translation"], p)
    for p in by_class(plants, "truth", "price effect at constant FX"):  # GBP like-for-like price change % close
        verdicts[p["id"]] = gbp is not None and within(gbp["price_change_local_pct"], p)
    for p in by_class(plants, "truth", "volume loss"):
        # the group's bridge shows the largest volume loss of all groups, and its volume step as % of its prior
        # revenue (volume at prior prices: the units change) within tolerance
        g = groups.get(p["entity"]["product_group"])
        pct = {k: v["volume at prior prices"] / v["prior period revenue"] * 100 for k, v in groups.items()}
        verdicts[p["id"]] = (
            g is not None
            and min(pct, key=pct.get) == p["entity"]["product_group"]
            and within(pct[p["entity"]["product_group"]], p)
        )
    for p in by_class(plants, "lookalike", "fx-driven decline"):  # UK (GBP) called down at constant currency / no FX
        verdicts[p["id"]] = gbp is None or gbp["change_local_pct"] < 0
    return verdicts


RECIPES: dict[str, Recipe] = {
    "ab-test-readout": ab_test_readout,
    "customer-lifetime-value": customer_lifetime_value,
    "budget-vs-actual": budget_vs_actual,
    "sales-performance-review": sales_performance_review,
}
