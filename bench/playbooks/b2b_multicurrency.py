"""Recipes for the DE/FR/UK industrial distributor (bench/archetypes/b2b_multicurrency.md).

Each recipe follows its SKILL.md literally on these exports and judges the archetype's plants for that skill from
the script's output (see bench/playbooks/common.py). The shaping every recipe shares (``LINES``) reads the two SAP
invoice exports as business-profile reported them (cp1252, ';', day-first dates, decimal comma, trailing minus,
a dot thousands separator), stacks them, drops the DE01 lines the EN export repeats (document + item) and adds the
EUR amount at the posting month's AVG rate (GBP per 1 EUR: divided), the product group, segment, region and the
fiscal year (April start, named by its end year).
"""

from __future__ import annotations

import re

import pandas as pd

from bench.playbooks.common import Recipe, Run, ScriptCrash, by_class, within
from tests.conftest import meta_of, text_of

LINES = """
import numpy as np, pandas as pd
_ours = [globals().get(n) for n in ('lines', 'sales', 'customers')]  # a script may leave a name of its own
if not (all(isinstance(v, pd.DataFrame) for v in _ours) and 'fiscal_year' in lines and 'Segment' in customers):
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
    timed = set(r["timing"])  # a miss the script explains as a TIMING shift is not reported as a miss
    named = {(m["region"], m["category"]) for m in r["misses"] if f"{m['region']} x {m['category']}" not in timed} | {
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
    for p in by_class(plants, "lookalike", "timing shift"):  # the late cell: the largest miss, or a miss not TIMING
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
    for p in by_class(plants, "lookalike", "fx-driven decline"):
        # the UK's EUR fall read as its own: no GBP FX line, or its constant-currency change not the plant's
        verdicts[p["id"]] = gbp is None or not within(gbp["change_local_pct"], p)
    return verdicts


async def script_whole(run: Run, skill: str, path: str, inputs: str, timeout: float = 300) -> str:
    """``run.script`` for a script longer than use_skill's window (it is cut, the whole text kept as an artifact):
    the whole text, as a model reads it on, then run the same way. (A helper common.py's Run.script lacks.)"""
    read = await run.session.call_tool("use_skill", {"name": skill, "path": path, "output_level": "full"})
    meta = meta_of(read)
    if not meta.get("truncated"):
        return await run.script(skill, path, inputs, timeout)
    code = await run.get(f"load_artifact({meta['artifact_id']!r})")
    result = await run.session.call_tool(
        "run_python", {"code": f"{inputs}\n{code}", "timeout": timeout, "output_level": "full"}
    )
    text = text_of(result)
    run.outputs.append(f"### {skill} {path} (read whole)\n{text}")
    if result.is_error or "\n## error" in text:
        raise ScriptCrash(text[-1500:])
    return text


async def _sql(run: Run, skill: str, feeds: str, table: str, artifact: str) -> str:
    """The SQL block of SKILL.md (as served) that feeds ``feeds``, on the shaped artifact in place of ``table``, run
    with query_database at brief: its artifact id."""
    read = await run.session.call_tool("use_skill", {"name": skill, "output_level": "full"})
    blocks = re.findall(r"```sql\n(.*?)```", text_of(read), re.S)
    query = next(b for b in blocks if feeds in b).replace(table, artifact)
    result = await run.session.call_tool("query_database", {"query": query, "output_level": "brief"})
    text = text_of(result)
    run.outputs.append(f"### {skill} query_database ({feeds})\n{text}")
    found = meta_of(result).get("artifact_id") or (re.findall(r"artifact_[0-9a-z]+", text) or [None])[-1]
    if result.is_error or not found:
        raise ScriptCrash(text[-1500:])
    return found


async def rfm_segmentation(run: Run) -> dict[str, bool]:
    """order_facts: one row per invoice (document) of product lines, net revenue in EUR at the posting month's rate,
    rebate lines and credit memos left out; step 1's SQL as written; STATES = the partners' reseller agreements
    (PROFILE is contractual), no charge attempts in these exports."""
    plants = run.plants("rfm-segmentation")
    await run.py(
        LINES + AGREEMENTS + "of = sales.groupby(['customer', 'document_number'], as_index=False).agg(\n"
        "    order_date=('posting_date', 'min'), net_revenue=('amount_eur', 'sum'))\n"
        "of = of.rename(columns={'customer': 'customer_id', 'document_number': 'order_id'})\n"
        "of = of.assign(status='completed')\n"
        "of_id = save_artifact(of, title='order_facts (invoices, EUR)')\n"
        "rfm_states = agreements[['customer_id', 'status']].assign(pause_until=None)\n"
        "rfm_states = save_artifact(rfm_states, title='agreements')\n"
        "print(len(of), of_id)"
    )
    of_id = await run.get("of_id")
    scores = await _sql(run, "rfm-segmentation", "feeds scripts/rfm.py", "order_facts", of_id)
    await run.script("rfm-segmentation", "scripts/rfm.py", f"SOURCE = {scores!r}\nSTATES = rfm_states")
    listed = sorted({c for p in plants for c in p["entity"]["customers"]})
    flagged = set(await run.get(f"sorted(set(rfm[rfm.flagged].customer_id.astype(str)) & set({listed!r}))"))
    verdicts: dict[str, bool] = {}
    for p in plants:
        share = share_flagged(p["entity"]["customers"], flagged)
        if p["kind"] == "truth":  # the share of the planted customers flagged, within the plant's expected share
            verdicts[p["id"]] = within(share, p)
        else:  # a look-alike list: flagged when more than a quarter of its customers are
            verdicts[p["id"]] = share > 0.25
    return verdicts


async def profitability(run: Run) -> dict[str, bool]:
    """FY2026, one row per segment x product group x region x month in EUR (converted at the posting month's AVG
    rate before summing, so currency EUR): net revenue = product lines minus credit memos; cogs = standard cost x
    units sold minus units restocked (Z05 stock rotation); variable costs: the deliveries' freight (EUR) and the
    partners' rebate settlements (REB-* lines, positive)."""
    plants = run.plants("profitability")
    await run.py(
        LINES + "costs = load_file('uploads/item_costs.csv')\n"
        "std = costs.set_index(['Material', 'Fiscal Year'])['Standard Cost EUR']\n"
        "def fy_of(d): return 'FY' + (d.dt.year + (d.dt.month >= 4)).astype(str)\n"
        "keys = ['segment', 'product_group', 'region', 'month']\n"
        "inv = lines[lines.fiscal_year == 'FY2026'].copy()\n"
        "inv['cogs'] = [std.get((m, f), 0.0) for m, f in zip(inv.material, inv.fiscal_year)] * inv.quantity.fillna(0)\n"
        "inv['rebates'] = np.where(inv.rebate, -inv.amount_eur, 0.0)\n"
        "inv['net_revenue'] = np.where(inv.rebate, 0.0, inv.amount_eur)\n"
        "cn = load_file('uploads/credit_notes.csv', dtype=str)\n"
        "cn['date'] = pd.to_datetime(cn['Posting Date'])\n"
        "cn = cn[fy_of(cn.date) == 'FY2026'].copy()\n"
        "cn['month'] = cn.date.dt.strftime('%Y-%m')\n"
        "gbp_avg = avg[avg.Currency == 'GBP'].set_index('Month').rate\n"
        "cn_rate = np.where(cn.Currency == 'GBP', cn.month.map(gbp_avg), 1.0)\n"
        "cn['net_revenue'] = -pd.to_numeric(cn['Net Amount']) / cn_rate\n"
        "restocked = pd.to_numeric(cn.Quantity).fillna(0).where(cn['Reason Code'] == 'Z05', 0)\n"
        "cn['cogs'] = -restocked * [std.get((m, 'FY2026'), 0.0) for m in cn.Material]\n"
        "cn['segment'] = cn.Customer.map(customers.set_index('Customer').Segment)\n"
        "cn['product_group'] = cn.Material.map(groups)\n"
        "cn['region'] = cn['Company Code'].map({'DE01': 'Germany', 'FR01': 'France', 'GB01': 'United Kingdom'})\n"
        "dl = load_file('uploads/deliveries.csv', dtype=str)\n"
        "dl = dl.merge(lines[['document_number', 'item', 'month', 'fiscal_year'] + keys[:3]],\n"
        "    left_on=['Billing Document', 'Billing Item'], right_on=['document_number', 'item'])\n"
        "dl = dl[dl.fiscal_year == 'FY2026'].assign(freight=lambda d: pd.to_numeric(d['Freight Cost EUR']))\n"
        "frame = pd.concat([inv[keys + ['net_revenue', 'cogs', 'rebates']], cn[keys + ['net_revenue', 'cogs']],\n"
        "    dl[keys + ['freight']]]).fillna({'net_revenue': 0, 'cogs': 0, 'rebates': 0, 'freight': 0})\n"
        "frame = frame.groupby(keys, as_index=False).sum().assign(currency='EUR')\n"
        "profit_src = save_artifact(frame, title='FY2026 P&L cells, EUR')\n"
        "print(frame.groupby('segment')[['net_revenue', 'cogs', 'rebates', 'freight']].sum())"
    )
    await run.script("profitability", "scripts/loss_cells.py", "SOURCE = profit_src")
    cells = await run.get("cells[cells.flagged].to_dict('records')")
    verdicts: dict[str, bool] = {}
    for p in plants:  # a loss cell (contribution < 0) of that segment x product group; the truth's margin close
        seg, group = p["entity"]["segment"], p["entity"]["product_group"]
        hit = [c for c in cells if c.get("segment") == seg and c.get("product_group") == group]
        verdicts[p["id"]] = bool(hit) and (p["kind"] == "lookalike" or within(hit[0]["margin_pct"], p))
    return verdicts


async def data_quality_audit(run: Run) -> dict[str, bool]:
    """Each export audited as read with the options business-profile reported: deliveries.csv as it is; the credit
    memos with RELATED invoices (Reference Invoice = the invoices' document number); invoices_de.csv as written (';',
    cp1252, decimal comma); and the invoices of both SAP exports stacked under one set of names (the German headers
    translated, amounts parsed), RELATED to the customer master (Account Created). Step 4, cross_checks.py, right
    after profile.py on each export with a document and line column (all four: Delivery/Item, Credit Memo/Item,
    Belegnummer/Position, document_number/item)."""
    plants = run.plants("data-quality-audit")
    await run.py(
        LINES + "de_raw = load_file('uploads/invoices_de.csv', sep=';', encoding='cp1252', decimal=',',\n"
        "    dtype={'Belegnummer': str, 'Kunde': str})\n"
        "invoices_all = stacked.copy()\nprint(len(invoices_all))"
    )
    audits = {
        "deliveries": "SOURCE = 'uploads/deliveries.csv'",
        "credits": "SOURCE = 'uploads/credit_notes.csv'\nRELATED = {'invoices': {'source': invoices_all, "
        "'on': {'Reference Invoice': 'document_number'}}}",
        "de": "DF = de_raw",
        "invoices": "DF = invoices_all\nRELATED = {'customers': {'source': customers, 'on': {'customer': 'Customer'}}}",
    }
    found: dict[str, list[dict]] = {}
    for name, inputs in audits.items():
        await run.script("data-quality-audit", "scripts/profile.py", f"DF = None\nRELATED = None\n{inputs}")
        await run.script("data-quality-audit", "scripts/cross_checks.py", "")
        found[name] = await run.get("findings[['severity', 'column', 'check', 'rows']].to_dict('records')")

    def rows(audit: str, *words: str) -> list[int]:
        return [f["rows"] for f in found[audit] if all(w.lower() in f["check"].lower() for w in words)]

    def found_count(p: dict, counts: list[int], value: float | None = None) -> bool:
        # a count planted as 0 on this seed (e.g. no thousands separators) is found when no such fault is reported
        planted = (p.get("expected") or {}).get("value") if value is None else value
        if planted == 0:
            return not counts
        return any(n == planted if value is not None else within(n, p) for n in counts)

    delivery = rows("deliveries", "Delivery Date before Order Date")
    credit = rows("credits", "before invoices.")
    account = rows("invoices", "before customers.")
    verdicts: dict[str, bool] = {}
    truths = {
        "dq_delivery_before_order": delivery,
        "dq_credit_before_invoice": credit,
        "dq_invoice_before_account": account,
        "dq_thousands_separator": [f["rows"] for f in found["de"] if f["column"] == "Nettobetrag"],
    }
    for p in plants:
        if p["id"] in truths:  # that check named, its count exactly the planted one
            verdicts[p["id"]] = found_count(p, truths[p["id"]])
        elif p["id"] == "dq_cross_file_duplicates":  # "documents sent twice" on the stack: the documents counted
            docs = int(re.search(r"\((\d+) documents", p["statement"]).group(1))
            verdicts[p["id"]] = found_count(p, rows("invoices", "sent twice"), docs)
        elif p["id"] == "dq_rebate_lines":  # negative invoice amounts reported as errors
            verdicts[p["id"]] = bool(rows("invoices", "negative") + rows("de", "negative"))
        elif p["id"] == "dq_zero_value_samples":  # zero amounts reported
            verdicts[p["id"]] = bool(rows("invoices", "zero") + rows("de", "zero"))
        elif p["id"] == "dq_identical_repeat_orders":  # lines alike in content under different documents as duplicates
            verdicts[p["id"]] = any(
                any(w in f["check"].lower() for w in ("duplicate", "repeat", "twice", "identical"))
                and not any(k in f["column"].lower() for k in ("document", "beleg"))
                and any(k in f["column"].lower() for k in ("customer", "kunde", "material", "amount", "betrag"))
                for audit in ("invoices", "de")
                for f in found[audit]
            )
        elif p["id"] == "dq_same_day_account":  # same-day accounts counted: the count beyond the planted faults
            planted = next(x for x in plants if x["id"] == "dq_invoice_before_account")["expected"]["value"]
            verdicts[p["id"]] = any(n > 2 * planted + 10 for n in account)
        elif p["id"] == "dq_same_day_delivery_and_credit":  # same-day deliveries (3,445) or credits (204) counted
            verdicts[p["id"]] = any(n > 100 for n in delivery) or any(n > 50 for n in credit)
    return verdicts


async def customer_cohort_retention(run: Run) -> dict[str, bool]:
    """SOURCE: one row per invoice (document) of product lines, active_at its posting day, acquired_at the customer
    master's Account Created; Direct accounts run on their own (partners behave differently); GRAIN quarter
    (B2B buyers), DATA_THROUGH the exports' last day."""
    plants = run.plants("customer-cohort-retention")
    await run.py(
        LINES + "docs = sales.groupby(['customer', 'document_number'], as_index=False).posting_date.min()\n"
        "docs['acquired_at'] = docs.customer.map(customers.set_index('Customer')['Account Created'])\n"
        "docs['segment'] = docs.customer.map(customers.set_index('Customer').Segment)\n"
        "direct = docs[docs.segment == 'Direct']\n"
        "direct = direct.rename(columns={'customer': 'customer_id', 'posting_date': 'active_at'})\n"
        "ccr_src = save_artifact(direct[['customer_id', 'active_at', 'acquired_at']], title='direct invoices')\n"
        "ccr_through = str(lines.posting_date.max().date())\nprint(len(direct), ccr_through)"
    )
    await script_whole(
        run,
        "customer-cohort-retention",
        "scripts/retention_matrix.py",
        "SOURCE = ccr_src\nGRAIN = 'quarter'\nDATA_THROUGH = ccr_through",
    )
    r = await run.get(
        "{'flagged': sorted(str(c) for c in cohort_effects[cohort_effects.flagged].cohort), "
        "'q1': {str(k): (None if pd.isna(v) else float(v)) for k, v in retention[1].items()}}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "weak cohort"):  # the cohort flagged, its next-quarter retention close
        c = p["entity"]["cohort"]
        verdicts[p["id"]] = c in r["flagged"] and within(r["q1"].get(c), p)
    for p in by_class(plants, "lookalike", "right-censoring"):  # the youngest cohorts flagged as weak
        verdicts[p["id"]] = any(c in r["flagged"] for c in (p["entity"]["cohort"], "FY2026-Q3"))
    return verdicts


async def returns_and_cancellations(run: Run) -> dict[str, bool]:
    """Line-level returns (credit memos with quantities, linked to invoice + item): per SKU x segment (the driver)
    units_sold (sale lines, units > 0), units_returned and returns (memos) of one reason, Z01 defective; per product
    group x segment the same for every return reason with a quantity (Z01, Z02, Z05); step 4 on one row per invoice
    and SKU (units, units_returned Z01, product group)."""
    plants = run.plants("returns-and-cancellations")
    await run.py(
        LINES + "cn = load_file('uploads/credit_notes.csv', dtype=str)\n"
        "cn['units'] = pd.to_numeric(cn.Quantity)\n"
        "sold = sales[sales.quantity > 0].copy()\n"
        "def returned(reasons):\n"
        "    c = cn[cn['Reason Code'].isin(reasons) & cn.units.notna()]\n"
        "    c = c.groupby(['Reference Invoice', 'Reference Item']).agg(\n"
        "        u=('units', 'sum'), n=('Credit Memo', 'nunique'))\n"
        "    k = pd.MultiIndex.from_arrays([sold.document_number, sold.item])\n"
        "    return c.u.reindex(k).fillna(0).to_numpy(), c.n.reindex(k).fillna(0).to_numpy()\n"
        "def counts(by, reasons):\n"
        "    u, n = returned(reasons)\n"
        "    t = sold.assign(units_returned=u, returns=n).groupby([by, 'segment'], as_index=False).agg(\n"
        "        units_sold=('quantity', 'sum'), units_returned=('units_returned', 'sum'),\n"
        "        returns=('returns', 'sum'))\n"
        "    return t.rename(columns={by: 'item'})\n"
        "ret_sku = save_artifact(counts('material', ['Z01']), title='Z01 defective returns per SKU and segment')\n"
        "ret_group = save_artifact(counts('product_group', ['Z01', 'Z02', 'Z05']), title='returns per group')\n"
        "u, n = returned(['Z01'])\n"
        "basket = sold.assign(units_returned=u).groupby(['document_number', 'material', 'product_group'],\n"
        "    as_index=False).agg(units=('quantity', 'sum'), units_returned=('units_returned', 'sum'))\n"
        "basket = basket.rename(\n"
        "    columns={'document_number': 'order_id', 'material': 'item', 'product_group': 'product'})\n"
        "ret_orders = save_artifact(basket, title='invoices and their SKUs')\nprint(len(basket))"
    )
    await run.script("returns-and-cancellations", "scripts/return_outliers.py", "SOURCE = ret_sku")
    sku_flags = set(await run.get("sorted(str(i) for i in flags['item'])"))
    await run.script("returns-and-cancellations", "scripts/return_outliers.py", "SOURCE = ret_group")
    group_flags = set(await run.get("sorted(str(i) for i in flags['item'])"))
    await run.script("returns-and-cancellations", "scripts/order_attribution.py", "SOURCE = ret_orders")
    named = set(await run.get("sorted(str(i) for i in named['item'])"))
    verdicts: dict[str, bool] = {}
    for p in plants:
        if p["class"] in ("defective SKU", "small sample"):  # flagged in step 3 and named at order level in step 4
            verdicts[p["id"]] = p["entity"]["sku"] in sku_flags and p["entity"]["sku"] in named
        elif p["class"] == "segment mix":  # the partner-heavy group flagged as returning more
            verdicts[p["id"]] = p["entity"]["product_group"] in group_flags
    return verdicts


async def kpi_anomaly_detection(run: Run) -> dict[str, bool]:
    """Daily order intake: one row per sales order (deliveries.csv, distinct Sales Order, its Order Date), counted per
    day; the business calendar of DE, FR and GB with the Christmas shutdown as a closure."""
    plants = run.plants("kpi-anomaly-detection")
    await run.py(
        "import pandas as pd\n"
        "dl = load_file('uploads/deliveries.csv', dtype=str)\n"
        "kpi = dl.drop_duplicates('Sales Order')[['Order Date', 'Sales Order']].rename(\n"
        "    columns={'Order Date': 'date', 'Sales Order': 'order'})\n"
        "kpi['date'] = pd.to_datetime(kpi.date)\n"
        "kpi_src = save_artifact(kpi[['date']], title='sales orders by order date')\n"
        "shutdown = {'Christmas shutdown': [f'{y}-12-24..{y + 1}-01-01' for y in (2022, 2023, 2024, 2025)]}\n"
        "print(len(kpi), kpi.date.min(), kpi.date.max())"
    )
    await run.script(
        "kpi-anomaly-detection",
        "scripts/business_calendar.py",
        "COUNTRY = ['DE', 'FR', 'GB']\nEVENTS = shutdown\nSOURCE = kpi_src",
    )
    await run.script(
        "kpi-anomaly-detection",
        "scripts/kpi_anomalies.py",
        "COUNTRY = ['DE', 'FR', 'GB']\nEVENTS = shutdown\nSOURCE = kpi_src",
    )
    found = await run.get(
        "[{'period': str(pd.Timestamp(a.period).date()), 'low': a.direction in ('low', 'drop'), "
        "'ratio_same_weekday': None if pd.isna(a.ratio_same_weekday) else float(a.ratio_same_weekday)} "
        "for a in anomalies.itertuples()]"
    )
    by_day = {a["period"]: a for a in found}
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "outage"):  # the day flagged low, its fall on the same weekday close
        a = by_day.get(p["entity"]["date"])
        verdicts[p["id"]] = a is not None and a["low"] and within(100 * ((a["ratio_same_weekday"] or 0) - 1), p)
    for p in by_class(plants, "lookalike", "catch-up"):  # the next day's backlog flagged as its own anomaly
        verdicts[p["id"]] = p["entity"]["date"] in by_day
    holidays = {h.split(" ")[0] for days in run.business["holidays"].values() for h in days}
    for p in by_class(plants, "lookalike", "holidays"):  # a DE/FR/UK public holiday or a shutdown day flagged
        days = set(holidays)
        for d in p["entity"]["dates"]:
            first, _, last = d.partition("..")
            days |= {str(x.date()) for x in pd.date_range(first, last or first)}
        for year in (2023, 2024, 2025):  # the shutdown, 24 Dec - 1 Jan, every year
            days |= {str(x.date()) for x in pd.date_range(f"{year}-12-24", f"{year + 1}-01-01")}
        verdicts[p["id"]] = bool(days & set(by_day))
    return verdicts


async def discount_effectiveness(run: Run) -> dict[str, bool]:
    """Each scheme a rollout to a group of direct accounts from a date: one row per account x month (the month's
    start) with outcome = invoices (orders), group 1 for the scheme's accounts, 0 for the direct accounts on no
    scheme; stratum = the company code (its own seasons); the whole history before START as the pre-period."""
    plants = run.plants("discount-effectiveness")
    await run.py(
        LINES + "d = sales[sales.segment == 'Direct']\n"
        "panel = d.groupby(['customer', 'month', 'company_code'], as_index=False).document_number.nunique()\n"
        "panel = panel.rename(columns={'customer': 'unit', 'document_number': 'outcome', 'company_code': 'stratum'})\n"
        "panel['period'] = panel.month + '-01'\n"
        "scheme = panel.unit.map(customers.set_index('Customer')['Rebate Scheme']).fillna('')\n"
        "def did_panel(name):\n"
        "    part = panel[scheme.isin([name, ''])]\n"
        "    return save_artifact(part.assign(group=(scheme[part.index] == name).astype(int))[\n"
        "        ['unit', 'period', 'outcome', 'group', 'stratum']], title=name)\n"
        "pilot_src, growth_src = did_panel('VR-PILOT'), did_panel('VR-GROWTH')\nprint(len(panel))"
    )
    results = {}
    for name, start, src in (("VR-PILOT", "2025-07-01", "pilot_src"), ("VR-GROWTH", "2025-04-01", "growth_src")):
        await run.script(
            "discount-effectiveness",
            "scripts/promo_did.py",
            f"DESIGN = 'rollout'\nSTART = {start!r}\nEND = '2026-03-01'\nSCHEME = {name!r}\nSOURCE = {src}",
        )
        results[name] = await run.get("{'lift': float(effects.lift.iloc[0]), 'flagged': bool(effects.flagged.iloc[0])}")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "real effect"):  # the pilot's lift claimed, its size close
        r = results[p["entity"]["scheme"]]
        verdicts[p["id"]] = r["flagged"] and within(100 * r["lift"], p)
    for p in by_class(plants, "lookalike", "selection"):  # a lift claimed for the nominated accounts
        verdicts[p["id"]] = results[p["entity"]["scheme"]]["flagged"]
    return verdicts


async def demand_forecast(run: Run) -> dict[str, bool]:
    """One row per day of invoiced units (product lines with units > 0), calendar months (PROFILE), DATA_END the
    exports' last day; periods.py then forecast.py three months ahead."""
    plants = run.plants("demand-forecast")
    await run.py(
        LINES + "u = sales[sales.quantity > 0].groupby(sales.posting_date.dt.normalize()).quantity.sum()\n"
        "fc = u.rename_axis('date').reset_index(name='value')\n"
        "fc_src = save_artifact(fc, title='invoiced units per day')\nprint(len(fc))"
    )
    await run.script(
        "demand-forecast", "scripts/periods.py", "SOURCE = fc_src\nGRAIN = 'month'\nDATA_END = '2026-03-31'"
    )
    await run.script("demand-forecast", "scripts/forecast.py", "SOURCE = periods\nHORIZON = 3")
    r = await run.get(
        "{'total': float(forecast.forecast.head(3).sum()) if len(forecast) else None, 'mape': float(chosen_mape), "
        "'flags': [f'{a} {b}' for a, b in zip(flagged.period.astype(str), flagged.flag.astype(str))], "
        "'broken': str(broken)}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "forecast with backtest"):  # a forecast with its backtest error, total close
        verdicts[p["id"]] = r["total"] is not None and r["mape"] == r["mape"] and within(r["total"], p)
    for p in by_class(plants, "lookalike", "seasonality"):  # a December replaced as a one-off or read as a break
        verdicts[p["id"]] = any(m in f for f in r["flags"] for m in p["entity"]["months"]) or "12" in r["broken"]
    for p in by_class(plants, "lookalike", "one-off"):  # the spike month read as a seasonal break (extrapolated)
        verdicts[p["id"]] = "2025-10" in r["broken"] or "Oct" in r["broken"]
    return verdicts


RECIPES: dict[str, Recipe] = {
    "ab-test-readout": ab_test_readout,
    "customer-lifetime-value": customer_lifetime_value,
    "budget-vs-actual": budget_vs_actual,
    "sales-performance-review": sales_performance_review,
    "rfm-segmentation": rfm_segmentation,
    "profitability": profitability,
    "data-quality-audit": data_quality_audit,
    "customer-cohort-retention": customer_cohort_retention,
    "returns-and-cancellations": returns_and_cancellations,
    "kpi-anomaly-detection": kpi_anomaly_detection,
    "discount-effectiveness": discount_effectiveness,
    "demand-forecast": demand_forecast,
}
