"""Loss-making cells across every pair of dimensions, judged on CONTRIBUTION (net revenue - cost of goods - the
channel's variable costs), never on gross margin alone: a loss that lives in one channel x product (or country x
product, segment x region …) cell is averaged away in one-way rankings, and a search of one chosen pair misses the
cells of every other pair.

Input: SOURCE, the id of a table artifact (or a DataFrame) with one row per combination of the dimensions (text
columns: channel, product, country, segment …; a time column — month, period, week, year — is kept apart, never
a dimension) and amounts:
- net_revenue — after discounts and returns/refunds (required);
- cogs (cost of goods) or gross_margin (= net_revenue - cogs);
- the channel's variable costs, one column each, positive amounts: any column named for fees, referral,
  fulfilment/FBA, payment processing, shipping/freight, rebates, API/hosting cost, variable_cost(s) — or the
  list VARIABLE_COSTS = ["col", …]; or rates, when the frame has no cost columns: VARIABLE_COSTS =
  {"amazon": {"referral_fee_pct": 0.15, "fulfilment_per_unit": 5.4}, …} or PROFILE["channels"][c]["variable_costs"]
  (numeric `*_pct` keys are shares of revenue; `*per_unit` keys need a `units` column);
- contribution — if already computed (then it is used as given);
- overhead (optional: allocated fixed cost, shown beside contribution, never in it);
- currency (optional): amounts in that currency, converted into PROFILE's reporting_currency BEFORE summing, by a
  `fx_rate` column (reporting currency per 1 unit) or FX = {"GBP": 1.17, …}; a currency without a rate is refused;
- period_start / period_end (optional: the service period of an invoice or contract): when PROFILE says
  contractual, revenue and costs are spread over the months of service (ratable recognition, ASC 606) and the
  window is cut by WINDOW = ("2024-06-01", "2025-06-01") if given.
PROFILE (from business-profile): reporting_currency, currencies, contractual, marketplace_fees, channels.
Run in run_python as:  PROFILE = {...}  SOURCE = "artifact_..."  then this script.
Method (said in the output): contribution = net revenue - COGS - variable costs, in the reporting currency; every
pair of dimensions searched, each pair's cells summed over the others (and over the time window); a cell whose
contribution is negative is a loss whatever its row's and column's totals; a loss with a channel in it is named with
its channel, and called channel-specific when the same product/segment earns in another channel; a cell whose
margin fell but stays positive is no loss (listed apart as `margin_down`); allocated overhead is shown beside the
contribution (a cell covering its costs but not its overhead is listed apart). A channel known to carry fees
(PROFILE marketplace_fees or channels' variable_costs, or named like a marketplace) with none given is a LOUD
warning: its contribution would be overstated.
Output: `loss_cells` (the cell's value: dimensions, each dimension's value, net_revenue, cogs, variable_costs,
gross_margin, gross_margin_pct, contribution, margin_pct (contribution margin %), revenue_share_pct,
hidden_in_one_way_views, channel_specific, finding), `cells` (every cell of every pair, flagged = contribution < 0),
`margin_down` (positive cells whose margin fell: not losses), `below_overhead`, `pairs`, `assumed`.
"""

import itertools
import re

import pandas as pd

PROFILE = globals().get("PROFILE") or {}
table = SOURCE if isinstance(SOURCE, pd.DataFrame) else load_artifact(SOURCE)  # noqa: F821 - run_python's
table = table.copy()
table.columns = [str(c) for c in table.columns]
warnings, notes = [], []

COST_NAME = re.compile(
    r"fee|referral|fulfil|fba|processing|shipping|freight|postage|rebate|api_cost|hosting|variable_cost|pick_pack",
    re.I,
)
TIME_NAME = re.compile(r"^(month|period|fiscal_period|week|fiscal_week|quarter|year|fiscal_year|date|day)$", re.I)
FEE_CHANNEL = re.compile(r"amazon|fba|marketplace|ebay|etsy|walmart|zalando|mercado|shopee|lazada|tiktok", re.I)
given_costs = globals().get("VARIABLE_COSTS")
cost_columns = [
    c
    for c in (given_costs if isinstance(given_costs, list) else table.columns)
    if COST_NAME.search(c) and c not in ("net_revenue", "gross_margin", "contribution") and c in table.columns
]
if isinstance(given_costs, list):
    cost_columns = [c for c in given_costs if c in table.columns]
amounts = [
    c for c in ("net_revenue", "cogs", "gross_margin", "contribution", "overhead", "units") if c in table.columns
]
amounts += cost_columns
if "net_revenue" not in table.columns:
    raise ValueError("loss_cells needs net_revenue (after discounts and returns) — rename the revenue column")
if not {"cogs", "gross_margin", "contribution"} & set(table.columns):
    raise ValueError("loss_cells needs the cost of goods: a cogs or gross_margin column (or contribution)")
for c in amounts:
    table[c] = pd.to_numeric(table[c], errors="coerce").fillna(0.0).astype(float)

# -- currency: converted row by row, before any sum
reporting = PROFILE.get("reporting_currency")
currencies = list(PROFILE.get("currencies") or [])
fx_note = "one currency"
money = [c for c in amounts if c != "units"]
if "currency" in table.columns:
    codes = sorted(table["currency"].astype(str).str.upper().unique())
    if not reporting:
        if len(codes) > 1:
            raise ValueError(
                f"amounts in {codes} and no reporting currency: pass PROFILE['reporting_currency'] (business-profile)"
            )
        reporting = codes[0]
    if "fx_rate" in table.columns:
        rate = pd.to_numeric(table["fx_rate"], errors="coerce")
        fx_note = f"converted into {reporting} row by row by fx_rate (reporting currency per unit) before summing"
    else:
        fx = {str(k).upper(): float(v) for k, v in (globals().get("FX") or PROFILE.get("fx") or {}).items()}
        fx[str(reporting).upper()] = 1.0
        missing = [c for c in codes if c not in fx]
        if missing:
            raise ValueError(
                f"no FX rate for {missing} into {reporting}: give a fx_rate column (the rate of each row's month, "
                "from PROFILE's FX source) or FX = {currency: reporting units per 1}"
            )
        rate = table["currency"].astype(str).str.upper().map(fx)
        fx_note = f"converted into {reporting} at FX { ({c: fx[c] for c in codes}) } before summing"
    if rate.isna().any():
        raise ValueError(f"{int(rate.isna().sum())} row(s) without an FX rate")
    for c in money:
        table[c] = table[c] * rate
elif len(currencies) > 1:
    warnings.append(
        f"PROFILE lists currencies {currencies} but the frame has no currency column: assumed already converted "
        f"into {reporting or 'one currency'} — sum only converted amounts"
    )
    fx_note = f"assumed already in {reporting or 'one currency'}"
else:
    reporting = reporting or (currencies[0] if currencies else "the data's currency")
    fx_note = f"{reporting} only"

# -- ratable recognition of contracts
contractual = PROFILE.get("contractual")
recognition = "as given (one row = revenue of its period)"
if {"period_start", "period_end"} <= set(table.columns):
    start = pd.to_datetime(table["period_start"], utc=True, errors="coerce").dt.tz_localize(None)
    end = pd.to_datetime(table["period_end"], utc=True, errors="coerce").dt.tz_localize(None)
    if contractual in (True, "mixed") or globals().get("RATABLE"):
        window = globals().get("WINDOW")
        lo = pd.Timestamp(window[0]) if window else start.min()
        hi = pd.Timestamp(window[1]) if window else end.max()
        spread = []
        for i, (s, e) in enumerate(zip(start, end, strict=True)):
            if pd.isna(s) or pd.isna(e) or e <= s:
                continue
            edges = [s, *pd.date_range(s.normalize() + pd.offsets.MonthBegin(1), e, freq="MS", inclusive="left"), e]
            for a, b in itertools.pairwise(edges):
                a2, b2 = max(a, lo), min(b, hi)
                if b2 > a2:
                    spread.append((i, a.strftime("%Y-%m"), (b2 - a2) / (e - s)))
        parts = pd.DataFrame(spread, columns=["row", "month", "share"])
        body = table.drop(columns=["period_start", "period_end"]).iloc[parts["row"]].reset_index(drop=True)
        for c in amounts:
            body[c] = body[c] * parts["share"].to_numpy()
        body["month"] = parts["month"].to_numpy()
        table = body
        recognition = (
            f"ratable: each invoice's revenue and costs spread over its service months ({lo.date()} .. {hi.date()})"
        )
    else:
        table = table.drop(columns=["period_start", "period_end"])
        warnings.append("service periods given but PROFILE does not say contractual: revenue taken as invoiced")
elif contractual is True:
    warnings.append(
        "PROFILE says contractual but the rows carry no period_start/period_end: revenue is taken as invoiced — an "
        "annual prepaid contract's months without an invoice look like losses; give service periods to spread it"
    )

# -- contribution
if "gross_margin" not in table.columns:
    table["gross_margin"] = table["net_revenue"] - table.get("cogs", 0.0)
if "cogs" not in table.columns:
    table["cogs"] = table["net_revenue"] - table["gross_margin"]
time_cols = [c for c in table.columns if TIME_NAME.match(c)]
amounts = list(dict.fromkeys([*amounts, "cogs", "gross_margin", "contribution", "variable_costs"]))
dims = [
    c
    for c in table.columns
    if c not in amounts
    and c not in time_cols
    and c not in ("currency", "fx_rate", "overhead")
    and not pd.api.types.is_numeric_dtype(table[c])
]
dims += [
    c
    for c in table.columns
    if c not in amounts
    and c not in dims
    and c not in time_cols
    and c not in ("currency", "fx_rate", "overhead", "units")
    and table[c].nunique() <= 50
]
channel = (
    globals().get("CHANNEL")
    or next((c for c in dims if re.search(r"channel|marketplace|sales_route", c, re.I)), None)
    or next((c for c in dims if re.search(r"^segment$|customer_type|route", c, re.I)), None)
)
channel_rates = {}
if isinstance(given_costs, dict):
    channel_rates = given_costs
elif isinstance(PROFILE.get("channels"), dict):
    channel_rates = {k: (v or {}).get("variable_costs", v) for k, v in PROFILE["channels"].items()}
applied = []
if "contribution" in table.columns:
    cost_source = "contribution given in the frame"
    table["variable_costs"] = table["gross_margin"] - table["contribution"]
elif cost_columns:
    table["variable_costs"] = table[cost_columns].abs().sum(axis=1)
    cost_source = "variable costs from the frame: " + ", ".join(cost_columns)
else:
    table["variable_costs"] = 0.0
    cost_source = "no variable costs in the frame"
    if channel and channel_rates:
        for name, rates in channel_rates.items():
            rows = table[channel].astype(str).str.lower() == str(name).lower()
            if not rows.any() or not isinstance(rates, dict):
                continue
            for key, rate in rates.items():
                if not isinstance(rate, int | float):
                    continue
                if key.endswith("_pct"):
                    table.loc[rows, "variable_costs"] += rate * table.loc[rows, "net_revenue"]
                elif "per_unit" in key and "units" in table.columns:
                    table.loc[rows, "variable_costs"] += rate * table.loc[rows, "units"]
                else:
                    continue
                applied.append(f"{name}.{key}={rate}")
        if applied:
            cost_source = "channel rates applied: " + ", ".join(applied)
    if "contribution" not in table.columns:
        table["contribution"] = table["gross_margin"] - table["variable_costs"]
if "contribution" not in table.columns:
    table["contribution"] = table["gross_margin"] - table["variable_costs"]

# -- channels known to carry fees but given none
if channel:
    fee_channels = set()
    if PROFILE.get("marketplace_fees"):
        fee_channels |= {v for v in table[channel].astype(str).unique() if FEE_CHANNEL.search(v)} or set(
            table[channel].astype(str).unique()
        )
    fee_channels |= {v for v in table[channel].astype(str).unique() if FEE_CHANNEL.search(v)}
    fee_channels |= {str(k) for k, v in channel_rates.items() if v} & set(table[channel].astype(str))
    for name in sorted(fee_channels):
        rows = table[channel].astype(str) == name
        if table.loc[rows, "variable_costs"].abs().sum() == 0:
            warnings.append(
                f"LOUD: channel {name!r} carries variable costs (referral/fulfilment/payment fees, shipping) but none "
                "were given for it — its contribution is only its gross margin, overstated; give the fee columns "
                "(a settlement report's fee lines) or VARIABLE_COSTS rates"
            )
elif PROFILE.get("marketplace_fees") and table["variable_costs"].abs().sum() == 0:
    warnings.append("LOUD: PROFILE names marketplace fees but no channel column or variable costs were given")
if table["variable_costs"].abs().sum() == 0 and "contribution" in table.columns and not warnings:
    notes.append("no variable costs given: contribution equals gross margin (cost to serve not in the data)")

measures = ["net_revenue", "cogs", "variable_costs", "gross_margin", "contribution"]
if "overhead" in table.columns:
    measures.append("overhead")
total_revenue = float(table.net_revenue.sum())
pairs = list(itertools.combinations(dims, 2)) or [(dims[0], dims[0])]


def pct(num, den):
    return (100 * num / den.where(den != 0)).round(1)


found = []
for a, b in pairs:
    keys = [a, b] if a != b else [a]
    part = table.groupby(keys, dropna=False)[measures].sum().reset_index()
    for dim in dict.fromkeys((a, b)):
        totals = table.groupby(dim, dropna=False)[["net_revenue", "contribution"]].sum()
        part[f"{dim}_margin_pct"] = part[dim].map(pct(totals.contribution, totals.net_revenue))
    part.insert(0, "dimensions", f"{a} x {b}")
    found.append(part)
cells = pd.concat(found, ignore_index=True)
cells["gross_margin_pct"] = pct(cells.gross_margin, cells.net_revenue)
cells["margin_pct"] = pct(cells.contribution, cells.net_revenue)
cells["revenue_share_pct"] = (100 * cells.net_revenue / total_revenue).round(2) if total_revenue else 0.0
cells["flagged"] = cells.contribution < 0
cells = cells.sort_values("contribution").reset_index(drop=True)
loss_cells = cells[cells.flagged].copy()


def hidden(row: pd.Series) -> bool:
    a, b = row.dimensions.split(" x ")
    return bool(row[f"{a}_margin_pct"] > 0 and row[f"{b}_margin_pct"] > 0)


def label(row) -> str:
    return " x ".join(str(row[d]) for d in dict.fromkeys(row["dimensions"].split(" x ")))


def elsewhere(row: pd.Series) -> str:
    """The same other value in the other channels, where it earns: the loss is the channel's, not the product's."""
    a, b = row.dimensions.split(" x ")
    if channel not in (a, b) or a == b:
        return ""
    other = b if a == channel else a
    same = cells[(cells.dimensions == row.dimensions) & (cells[other] == row[other]) & (cells[channel] != row[channel])]
    earning = same[same.contribution > 0]
    return "; ".join(f"{r[channel]} {r.margin_pct:+.1f} %" for _, r in earning.iterrows())


loss_cells["hidden_in_one_way_views"] = loss_cells.apply(hidden, axis=1) if len(loss_cells) else []
loss_cells["earns_in_other_channels"] = loss_cells.apply(elsewhere, axis=1) if len(loss_cells) else []
loss_cells["channel_specific"] = loss_cells["earns_in_other_channels"] != ""
loss_cells["finding"] = [
    f"loses {-r.contribution:,.0f} {reporting} ({r.margin_pct:+.1f} % contribution"
    + (f", gross margin {r.gross_margin_pct:+.1f} %" if r.gross_margin != r.contribution else "")
    + ")"
    + (f"; channel-specific: earns in {r.earns_in_other_channels}" if r.channel_specific else "")
    for _, r in loss_cells.iterrows()
]
gross_only = cells[(cells.gross_margin > 0) & (cells.contribution < 0)]
below_overhead = cells.iloc[0:0]
if "overhead" in cells.columns:
    below_overhead = cells[(cells.contribution >= 0) & (cells.contribution - cells.overhead < 0)].copy()

# -- margin trend: fell but still positive is no loss
margin_down = cells.iloc[0:0].assign(margin_first=[], margin_last=[])
trend_col = next((c for c in time_cols if table[c].nunique() >= 2), None)
if trend_col:
    order = sorted(table[trend_col].astype(str).unique())
    half = len(order) // 2
    early = table[table[trend_col].astype(str).isin(order[:half])]
    late = table[table[trend_col].astype(str).isin(order[half:])]
    rows = []
    for a, b in pairs:
        keys = [a, b] if a != b else [a]
        e = early.groupby(keys)[["net_revenue", "contribution"]].sum()
        late_sums = late.groupby(keys)[["net_revenue", "contribution"]].sum()
        both = e.join(late_sums, lsuffix="_first", rsuffix="_last", how="inner")
        both["margin_first"] = pct(both.contribution_first, both.net_revenue_first)
        both["margin_last"] = pct(both.contribution_last, both.net_revenue_last)
        fell = both[(both.margin_last < both.margin_first - 3) & (both.contribution_last > 0)].reset_index()
        fell.insert(0, "dimensions", f"{a} x {b}")
        rows.append(fell[["dimensions", *keys, "margin_first", "margin_last"]])
    margin_down = pd.concat(rows, ignore_index=True) if rows else margin_down
    margin_down = margin_down.merge(cells, on=[c for c in margin_down.columns if c in cells.columns], how="left")
    margin_down = margin_down[margin_down.contribution > 0]

assumed = (
    f"Assumed: contribution = net revenue - COGS - variable costs ({cost_source}); currency: {fx_note}; "
    f"recognition: {recognition}; contractual {contractual!r}; channel column {channel or 'none'}"
    + (f"; time column {', '.join(time_cols)} summed over the window, not a dimension" if time_cols else "")
)
names = ", ".join(f"{a} x {b}" for a, b in pairs)
print(assumed)
for line in warnings:
    print("WARNING:", line)
for line in notes:
    print("note:", line)
print(
    f"Method: every pair of the {len(dims)} dimensions searched ({names}), each cell summed over the others and "
    "ranked by its contribution margin; a negative cell is a loss whatever its row's and column's totals (a "
    "one-way ranking averages it away)"
    + ("; allocated overhead shown apart, never in the margin" if "overhead" in cells.columns else "")
)
shown = ["dimensions", *dims, "net_revenue", "gross_margin", "gross_margin_pct", "contribution", "margin_pct"]
print(f"the {min(10, len(cells))} lowest-contribution cells of {len(cells)}:")
print(cells[[c for c in shown if c in cells.columns]].head(10).round(1).to_string(index=False))
if len(loss_cells):
    hidden_count = int(loss_cells.hidden_in_one_way_views.sum())
    print(
        f"LOSS-MAKING CELLS: {len(loss_cells)} (contribution {loss_cells.contribution.sum():,.0f}); {hidden_count} of "
        "them invisible in one-way rankings; the largest loss first:"
    )
    for _, r in loss_cells.head(8).iterrows():
        print(
            f"- {r.dimensions} = {label(r)}: loses {-r.contribution:,.0f} on {r.net_revenue:,.0f} of revenue "
            f"({r.margin_pct:+.1f} %, {r.revenue_share_pct:.1f} % of all revenue)"
            + (f"; gross margin {r.gross_margin:+,.0f} ({r.gross_margin_pct:+.1f} %)" if r.variable_costs else "")
            + (f"; CHANNEL-SPECIFIC: earns in {r.earns_in_other_channels}" if r.channel_specific else "")
        )
    if len(gross_only):
        print(f"{len(gross_only)} of them earn on gross margin and lose only after the channel's variable costs")
else:
    print(f"no {' or '.join(f'{a} x {b}' for a, b in pairs)} cell loses money")
if len(margin_down):
    print(
        f"margin fell but still positive ({trend_col}, first half vs second half; NOT loss cells): "
        + "; ".join(
            f"{r.dimensions} = {label(r)} {r.margin_first:+.1f} % -> {r.margin_last:+.1f} %"
            for _, r in margin_down.head(5).iterrows()
        )
    )
if len(below_overhead):
    print(
        f"{len(below_overhead)} cell(s) cover their own costs but not their allocated overhead (not sold below "
        "cost; the allocation key decides them): "
        + "; ".join(f"{r.dimensions} = {label(r)}" for _, r in below_overhead.head(5).iterrows())
    )
loss_cells  # noqa: B018 - the cell's value
