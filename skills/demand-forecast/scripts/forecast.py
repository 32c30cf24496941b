"""Forecast chosen by a rolling-origin backtest against a seasonal-naive reference, intervals from its own errors.

Input: SOURCE, either `periods` from scripts/periods.py (the business's own calendar: fiscal weeks, 4-5-4 periods per
week, months; partial periods flagged and left out; `ahead` the periods to forecast), or a monthly series (a month
column: `month`, else the first; a value column: `value`, else VALUE, else the second - query_metrics' first metric;
every month complete). Optional: HORIZON (12 months / 13 weeks / 12 periods), MAX_ERROR_PCT (25), MIN_ONE_OFF (0.25).
Method: one-offs replaced first (a growth on the same period a year before far from every other period's and not kept
the next year), so a spike is not learned as seasonality; seasonality claimed with two full seasons only; a moved peak
(seasonal break) looked for; ETS, seasonal naive x growth and their average against the seasonal-naive reference in a
rolling-origin backtest, the lowest error chosen, intervals calibrated on its own errors (Hyndman & Athanasopoulos,
Forecasting: Principles and Practice). ALWAYS an answer: too short for a seasonal method, or an error above the bar,
gives the best plain method (mean of the recent periods, the last one, or the seasonal naive, by its own backtest)
labelled FALLBACK with the reason.
Output: `outlook` (always: period, start, end, forecast, lo80, hi80, lo95, hi95, method, basis; `month` first for
months, `weeks` for fiscal periods - the cell's value), `forecast` (the same when planning grade; empty when the error
is above the bar: the model's numbers in `candidate`), `periods` (the history with value_used, yoy_pct, flag, note),
`flagged` (its rows with a flag: partial, one-off, 53-week), `backtest` (error by horizon and method),
`backtest_summary` (method, role: chosen / candidate / reference / plain, mape_pct), `method`, `chosen_mape`,
`reference_mape`, `model_mape`, `naive_mape`, `coverage80`, `coverage95`, `seasonal`, `broken`, `reliable`, `assumed`.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.tsa.exponential_smoothing.ets import ETSModel

PROFILE = globals().get("PROFILE") or {}
assumed = []


class Refused(Exception):
    pass


def refuse(why):
    raise Refused("REFUSED: " + why)


data = SOURCE if isinstance(SOURCE, pd.DataFrame) else load_artifact(SOURCE)  # noqa: F821 - run_python's
if {"period", "start", "complete", "grain"} <= set(data.columns):  # periods.py's table
    table = data.reset_index(drop=True).copy()
    table["start"], table["end"] = pd.to_datetime(table.start), pd.to_datetime(table.end)
    grain = str(table.grain.iloc[0])
    ahead = globals().get("ahead")
    if not isinstance(ahead, pd.DataFrame):
        refuse("SOURCE is a periods table but `ahead` is missing: run scripts/periods.py in this session first")
    assumed.append(f"{grain} periods from periods.py")
else:  # a monthly series: every month complete (drop a month under way before)
    grain = "month"
    month_column = "month" if "month" in data.columns else data.columns[0]
    value_column = globals().get("VALUE")
    if value_column not in data.columns:
        if value_column is not None:
            print(f"WARNING: VALUE = {value_column!r} is not a column of SOURCE (left from another cell?): ignored")
        value_column = "value" if "value" in data.columns else data.columns[1]
    series0 = pd.Series(
        data[value_column].astype(float).values, index=pd.DatetimeIndex(pd.to_datetime(data[month_column]))
    )
    series0 = series0.asfreq("MS")
    if series0.isna().any():
        refuse("the series has missing months: fill or explain them first")
    table = pd.DataFrame({"period": series0.index.strftime("%Y-%m"), "start": series0.index, "value": series0.values})
    table["end"] = table.start + pd.offsets.MonthEnd(0)
    table["complete"], table["weeks"], table["per_week"], table["flag"], table["note"] = True, np.nan, np.nan, "", ""
    starts = pd.date_range(table.start.iloc[-1] + pd.offsets.MonthBegin(1), periods=60, freq="MS")
    ahead = pd.DataFrame({"period": starts.strftime("%Y-%m"), "start": starts, "end": starts + pd.offsets.MonthEnd(0)})
    ahead["weeks"] = np.nan
    if len(table) >= 7 and table.value.iloc[-1] < 0.6 * table.value.iloc[-7:-1].median():
        print(
            f"WARNING: the last month ({table.period.iloc[-1]}) is far below the six before it: if it is not complete, "
            "drop it (or build the series with periods.py, which sees its days)"
        )
    assumed.append("calendar months, each complete (a monthly series as given)")
    if (PROFILE.get("fiscal_calendar") or {}).get("kind") in ("4-5-4", "4-4-5", "5-4-4"):
        print(
            "WARNING: PROFILE's fiscal calendar is a week calendar but SOURCE is calendar months: build the periods "
            "with scripts/periods.py (fiscal weeks or periods) unless months are what the business plans in"
        )
ahead = ahead.assign(start=pd.to_datetime(ahead.start), end=pd.to_datetime(ahead.end))
complete = table[table.complete.astype(bool)]
per_week = grain == "fiscal_period"  # periods of 4 and 5 weeks (a 53-week P12 of 5): forecast per week
m = 52 if grain == "week" else 12  # a season: 52 weeks or 12 periods
k = 13 if grain == "week" else 12  # the recent window for growth and the plain mean
horizon = int(globals().get("HORIZON") or (13 if grain == "week" else 12))
series = pd.Series(
    (complete.value / complete.weeks if per_week else complete.value).astype(float).to_numpy(),
    index=pd.DatetimeIndex(complete.start),
)
labels = complete.period.tolist()
n = len(series)
if n < 3:
    refuse(f"{n} complete periods: too few for any forecast with a backtest")
if not (series > 0).all():
    refuse(f"{int((series <= 0).sum())} periods are zero or below: the methods compare periods by ratios")
seasonal = n >= 2 * m
unit = "months" if grain == "month" else ("weeks" if grain == "week" else "fiscal periods")

# ------------------------------------------------------------------------------------------------ one-offs
# One-offs (a spike, a double load, a glitch the query did not remove): a period whose growth on the same period a
# year before is far from every other period's (pooled: 3.5 robust deviations, and at least MIN_ONE_OFF) and which
# the next year does not confirm (its growth out of it is far the other way: the level came back), or which is in
# the last season (no year after it yet). A jump the next year keeps is a level shift, not a one-off. It is replaced
# by the same period a year before times the median growth, so it is neither learned as seasonality nor repeated.
# Without a year before (under two seasons): 5 robust deviations from the median of the 5 periods around it.
MAX_SEASONAL_SMOOTHING = 0.1
min_one_off = float(globals().get("MIN_ONE_OFF", 0.25))  # a one-off is at least 25 % off its expected value


def one_offs(y: pd.Series, skip_last_season: bool = False) -> dict[int, float]:
    logs = np.log(y.to_numpy())
    size = len(logs)
    floor = np.log(1 + min_one_off)
    if size < 2 * m:
        if size < 7:
            return {}
        local = pd.Series(logs).rolling(5, center=True, min_periods=3).median().to_numpy()
        resid = logs - local
        scale = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
        bar = max(5 * scale, floor)
        return {i: float(np.exp(local[i])) for i in range(size) if abs(resid[i]) > bar}
    growth = logs[m:] - logs[:-m]  # growth[t - m]: into t from a year before
    centre = float(np.median(growth))
    spread = 1.4826 * float(np.median(np.abs(growth - centre)))
    bar = max(3.5 * spread, floor)

    work = logs.copy()  # a one-off replaced as found: the growth out of it a year on is then not one

    def far(t):  # the growth into t, far: +1 up, -1 down, 0 not
        if t < m or t >= size:
            return 0
        d = work[t] - work[t - m] - centre
        return int(np.sign(d)) if abs(d) > bar else 0

    def counts_noise(t, e):  # small counts: a one-off must also be beyond 4 Poisson deviations of its expectation
        return abs(np.exp(logs[t]) - e) <= 4 * np.sqrt(e)

    found = {}
    for t in range(size):
        if skip_last_season and t >= size - m:
            continue
        into, out = far(t), far(t + m)
        if into and (t + m >= size or out == -into):  # up (or down) and back, or not yet seen a year on
            expected = float(np.exp(work[t - m] + centre))
        elif t < m and out and t + 2 * m < size and not far(t + 2 * m):  # the first season, odd against the rest
            expected = float(np.exp(work[t + m] - centre))
        else:
            continue
        if not counts_noise(t, expected):
            found[t], work[t] = expected, np.log(expected)
    return found


def ets_fit(y: pd.Series, season: bool):
    """Additive ETS with a damped trend; a season (12 periods) that changes slowly when there are two."""
    options = {
        "seasonal": "add",
        "seasonal_periods": m,
        "bounds": {"smoothing_seasonal": (1e-4, MAX_SEASONAL_SMOOTHING)},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = pd.Series(np.asarray(y, dtype=float))  # positions, not dates: fiscal periods have no frequency
        model = ETSModel(values, error="add", trend="add", damped_trend=True, **(options if season else {}))
        return model.fit(disp=False)


def ets(y: pd.Series, steps: int) -> np.ndarray:
    return np.asarray(ets_fit(y, season=m == 12 and len(y) >= 2 * m).forecast(steps))


def unusual(y: pd.Series, pooled: bool = False) -> tuple[list[int], float]:
    """The positions among the last season whose growth on the same period a year before is far from the others'
    (3.5 robust deviations: of the last season's growths, or ``pooled`` of every year's), and the median growth."""
    vals = y.to_numpy()
    yearly = np.log(vals[m:] / vals[:-m])
    centre = float(np.median(yearly[-m:]))
    scale = yearly if pooled else yearly[-m:]
    spread = 1.4826 * float(np.median(np.abs(scale - np.median(scale))))
    far = [i for i in range(len(vals) - m, len(vals)) if spread > 0 and abs(yearly[i - m] - centre) > 3.5 * spread]
    return far, centre


def seasonal_break(y: pd.Series) -> str:
    """A moved peak in the last season: two or more periods far off their growth, some up and some down."""
    if len(y) < 3 * m:
        return ""
    far, centre = unusual(y, pooled=True)
    vals = y.to_numpy()
    moves = {i: float(np.log(vals[i] / vals[i - m])) - centre for i in far}
    up, down = [i for i, v in moves.items() if v > 0], [i for i, v in moves.items() if v < 0]
    if not (up and down):
        return ""
    name = lambda i: f"{y.index[i]:%b %Y}" if grain == "month" else labels[i]  # noqa: E731
    return (
        f"SEASONAL BREAK: the pattern moved in the last {m} {unit} ({', '.join(name(i) for i in down)} far below, "
        f"{', '.join(name(i) for i in up)} far above their growth on the year before)"
    )


def seasonal_naive(y: pd.Series, steps: int, keep_last_year: bool = False, growth_on: bool = True) -> np.ndarray:
    """The same period a year earlier times the growth of the last k periods on the same k a year before (12
    months: the year's growth; 13 weeks: the quarter's). A one-off in the last season is first replaced by what
    that growth says, unless the last season is a new regime (``keep_last_year``)."""
    vals = y.to_numpy().copy()
    growth = vals[-k:].sum() / vals[-m - k : -m].sum() if growth_on else 1.0
    if not keep_last_year and len(y) >= 2 * m:
        far, centre = unusual(y)
        for i in far:
            vals[i] = vals[i - m] * np.exp(centre)
    last = vals[-m:]
    return np.array([last[h % m] * growth ** (1 + h // m) for h in range(steps)])


def main_methods(y: pd.Series, steps: int) -> dict[str, np.ndarray]:
    model, naive = ets(y, steps), seasonal_naive(y, steps)
    return {"ETS": model, "seasonal naive x growth": naive, "average of the two": (model + naive) / 2}


def plain_methods(y: pd.Series, steps: int) -> dict[str, np.ndarray]:
    out = {
        f"mean of the last {k}": np.repeat(y.iloc[-k:].mean(), steps),
        "naive (last period)": np.repeat(y.iloc[-1], steps),
    }
    if len(y) >= m:
        out["seasonal naive"] = seasonal_naive(y, steps, keep_last_year=True, growth_on=False)
    return out


# the history the methods see: one-offs replaced (the raw values stay in `periods`)
broken = seasonal_break(series) if seasonal else ""
spikes = one_offs(series, skip_last_season=bool(broken))  # after a moved peak the last season is the new regime
clean = series.copy()
for i, expected_value in spikes.items():
    clean.iloc[i] = expected_value
    row = complete.index[i]
    scale = table.weeks[row] if per_week else 1.0
    table.loc[row, "flag"] = (table.flag[row] + " one-off").strip()
    table.loc[row, "note"] += (
        f"one-off: {series.iloc[i] * scale:,.0f} replaced by its expected {expected_value * scale:,.0f}"
    )
    print(
        f"ONE-OFF replaced: {labels[i]} {series.iloc[i] * scale:,.0f} against an expected {expected_value * scale:,.0f} "
        "(its growth on the year before far from every other period's) - not learned as seasonality, not repeated"
    )
table["value_used"] = np.nan
table.loc[complete.index, "value_used"] = clean.to_numpy() * (complete.weeks.to_numpy() if per_week else 1.0)
if seasonal:
    print(f"seasonality: claimed from {n / m:.1f} seasons of {m} periods")
else:
    print(f"seasonality: NOT claimed - {n} complete periods, a seasonal method needs {2 * m} (two seasons)")

# ------------------------------------------------------------------------------------------------ backtest
MAX_ERROR = float(globals().get("MAX_ERROR_PCT", 25))
min_train = m + k if seasonal else max(3, min(k, n // 2))
first_origin = max(min_train, n - 18)
origins = list(range(first_origin, n))
rows = []
use_main = seasonal and len(origins) >= 6
if len(origins) >= 3:
    for origin in origins:
        steps = min(horizon, n - origin)
        actual = clean.iloc[origin : origin + steps].to_numpy()
        found = {
            **(main_methods(clean.iloc[:origin], steps) if use_main else {}),
            **plain_methods(clean.iloc[:origin], steps),
        }
        for name, predicted in found.items():
            for h in range(steps):
                rows.append((name, origin, h + 1, actual[h], predicted[h]))
backtest_rows = pd.DataFrame(rows, columns=["method", "origin", "h", "actual", "predicted"])
MAIN = ["ETS", "seasonal naive x growth", "average of the two"]
PLAIN = [c for c in backtest_rows.method.unique() if c not in MAIN]
reference_name = "seasonal naive" if seasonal else "naive (last period)"


def spread(h: int, used: pd.DataFrame) -> tuple[float, int]:
    widths = []
    for j in range(1, h + 1):
        near = used.log_error[(used.h >= j - 1) & (used.h <= j + 1)]
        widths.append((float(np.sqrt((near**2).mean())) if len(near) else np.nan, len(near)))
    return np.nanmax([w for w, _ in widths]), widths[-1][1]


def band(h: int, level: float, used: pd.DataFrame) -> float:
    sd, count = spread(h, used)
    return float(stats.t.ppf(0.5 + level / 2, max(count - 1, 1)) * sd)


def future_of(name: str) -> np.ndarray:
    if name in MAIN:
        return main_methods(clean, horizon)[name]
    return plain_methods(clean, horizon)[name]


def name_of(i):
    return f"{series.index[i]:%Y-%m}" if grain == "month" else labels[i]


model_mape = naive_mape = reference_mape = chosen_mape = float("nan")
coverage80 = coverage95 = float("nan")
backtest, backtest_summary = pd.DataFrame(), pd.DataFrame(columns=["method", "role", "mape_pct"])
candidate = candidate_point = None
if not len(backtest_rows) and not seasonal:
    refuse(f"{n} complete periods: too few for a backtest of even a plain forecast")
if len(backtest_rows):
    backtest_rows["ape"] = 100 * (backtest_rows.actual - backtest_rows.predicted).abs() / backtest_rows.actual
    backtest_rows["log_error"] = np.log(backtest_rows.actual / backtest_rows.predicted)
    mape_by_method = backtest_rows.groupby("method").ape.mean()
    backtest = backtest_rows.pivot_table(index="h", columns="method", values="ape", aggfunc="mean").round(1)
    pool = [x for x in [*MAIN, reference_name] if x in mape_by_method.index] if use_main else []
    reference_mape = float(mape_by_method.get(reference_name, np.nan))
    if use_main:
        model_mape = float(mape_by_method["ETS"])
        naive_mape = float(mape_by_method["seasonal naive x growth"])
    print(
        f"backtest: {len(origins)} origins ({name_of(origins[0])} to {name_of(origins[-1])}), each forecasting up to "
        f"{horizon} {unit} ahead; mean absolute % error: "
        + "; ".join(f"{name} {v:.1f} %" for name, v in mape_by_method.sort_values().items())
    )
    if not use_main:
        why = (
            f"{n} complete periods, a seasonal method needs {2 * m}"
            if not seasonal
            else f"{len(origins)} origins with {m + k} periods before them (fewer than 6)"
        )
        print(f"seasonal methods not run: {why}; the forecast is the best plain method's, labelled as such")
    method = str(mape_by_method[pool].idxmin()) if pool else None
    if broken:
        method = "seasonal naive x growth"
        print(broken)
        print(
            f"chosen: seasonal naive x growth on the last {m} periods' pattern (the regime after the break); the "
            "backtest above spans the break and does not judge it: read the forecast as that pattern repeated"
        )
    elif method:
        print(f"chosen: {method} (the lowest backtest error; reference seasonal naive {reference_mape:.1f} %)")
    chosen_mape = float(mape_by_method[method]) if method else float("nan")
    reliable = bool(method) and bool(broken or not chosen_mape > MAX_ERROR)
    basis = "backtested"
    if method and not reliable:
        candidate_point = future_of(method)
        print(
            f"NO FORECAST: the best method's backtest error is {chosen_mape:.1f} %, above the {MAX_ERROR:g} % bar "
            "(MAX_ERROR_PCT) - this history does not predict its next periods well enough to plan on; look for a "
            "break the check did not see (a new product, a lost customer, a changed calendar); the numbers are in "
            "`candidate`, the plain fallback below in `outlook`"
        )
    if not reliable:  # the best defensible plain forecast, by its own backtest
        best_plain = str(mape_by_method[PLAIN].idxmin())
        fallback_of = method
        method = best_plain
        chosen_mape = float(mape_by_method[method])
        basis = f"FALLBACK: {method} (backtest error {chosen_mape:.1f} %)" + (
            f" - the best model erred {float(mape_by_method[fallback_of]):.1f} % > {MAX_ERROR:g} %"
            if fallback_of
            else f" - {why}"
        )
        print(basis)
    errors = backtest_rows[backtest_rows.method == method]
    inside = {0.8: [], 0.95: []}
    for origin, own in errors.groupby("origin"):
        others = errors[errors.origin != origin]
        for level in inside:
            for h, log_error in zip(own.h, own.log_error, strict=True):
                inside[level].append(abs(log_error) <= band(int(h), level, others))
    coverage80, coverage95 = (float(100 * np.mean(inside[level])) for level in (0.8, 0.95))
    print(
        f"intervals from the backtest's own errors: the 80 % ones covered {coverage80:.0f} % and the 95 % ones "
        f"{coverage95:.0f} % of the {len(errors)} backtest {unit} (each origin judged by the others' errors)"
    )
    point = seasonal_naive(clean, horizon, keep_last_year=True) if broken else future_of(method)
    bands = {level: np.array([band(h, level, errors) for h in range(1, horizon + 1)]) for level in (0.8, 0.95)}
    lo80, hi80 = point * np.exp(-bands[0.8]), point * np.exp(bands[0.8])
    lo95, hi95 = point * np.exp(-bands[0.95]), point * np.exp(bands[0.95])
    roles = {
        x: ("chosen" if x == method else "reference" if x == reference_name else "candidate" if x in MAIN else "plain")
        for x in mape_by_method.index
    }
    backtest_summary = (
        pd.DataFrame(
            {
                "method": mape_by_method.index,
                "role": [roles[x] for x in mape_by_method.index],
                "mape_pct": mape_by_method.round(1).to_numpy(),
            }
        )
        .sort_values("mape_pct")
        .reset_index(drop=True)
    )
    if candidate_point is not None:
        candidate = candidate_point
else:  # a seasonal model without enough origins for a backtest (24-29 months): the model's own intervals
    method, basis, reliable = "ETS", "UNCHECKED: no backtest", True
    print(
        f"backtest skipped: {n} months leave fewer than 6 origins with two years before them (it needs "
        "30); the forecast is the ETS model's, its intervals the model's own, not checked against its errors"
    )
    if broken:
        print(broken + "; the history is too short to refit after it: the model below spans the break")
    fitted = ets_fit(clean, season=True)
    frames = {a: fitted.get_prediction(start=n, end=n + horizon - 1).summary_frame(alpha=a) for a in (0.2, 0.05)}
    point = frames[0.2]["mean"].to_numpy()
    lo80, hi80 = frames[0.2]["pi_lower"].to_numpy(), frames[0.2]["pi_upper"].to_numpy()
    lo95, hi95 = frames[0.05]["pi_lower"].to_numpy(), frames[0.05]["pi_upper"].to_numpy()

# ------------------------------------------------------------------------------------------------ the answer
ahead = ahead[ahead.start > complete.end.iloc[-1]].head(horizon).reset_index(drop=True)
if len(ahead) < horizon:
    refuse(f"`ahead` holds {len(ahead)} periods, fewer than HORIZON = {horizon}")
scale = ahead.weeks.to_numpy() if per_week else np.ones(horizon)


def _table(p, a80, b80, a95, b95, name, why):
    out = pd.DataFrame(
        {
            "period": ahead.period,
            "start": ahead.start.dt.strftime("%Y-%m-%d"),
            "end": ahead.end.dt.strftime("%Y-%m-%d"),
            "forecast": np.round(p * scale, 2),
            "lo80": np.round(a80 * scale, 2),
            "hi80": np.round(b80 * scale, 2),
            "lo95": np.round(a95 * scale, 2),
            "hi95": np.round(b95 * scale, 2),
            "method": name,
            "basis": why,
        }
    )
    if grain == "month":
        out.insert(0, "month", ahead.start.dt.strftime("%Y-%m"))
    if per_week:
        out.insert(3, "weeks", ahead.weeks.astype(int))
    return out


outlook = _table(point, lo80, hi80, lo95, hi95, method, basis)
forecast = outlook.copy() if reliable else outlook.iloc[0:0]
if candidate is not None:
    candidate = _table(candidate, candidate, candidate, candidate, candidate, "candidate", "above the error bar")
for c in ("days", "days_in_period", "yoy_pct"):
    table[c] = table.get(c, np.nan)
periods = table.assign(start=table.start.dt.strftime("%Y-%m-%d"), end=table.end.dt.strftime("%Y-%m-%d"))[
    [
        "period",
        "start",
        "end",
        "days",
        "days_in_period",
        "complete",
        "weeks",
        "value",
        "value_used",
        "per_week",
        "yoy_pct",
        "flag",
        "note",
    ]
]
flagged = periods[periods.flag != ""].reset_index(drop=True)

history = clean.to_numpy() * (complete.weeks.to_numpy() if per_week else 1.0)
span = min(m, horizon, len(history))
last_season = history[-m:].sum() if len(history) >= m else float("nan")
same_ahead = history[-m:][:span] if len(history) >= m else None
print(
    f"next {horizon} {unit} ({method}): {outlook.forecast.sum():,.0f}, "
    f"{outlook.forecast.mean():,.1f} a period"
    + (f"; the same {span} a year before: {same_ahead.sum():,.0f}" if same_ahead is not None else "")
    + (
        f" ({100 * (outlook.forecast.iloc[:span].sum() / same_ahead.sum() - 1):+.1f} %)"
        if same_ahead is not None
        else ""
    )
    + (
        f"; the last {m} grew {100 * (last_season / history[-2 * m : -m].sum() - 1):+.1f} % on the {m} before"
        if len(history) >= 2 * m
        else ""
    )
)
assumed_line = "Assumed: " + "; ".join(assumed)
print(assumed_line)
print(outlook.to_string(index=False))

fig, ax = plt.subplots(figsize=(10, 4.5))
ax.plot(pd.to_datetime(complete.start), history, label="history (one-offs replaced)")
ax.plot(pd.to_datetime(outlook.start), outlook.forecast, label=f"forecast ({method})")
ax.fill_between(pd.to_datetime(outlook.start), outlook.lo95, outlook.hi95, alpha=0.2, label="95 % interval")
ax.set_title(f"{grain.replace('_', ' ')} forecast")
ax.legend()
outlook  # noqa: B018 - the cell's value
