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
if 'sc_subs' not in globals():
    def sc_ts(s):  # Stripe's Unix seconds -> UTC time (naive)
        return pd.to_datetime(pd.to_numeric(s, errors='coerce'), unit='s')
    sc_fxm = load_file('uploads/fx_rates_monthly.csv').set_index('month').rate
    def unix(s):  # Unix seconds as written, read as numbers (the file's own type)
        return pd.to_numeric(s, errors='coerce')
    def sc_usd(amount, currency, when):  # EUR at the month's average (USD per 1 EUR)
        rate = pd.Series(pd.to_datetime(when)).dt.strftime('%Y-%m').map(sc_fxm).to_numpy()
        return np.where(np.asarray(currency).astype(str) == 'eur', np.asarray(amount, float) * rate,
                        np.asarray(amount, float))
    sc_accounts = load_file('uploads/accounts.csv', dtype=str, keep_default_na=False)  # region 'NA' is no null
    sc_ws = sc_accounts.set_index('workspace_id')
    sc_subs = load_file('uploads/subscriptions.csv', dtype=str)
    for c in ['created', 'start_date', 'current_period_start', 'current_period_end', 'trial_start', 'trial_end',
              'canceled_at', 'ended_at']:
        sc_subs[c + '_t'] = sc_ts(sc_subs[c])
    sc_subs['quantity'] = pd.to_numeric(sc_subs.quantity)
    sc_subs['account_id'] = sc_subs.metadata_workspace_id.map(sc_ws.account_id)
    sc_subs['region'] = sc_subs.metadata_workspace_id.map(sc_ws.region)
    sc_subs['segment'] = np.where(sc_subs.collection_method == 'send_invoice', 'sales_led', 'self_serve')
    sc_inv = load_file('uploads/invoices.csv', dtype=str)
    for c in ['subtotal', 'total_discount_amount', 'total', 'amount_paid', 'post_payment_credit_notes_amount']:
        sc_inv[c] = pd.to_numeric(sc_inv[c]).fillna(0) / 100  # cents -> currency units
    sc_inv['created_t'] = sc_ts(sc_inv.created)
    sc_inv['paid_t'] = sc_ts(sc_inv.status_transitions_paid_at)
    sc_lines = load_file('uploads/invoice_line_items.csv', dtype=str)
    for c in ['quantity', 'unit_amount', 'amount', 'discount_amount']:
        sc_lines[c] = pd.to_numeric(sc_lines[c]).fillna(0)
    for c in ['unit_amount', 'amount', 'discount_amount']:
        sc_lines[c] = sc_lines[c] / 100
    sub_line = sc_lines[sc_lines.type == 'subscription'].drop_duplicates('invoice').set_index('invoice')
    sc_inv['plan'] = sc_inv.id.map(sub_line.plan)
    sc_inv['seats'] = sc_inv.id.map(sc_lines[sc_lines.type == 'subscription'].groupby('invoice').quantity.sum())
    # the service period is the seat line's (the invoice's own period spans its proration lines' earlier months)
    sc_inv['svc_start'] = sc_ts(sc_inv.id.map(sub_line.period_start))
    sc_inv['svc_end'] = sc_ts(sc_inv.id.map(sub_line.period_end))
    sc_inv['region'] = sc_inv.subscription.map(sc_subs.set_index('id').region)
    sc_inv['segment'] = np.where(sc_inv.collection_method == 'send_invoice', 'sales_led', 'self_serve')
    data_end = pd.Timestamp('2025-06-17')
print(len(sc_subs), len(sc_inv), len(sc_lines), sc_subs.status.value_counts().to_dict())
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
        "o = sc_inv[sc_inv.status == 'paid'].copy()\n"
        "months = (o.svc_end - o.svc_start).dt.days / (365.25 / 12)\n"
        "o['margin'] = sc_usd(o.total - o.post_payment_credit_notes_amount, o.currency, o.created_t)"
        " - o.seats.fillna(0) * months.round() * o.region.map(api).fillna(0)\n"
        "clv_orders = pd.DataFrame({'customer_id': o.customer, 'order_date': o.created_t.dt.date,\n"
        "    'margin': o.margin})\n"
        "clv_src = save_artifact(clv_orders, title='paid invoices with margin (USD)')\n"
        "first_paid = o[o.amount_paid > 0].sort_values('svc_start').drop_duplicates('subscription')\n"
        "first_paid = first_paid.set_index('subscription').svc_start\n"
        "opps = load_file('uploads/opportunities.csv', dtype=str)\n"
        "won = opps[(opps.Type == 'New Business') & (opps.Stage == 'Closed Won')]\n"
        "term = won.set_index('Account ID')['Contract Term (Months)'].astype(float)\n"
        "sales = sc_subs.segment == 'sales_led'\n"
        "states = pd.DataFrame({'customer_id': sc_subs.customer, 'subscription_id': sc_subs.id,\n"
        "    'status': sc_subs.status,\n"
        "    'plan': sc_subs.plan, 'started_at': unix(sc_subs.start_date), 'cancelled_at': unix(sc_subs.canceled_at),\n"
        "    'cancel_at_period_end': sc_subs.cancel_at_period_end, 'pause_until': None,\n"
        "    'next_charge_at': unix(sc_subs.current_period_end), 'trial_end': unix(sc_subs.trial_end),\n"
        "    'first_paid_at': sc_subs.id.map(first_paid),\n"
        "    'period_days': np.where(sc_subs.interval == 'year', 365.25, 30.44),\n"
        "    'term_days': np.where(sales, sc_subs.account_id.map(term) * 30.44, np.nan),\n"
        "    'contract_id': np.where(sales, sc_subs.account_id, sc_subs.id)})\n"
        "clv_states = save_artifact(states, title='Stripe subscriptions')\n"
        "failed = sc_inv[sc_inv.attempt_count.astype(int) > 1]\n"
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
            "int(subscriptions[subscriptions.subscription_id.isin(sc_subs[sc_subs.cancel_at_period_end == 'true'].id)"
            " & (subscriptions.p_alive == 0) & (subscriptions.value == 0)].subscription_id.nunique())"
        )
        verdicts[p["id"]] = n > 0 and within(n, p)
    surv = await run.get("survival")
    for p in by_class(plants, "truth", "renewal_survival_by_tenure"):
        # the sales-led plans' observed first-renewal rate as planted (and the fit rising with tenure)
        rate = _first_renewal(surv, ("business_annual", "enterprise_annual"))
        verdicts[p["id"]] = rate is not None and within(rate, p)
    for p in by_class(plants, "truth", "tenure_hazard"):  # the monthly plans' first-renewal churn as planted
        rate = _first_renewal(surv, ("starter_monthly", "team_monthly", "pro_monthly"))
        verdicts[p["id"]] = rate is not None and within(1 - rate, p)
    for p in by_class(plants, "lookalike", "dunning_not_churn"):  # a past_due subscription valued as gone (p_alive 0)
        n = await run.get(
            "int(subscriptions[subscriptions.subscription_id.isin(sc_subs[sc_subs.status == 'past_due'].id)"
            " & (subscriptions.p_alive == 0)].shape[0])"
        )
        verdicts[p["id"]] = n > 0
    return verdicts


def _first_renewal(survival: list[dict], plans: tuple[str, ...]) -> float | None:
    """The observed first-renewal rate of these plans pooled (weighted by the subscriptions at risk) from the
    script's survival table."""
    rows = [r for r in survival if r["plan"] in plans and r["renewal"] == 1]
    n = sum(r["at_risk"] for r in rows)
    return sum(r["observed"] * r["at_risk"] for r in rows) / n if n else None


# business.metric_definitions, by month x segment: new ARR (sales-led Closed Won New Business + Expansion at the
# close month's rate; self-serve the first invoice's subscription line x12 for monthly plans) and net revenue
# (invoice total - credit notes of non-uncollectible invoices, segment by the invoice's plan)
ACTUALS = """
opps = load_file('uploads/opportunities.csv', dtype=str)
won = opps[opps.Type.isin(['New Business', 'Expansion']) & (opps.Stage == 'Closed Won')].copy()
won['day'] = pd.to_datetime(won['Close Date'], format='%m/%d/%Y')
won['usd'] = sc_usd(pd.to_numeric(won.Amount), won['Amount Currency'].str.lower(), won.day)
first_inv = sc_inv[sc_inv.billing_reason != 'manual'].sort_values('created_t').drop_duplicates('subscription')
first_inv = first_inv[first_inv.segment == 'self_serve']
sl = sc_lines[(sc_lines.type == 'subscription') & sc_lines.invoice.isin(first_inv.id)].groupby('invoice').amount.sum()
first_inv = first_inv.assign(arr=first_inv.id.map(sl) * np.where(first_inv.plan.str.endswith('_monthly'), 12, 1))
first_inv['usd'] = sc_usd(first_inv.arr, first_inv.currency, first_inv.created_t)
new_arr = pd.concat([
    pd.DataFrame({'month': won.day.dt.strftime('%Y-%m'), 'segment': 'sales_led', 'actual': won.usd}),
    pd.DataFrame({'month': first_inv.created_t.dt.strftime('%Y-%m'), 'segment': 'self_serve',
                  'actual': first_inv.usd})]).groupby(['month', 'segment']).actual.sum()
nr = sc_inv[sc_inv.status != 'uncollectible']
nr = pd.DataFrame({'month': nr.created_t.dt.strftime('%Y-%m'),
    'segment': np.where(nr.plan.isin(['business_annual', 'enterprise_annual']), 'sales_led', 'self_serve'),
    'actual': sc_usd(nr.total - nr.post_payment_credit_notes_amount, nr.currency, nr.created_t)})
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
        "ok = sc_inv[sc_inv.status != 'uncollectible'].set_index('id')\n"
        "sl = sc_lines[(sc_lines.type == 'subscription') & (sc_lines.proration == 'false')]\n"
        "sl = sl[sl.invoice.isin(ok.index)]\n"
        "sl = sl.assign(period=sl.invoice.map(ok.created_t).dt.strftime('%Y-%m').map(q)).dropna(subset=['period'])\n"
        "spr = sl.assign(net_revenue=sl.amount - sl.discount_amount, list_revenue=sl.amount, currency=sl.currency)"
        ".groupby(['plan', 'period', 'currency'], as_index=False).agg(\n"
        "    net_revenue=('net_revenue', 'sum'), units=('quantity', 'sum'), list_revenue=('list_revenue', 'sum'))\n"
        "spr_source = save_artifact(spr, title='seat revenue per plan, quarter and currency (local money)')\n"
        "rates = sc_fxm.rename_axis('month').reset_index().assign(period=lambda d: d.month.map(q)).dropna()\n"
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


async def data_quality_audit(run: Run) -> dict[str, bool]:
    """The four billing exports the analyses rest on, each audited as it is; the invoices with the subscriptions
    they bill as RELATED (joined on subscription = id)."""
    plants = run.plants("data-quality-audit")
    found: dict[str, list[dict]] = {}
    for name, extra in (
        ("subscriptions.csv", "RELATED = None\n"),
        (
            "invoices.csv",
            "RELATED = {'subscriptions': {'source': 'uploads/subscriptions.csv', 'on': {'subscription': 'id'}}}\n",
        ),
        ("invoice_line_items.csv", "RELATED = None\n"),
        ("seat_changes.csv", "RELATED = None\n"),
    ):
        await run.script("data-quality-audit", "scripts/profile.py", f"{extra}SOURCE = 'uploads/{name}'")
        found[name] = await run.get("findings")

    def rows(file: str, check: str, column: str = "") -> int | None:
        hit = [f for f in found[file] if check in f["check"] and column in str(f["column"])]
        return sum(int(f["rows"]) for f in hit) if hit else None

    named = {
        "dq_invoice_before_sub": rows("invoices.csv", "before subscriptions."),
        "dq_negative_seats": rows("seat_changes.csv", "negative values", "seats_after"),
        "dq_canceled_before_created": rows("subscriptions.csv", "before created", "canceled_at"),
    }
    verdicts: dict[str, bool] = {}
    for p in plants:
        if p["kind"] == "truth":  # named by the audit, with the rows as planted
            verdicts[p["id"]] = named.get(p["id"]) is not None and within(named[p["id"]], p)
    for p in by_class(plants, "lookalike", "legitimate_proration"):  # prorations called duplicates
        verdicts[p["id"]] = any("duplicate" in f["check"] for f in found["invoice_line_items.csv"])
    for p in by_class(plants, "lookalike", "minor_units"):  # the seat price in cents (unit_amount) called a wrong value
        verdicts[p["id"]] = any(
            f["column"] == "unit_amount" and f["severity"] != "low" for f in found["invoice_line_items.csv"]
        )
    for p in by_class(plants, "lookalike", "unix_time"):  # the Unix seconds called not dates, or outliers / future
        verdicts[p["id"]] = any(
            f["column"]
            in (
                "created",
                "start_date",
                "canceled_at",
                "ended_at",
                "current_period_start",
                "current_period_end",
                "trial_start",
                "trial_end",
            )
            and any(w in f["check"] for w in ("not dates", "not numbers", "format", "future", "outside", "extreme"))
            for f in found["subscriptions.csv"]
        )
    return verdicts


async def profitability(run: Run) -> dict[str, bool]:
    """One row per invoice (not uncollectible) in its own currency with fx_rate (USD per unit, the invoice month's
    average): net revenue (total - credit notes), cogs 0 (no goods), payment fees and API cost from
    business.channels (card 2.9 % NA / 3.9 % elsewhere + $0.30 on a charge > 0; ACH 0.8 % capped at $5; API per
    billed seat-month by region), its service period, WINDOW 2024-06..2025-05, ratable as SKILL.md says."""
    plants = run.plants("profitability")
    await run.py(SETUP)
    await run.py(
        f"api = {API}\n"
        "pv = sc_inv[(sc_inv.status != 'uncollectible') & (sc_inv.billing_reason != 'manual')].copy()\n"
        "pv['fx_rate'] = np.where(pv.currency == 'eur', pv.created_t.dt.strftime('%Y-%m').map(sc_fxm), 1.0)\n"
        "total_usd = pv.total * pv.fx_rate\n"
        "card = pv.collection_method == 'charge_automatically'\n"
        "pct = np.where(pv.region == 'NA', 0.029, 0.039)\n"
        "fee_usd = np.where(card, (total_usd * pct + 0.30) * (pv.total > 0),"
        " np.minimum(total_usd * 0.008, 5.0) * (pv.amount_paid > 0))\n"
        "start, end = pv.svc_start, pv.svc_end\n"
        "months = ((end - start).dt.days / (365.25 / 12)).round()\n"
        "api_usd = pv.seats.fillna(0) * months * pv.region.map(api).fillna(0)\n"
        "tier = np.where(pv.segment == 'sales_led', 'sales_led',"
        " np.where(pv.plan == 'team_annual', 'self_serve_annual', 'self_serve_monthly'))\n"
        "frame = pd.DataFrame({'channel': np.where(card, 'self_serve_card', 'sales_led_invoice'), 'tier': tier,\n"
        "    'plan': pv.plan, 'region': pv.region, 'currency': pv.currency.str.upper(), 'fx_rate': pv.fx_rate,\n"
        "    'net_revenue': pv.total - pv.post_payment_credit_notes_amount, 'cogs': 0.0,\n"
        "    'payment_fees': fee_usd / pv.fx_rate, 'api_cost': api_usd / pv.fx_rate,\n"
        "    'period_start': start.astype(str), 'period_end': end.astype(str)})\n"
        "profit_src = save_artifact(frame, title='invoices with variable costs, local currency')\n"
        "print(len(frame), frame.groupby('tier').net_revenue.sum())"
    )
    await run.script(
        "profitability",
        "scripts/loss_cells.py",
        "SOURCE = profit_src\nWINDOW = ('2024-06-01', '2025-06-01')",
    )
    losses = await run.get("loss_cells")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "loss_cell"):  # self-serve monthly x APAC a loss cell, its margin as planted
        hit = [c for c in losses if c.get("region") == "APAC" and c.get("tier") == "self_serve_monthly"]
        verdicts[p["id"]] = bool(hit) and within(hit[0]["margin_pct"], p, 0.01)
    for p in by_class(plants, "lookalike", "cash_vs_ratable"):  # team_annual (or its tier) called a loss
        verdicts[p["id"]] = any(c.get("plan") == "team_annual" or c.get("tier") == "self_serve_annual" for c in losses)
    return verdicts


# one row per subscription offered the coupon: group 1 if it got it, retained at 2025-06-01, and the usage per seat
# of the month before the offer (usage_events: active-user-days / days / seats)
COUPON_UNITS = """
usage = load_file('uploads/usage_events.parquet')
usage['date'] = pd.to_datetime(usage['date'])
def per_seat(units, month):
    u = usage[usage.date.dt.strftime('%Y-%m') == month].groupby('workspace_id').active_users.sum()
    days = pd.Period(month).days_in_month
    return units.metadata_workspace_id.map(u).fillna(0) / days / units.seats.clip(lower=1)
def offered(subs_ids, taken, month):
    units = sc_subs[sc_subs.id.isin(subs_ids)].copy()
    units['seats'] = units.id.map(sc_inv[sc_inv.created_t.dt.strftime('%Y-%m') >= month].sort_values('created_t')
                                  .drop_duplicates('subscription').set_index('subscription').seats).fillna(units.quantity)
    retained = units.ended_at_t.isna() | (units.ended_at_t > pd.Timestamp('2025-06-01'))
    # the pre-period covariates SKILL.md asks for (`pre_*`, measured before the offer): tenure, plan, seats
    before_offer = sc_inv[sc_inv.created_t < pd.Timestamp(month + '-01') + pd.offsets.MonthBegin(1)]
    last = before_offer.sort_values('created_t').drop_duplicates('subscription', keep='last').set_index('subscription')
    return pd.DataFrame({'unit': units.id, 'group': units.id.isin(taken).astype(int),
                         'outcome': retained.astype(int), 'pre_usage': per_seat(units, month),
                         'pre_tenure_months': (pd.Timestamp(month + '-01') - units.start_date_t).dt.days / 30.44,
                         'pre_plan': units.id.map(last.plan).fillna(units.plan), 'pre_seats': units.seats})
partner = set(sc_inv[sc_inv.discount_coupon_id == 'PARTNER100_3M'].subscription)
non_apac = set(sc_subs[sc_subs.region != 'APAC'].id)
cyc = sc_inv[sc_inv.billing_reason == 'subscription_cycle']
# LOYALTY15: pro/starter monthly (not APAC, not partner) renewing in September 2024 after a paid month before it
sep = cyc[cyc.plan.isin(['pro_monthly', 'starter_monthly']) & (cyc.created_t.dt.strftime('%Y-%m') == '2024-09')]
before = set(sc_inv[(sc_inv.created_t < '2024-08-15') & (sc_inv.total > 0)].subscription)
loyal_ids = (set(sep.subscription) & non_apac & before) - partner
loyalty = offered(loyal_ids, set(sc_inv[sc_inv.discount_coupon_id == 'LOYALTY15'].subscription), '2024-08')
# ANNUAL20: team_monthly (not APAC, not partner) renewing in May 2024, the takers switched to team_annual
may = sc_inv[(sc_inv.created_t.dt.strftime('%Y-%m') == '2024-05') & sc_inv.billing_reason.isin(['subscription_cycle',
          'subscription_update'])]
takers = set(sc_inv[sc_inv.discount_coupon_id == 'ANNUAL20'].subscription)
annual_ids = ((set(may[may.plan == 'team_monthly'].subscription) | takers) & non_apac) - partner
annual = offered(annual_ids, takers, '2024-04')
loyalty_src = save_artifact(loyalty, title='LOYALTY15 eligible subscriptions')
annual_src = save_artifact(annual, title='ANNUAL20 offered subscriptions')
print(loyalty.groupby('group').outcome.agg(['size', 'mean']), annual.groupby('group').outcome.agg(['size', 'mean']))
"""


async def discount_effectiveness(run: Run) -> dict[str, bool]:
    """LOYALTY15 (randomised per subscription) read as randomised, ANNUAL20 (CS picked the takers) as
    self-selected: one row per subscription offered, retention at 2025-06-01, pre-offer usage deciles."""
    plants = run.plants("discount-effectiveness")
    await run.py(SETUP)
    await run.py(COUPON_UNITS)
    reads = {}
    for scheme, design, src in (
        ("LOYALTY15", "randomised", "loyalty_src"),
        ("ANNUAL20", "self-selected", "annual_src"),
    ):
        await run.script(
            "discount-effectiveness",
            "scripts/promo_did.py",
            f"DESIGN = {design!r}\nSCHEME = {scheme!r}\nSOURCE = {src}",
        )
        reads[scheme] = await run.get("effects.iloc[0][['lift', 'flagged']].to_dict()")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "real_effect_randomised"):  # a lift claimed, its size as planted
        r = reads["LOYALTY15"]
        verdicts[p["id"]] = bool(r["flagged"]) and within(r["lift"], p)
    for p in by_class(plants, "lookalike", "selection_bias"):  # ANNUAL20 credited with a lift
        verdicts[p["id"]] = bool(reads["ANNUAL20"]["flagged"])
    return verdicts


# SKILL.md step 2 from the exports: the logo is the Stripe customer (= CRM account); SOURCE the paid invoices
# above 0, SUBSCRIPTIONS one row per subscription (first paid day = the trial's end when a trial came first; a
# trial that ended at or before its end never converted), MRR at 2024-06-01 and 2025-06-01: each subscription
# billed over the day, its seats then (the seat audit log) x its seat line's list price (annual / 12) at June
# 2024's EURUSD, segment = tier + region
COHORTS = """
paid_inv = sc_inv[(sc_inv.status == 'paid') & (sc_inv.total > 0) & (sc_inv.billing_reason != 'manual')]
coh_source = paid_inv.rename(columns={'customer': 'customer_id'}).assign(active_at=unix(paid_inv.created))
coh_source = coh_source[['customer_id', 'active_at', 'segment']]
trial = sc_subs.trial_end.notna() & (sc_subs.trial_end != '')
first_paid = sc_subs.trial_end.where(trial, sc_subs.start_date)
never = trial & sc_subs.ended_at_t.notna() & (sc_subs.ended_at_t <= sc_subs.trial_end_t)
coh_subs = pd.DataFrame({'customer_id': sc_subs.customer, 'started_at': unix(first_paid),
    'ended_at': unix(sc_subs.ended_at),
    'converted': ~never, 'segment': sc_subs.segment + ' ' + sc_subs.region})
reg = sc_lines[(sc_lines.type == 'subscription') & (sc_lines.proration == 'false')].copy()
reg['ps'], reg['pe'] = sc_ts(reg.period_start), sc_ts(reg.period_end)
reg['customer_id'] = reg.subscription.map(sc_subs.set_index('id').customer)
reg['segment'] = reg.subscription.map((sc_subs.segment + ' ' + sc_subs.region).set_axis(sc_subs.id))
seat_log = load_file('uploads/seat_changes.csv').sort_values('occurred_at')
seat_log['at'] = pd.to_datetime(seat_log.occurred_at, utc=True).dt.tz_localize(None)
reg['workspace_id'] = reg.subscription.map(sc_subs.set_index('id').metadata_workspace_id)
snaps = []
for at in ('2024-06-01', '2025-06-01'):
    on = reg[(reg.ps <= at) & (reg.pe > at)].copy()
    seats_then = seat_log[seat_log['at'] <= at].groupby('workspace_id').seats_after.last()  # the audit log's seats
    on['seats'] = on.workspace_id.map(seats_then).fillna(on.quantity).clip(lower=0)
    per_month = np.where(on.plan.isin(['team_annual', 'business_annual', 'enterprise_annual']), 12, 1)
    snaps.append(on.assign(at=at, mrr=sc_usd(on.seats * on.unit_amount / per_month, on.currency,
                                             pd.Series('2024-06-01', index=on.index))))
mrr = pd.concat(snaps).groupby(['customer_id', 'at', 'segment'], as_index=False).mrr.sum()
coh_mrr = save_artifact(mrr, title='MRR snapshots (list, constant FX)')
coh_subs_all = save_artifact(coh_subs, title='subscriptions: first paid day, end, converted')
coh = {}
for seg in ('self_serve', 'sales_led'):
    coh[seg] = (save_artifact(coh_source[coh_source.segment == seg].drop(columns='segment'), title=f'{seg} paid'),
                save_artifact(coh_subs[coh_subs.segment.str.startswith(seg)], title=f'{seg} subscriptions'))
print(len(coh_source), int(never.sum()), mrr.groupby('at').mrr.sum().to_dict())
"""


async def customer_cohort_retention(run: Run) -> dict[str, bool]:
    """Subscription survival per segment (self-serve, sales-led run apart) on calendar months, data through
    2025-06-17; then KM and logo retention beside NRR by tier + region."""
    plants = run.plants("customer-cohort-retention")
    await run.py(SETUP)
    await run.py(COHORTS)
    effects = {}
    for seg in ("self_serve", "sales_led"):
        await run.script(
            "customer-cohort-retention",
            "scripts/retention_matrix.py",
            f"SOURCE, SUBSCRIPTIONS = coh[{seg!r}]\nDATA_THROUGH = '2025-06-17'",
        )
        effects[seg] = await run.get(
            "dict(zip(cohort_effects[cohort_effects.flagged].cohort.astype(str),"
            " cohort_effects[cohort_effects.flagged].retention_pct))"
        )
    await run.script(
        "customer-cohort-retention",
        "scripts/subscription_survival.py",
        "SUBSCRIPTIONS = coh_subs_all\nMRR = coh_mrr\nDATA_THROUGH = '2025-06-17'",
    )
    segments = {r["segment"]: r for r in await run.get("segments")}
    verdicts: dict[str, bool] = {}
    ss = effects["self_serve"]
    for p in by_class(plants, "truth", "cohort_effect_promo"):
        # the 2024-04 cohort flagged, the retention the script names it at as planted (month 3 after the free months)
        hit = [v for c, v in ss.items() if c in ("2024-04", "FY2024-P04")]
        verdicts[p["id"]] = bool(hit) and within(hit[0], p, 0.01)
    for p in by_class(plants, "lookalike", "period_effect"):  # a 2023 cohort named weak (the Oct-2023 diagonal)
        verdicts[p["id"]] = any("2023" in c for seg in effects.values() for c in seg)
    emea = segments.get("sales_led EMEA", {})
    for p in by_class(plants, "truth", "logo_vs_nrr"):  # sales-led EMEA called out, logo retention / NRR as planted
        value = emea.get("nrr") if p["id"].endswith("_nrr") else emea.get("logo_retention")
        verdicts[p["id"]] = bool(emea.get("finding")) and value is not None and within(value, p)
    for p in by_class(plants, "lookalike", "trial_not_customer"):  # self-serve logos lost beyond the planted level
        rows = [r for k, r in segments.items() if k.startswith("self_serve")]
        n = sum(r["customers"] for r in rows)
        logo = sum(r["customers"] * r["logo_retention"] for r in rows) / n if n else None
        tol = p["expected"]["tolerance"]
        verdicts[p["id"]] = logo is not None and logo < p["expected"]["value"] - tol
    return verdicts


async def returns_and_cancellations(run: Run) -> dict[str, bool]:
    """Paid invoices above 0 (not manual) per plan, tenure (the rank of the subscription's paid charges: 1 vs later,
    the 30-day money-back is on the first paid month) and billing interval; returned = refunded by a credit note,
    returned revenue in USD (at the invoice month's EURUSD).
    An invoice holds one plan, so there is no basket to attribute (step 4 has nothing to hold fixed)."""
    plants = run.plants("returns-and-cancellations")
    await run.py(SETUP)
    await run.py(
        "iv = sc_inv[(sc_inv.billing_reason != 'manual') & (sc_inv.status == 'paid') & (sc_inv.total > 0)]\n"
        "iv = iv.sort_values(['subscription', 'paid_t'])\n"
        "k = iv.groupby('subscription').cumcount()  # rank of the subscription's paid charges\n"
        "annual = iv.plan.isin(['team_annual', 'business_annual', 'enterprise_annual'])\n"
        "ret = pd.DataFrame({'item': iv.plan, 'tenure_month': np.where(k == 0, '1', '2+'),\n"
        "    'interval': np.where(annual, 'year', 'month'), 'shipped': 1,\n"
        "    'returned': (iv.post_payment_credit_notes_amount > 0).astype(int), 'currency': 'USD',\n"
        "    'returned_revenue': sc_usd(iv.post_payment_credit_notes_amount, iv.currency, iv.created_t)})\n"
        "ret = ret.groupby(['item', 'tenure_month', 'interval', 'currency'], as_index=False).sum()\n"
        "ret_src = save_artifact(ret, title='paid invoices and refunds per plan and tenure')\n"
        "print(ret)"
    )
    await run.script("returns-and-cancellations", "scripts/return_outliers.py", "SOURCE = ret_src")
    flagged = set(await run.get("flags[flags.kind == 'returned'].item.tolist() if len(flags) else []"))
    later = await run.get(
        "dict(zip(cells.item, cells.rate_pct)) if 'tenure_month' not in cells else "
        "dict(cells[(cells.kind == 'returned') & (cells.tenure_month == '2+')].set_index('item').rate_pct)"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "real_excess"):  # pro_monthly flagged, its after-month-1 rate as planted
        rate = later.get(p["entity"]["plan"])
        verdicts[p["id"]] = p["entity"]["plan"] in flagged and rate is not None and within(rate, p, 0.01)
    for p in by_class(plants, "lookalike", "tenure_mix"):  # starter_monthly flagged for its first-month mix
        verdicts[p["id"]] = p["entity"]["plan"] in flagged
    return verdicts


async def kpi_anomaly_detection(run: Run) -> dict[str, bool]:
    """Daily workspace sign-ups (accounts.csv: one row per workspace, its created time as written, UTC), the
    business calendar with the business's own days (sales-led contracts start and provision on the 1st)."""
    plants = run.plants("kpi-anomaly-detection")
    await run.py(
        "acc = load_file('uploads/accounts.csv', dtype=str)\n"
        "signups = acc[['workspace_created_at']].rename(columns={'workspace_created_at': 'created_at'})\n"
        "kpi_src = save_artifact(signups, title='workspace sign-ups')\n"
        "print(len(signups))"
    )
    await run.script(
        "kpi-anomaly-detection",
        "scripts/business_calendar.py",
        "COUNTRY = 'US'\nEVENTS = {'contract starts (sales-led provisioning)': 'monthly:1'}\nSOURCE = kpi_src",
    )
    await run.script("kpi-anomaly-detection", "scripts/kpi_anomalies.py", "COUNTRY = 'US'\nSOURCE = kpi_src")
    found = await run.get("{str(pd.Timestamp(r.period).date()): r.value for r in anomalies.itertuples()}")
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "outage"):  # the outage day named, its count as planted
        day = p["entity"]["date"]
        verdicts[p["id"]] = day in found and within(found[day], p)
    for p in by_class(plants, "lookalike", "business_calendar"):  # a month start / quarter end called an anomaly
        verdicts[p["id"]] = p["entity"]["date"] in found
    return verdicts


async def demand_forecast(run: Run) -> dict[str, bool]:
    """Gross new seats (business.metric_definitions): the positive seat deltas per event, their time as written
    (UTC), the 2025-02-20 SCIM sync and its support fix left out in the query as SKILL.md says; calendar months,
    DATA_END 2025-06-17."""
    plants = run.plants("demand-forecast")
    await run.py(
        "seats = load_file('uploads/seat_changes.csv', dtype={'delta': int})\n"
        "sync = seats.source.isin(['scim_sync', 'support_fix']) & seats.occurred_at.str.startswith('2025-02-20')\n"
        "adds = seats[(seats.delta > 0) & ~sync]\n"
        "fc_src = save_artifact(adds.rename(columns={'occurred_at': 'date', 'delta': 'value'})[['date', 'value']],"
        " title='gross new seats (events)')\n"
        "print(len(adds), int(sync.sum()))"
    )
    await run.script("demand-forecast", "scripts/periods.py", "SOURCE = fc_src\nDATA_END = '2025-06-17'")
    await run.script("demand-forecast", "scripts/forecast.py", "SOURCE = periods")
    r = await run.get(
        "{'q3': float(outlook[outlook.period.astype(str).isin(['2025-07', '2025-08', '2025-09'])].forecast.sum()),"
        " 'q3_rows': int(outlook.period.astype(str).isin(['2025-07', '2025-08', '2025-09']).sum()),"
        " 'june': periods[periods.period.astype(str) == '2025-06'][['complete', 'flag']].to_dict('records'),"
        " 'feb': periods[periods.period.astype(str) == '2025-02'].flag.astype(str).tolist()}"
    )
    verdicts: dict[str, bool] = {}
    for p in by_class(plants, "truth", "forecast"):  # Jul-Sep forecast within the plant's +-30 %
        verdicts[p["id"]] = r["q3_rows"] == 3 and within(r["q3"], p)
    for p in by_class(plants, "lookalike", "partial_period"):  # June 2025 (17 days) taken as a complete month
        verdicts[p["id"]] = any(bool(x["complete"]) and x["flag"] != "partial" for x in r["june"])
    for p in by_class(plants, "lookalike", "data_artefact"):  # February read as a change in demand (flagged, kept)
        verdicts[p["id"]] = any(f not in ("", "None", "nan", "one-off") for f in r["feb"])
    return verdicts


RECIPES: dict[str, Recipe] = {
    "ab-test-readout": ab_test_readout,
    "customer-lifetime-value": customer_lifetime_value,
    "budget-vs-actual": budget_vs_actual,
    "sales-performance-review": sales_performance_review,
    "data-quality-audit": data_quality_audit,
    "profitability": profitability,
    "discount-effectiveness": discount_effectiveness,
    "customer-cohort-retention": customer_cohort_retention,
    "returns-and-cancellations": returns_and_cancellations,
    "kpi-anomaly-detection": kpi_anomaly_detection,
    "demand-forecast": demand_forecast,
}
