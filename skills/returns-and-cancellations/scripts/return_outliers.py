"""Which plans, products, channels or stores return, refund or cancel more than their mix explains, beyond chance.

Input: SOURCE, the id of a table artifact; PROFILE (business-profile's dict; optional but read); optional ITEM (the
entity column, default "item": plan, sku, store, channel …), STRATA (the driver columns to standardise on; default
every column that is not the entity, a count, revenue, currency or an id), MIN_EXPOSURE (30), MIN_RATIO (1.5),
ALPHA (0.01).
One row per entity and driver cell (or per line: rows are summed), with counts:
- units (line-level returns: credit notes or return lines with quantities): units_sold, units_returned, and
  returns (the number of return lines / credit memos) with lines_sold (the sale lines) when a return credits several
  units: the test then counts returns per line sold (else units / the entity's units per return), the ratio is in units;
- orders / charges / invoices: shipped (paid) and returned (refunded), or completed and returned (shipped =
  completed + returned); and orders and cancelled for cancellations;
- optional returned_revenue (and currency: converted with PROFILE["fx"] {currency: rate to the reporting currency}).
Run in run_python as:  PROFILE = {...}  SOURCE = "artifact_..."  then this script.

Method (indirect standardisation, the standardised ratio of epidemiology): an entity's expected returns are the
sum over its driver cells (tenure x product x …) of the other entities' rate in that cell times its own exposure
there; ratio = observed / expected, tested by an exact Poisson test of the excess, Bonferroni-corrected over every
entity tested. Flagged: corrected p < ALPHA and ratio >= MIN_RATIO, with at least MIN_EXPOSURE (smaller entities are
shown, not tested). A plan whose excess is its mix (more first boxes, more of a high-return product) gets a ratio
near 1 and is not flagged; a store or SKU that returns more within the same cells is. Without driver columns each
entity is compared with all the others (a two-proportion z-test). A subscription business (PROFILE contractual)
without a tenure driver (box number, month of tenure) is refused: first boxes are refunded far more often.
Output: `rates` (the cell's value: one row per entity and kind - exposure, events, rate_pct, rest_pct = the rate its
own mix has elsewhere, standardized_ratio, excess, p_corrected, tested, flagged), `flags` (the flagged rows), `cells`
(entity x driver cell: its rate and the others' rate there) and `assumed` (the facts used, printed as `Assumed:`).
"""

import math
import re

import pandas as pd

PROFILE = globals().get("PROFILE") or {}
alpha = float(globals().get("ALPHA") or 0.01)
min_exposure = float(globals().get("MIN_EXPOSURE") or 30)
min_ratio = float(globals().get("MIN_RATIO") or 1.5)
entity = globals().get("ITEM") or "item"
data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
if entity not in data.columns:
    raise ValueError(f"no entity column {entity!r} in {list(data.columns)}: set ITEM = '<column>' (plan, sku, store …)")
data = data.rename(columns={entity: "item"}) if entity != "item" else data
data["item"] = data["item"].astype(str)
COUNTS = [
    "orders",
    "completed",
    "shipped",
    "returned",
    "cancelled",
    "units_sold",
    "units_returned",
    "returns",
    "lines_sold",
]
MONEY = ["returned_revenue", "currency"]
strata = globals().get("STRATA")
IDS = re.compile(r"(^|_)(id|number|no)$|order|trans|invoice|charge|memo|document|line", re.I)  # never a driver
strata = (
    list(strata)
    if strata is not None
    else [c for c in data.columns if c not in ["item", *COUNTS, *MONEY] and not IDS.search(str(c))]
)
missing = [c for c in strata if c not in data.columns]
if missing:
    raise ValueError(f"STRATA {missing} are not columns of the input")
for c in strata:
    data[c] = data[c].astype(str)
warnings, assumed_parts = [], []

# the unit of a return: units where returns are line-level, else orders (charges, invoices)
if {"units_sold", "units_returned"} <= set(data.columns):
    unit, kinds = "units", {"returned": ("units_returned", "units_sold")}
elif "returned" in data.columns and ({"shipped"} <= set(data.columns) or "completed" in data.columns):
    unit = "orders"
    if "shipped" not in data.columns:
        data["shipped"] = data["completed"].astype(float) + data["returned"].astype(float)
    kinds = {"returned": ("returned", "shipped")}
else:
    unit, kinds = "orders", {}
if {"cancelled", "orders"} <= set(data.columns):
    kinds["cancelled"] = ("cancelled", "orders")
if not kinds:
    raise ValueError("give units_sold + units_returned, or shipped (or completed) + returned, or orders + cancelled")
present = [c for c in COUNTS if c in data.columns]
data[present] = data[present].astype(float)
grain = str(PROFILE.get("returns_grain") or "").lower()
if grain in ("line", "units", "unit") and unit != "units":
    warnings.append(
        "WARNING: PROFILE says returns are line-level (credit notes with quantities) but the input counts orders: "
        "feed units_sold and units_returned, or a partly returned order counts as wholly returned"
    )
assumed_parts.append(
    f"returns counted in {unit}" + (" (units returned / units sold: line-level returns)" if unit == "units" else "")
)

# subscriptions: the first box / month is refunded far more often - tenure must be a driver
contractual = PROFILE.get("contractual")
tenure_like = [c for c in strata if re.search(r"box|tenure|cycle|first|month|renewal|invoice_n", c, re.I)]
if contractual is True and not tenure_like and "returned" in kinds:
    raise ValueError(
        "REFUSED: PROFILE says the business is contractual (subscriptions) and no tenure driver is given: first "
        "boxes / first months are refunded far more often, so a plan with more new subscribers looks worse. Add a "
        "column such as box (1, 2, 3+) or tenure_month (1 vs later) to the input (it is standardised on)."
    )
if contractual is None:
    warnings.append(
        "WARNING: PROFILE['contractual'] is unknown (run business-profile first): for subscriptions, standardise on "
        "box number / month of tenure"
    )
assumed_parts.append(
    f"contractual = {contractual} (PROFILE)" + (f", tenure driver {', '.join(tenure_like)}" if tenure_like else "")
)

# revenue: one currency, or converted with PROFILE's rates
revenue = None
if "returned_revenue" in data.columns:
    money = data["returned_revenue"].astype(float)
    reporting = PROFILE.get("reporting_currency")
    if "currency" in data.columns and data["currency"].nunique() > 1:
        fx = PROFILE.get("fx") or globals().get("FX") or {}
        codes = sorted(data["currency"].astype(str).unique())
        lacking = [c for c in codes if c != reporting and c not in fx]
        if not reporting or lacking:
            warnings.append(
                f"WARNING: returned revenue is in {', '.join(codes)} and the reporting currency or FX rates are "
                f"unknown (PROFILE reporting_currency {reporting!r}, fx lacks {lacking}): revenue is not totalled"
            )
            money = None
        else:
            money = money * data["currency"].astype(str).map(lambda c: 1.0 if c == reporting else float(fx[c]))
            assumed_parts.append(f"revenue converted to {reporting} at PROFILE fx {fx}")
    elif "currency" in data.columns:
        assumed_parts.append(f"revenue in {data['currency'].iloc[0]}")
    elif len(PROFILE.get("currencies") or []) > 1:
        warnings.append(
            f"WARNING: the business has {PROFILE['currencies']} and the input has no currency column: returned "
            f"revenue is assumed already in {reporting or 'one currency (UNKNOWN which)'}"
        )
    if money is not None:
        revenue = money.groupby(data["item"]).sum()


def upper_p(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


grouped = data.groupby(["item", *strata], as_index=False)[present].sum()
counted = unit == "units" and "returns" in data.columns and data["returns"].sum() > 0
lots = float(data["units_returned"].sum() / data["returns"].sum()) if counted else 1.0
if counted:  # a credit memo or return line credits several units: the independent events are the returns
    assumed_parts.append(
        f"a return credits {lots:.1f} units on average: the test counts returns ("
        + ("per line sold" if "lines_sold" in data.columns else "units / the entity's units per return, quasi-Poisson")
        + "), the ratio is in units"
    )
elif unit == "units":
    warnings.append(
        "NOTE: no `returns` column (return lines / credit memos): each returned unit is tested as an independent "
        "event - if returns credit several units at once, give `returns` or the test is too confident"
    )
items = list(grouped["item"].unique())


def expect(mine, others, event, base_col):
    """The entity's expected events at the others' rate in each of its driver cells (indirect standardisation)."""
    overall = others[event].sum() / max(others[base_col].sum(), 1)
    ref = others.groupby(strata)[[event, base_col]].sum()
    ref_rate = ref[event] / ref[base_col].where(ref[base_col] > 0)
    own = mine.groupby(strata)[[event, base_col]].sum()
    rate_here = ref_rate.reindex(own.index).to_numpy(dtype=float)
    fallback = float(own[base_col][pd.isna(rate_here)].sum())
    rate_here = pd.Series(rate_here, index=own.index).fillna(overall)
    return float((own[base_col] * rate_here).sum()), rate_here, fallback, own


def compare(excluded):
    """Every entity against the others in its own driver cells (the entities in `excluded[kind]` left out of the
    reference: a known outlier does not inflate the others' expected rates)."""
    rows, cell_rows, notes = [], [], []
    for kind, (event, base_col) in kinds.items():
        totals = grouped.groupby("item")[[event, base_col]].sum()
        testable = [i for i in items if totals.loc[i, base_col] >= min_exposure]
        for item in items:
            mine = grouped[grouped["item"] == item]
            others = grouped[(grouped["item"] != item) & ~grouped["item"].isin(excluded.get(kind, ()))]
            n1, observed = float(mine[base_col].sum()), float(mine[event].sum())
            if n1 <= 0:
                continue
            overall = others[event].sum() / max(others[base_col].sum(), 1)
            lot = 1.0  # units per return: a memo crediting 20 units is one event (quasi-Poisson scale)
            if counted and kind == "returned":
                own_returns = float(mine["returns"].sum())
                lot = max(1.0, observed / own_returns if own_returns > 0 else lots)
            if strata:
                expected, rate_here, fallback, own = expect(mine, others, event, base_col)
                for key, cell in own.iterrows():
                    key = key if isinstance(key, tuple) else (key,)
                    cell_rows.append(
                        {
                            "item": item,
                            "kind": kind,
                            **dict(zip(strata, key, strict=True)),
                            "exposure": cell[base_col],
                            "events": cell[event],
                            "rate_pct": round(100 * cell[event] / max(cell[base_col], 1e-9), 2),
                            "others_pct": round(100 * rate_here[key if len(key) > 1 else key[0]], 2),
                        }
                    )
                if fallback > 0.1 * n1:
                    notes.append(
                        f"WARNING: {item}: {fallback:.0f} of its {n1:.0f} {unit} are in cells no other entity has "
                        "(compared with the overall rate there)"
                    )
            else:
                expected = n1 * overall
            tested = item in testable and expected > 0
            row = {
                "item": item,
                "kind": kind,
                "unit": unit,
                "exposure": n1,
                "events": round(observed),
                "rate_pct": round(100 * observed / n1, 2),
                "rest_pct": round(100 * expected / n1, 2),  # the rate its own mix has among the others
                "standardized_ratio": round(observed / expected, 2) if expected > 0 else float("nan"),
                "excess": round(observed - expected, 1),
                "tested": tested,
                "p": float("nan"),
            }
            if tested and strata:
                from scipy import stats

                k, mu = observed / lot, expected / lot  # returns observed against returns expected
                if counted and kind == "returned" and "lines_sold" in grouped.columns:  # returns per line sold
                    k, mu = float(mine["returns"].sum()), expect(mine, others, "returns", "lines_sold")[0]
                row["p"] = float(stats.gamma.cdf(mu, k)) if k > 0 and mu > 0 else 1.0  # = P(Poisson >= k), exact
            elif tested:  # two-proportion z-test against all the others
                n2, x2 = float(others[base_col].sum()), float(others[event].sum())
                pooled = (observed + x2) / (n1 + n2)
                se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2)) if 0 < pooled < 1 and n2 > 0 else 0.0
                se = se * math.sqrt(lot)
                row["z"] = round((observed / n1 - x2 / max(n2, 1)) / se, 2) if se else 0.0
                row["p"] = upper_p(row["z"])
            rows.append(row)
    rates = pd.DataFrame(rows)
    rates["reference"] = [
        "the others" + (f" except {', '.join(sorted(excluded[k] - {i}))}" if excluded.get(k, set()) - {i} else "")
        for i, k in zip(rates["item"], rates["kind"], strict=True)
    ]
    comparisons = int(rates.tested.sum()) if len(rates) else 0
    rates["p_corrected"] = (rates.p * comparisons).clip(upper=1.0)
    rates["flagged"] = rates.tested & (rates.p_corrected < alpha) & (rates.standardized_ratio >= min_ratio)
    return rates, pd.DataFrame(cell_rows), notes, comparisons


rates, cells, notes, comparisons = compare({})
outliers = {k: set(rates[rates.flagged & (rates.kind == k)].item) for k in kinds}
if any(outliers.values()):  # once more, the flagged entities left out of everyone's reference
    rates, cells, notes, comparisons = compare(outliers)
warnings += list(dict.fromkeys(notes))
if unit == "orders":
    rates["orders"] = rates.exposure.astype(int)
    rates["excess_orders"] = rates.excess
if entity != "item":
    rates[entity] = rates["item"]
if entity != "item" and len(cells):
    cells[entity] = cells["item"]
flags = rates[rates.flagged].reset_index(drop=True)
if revenue is not None:
    flags = flags.assign(returned_revenue=flags.item.map(revenue).where(flags.kind == "returned"))
small = rates[~rates.tested].item.unique().tolist()

assumed_parts.append(
    (f"standardised on {' x '.join(strata)} (indirect standardisation)" if strata else "no driver columns")
    + f"; minimum exposure {min_exposure:.0f} {unit}; Bonferroni over {comparisons} tests; flagged at ratio >= "
    f"{min_ratio} and corrected p < {alpha}"
)
assumed = "Assumed: " + "; ".join(assumed_parts)
for line in warnings:
    print(line)
print(assumed)
if strata:
    within = f"{' x '.join(strata)} cells" if len(strata) > 1 else strata[0] + ("es" if strata[0][-1] in "sx" else "s")
    print(
        f"Method: each item against the other items within the same {within} (indirect standardization: "
        "the rest_pct column is the rate its own mix has elsewhere; an exact Poisson test of the excess, "
        f"Bonferroni-corrected over {comparisons} comparisons)"
    )
for kind, (event, base_col) in kinds.items():
    total = grouped[[event, base_col]].sum()
    print(f"{kind} {100 * total[event] / max(total[base_col], 1):.1f} % of {base_col} ({comparisons} comparisons)")
if small:
    print(f"too small to test (< {min_exposure:.0f} {unit}), not flagged: {', '.join(map(str, small[:20]))}")
if len(flags):
    print("above their mix beyond chance:")
    print(flags.drop(columns=["p"]).to_string(index=False))
else:
    print("no item returns or cancels more than its mix explains, beyond chance")
rates  # noqa: B018 - the cell's value
