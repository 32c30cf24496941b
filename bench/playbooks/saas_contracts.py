"""Recipes for the per-seat B2B SaaS (bench/archetypes/saas_contracts.md): see bench/playbooks/common.py.

Each recipe follows its SKILL.md literally on the Stripe / Salesforce / product exports and judges the archetype's
plants for that skill from the script's output. The shaping the recipes share (``SETUP``) is the model's part:
Stripe's Unix seconds as UTC times, its integer cents as money, EUR in USD at the month's average (USD per EUR:
multiplied), each subscription's workspace joined to its CRM account, segment and region.
"""

from __future__ import annotations

from bench.playbooks.common import Recipe, Run, by_class, within

SETUP = """
import pandas as pd, numpy as np
if 'subs' not in globals():
    def ts(s):  # Stripe's Unix seconds -> UTC time (naive)
        return pd.to_datetime(pd.to_numeric(s, errors='coerce'), unit='s')
    fxm = load_file('uploads/fx_rates_monthly.csv').set_index('month').rate
    def usd(amount, currency, when):  # EUR at the month's average (USD per 1 EUR)
        rate = pd.Series(pd.to_datetime(when)).dt.strftime('%Y-%m').map(fxm).to_numpy()
        return np.where(np.asarray(currency).astype(str) == 'eur', np.asarray(amount, float) * rate,
                        np.asarray(amount, float))
    accounts = load_file('uploads/accounts.csv', dtype=str)
    ws = accounts.set_index('workspace_id')
    subs = load_file('uploads/subscriptions.csv', dtype=str)
    for c in ['created', 'start_date', 'current_period_start', 'current_period_end', 'trial_start', 'trial_end',
              'canceled_at', 'ended_at']:
        subs[c + '_t'] = ts(subs[c])
    subs['quantity'] = pd.to_numeric(subs.quantity)
    subs['account_id'] = subs.metadata_workspace_id.map(ws.account_id)
    subs['region'] = subs.metadata_workspace_id.map(ws.region)
    subs['segment'] = np.where(subs.collection_method == 'send_invoice', 'sales_led', 'self_serve')
    inv = load_file('uploads/invoices.csv', dtype=str)
    for c in ['subtotal', 'total_discount_amount', 'total', 'amount_paid', 'post_payment_credit_notes_amount']:
        inv[c] = pd.to_numeric(inv[c]).fillna(0) / 100  # cents -> currency units
    inv['created_t'] = ts(inv.created)
    inv['paid_t'] = ts(inv.status_transitions_paid_at)
    lines = load_file('uploads/invoice_line_items.csv', dtype=str)
    for c in ['quantity', 'unit_amount', 'amount', 'discount_amount']:
        lines[c] = pd.to_numeric(lines[c]).fillna(0)
    for c in ['unit_amount', 'amount', 'discount_amount']:
        lines[c] = lines[c] / 100
    sub_line = lines[lines.type == 'subscription'].drop_duplicates('invoice').set_index('invoice')
    inv['plan'] = inv.id.map(sub_line.plan)
    inv['seats'] = inv.id.map(lines[lines.type == 'subscription'].groupby('invoice').quantity.sum())
    inv['region'] = inv.subscription.map(subs.set_index('id').region)
    inv['segment'] = np.where(inv.collection_method == 'send_invoice', 'sales_led', 'self_serve')
    data_end = pd.Timestamp('2025-06-17')
print(len(subs), len(inv), len(lines), subs.status.value_counts().to_dict())
"""


async def ab_test_readout(run: Run) -> dict[str, bool]:
    """The experiment export fed as it is (one row per workspace; the unit, the account, from PROFILE), each
    metric read on its own (METRIC): the pre-registered upgrade_clicked_14d and the secondary invited_teammate_14d."""
    plants = run.plants("ab-test-readout")
    reads = {}
    for metric in ("upgrade_clicked_14d", "invited_teammate_14d"):
        await run.script(
            "ab-test-readout",
            "scripts/ab_readout.py",
            f"SOURCE = 'uploads/experiments.csv'\nMETRIC = {metric!r}",
        )
        reads[metric] = await run.get(
            "{'diff': float(comparisons.diff_points.iloc[0]) if 'diff_points' in comparisons else None,"
            " 'p': float(comparisons.p.iloc[0]), 'significant': bool(significant), 'unit': str(unit)}"
        )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "real_effect_cluster"):  # invites: significant at the account, diff as planted
        r = reads["invited_teammate_14d"]
        verdicts[p["id"]] = r["significant"] and r["diff"] is not None and within(r["diff"], p, 0.01)
    for p in by_class(plants, "lookalike", "design_effect"):  # the per-workspace significance of upgrades called real
        verdicts[p["id"]] = reads["upgrade_clicked_14d"]["significant"]
    return verdicts


API = "{'NA': 1.80, 'EMEA': 2.10, 'APAC': 8.60, 'LATAM': 2.00}"  # business.channels: API cost per billed seat-month


async def customer_lifetime_value(run: Run) -> dict[str, bool]:
    """Orders: the paid invoices, margin = net revenue (total - credit notes) in USD - the API cost of the billed
    seat-months (the SaaS's cost of goods); STATES: one row per Stripe subscription as written (Unix seconds)."""
    plants = run.plants("customer-lifetime-value")
    await run.py(SETUP)
    await run.py(
        f"api = {API}\n"
        "o = inv[inv.status == 'paid'].copy()\n"
        "months = (pd.to_numeric(o.period_end) - pd.to_numeric(o.period_start)) / (86400 * 365.25 / 12)\n"
        "o['margin'] = usd(o.total - o.post_payment_credit_notes_amount, o.currency, o.created_t)"
        " - o.seats.fillna(0) * months.round() * o.region.map(api).fillna(0)\n"
        "clv_orders = o.rename(columns={'customer': 'customer_id'})[['customer_id', 'created', 'margin']]\n"
        "clv_orders = clv_orders.rename(columns={'created': 'order_date'})\n"
        "clv_src = save_artifact(clv_orders, title='paid invoices with margin (USD)')\n"
        "states = pd.DataFrame({'customer_id': subs.customer, 'subscription_id': subs.id, 'status': subs.status,\n"
        "    'plan': subs.plan, 'started_at': subs.start_date, 'cancelled_at': subs.canceled_at,\n"
        "    'cancel_at_period_end': subs.cancel_at_period_end, 'pause_until': None,\n"
        "    'next_charge_at': subs.current_period_end,\n"
        "    'period_days': np.where(subs.interval == 'year', 365, 30)})\n"
        "clv_states = save_artifact(states, title='Stripe subscriptions')\n"
        "failed = inv[inv.attempt_count.astype(int) > 1]\n"
        "recovered = float((failed.status == 'paid').mean())\n"
        "print(len(clv_orders), len(states), round(recovered, 3))"
    )
    await run.script(
        "customer-lifetime-value",
        "scripts/clv.py",
        "SOURCE = clv_src\nSTATES = clv_states\nDUNNING_RECOVERY = recovered",
        timeout=600,
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "contractual_zero_future_value"):  # each pending cancel valued at exactly 0
        n = await run.get(
            "int(subscriptions[subscriptions.subscription_id.isin(subs[subs.cancel_at_period_end == 'true'].id)"
            " & (subscriptions.p_alive == 0) & (subscriptions.value == 0)].subscription_id.nunique())"
        )
        verdicts[p["id"]] = n > 0 and within(n, p)
    surv = await run.get("survival")
    for p in by_class(plants, "truth", "renewal_survival_by_tenure"):
        # the sales-led plans' observed first-renewal rate as planted (and the fit rising with tenure)
        rates = _first_renewal(surv, ("business_annual", "enterprise_annual"))
        verdicts[p["id"]] = bool(rates) and all(within(x, p) for x in rates)
    for p in by_class(plants, "truth", "tenure_hazard"):  # the monthly plans' first-renewal churn as planted
        rates = _first_renewal(surv, ("starter_monthly", "team_monthly", "pro_monthly"))
        verdicts[p["id"]] = bool(rates) and all(within(1 - x, p) for x in rates)
    for p in by_class(plants, "lookalike", "dunning_not_churn"):  # a past_due subscription valued as gone
        n = await run.get(
            "int(subscriptions[subscriptions.subscription_id.isin(subs[subs.status == 'past_due'].id)"
            " & ((subscriptions.p_alive == 0) | (subscriptions.value <= 0))].shape[0])"
        )
        verdicts[p["id"]] = n > 0
    return verdicts


def _first_renewal(survival: list[dict], plans: tuple[str, ...]) -> list[float]:
    """The observed first-renewal rate of each of these plans in the script's survival table."""
    return [float(r["observed"]) for r in survival if r["plan"] in plans and r["renewal"] == 1]


# business.metric_definitions, by month x segment: new ARR (sales-led Closed Won New Business + Expansion at the
# close month's rate; self-serve the first invoice's subscription line x12 for monthly plans) and net revenue
# (invoice total - credit notes of non-uncollectible invoices, segment by the invoice's plan)
ACTUALS = """
opps = load_file('uploads/opportunities.csv', dtype=str)
won = opps[opps.Type.isin(['New Business', 'Expansion']) & (opps.Stage == 'Closed Won')].copy()
won['day'] = pd.to_datetime(won['Close Date'], format='%m/%d/%Y')
won['usd'] = usd(pd.to_numeric(won.Amount), won['Amount Currency'].str.lower(), won.day)
first_inv = inv[inv.billing_reason != 'manual'].sort_values('created_t').drop_duplicates('subscription')
first_inv = first_inv[first_inv.segment == 'self_serve']
sl = lines[(lines.type == 'subscription') & lines.invoice.isin(first_inv.id)].groupby('invoice').amount.sum()
first_inv = first_inv.assign(arr=first_inv.id.map(sl) * np.where(first_inv.plan.str.endswith('_monthly'), 12, 1))
first_inv['usd'] = usd(first_inv.arr, first_inv.currency, first_inv.created_t)
new_arr = pd.concat([
    pd.DataFrame({'month': won.day.dt.strftime('%Y-%m'), 'segment': 'sales_led', 'actual': won.usd}),
    pd.DataFrame({'month': first_inv.created_t.dt.strftime('%Y-%m'), 'segment': 'self_serve',
                  'actual': first_inv.usd})]).groupby(['month', 'segment']).actual.sum()
nr = inv[inv.status != 'uncollectible']
nr = pd.DataFrame({'month': nr.created_t.dt.strftime('%Y-%m'),
    'segment': np.where(nr.plan.isin(['business_annual', 'enterprise_annual']), 'sales_led', 'self_serve'),
    'actual': usd(nr.total - nr.post_payment_credit_notes_amount, nr.currency, nr.created_t)})
net_revenue = nr.groupby(['month', 'segment']).actual.sum()
print(new_arr.loc['2025-01':].round(0).to_dict())
"""


async def budget_vs_actual(run: Run) -> dict[str, bool]:
    """The FY2025 plan by month x segment against the actuals defined as the plan defines them
    (business.metric_definitions), each metric read on its own; data through 2025-06-17."""
    plants = run.plants("budget-vs-actual")
    await run.py(SETUP)
    await run.py(ACTUALS)
    reads = {}
    for metric in ("new_arr", "net_revenue"):
        await run.py(
            "plan = load_file('uploads/plan_fy.csv', dtype={'month': str})\n"
            f"bva = plan[['month', 'segment', '{metric}_plan_usd']].rename(columns={{'{metric}_plan_usd': 'plan'}})\n"
            f"bva = bva.merge({metric}.reset_index(), on=['month', 'segment'], how='outer')\n"
            "bva = bva[bva.month >= '2025-01'].fillna({'plan': 0.0, 'actual': 0.0})\n"
            "bva['data_through'] = str(data_end.date())\n"
            f"bva_{metric} = save_artifact(bva, title='{metric}: plan vs actual by month and segment')\n"
            "print(bva.head(14))"
        )
        await run.script("budget-vs-actual", "scripts/budget_variance.py", f"SOURCE = bva_{metric}")
        reads[metric] = await run.get(
            "{'misses': misses[['segment', 'quarter']].to_dict('records'),"
            " 'flags': flags[['segment', 'quarter']].to_dict('records'),"
            " 'periods': period_cells[['label', 'segment', 'variance']].to_dict('records')}"
        )
    verdicts: dict[str, bool] = {}
    arr = reads["new_arr"]
    for p in by_class(plants, "truth", "real_miss"):  # sales-led Q1 a miss, March's variance as planted
        march = [r["variance"] for r in arr["periods"] if r["label"] == "2025-03" and r["segment"] == "sales_led"]
        named = any(r["segment"] == "sales_led" and "Q1" in str(r["quarter"]) for r in arr["misses"])
        verdicts[p["id"]] = named and bool(march) and within(march[0], p)
    for p in by_class(plants, "lookalike", "partial_period"):  # June (17 of 30 days) judged as a complete period
        verdicts[p["id"]] = any(r["label"] == "2025-06" for m in reads.values() for r in m["periods"])
    return verdicts


async def sales_performance_review(run: Run) -> dict[str, bool]:
    """Q1-2025 against Q1-2024 (June's quarter is under way): per plan and currency the regular seat lines of
    non-uncollectible invoices in local money - net revenue (amount - discount), seats, list revenue (amount);
    FX = the quarter's average of the monthly EURUSD (USD per 1 EUR: reporting_per_local)."""
    plants = run.plants("sales-performance-review")
    await run.py(SETUP)
    await run.py(
        "q = {'2024-01': '2024-Q1', '2024-02': '2024-Q1', '2024-03': '2024-Q1',\n"
        "     '2025-01': '2025-Q1', '2025-02': '2025-Q1', '2025-03': '2025-Q1'}\n"
        "ok = inv[inv.status != 'uncollectible'].set_index('id')\n"
        "sl = lines[(lines.type == 'subscription') & (lines.proration == 'false') & lines.invoice.isin(ok.index)]\n"
        "sl = sl.assign(period=sl.invoice.map(ok.created_t).dt.strftime('%Y-%m').map(q)).dropna(subset=['period'])\n"
        "spr = sl.assign(net_revenue=sl.amount - sl.discount_amount, list_revenue=sl.amount, currency=sl.currency)"
        ".groupby(['plan', 'period', 'currency'], as_index=False).agg(\n"
        "    net_revenue=('net_revenue', 'sum'), units=('quantity', 'sum'), list_revenue=('list_revenue', 'sum'))\n"
        "spr_source = save_artifact(spr, title='seat revenue per plan, quarter and currency (local money)')\n"
        "rates = fxm.rename_axis('month').reset_index().assign(period=lambda d: d.month.map(q)).dropna()\n"
        "rates = rates.groupby('period', as_index=False).rate.mean().assign(currency='EUR')\n"
        "rates = pd.concat([rates, rates.assign(currency='USD', rate=1.0)])\n"
        "spr_fx = save_artifact(rates[['currency', 'rate', 'period']], title='EURUSD quarter averages')\n"
        "print(spr, rates)"
    )
    await run.script(
        "sales-performance-review",
        "scripts/price_volume_mix.py",
        "SOURCE = spr_source\nFX = spr_fx\nFX_DIRECTION = 'reporting_per_local'",
    )
    r = await run.get(
        "{'steps': dict(zip(bridge.step, bridge.revenue)),"
        " 'eur': by_currency.loc['EUR'].to_dict() if by_currency is not None and 'EUR' in by_currency.index else {}}"
    )
    eur = r["eur"]
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "fx_effect"):  # an FX line, the EUR rate's change as planted
        fx_step = [v for k, v in r["steps"].items() if "fx" in k.lower()]
        change = eur.get("rate_change_pct")
        verdicts[p["id"]] = bool(fx_step) and fx_step[0] < 0 and change is not None and within(change, p, 0.01)
    for p in by_class(plants, "lookalike", "fx_not_price"):  # EUR prices read as cut in local money
        local = eur.get("list_price_change_local_pct", eur.get("price_change_local_pct"))
        verdicts[p["id"]] = local is None or local <= 0
    return verdicts


RECIPES: dict[str, Recipe] = {
    "ab-test-readout": ab_test_readout,
    "customer-lifetime-value": customer_lifetime_value,
    "budget-vs-actual": budget_vs_actual,
    "sales-performance-review": sales_performance_review,
}
