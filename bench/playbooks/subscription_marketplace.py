"""Recipes for the pet-food subscription business (bench/archetypes/subscription_marketplace.md).

Each recipe follows its SKILL.md literally on these exports and judges the archetype's plants for that skill from
the script's output (see bench/playbooks/common.py). The shaping every skill shares (``SETUP``) is the model's part:
Recharge charges with the exact duplicate rows counted once and their UTC-offset timestamps turned into the store's
local day; Shopify's order-level fields filled from each order's first line; every local amount in USD at the rate
of its local day (finance's file: units of the currency per 1 USD, weekends on the last earlier rate).
"""

from __future__ import annotations

import re

from bench.playbooks.common import Recipe, Run, ScriptCrash, by_class, within
from tests.conftest import text_of

SETUP = """
import pandas as pd, numpy as np
if 'charges' not in globals():
    STORE_TZ = PROFILE['store_timezone']
    def to_local(ts):  # a timestamp with its UTC offset -> the store's local time
        t = pd.to_datetime(ts, utc=True, format='mixed', errors='coerce')
        return t.dt.tz_convert(STORE_TZ).dt.tz_localize(None)
    def to_num(s):
        return pd.to_numeric(s.astype(str).str.replace(r'[^0-9.\\-]', '', regex=True), errors='coerce').fillna(0.0)
    fx_rates = load_file('uploads/fx_rates.csv')
    fx_rates['Date'] = pd.to_datetime(fx_rates.Date)
    fx_rates = fx_rates.sort_values('Date')
    def to_usd(amount, currency, day):  # local money / the rate of its local day (the last earlier business day)
        q = pd.DataFrame({'amount': np.asarray(amount, float), 'Quote': np.asarray(currency, dtype=object),
                          'Date': pd.to_datetime(np.asarray(day)).normalize(), 'i': np.arange(len(amount))})
        m = pd.merge_asof(q.sort_values('Date'), fx_rates[['Date', 'Quote', 'Rate']], on='Date', by='Quote')
        m['Rate'] = m.Rate.where(m.Quote != 'USD', 1.0)
        return (m.sort_values('i').amount / m.sort_values('i').Rate).to_numpy()
    unit_cogs = load_file('uploads/product_costs.csv').set_index('SKU')['Unit COGS (USD)']
    rc_charges = load_file('uploads/charges.csv', dtype=str).fillna('')
    rc_charges = rc_charges.drop_duplicates()  # an exact copy of a row is the same attempt exported twice
    rc_charges['when'] = to_local(rc_charges.processed_at.where(rc_charges.processed_at != '', rc_charges.scheduled_at))
    rc_charges['day'] = rc_charges['when'].dt.normalize()
    rc_charges['qty'] = to_num(rc_charges.line_item_quantity)
    rc_charges['net'] = to_num(rc_charges.subtotal_price) - to_num(rc_charges.total_discounts)
    rc_paid = rc_charges[rc_charges.status.isin(['SUCCESS', 'REFUNDED', 'PARTIALLY_REFUNDED'])].copy()
    rc_paid['net_usd'] = to_usd(rc_paid.net, rc_paid.currency, rc_paid.day)
    rc_subs = load_file('uploads/subscriptions.csv', dtype=str).fillna('')
    rc_customers = load_file('uploads/customers.csv', dtype=str).fillna('')
    email_id = dict(zip(rc_customers.email.str.lower(), rc_customers.customer_id))
    shop_lines = load_file('uploads/orders_export.csv', dtype=str).fillna('')
    first_line = shop_lines['Financial Status'] != ''
    for c in ['Email', 'Financial Status', 'Currency', 'Subtotal', 'Created at', 'Shipping Country', 'Refunded Amount']:
        shop_lines[c] = shop_lines[c].where(first_line).groupby(shop_lines.Name).transform('first')
    shop_lines['when'] = to_local(shop_lines['Created at'])
    shop_lines['day'] = shop_lines['when'].dt.normalize()
    shop_lines['qty'] = to_num(shop_lines['Lineitem quantity'])
    shop_lines['customer_id'] = shop_lines.Email.str.lower().map(email_id).fillna(shop_lines.Email.str.lower())
    shop_orders = shop_lines[first_line].copy()
    shop_orders['subtotal_usd'] = to_usd(to_num(shop_orders.Subtotal), shop_orders.Currency, shop_orders.day)
    amz = load_file('uploads/amazon_settlement.tsv', sep='\\t', dtype=str).fillna('')
    amz = amz[amz['transaction-type'] != '']  # a settlement's summary row is no transaction
    export_end = rc_charges.day.max()
print(len(rc_charges), len(rc_paid), len(shop_orders), len(amz), export_end)
"""


async def sql(run: Run, query: str) -> str:
    """A query of the playbook with ``query_database`` at brief: the artifact id it returns."""
    result = await run.session.call_tool("query_database", {"query": query, "output_level": "brief"})
    text = text_of(result)
    run.outputs.append(f"### query_database\n{text}")
    found = [i for i in re.findall(r"artifact_[0-9a-f]{12}", text) if i not in query]  # the result, not the input
    if result.is_error or not found:
        raise ScriptCrash(text[-1500:])
    return found[-1]


async def customer_lifetime_value(run: Run) -> dict[str, bool]:
    """One row per completed order (a paid Recharge charge or a Shopify order; Amazon buyers have no id) with its
    margin in USD, net of refunds, minus COGS; STATES one row per subscription as Recharge writes it."""
    plants = run.plants("customer-lifetime-value")
    await run.py(SETUP)
    await run.py(
        "c = rc_paid.assign(margin=to_usd(rc_paid.net - to_num(rc_paid.total_refunds), rc_paid.currency, rc_paid.day)"
        " - rc_paid.line_item_sku.map(unit_cogs) * rc_paid.qty)\n"
        "line_cogs = (shop_lines['Lineitem sku'].map(unit_cogs) * shop_lines.qty).groupby(shop_lines.Name).sum()\n"
        "o = shop_orders\n"
        "o = o.assign(margin=to_usd(to_num(o.Subtotal) - to_num(o['Refunded Amount']), o.Currency, o.day)"
        " - o.Name.map(line_cogs))\n"
        "clv_orders = pd.concat([c[['customer_id', 'processed_at', 'margin']].rename(columns={'processed_at': "
        "'order_date'}), o[['customer_id', 'Created at', 'margin']].rename(columns={'Created at': 'order_date'})])\n"
        "clv_source = save_artifact(clv_orders, title='completed orders with margin (USD)')\n"
        "states = pd.DataFrame({'customer_id': rc_subs.customer_id, 'subscription_id': rc_subs.subscription_id,\n"
        "    'status': rc_subs.status, 'plan': rc_subs.sku, 'started_at': rc_subs.created_at,\n"
        "    'cancelled_at': rc_subs.cancelled_at.replace('', None),\n"
        "    'pause_until': rc_subs.paused_until.replace('', None),\n"
        "    'next_charge_at': rc_subs.next_charge_scheduled_at.replace('', None),\n"
        "    'period_days': 7 * rc_subs.order_interval_frequency.astype(int)})\n"
        "clv_states = save_artifact(states, title='subscriptions (Recharge)')\n"
        "failed = rc_charges[rc_charges.status == 'ERROR'].charge_id.unique()\n"  # recovered / failed charges
        "recovered = rc_paid[rc_paid.charge_id.isin(failed)].charge_id.nunique() / max(len(failed), 1)\n"
        "print(len(clv_orders), len(states), round(recovered, 3))"
    )
    await run.script(
        "customer-lifetime-value",
        "scripts/clv.py",
        "SOURCE = clv_source\nSTATES = clv_states\nEXPORT_START = '2023-01-29'\nDUNNING_RECOVERY = recovered",
        timeout=600,
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "contractual_churn_observed"):  # every recent canceller valued at exactly 0
        gone = await run.get(
            f"int(clv[clv.customer_id.isin({p['entity']['customers']!r}) & (clv.p_alive == 0)"
            " & (clv.value_3y == 0)].customer_id.nunique())"
        )
        verdicts[p["id"]] = within(gone, p)
    for p in by_class(plants, "lookalike", "paused_with_resume_date"):  # a paused one with a resume date valued as gone
        dead = await run.get(
            "int(subscriptions[subscriptions.subscription_id.isin(rc_subs[(rc_subs.status == 'PAUSED') & "
            "(rc_subs.paused_until > str(export_end.date()))].subscription_id) & ((subscriptions.p_alive == 0) | "
            "(subscriptions.value <= 0))].shape[0])"
        )
        verdicts[p["id"]] = dead > 0
    return verdicts


RFM_SQL = """
WITH orders AS (
  SELECT customer_id, order_id, min(order_date) AS order_date, sum(net_revenue) AS revenue
  FROM order_facts WHERE status = 'completed'
  GROUP BY customer_id, order_id
), gaps AS (
  SELECT customer_id,
         date_diff('day', lag(order_date) OVER (PARTITION BY customer_id ORDER BY order_date), order_date) AS gap
  FROM (SELECT DISTINCT customer_id, order_date FROM orders)
), own AS (
  SELECT customer_id, median(gap) AS own_cycle, count(*) AS gap_count FROM gaps WHERE gap > 0 GROUP BY customer_id
), business AS (
  SELECT coalesce(median(gap), 30) AS cycle FROM gaps WHERE gap > 0
), per_customer AS (
  SELECT customer_id, min(order_date) AS first_order, max(order_date) AS last_order,
         count(DISTINCT order_id) AS orders, sum(revenue) AS revenue,
         count(DISTINCT year(order_date)) >= 2 AND date_diff('day', min(order_date), max(order_date)) >= 300
           AND least(max(dayofyear(order_date)) - min(dayofyear(order_date)),
                     max((dayofyear(order_date) + 183) % 366) - min((dayofyear(order_date) + 183) % 366)) <= 92
           AS seasonal
  FROM orders GROUP BY customer_id
), scored AS (
  SELECT p.*,
         date_diff('day', last_order, (SELECT max(order_date) FROM orders)) AS recency_days,
         date_diff('day', first_order, (SELECT max(order_date) FROM orders)) AS tenure_days,
         greatest(1, CASE WHEN seasonal THEN 365 WHEN own.gap_count >= 2 THEN own.own_cycle
                          ELSE business.cycle END) AS cycle_days,
         business.cycle AS business_cycle_days,
         1 + floor(5 * (rank() OVER (ORDER BY orders) - 1) / count(*) OVER ())::INT AS f,
         1 + floor(5 * (rank() OVER (ORDER BY p.revenue) - 1) / count(*) OVER ())::INT AS m
  FROM per_customer p LEFT JOIN own USING (customer_id) CROSS JOIN business
), cycles AS (
  SELECT *, round(recency_days / cycle_days, 2) AS cycles_silent,
         CASE WHEN recency_days <= cycle_days THEN 5 WHEN recency_days <= 1.5 * cycle_days THEN 4
              WHEN recency_days <= 3 * cycle_days THEN 3 WHEN recency_days <= 6 * cycle_days THEN 2 ELSE 1 END AS r
  FROM scored
)
SELECT customer_id, last_order, recency_days, tenure_days, round(cycle_days) AS cycle_days, cycles_silent,
       seasonal, orders, round(revenue, 2) AS revenue, r, f, m,
       CASE
         WHEN tenure_days <= 180 THEN 'New'
         WHEN r >= 4 AND f >= 4 AND m >= 4 THEN 'Champions'
         WHEN r >= 4 AND f >= 3 THEN 'Loyal'
         WHEN r = 5 THEN 'Promising'
         WHEN r = 4 THEN 'Needs attention'
         WHEN r = 3 AND m >= 4 THEN 'Cannot lose'
         WHEN r = 3 THEN 'At risk'
         WHEN r = 2 THEN 'Hibernating'
         ELSE 'Lost'
       END AS segment
FROM cycles
ORDER BY revenue DESC
"""


async def rfm_segmentation(run: Run) -> dict[str, bool]:
    """Purchases: the non-contractual orders only (Shopify one-offs and add-ons, refunded ones left out; Amazon
    buyers have no id; renewals are not purchases), net revenue in USD at the order month's rate; STATES: every
    subscription with the status of its latest charge attempt."""
    plants = run.plants("rfm-segmentation")
    await run.py(SETUP)
    await run.py(
        "month_fx = fx_rates.assign(month=fx_rates.Date.dt.to_period('M')).groupby(['Quote', 'month']).Rate.mean()\n"
        "o = shop_orders[shop_orders['Financial Status'] != 'refunded']\n"
        "rate = [1.0 if c == 'USD' else month_fx[(c, m)] for c, m in zip(o.Currency, o.day.dt.to_period('M'))]\n"
        "facts = pd.DataFrame({'customer_id': o.customer_id, 'order_id': o.Name, 'order_date': o.day.dt.date,\n"
        "    'status': 'completed', 'net_revenue': to_num(o.Subtotal).to_numpy() / np.array(rate)})\n"
        "rfm_facts = save_artifact(facts, title='order_facts (non-contractual orders, USD)')\n"
        "attempts = rc_charges.assign(tried=pd.to_numeric(rc_charges.number_times_tried, errors='coerce'))\n"
        "last = attempts.sort_values(['when', 'tried']).groupby('subscription_id').tail(1)\n"
        "states = pd.DataFrame({'customer_id': rc_subs.customer_id, 'status': rc_subs.status,\n"
        "    'pause_until': rc_subs.paused_until.replace('', None),\n"
        "    'last_charge_status': rc_subs.subscription_id.map(last.set_index('subscription_id').status)})\n"
        "rfm_states = save_artifact(states, title='subscriptions with their latest charge attempt')\n"
        "print(rfm_facts, rfm_states, len(facts), states.last_charge_status.value_counts().to_dict())"
    )
    facts = await run.get("rfm_facts")
    scored = await sql(run, RFM_SQL.replace("order_facts", facts))
    await run.script(
        "rfm-segmentation",
        "scripts/rfm.py",
        f"SOURCE = {scored!r}\nSTATES = rfm_states\nAS_OF = str(export_end.date())",
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "involuntary_churn_risk"):  # the Dunning customers, flagged, as many as planted
        n = await run.get("int((rfm.segment.eq('Dunning') & rfm.flagged).sum())")
        verdicts[p["id"]] = n > 0 and within(n, p)
    for p in by_class(plants, "lookalike", "cadence_driven_recency"):  # a live, not dunning subscriber flagged
        n = await run.get("int((rfm.contract_state.isin(['active', 'paused', 'paused_open']) & rfm.flagged).sum())")
        verdicts[p["id"]] = n > 0
    return verdicts


# The plan's fiscal periods, dated from PROFILE's calendar (4-5-4 from its first day, the 53rd week in P12 of the
# years it lists), each day of the actuals in its period.
PERIODS = """
cal = PROFILE['fiscal_calendar']
rows, start = [], pd.Timestamp(cal['first_day'])
for fy in range(start.year, start.year + 4):
    weeks = [4, 5, 4] * 4
    if fy in cal.get('53_week_years', []):
        weeks[-1] += 1
    for n, w in enumerate(weeks, 1):
        rows.append((f'FY{fy}', f'P{n}', start, start + pd.Timedelta(weeks=w) - pd.Timedelta(days=1)))
        start += pd.Timedelta(weeks=w)
periods = pd.DataFrame(rows, columns=['fiscal_year', 'period', 'period_start', 'period_end'])
def fiscal(days):
    i = np.searchsorted(periods.period_start.values, np.asarray(days, dtype='datetime64[ns]'), side='right') - 1
    return periods.fiscal_year.values[i], periods.period.values[i]
"""


async def budget_vs_actual(run: Run) -> dict[str, bool]:
    """Actuals as the plan defines them (business.plan_definition): paid Recharge charges (subtotal - discounts),
    Shopify Subtotal and Amazon Order Principal and Promotion rows (US), before refunds, in USD at the daily
    rate of the local day, by fiscal period x country on the plan's own dates; data through the exports' end."""
    plants = run.plants("budget-vs-actual")
    await run.py(SETUP)
    await run.py(PERIODS)
    await run.py(
        "a = amz[(amz['transaction-type'] == 'Order') & (amz['amount-description'] == 'Principal')]\n"
        "rev = pd.concat([\n"
        "    pd.DataFrame({'day': rc_paid.day, 'country': rc_paid.shipping_country, 'usd': rc_paid.net_usd}),\n"
        "    pd.DataFrame({'day': shop_orders.day, 'country': shop_orders['Shipping Country'],\n"
        "                  'usd': shop_orders.subtotal_usd}),\n"
        "    pd.DataFrame({'day': pd.to_datetime(a['posted-date']), 'country': 'US', 'usd': to_num(a.amount)})])\n"
        "rev['fiscal_year'], rev['period'] = fiscal(rev.day)\n"
        "act = rev.groupby(['fiscal_year', 'period', 'country']).usd.sum().rename('actual').reset_index()\n"
        "plan = load_file('uploads/plan.csv', dtype=str)\n"
        "plan = plan.rename(columns={'Fiscal Year': 'fiscal_year', 'Period': 'period', 'Country': 'country',\n"
        "                            'Plan Revenue (USD)': 'plan'})\n"
        "plan['plan'] = to_num(plan.plan)\n"
        "bva = plan.merge(act, on=['fiscal_year', 'period', 'country'], how='left').fillna({'actual': 0.0})\n"
        "bva = bva.merge(periods, on=['fiscal_year', 'period'])\n"
        "bva['data_through'] = export_end\n"
        "bva_source = save_artifact(bva[['period_start', 'period_end', 'fiscal_year', 'country', 'plan', 'actual',"
        " 'data_through']], title='plan vs actual by fiscal period and country')\n"
        "print(bva.tail(8))"
    )
    await run.script("budget-vs-actual", "scripts/budget_variance.py", "SOURCE = bva_source")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "real_cell_miss"):  # AU's quarter holding P4 a miss, P4's variance measured
        hit = await run.get(
            "{'flagged': bool(((misses.country == 'AU') & (misses.quarter == 'FY2025-Q2')).any()),"
            " 'var': period_cells[(period_cells.country == 'AU') & (period_cells.label == 'FY2025 P4')]"
            ".variance_pct.tolist()}"
        )
        verdicts[p["id"]] = hit["flagged"] and bool(hit["var"]) and within(hit["var"][0], p, 0.01)
    for p in by_class(plants, "lookalike", "plan_bias"):  # any other cell-quarter or year called a miss or overrun
        n = await run.get(
            "int((~((flags.country == 'AU') & (flags.quarter == 'FY2025-Q2'))).sum()"
            " + (year_cells.flag & ~((year_cells.country == 'AU') & (year_cells.fy == 'FY2025'))).sum())"
        )
        verdicts[p["id"]] = n > 0
    for p in by_class(plants, "lookalike", "partial_period"):  # the 3-day-old period judged as complete
        verdicts[p["id"]] = await run.get("bool((period_cells.label == 'FY2025 P11').any())")
    return verdicts


async def sales_performance_review(run: Run) -> dict[str, bool]:
    """The subscription line (paid Recharge charges, each in its own currency, a row stamped in another currency
    than its country's left out as the audit finds it) per SKU and local day: net revenue (subtotal - discounts),
    bags and list revenue; FX = finance's daily rates (units per 1 USD: divide); FY2025 P1-P10 against FY2024."""
    plants = run.plants("sales-performance-review")
    await run.py(SETUP)
    await run.py(
        "home = {'US': 'USD', 'CA': 'CAD', 'AU': 'AUD'}\n"
        "p = rc_paid[rc_paid.currency == rc_paid.shipping_country.map(home)]\n"
        "p = p.assign(list=to_num(p.subtotal_price))\n"
        "spr = p.groupby(['line_item_sku', 'day', 'currency'], as_index=False).agg(\n"
        "    net_revenue=('net', 'sum'), units=('qty', 'sum'), list_revenue=('list', 'sum'))\n"
        "spr_source = save_artifact(spr, title='Recharge sales per SKU, day and currency')\n"
        "spr_fx = save_artifact(fx_rates.rename(columns={'Date': 'date', 'Quote': 'currency', 'Rate': 'rate'})"
        "[['currency', 'rate', 'date']], title='daily FX (units per USD)')\n"
        "print(len(spr))"
    )
    await run.script(
        "sales-performance-review",
        "scripts/price_volume_mix.py",
        "SOURCE = spr_source\nFX = spr_fx\nFX_DIRECTION = 'local_per_reporting'\nPERIOD = (1, 10)\nFISCAL_YEAR = 2025",
    )
    steps = await run.get("dict(zip(bridge.step, bridge.revenue))")
    local = await run.get("by_currency.list_price_change_local_pct.to_dict() if by_currency is not None else {}")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "fx_vs_price"):  # the list-price step at prior rates is the price rise
        verdicts[p["id"]] = "list price" in steps and within(steps["list price"], p)
    for p in by_class(plants, "lookalike", "fx_translation"):  # CA/AU prices read as fallen
        fell = [local.get(c) is None or local[c] <= 0 for c in ("CAD", "AUD")]
        verdicts[p["id"]] = any(fell) or steps.get("list price", 0) <= 0
    return verdicts


async def data_quality_audit(run: Run) -> dict[str, bool]:
    """The two exports the analyses rest on, each audited as it is: Recharge's charges, and Shopify's line export
    with its customers' signup dates (customers.csv, joined on the e-mail) as RELATED."""
    plants = run.plants("data-quality-audit")
    await run.script("data-quality-audit", "scripts/profile.py", "SOURCE = 'uploads/charges.csv'")
    on_charges = await run.get("findings")
    await run.script(
        "data-quality-audit",
        "scripts/profile.py",
        "SOURCE = 'uploads/orders_export.csv'\n"
        "RELATED = {'customers': {'source': 'uploads/customers.csv', 'on': {'Email': 'email'}}}",
        timeout=900,  # the line export's order-level fields are filled per order: minutes on 18k lines
    )
    on_orders = await run.get("findings")

    def rows(findings: list[dict], check: str, column: str = "") -> int | None:
        hit = [f for f in findings if check in f["check"] and column in str(f["column"])]
        return sum(f["rows"] for f in hit) if hit else None

    verdicts: dict[str, bool] = {}
    found = {
        "dq_orders_before_signup": rows(on_orders, "before customers."),
        "dq_refund_before_sale": rows(on_charges, "refunded_at before processed_at"),
        "dq_duplicated_charge_batch": rows(on_charges, "exact duplicate rows"),
        "dq_currency_country_mismatch": rows(on_charges, "currency not the country's"),
    }
    for p in by_class(plants, "truth", "impossible_date") + by_class(plants, "truth", "duplicate_rows"):
        verdicts[p["id"]] = found.get(p["id"]) is not None and within(found[p["id"]], p)  # named, rows as planted
    for p in by_class(plants, "truth", "inconsistent_currency"):
        verdicts[p["id"]] = found.get(p["id"]) is not None and within(found[p["id"]], p)
    for p in by_class(plants, "lookalike", "layout_blank"):  # a later line's blank order field called missing
        cols = p["entity"]["columns"]
        verdicts[p["id"]] = any(f["check"].startswith("missing values") and f["column"] in cols for f in on_orders)
    for p in by_class(plants, "lookalike", "unit_misread"):  # the amount checked as a rate
        verdicts[p["id"]] = rows(on_orders, "outside 0-1", p["entity"]["column"]) is not None
    for p in by_class(plants, "lookalike", "tz_offsets"):  # two DST offsets called a format or date fault
        verdicts[p["id"]] = any(
            "mixed date formats" in f["check"] or "offset" in f["check"] or "not dates" in f["check"]
            for f in on_charges
        )
    for p in by_class(plants, "lookalike", "grain_misread"):  # the retries of one charge called duplicate ids
        verdicts[p["id"]] = any("duplicate" in f["check"] and "charge_id" in str(f["column"]) for f in on_charges)
    return verdicts


async def kpi_anomaly_detection(run: Run) -> dict[str, bool]:
    """Paid charges (SUCCESS and the refunded ones: they were paid), one row per charge id after deduplication,
    with processed_at as written (the script takes the store's day); the business calendar from PROFILE with the
    countries sold in and the business's own campaign days."""
    plants = run.plants("kpi-anomaly-detection")
    await run.py(SETUP)
    await run.py(
        "kpi = rc_paid.drop_duplicates('charge_id')[['charge_id', 'processed_at']]\n"
        "kpi_source = save_artifact(kpi, title='paid rc_charges (one row per charge)')\n"
        "print(len(kpi))"
    )
    await run.script(
        "kpi-anomaly-detection",
        "scripts/business_calendar.py",
        "SOURCE = kpi_source\nCOUNTRY = ['US', 'CA', 'AU']\n"
        "EVENTS = {'Summer pause campaign': ['2024-06-28..2024-07-02'], 'TREATS20': ['2025-06-01..2025-07-05']}",
    )
    await run.script(
        "kpi-anomaly-detection",
        "scripts/kpi_anomalies.py",
        "SOURCE = kpi_source\nCOUNTRY = ['US', 'CA', 'AU']\nDATE = 'processed_at'",
        timeout=900,
    )
    found = await run.get(
        "[{'day': str(pd.Timestamp(r.period).date()), 'low': r.direction in ('low', 'drop'), "
        "'ratio': float(r.ratio_same_weekday) if pd.notna(r.ratio_same_weekday) else None} "
        "for r in anomalies.itertuples()]"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "one_day_drop"):  # the outage day a drop, its same-weekday ratio measured
        day = [a for a in found if a["day"] == p["entity"]["date"] and a["low"]]
        verdicts[p["id"]] = bool(day) and within(day[0]["ratio"], p)
    for p in by_class(plants, "lookalike", "recurring_calendar_dip"):  # any period start called an anomaly
        verdicts[p["id"]] = any(a["day"] in p["entity"]["dates"] for a in found)
    return verdicts


async def profitability(run: Run) -> dict[str, bool]:
    """One frame per channel x SKU x country x currency x month: net revenue after discounts and refunds, COGS and
    the channel's variable costs in each row's own currency with the month's fx_rate (USD per 1 unit): Recharge
    boxes (payment fee and pick/pack/ship per box from the business's cost sheet), Shopify lines (payment fee and
    pick/pack/ship per order), Amazon's settlement rows (referral and FBA fees from its fee lines, the account-level
    Storage and Subscription fees on CHK-30, its only product; tax lines left out)."""
    plants = run.plants("profitability")
    costs = run.business["channels"]
    box = costs["recharge_subscription"]["variable_costs"]["pick_pack_ship_usd_per_box"]
    await run.py(SETUP)
    await run.py(
        f"BOX = {box!r}\n"
        f"ORDER_SHIP = {costs['shopify_one_off']['variable_costs']['pick_pack_ship_usd_per_order']!r}\n"
        "usd_per = lambda cur, day: to_usd(np.ones(len(cur)), cur, day)  # USD per 1 unit of the row's currency\n"
        "c = rc_paid\n"
        "rate = usd_per(c.currency, c.day)\n"
        "size = c.line_item_sku.str[-2:].astype(int).astype(str) + 'lb'\n"
        "rc = pd.DataFrame({'channel': 'recharge', 'sku': c.line_item_sku, 'country': c.shipping_country,\n"
        "    'currency': c.currency, 'month': c.day.dt.to_period('M').astype(str), 'rate': rate,\n"
        "    'net_revenue': c.net - to_num(c.total_refunds), 'units': c.qty,\n"
        "    'cogs': c.qty * c.line_item_sku.map(unit_cogs) / rate,\n"
        "    'payment_fees': 0.029 * to_num(c.total_price) + 0.30 / rate, 'shipping': size.map(BOX) / rate})\n"
        "l = shop_lines\n"
        "rate = usd_per(l.Currency, l.day)\n"
        "one = ~l.Name.duplicated()\n"
        "line = to_num(l['Lineitem price']) * l.qty - to_num(l['Lineitem discount'])\n"
        "sh = pd.DataFrame({'channel': 'shopify', 'sku': l['Lineitem sku'], 'country': l['Shipping Country'],\n"
        "    'currency': l.Currency, 'month': l.day.dt.to_period('M').astype(str), 'rate': rate,\n"
        "    'net_revenue': line - np.where(one, to_num(l['Refunded Amount']), 0.0), 'units': l.qty,\n"
        "    'cogs': l.qty * l['Lineitem sku'].map(unit_cogs) / rate,\n"
        "    'payment_fees': 0.029 * line + np.where(one, 0.30 / rate, 0.0),\n"
        "    'shipping': np.where(one, ORDER_SHIP / rate, 0.0)})\n"
        "a = amz[amz['amount-type'] != 'ItemWithheldTax']\n"
        "a = a[~((a['amount-type'] == 'ItemPrice') & (a['amount-description'] == 'Tax'))]\n"
        "amount = to_num(a.amount)\n"
        "what = a['amount-description']\n"
        "units = np.where((a['transaction-type'] == 'Order') & (a['amount-type'] == 'ItemPrice'),"
        " to_num(a['quantity-purchased']), 0.0)\n"
        "am = pd.DataFrame({'channel': 'amazon', 'sku': 'CHK-30', 'country': 'US', 'currency': 'USD',\n"
        "    'month': pd.to_datetime(a['posted-date']).dt.to_period('M').astype(str), 'rate': 1.0,\n"
        "    'net_revenue': np.where(what == 'Principal', amount, 0.0), 'units': units,\n"
        "    'cogs': units * unit_cogs['CHK-30'],\n"
        "    'referral_fees': -np.where(what.isin(['Commission', 'RefundCommission']), amount, 0.0),\n"
        "    'fba_fees': -np.where(what.isin(['FBAPerUnitFulfillmentFee', 'Storage Fee', 'Subscription Fee']),"
        " amount, 0.0)})\n"
        "rows = pd.concat([rc, sh, am], ignore_index=True).fillna({'referral_fees': 0.0, 'fba_fees': 0.0,"
        " 'payment_fees': 0.0, 'shipping': 0.0})\n"
        "keys = ['channel', 'sku', 'country', 'currency', 'month']\n"
        "prof = rows.drop(columns='rate').groupby(keys, as_index=False).sum()\n"
        "prof['fx_rate'] = prof.set_index(keys).index.map(rows.groupby(keys).rate.mean())\n"
        "prof_source = save_artifact(prof, title='contribution inputs by channel, SKU, country and month')\n"
        "print(prof.groupby('channel')[['net_revenue', 'cogs']].sum())"
    )
    await run.script("profitability", "scripts/loss_cells.py", "SOURCE = prof_source")
    cell = await run.get(
        "cells[(cells.dimensions == 'channel x sku') & (cells.channel == 'amazon') & (cells.sku == 'CHK-30')]"
        "[['contribution', 'gross_margin', 'flagged']].to_dict('records')"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "negative_contribution"):  # amazon x CHK-30 a loss cell, its contribution
        verdicts[p["id"]] = bool(cell) and cell[0]["flagged"] and within(cell[0]["contribution"], p)
    for p in by_class(plants, "lookalike", "gross_margin_only"):  # the cell judged profitable on its gross margin
        verdicts[p["id"]] = bool(cell) and not cell[0]["flagged"]
    return verdicts


async def returns_and_cancellations(run: Run) -> dict[str, bool]:
    """Subscriptions: one row per paid charge, deduplicated on its id, only subscriptions whose first box
    (CHECKOUT) is in the export; shipped = paid, returned = refunded or partly refunded; plan = the box's SKU;
    drivers the box number (rank of the paid charges by processed_at: 1, 2, 3+) and the billing interval."""
    plants = run.plants("returns-and-cancellations")
    await run.py(SETUP)
    await run.py(
        "c = rc_paid.drop_duplicates('charge_id').sort_values(['subscription_id', 'when'])\n"
        "c = c.assign(n=c.groupby('subscription_id').cumcount() + 1)\n"
        "c = c[c.subscription_id.isin(c[(c.n == 1) & (c.type == 'CHECKOUT')].subscription_id)]\n"
        "interval = rc_subs.set_index('subscription_id').order_interval_frequency\n"
        "ret = pd.DataFrame({'plan': c.line_item_sku, 'box': np.where(c.n >= 3, '3+', c.n.astype(str)),\n"
        "    'interval': c.subscription_id.map(interval).fillna('?') + ' weeks', 'shipped': 1,\n"
        "    'returned': c.status.isin(['REFUNDED', 'PARTIALLY_REFUNDED']).astype(int)})\n"
        "ret = ret.groupby(['plan', 'box', 'interval'], as_index=False)[['shipped', 'returned']].sum()\n"
        "ret_source = save_artifact(ret, title='paid boxes and refunds by plan, box number and interval')\n"
        "print(ret.groupby('box')[['shipped', 'returned']].sum())"
    )
    await run.script("returns-and-cancellations", "scripts/return_outliers.py", "SOURCE = ret_source\nITEM = 'plan'")
    rows = await run.get(
        "{str(r['item']): {'flagged': bool(r['flagged']), 'ratio': float(r['standardized_ratio'])}"
        " for r in rates.to_dict('records')}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "real_excess"):  # the plan flagged beyond its box mix, its ratio measured
        r = rows.get(p["entity"]["plan"])
        verdicts[p["id"]] = bool(r) and r["flagged"] and within(r["ratio"], p)
    for p in by_class(plants, "lookalike", "mix_effect"):  # the first-box-heavy plan flagged
        r = rows.get(p["entity"]["plan"])
        verdicts[p["id"]] = bool(r) and r["flagged"]
    return verdicts


async def customer_cohort_retention(run: Run) -> dict[str, bool]:
    """SOURCE the paid charges (one row per charge id, amount above 0) with the customer's signup from customers.csv;
    SUBSCRIPTIONS one row per subscription (started = created, ended = cancelled, all paid at start); fiscal
    periods from PROFILE; then the activity view again without SUBSCRIPTIONS, as SKILL.md asks."""
    plants = run.plants("customer-cohort-retention")
    await run.py(SETUP)
    await run.py(
        "c = rc_paid[rc_paid.net > 0].drop_duplicates('charge_id')\n"
        "signup = rc_customers.set_index('customer_id').created_at\n"
        "coh = pd.DataFrame({'customer_id': c.customer_id, 'active_at': c.processed_at,"
        " 'acquired_at': c.customer_id.map(signup)})\n"
        "coh_source = save_artifact(coh, title='paid charges with signup')\n"
        "coh_subs = save_artifact(pd.DataFrame({'customer_id': rc_subs.customer_id, 'started_at': rc_subs.created_at,\n"
        "    'ended_at': rc_subs.cancelled_at.replace('', None), 'converted': True}), title='subscriptions')\n"
        "through = str(export_end.date())\n"
        "print(len(coh), through)"
    )
    effects, cohorts = [], []
    for subscriptions in ("coh_subs", "None"):
        await run.script(
            "customer-cohort-retention",
            "scripts/retention_matrix.py",
            f"SOURCE = coh_source\nSUBSCRIPTIONS = {subscriptions}\nGRAIN = 'period'\nDATA_THROUGH = through",
            timeout=600,
        )
        effects += await run.get("period_effects[period_effects.flagged].to_dict('records')")
        cohorts += await run.get("cohort_effects[cohort_effects.flagged].cohort.astype(str).tolist()")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "calendar_period_effect"):  # the campaign's fiscal period named as one effect
        # (the plant's value is a calendar-month ratio; the script measures fiscal periods: not the same quantity)
        fiscal = p["entity"]["fiscal_period"].replace(" P", "-P0" if len(p["entity"]["fiscal_period"]) < 10 else "-P")
        verdicts[p["id"]] = any(str(e["period"]) == fiscal for e in effects)
    for p in by_class(plants, "lookalike", "cohort_specific_dip"):  # a spring-2024 cohort called a weak cohort
        verdicts[p["id"]] = any(c.startswith("FY2024-P0") and c[-1] in "12345" for c in cohorts)
    return verdicts


async def discount_effectiveness(run: Run) -> dict[str, bool]:
    """Two schemes given to a group from a date (DESIGN rollout). TREATS20: treat units per customer (the e-mail) and
    week (Sun-Sat) from the Shopify lines, US customers treated, CA+AU the comparison, the 10 weeks before as the
    pre-period. PUPPY15: lbs per paid box per puppy subscription by box number (START = box 4), the code's puppies
    against puppies who signed up before it, each followed to box 6 (a fixed panel)."""
    plants = run.plants("discount-effectiveness")
    await run.py(SETUP)
    await run.py(
        "t = shop_lines[shop_lines['Lineitem sku'].str.startswith('TRT')]\n"
        "t = t[(t.day >= '2025-03-23') & (t.day <= '2025-07-05')]\n"
        "week = t.day - pd.to_timedelta((t.day.dt.dayofweek + 1) % 7, unit='D')\n"
        "treats = t.assign(period=week.dt.date.astype(str)).groupby(['Email', 'period'], as_index=False).qty.sum()\n"
        "country = shop_lines.groupby('Email')['Shipping Country'].first()\n"
        "treats = treats.rename(columns={'Email': 'unit', 'qty': 'outcome'})\n"
        "treats['group'] = (treats.unit.map(country) == 'US').astype(int)\n"
        "treats_source = save_artifact(treats, title='treat units per customer and week')\n"
        "c = rc_paid.drop_duplicates('charge_id').sort_values(['subscription_id', 'when'])\n"
        "c = c.assign(box=c.groupby('subscription_id').cumcount() + 1)\n"
        "c = c.assign(lbs=c.qty * c.line_item_sku.str[-2:].astype(int))\n"
        "pup = c[(c.box == 1) & (c.type == 'CHECKOUT') & c.line_item_sku.str.startswith('PUP')].subscription_id\n"
        "c = c[c.subscription_id.isin(pup)]\n"
        "c = c[c.subscription_id.isin(c[c.box == 6].subscription_id) & (c.box <= 6)]\n"
        "created = rc_subs.set_index('subscription_id').created_at.str[:10]\n"
        "coded = set(c[c.discount_codes.str.contains('PUPPY15')].subscription_id)\n"
        "c = c[c.subscription_id.isin(coded) | (c.subscription_id.map(created) < '2024-06-02')]\n"
        "puppies = pd.DataFrame({'unit': c.subscription_id, 'period': c.box, 'outcome': c.lbs,\n"
        "    'group': c.subscription_id.isin(coded).astype(int)})\n"
        "puppies_source = save_artifact(puppies, title='lbs per box, puppy subscriptions')\n"
        "print(treats.group.value_counts().to_dict(), puppies.groupby('group').unit.nunique().to_dict())"
    )
    lifts = {}
    for scheme, source, window in (
        ("TREATS20", "treats_source", "START = '2025-06-01'\nEND = '2025-07-05'"),
        ("PUPPY15", "puppies_source", "START = 4\nEND = 6"),
    ):
        await run.script(
            "discount-effectiveness",
            "scripts/promo_did.py",
            f"DESIGN = 'rollout'\nSCHEME = {scheme!r}\n{window}\nSOURCE = {source}",
            timeout=600,
        )
        lifts[scheme] = await run.get("effects[['lift', 'flagged']].to_dict('records')[0]")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "real_lift"):  # the lift claimed, its size measured
        e = lifts[p["entity"]["code"]]
        verdicts[p["id"]] = bool(e["flagged"]) and within(e["lift"], p)
    for p in by_class(plants, "lookalike", "lifecycle_confounding"):  # a lift claimed for the code
        verdicts[p["id"]] = bool(lifts[p["entity"]["code"]]["flagged"])
    return verdicts


async def demand_forecast(run: Run) -> dict[str, bool]:
    """Bags of dry food per local day, the three channels stacked: paid Recharge boxes (deduplicated on the charge
    id), Shopify bag lines (treats are not bags), Amazon units ordered; fiscal weeks from PROFILE, data to the
    exports' last day."""
    plants = run.plants("demand-forecast")
    await run.py(SETUP)
    await run.py(
        "c = rc_paid.drop_duplicates('charge_id')\n"
        "b = shop_lines[~shop_lines['Lineitem sku'].str.startswith('TRT')]\n"
        "a = amz[(amz['transaction-type'] == 'Order') & (amz['amount-type'] == 'ItemPrice')"
        " & (amz['amount-description'] == 'Principal')]\n"
        "bags = pd.concat([pd.DataFrame({'date': c.day, 'value': c.qty}),\n"
        "    pd.DataFrame({'date': b.day, 'value': b.qty}),\n"
        "    pd.DataFrame({'date': pd.to_datetime(a['posted-date']), 'value': to_num(a['quantity-purchased'])})])\n"
        "bags = bags.groupby(bags.date.dt.date.astype(str), as_index=False).value.sum()\n"
        "fc_source = save_artifact(bags, title='bags per day')\n"
        "through = str(export_end.date())\n"
        "print(bags.tail(3))"
    )
    await run.script(
        "demand-forecast", "scripts/periods.py", "SOURCE = fc_source\nDATA_END = through\nGRAIN = 'week'", timeout=600
    )
    await run.script("demand-forecast", "scripts/forecast.py", "SOURCE = periods", timeout=900)
    out = await run.get(
        "{'ahead': outlook[['start', 'forecast']].astype({'start': str}).to_dict('records'),"
        " 'flags': periods[periods.flag.astype(str).str.contains('one-off')].start.astype(str).tolist()}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "forecast_level"):  # the mean of the 4 weeks asked for, against what came
        first, last = p["entity"]["weeks"]
        weeks = [r["forecast"] for r in out["ahead"] if first <= r["start"][:10] <= last]
        verdicts[p["id"]] = bool(weeks) and within(sum(weeks) / len(weeks), p)
    for p in by_class(plants, "lookalike", "53rd_week"):  # a P12 week of FY2023 or FY2024 called a one-off
        verdicts[p["id"]] = any(
            "2024-01-07" <= d[:10] <= "2024-02-03" or "2025-01-05" <= d[:10] <= "2025-02-01" for d in out["flags"]
        )
    return verdicts


async def ab_test_readout(run: Run) -> dict[str, bool]:
    """One row per pet profile; the unit comes from PROFILE (randomised by account). Each test read on its own."""
    plants = run.plants("ab-test-readout")
    verdicts: dict[str, bool] = {}
    tests = {}
    for test in ("onboarding_v2", "pricing_page_v3"):
        await run.py(
            "ab = load_file('uploads/ab_assignments.csv')\n"
            f"ab_{test} = ab[ab.test_name == {test!r}][['variant', 'account_id', 'pet_profile_id', 'converted']]\n"
            f"print(ab_{test}.variant.value_counts())"
        )
        await run.script("ab-test-readout", "scripts/ab_readout.py", f"SOURCE = ab_{test}")
        tests[test] = await run.get(
            "{'p': float(comparisons.p.iloc[0]), 'significant': bool(significant), 'srm_p': float(srm_p), "
            "'srm_finding': bool(srm_finding), 'unit': unit}"
        )
    onboarding, pricing = tests["onboarding_v2"], tests["pricing_page_v3"]
    for p in by_class(plants, "truth", "cluster_null"):  # null at the account: not significant, p near the truth's
        verdicts[p["id"]] = not onboarding["significant"] and within(onboarding["p"], p)
    for p in by_class(plants, "lookalike", "wrong_unit_significance"):  # the per-pet significance called real
        verdicts[p["id"]] = onboarding["significant"]
    for p in by_class(plants, "truth", "sample_ratio_mismatch"):  # the split reported as a mismatch at the account
        verdicts[p["id"]] = pricing["srm_finding"] and "account" in str(pricing["unit"])
    for p in by_class(plants, "lookalike", "srm_wrong_unit"):  # the pets' imbalance called a mismatch
        verdicts[p["id"]] = onboarding["srm_finding"]
    return verdicts


RECIPES: dict[str, Recipe] = {
    "ab-test-readout": ab_test_readout,
    "customer-lifetime-value": customer_lifetime_value,
    "customer-cohort-retention": customer_cohort_retention,
    "rfm-segmentation": rfm_segmentation,
    "budget-vs-actual": budget_vs_actual,
    "sales-performance-review": sales_performance_review,
    "data-quality-audit": data_quality_audit,
    "kpi-anomaly-detection": kpi_anomaly_detection,
    "profitability": profitability,
    "discount-effectiveness": discount_effectiveness,
    "demand-forecast": demand_forecast,
    "returns-and-cancellations": returns_and_cancellations,
}
