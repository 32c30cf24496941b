"""Monthly forecast chosen by a rolling-origin backtest, with intervals calibrated on its own errors.

Input: SOURCE, the id of a table artifact with a month column (dates: `month`, else the first column) and
a value column (`value`, else VALUE names it, else the second column: query_metrics' first metric);
optional HORIZON (months ahead, default 12). Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: the forecast table (month, forecast, lo80, hi80, lo95, hi95) as the cell's value; `backtest` (error
of each method by horizon), `method` (the one chosen), `coverage80` / `coverage95` (how often the backtest's
actual months fell inside the intervals), `model_mape` (the ETS model's) and `naive_mape` (the benchmark's),
`broken` (a seasonal break found: '' when none), `reliable` (False: no forecast, its backtest error is above
MAX_ERROR_PCT, default 25; the numbers are then in `candidate`).
Method (said in the output): a seasonal break in the last 12 months (a peak that moved) is looked for first;
after one, the last year's pattern is the regime that holds and is repeated at its growth. Otherwise the method
with the lowest rolling-origin backtest error is chosen, and no forecast is given when even that error is above
the bar (Hyndman & Athanasopoulos, Forecasting: Principles and Practice, on evaluating and refusing forecasts).
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.tsa.exponential_smoothing.ets import ETSModel

horizon = int(globals().get("HORIZON", 12))
data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
month_column = "month" if "month" in data.columns else data.columns[0]
value_column = globals().get("VALUE") or ("value" if "value" in data.columns else data.columns[1])
series = pd.Series(
    data[value_column].astype(float).values, index=pd.DatetimeIndex(pd.to_datetime(data[month_column]))
)
series = series.asfreq("MS")
assert series.notna().all(), "the series has missing months: fill or explain them first"
assert len(series) >= 24, f"{len(series)} months: a seasonal model needs at least 24"
assert (series > 0).all(), "the methods compare months by ratios: every month must be above zero"

# The seasonal pattern may change only slowly: one unusual month must not become next year's peak (an
# unbounded fit gave gamma = 0.66 and turned one noisy May into a forecast May peak the data does not have).
MAX_SEASONAL_SMOOTHING = 0.1


def ets_fit(y: pd.Series):
    """Additive ETS: damped trend, 12-month seasonality that changes slowly."""
    model = ETSModel(
        y,
        error="add",
        trend="add",
        damped_trend=True,
        seasonal="add",
        seasonal_periods=12,
        bounds={"smoothing_seasonal": (1e-4, MAX_SEASONAL_SMOOTHING)},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(disp=False)


def ets(y: pd.Series, steps: int) -> np.ndarray:
    return np.asarray(ets_fit(y).forecast(steps))


def unusual_months(y: pd.Series, pooled: bool = False) -> tuple[list[int], float]:
    """The positions among the last 12 months whose growth on the same month a year before is far from the
    others' (3.5 robust deviations: of the last 12 months' growths, or ``pooled`` of every year's — a steadier
    yardstick for a noisy series), and the median growth."""
    values = y.to_numpy()
    yearly = np.log(values[12:] / values[:-12])  # each month's growth on the same month a year before
    centre = float(np.median(yearly[-12:]))
    scale = yearly if pooled else yearly[-12:]
    spread = 1.4826 * float(np.median(np.abs(scale - np.median(scale))))
    far = [i for i in range(len(values) - 12, len(values)) if spread > 0 and abs(yearly[i - 12] - centre) > 3.5 * spread]
    return far, centre


def seasonal_break(y: pd.Series) -> str:
    """A seasonal break in the last 12 months: the pattern moved — two or more months far off their growth on the
    year before, some up and some down (a peak that moved from March to April), where one month far off in one
    direction is a one-off. '' when none."""
    if len(y) < 36:  # the year-on-year growths of two years at least: the yardstick of what is unusual
        return ""
    far, centre = unusual_months(y, pooled=True)
    values = y.to_numpy()
    moves = {i: float(np.log(values[i] / values[i - 12])) - centre for i in far}
    up, down = [i for i, m in moves.items() if m > 0], [i for i, m in moves.items() if m < 0]
    if not (up and down):
        return ""
    name = lambda i: f"{y.index[i]:%b %Y}"  # noqa: E731
    return (
        f"SEASONAL BREAK: the pattern moved in the last 12 months ({', '.join(name(i) for i in down)} far below, "
        f"{', '.join(name(i) for i in up)} far above their growth on the year before)"
    )


def seasonal_naive(y: pd.Series, steps: int, keep_last_year: bool = False) -> np.ndarray:
    """The benchmark: the same month a year earlier times the growth of the last 12 months over the 12 before.
    A one-off month (its growth on the year before far from the others', by 3.5 robust deviations) is first
    replaced by what the growth says it should have been, so one spike is not repeated next year — unless the
    last year is a new regime (``keep_last_year``: after a seasonal break its pattern is the one that holds)."""
    values = y.to_numpy().copy()
    growth = values[-12:].sum() / values[-24:-12].sum()
    far, centre = unusual_months(y)
    if not keep_last_year:
        for i in far:
            values[i] = values[i - 12] * np.exp(centre)
    last_year = values[-12:]
    return np.array([last_year[h % 12] * growth ** (1 + h // 12) for h in range(steps)])


def methods(y: pd.Series, steps: int) -> dict[str, np.ndarray]:
    """Every method's forecast from the data y (ETS fitted once)."""
    model, naive = ets(y, steps), seasonal_naive(y, steps)
    return {"ETS": model, "seasonal naive x growth": naive, "average of the two": (model + naive) / 2}

# Structural break first: a forecast fitted across a moved seasonal peak repeats the old one (a fiscal-year-end
# peak that moved from March to April forecast for March). After a break the last 12 months are the regime that
# holds: too short for ETS (24 months), so the forecast is the last year's pattern times its growth, and the
# backtest (before the break) cannot judge it - said so.
broken = seasonal_break(series)
MAX_ERROR = float(globals().get("MAX_ERROR_PCT", 25))  # above this backtest error no forecast is given

# Rolling-origin backtest: from each of the last 18 months that have two years before them, forecast the
# months ahead (up to the horizon) that the data has, with every method fitted on the data up to that origin.
first_origin = max(24, len(series) - 18)
origins = list(range(first_origin, len(series)))
rows = []
if len(origins) >= 6:
    for origin in origins:
        steps = min(horizon, len(series) - origin)
        actual = series.iloc[origin : origin + steps].to_numpy()
        for name, predicted in methods(series.iloc[:origin], steps).items():
            for h in range(steps):
                rows.append((name, origin, h + 1, actual[h], predicted[h]))
backtest_rows = pd.DataFrame(rows, columns=["method", "origin", "h", "actual", "predicted"])

if len(backtest_rows):
    backtest_rows["ape"] = 100 * (backtest_rows.actual - backtest_rows.predicted).abs() / backtest_rows.actual
    backtest_rows["log_error"] = np.log(backtest_rows.actual / backtest_rows.predicted)
    mape_by_method = backtest_rows.groupby("method").ape.mean()
    method = str(mape_by_method.idxmin())
    model_mape = float(mape_by_method["ETS"])
    naive_mape = float(mape_by_method["seasonal naive x growth"])
    backtest = backtest_rows.pivot_table(index="h", columns="method", values="ape", aggfunc="mean").round(1)
    print(
        f"backtest: {len(origins)} origins ({series.index[origins[0]]:%Y-%m} to {series.index[origins[-1]]:%Y-%m}), "
        f"each forecasting up to {horizon} months ahead; mean absolute % error: "
        + "; ".join(f"{name} {mape:.1f} %" for name, mape in mape_by_method.sort_values().items())
    )
    if broken:
        method = "seasonal naive x growth"
        print(broken)
        print(
            "chosen: seasonal naive x growth on the last 12 months' pattern (the regime after the break); the "
            "backtest above spans the break and does not judge it: read the forecast as that pattern repeated"
        )
    else:
        print(f"chosen: {method} (the lowest backtest error)")
    errors = backtest_rows[backtest_rows.method == method]

    def spread(h: int, used: pd.DataFrame) -> tuple[float, int]:
        """The log errors' spread at horizon h (pooled with the horizons either side), never below a nearer one."""
        widths = []
        for k in range(1, h + 1):
            near = used.log_error[(used.h >= k - 1) & (used.h <= k + 1)]
            widths.append((float(np.sqrt((near**2).mean())) if len(near) else np.nan, len(near)))
        sd = np.nanmax([w for w, _ in widths])
        return sd, widths[-1][1]

    def band(h: int, level: float, used: pd.DataFrame) -> float:
        sd, count = spread(h, used)
        return float(stats.t.ppf(0.5 + level / 2, max(count - 1, 1)) * sd)

    # Coverage: each origin's months judged with the spread of the other origins' errors only
    inside = {0.8: [], 0.95: []}
    for origin, own in errors.groupby("origin"):
        others = errors[errors.origin != origin]
        for level in inside:
            for h, log_error in zip(own.h, own.log_error):
                inside[level].append(abs(log_error) <= band(int(h), level, others))
    coverage80, coverage95 = (float(100 * np.mean(inside[level])) for level in (0.8, 0.95))
    print(
        f"intervals from the backtest's own errors: the 80 % ones covered {coverage80:.0f} % and the 95 % ones "
        f"{coverage95:.0f} % of the {len(errors)} backtest months (each origin judged by the others' errors)"
    )
    point = seasonal_naive(series, horizon, keep_last_year=True) if broken else methods(series, horizon)[method]
    bands = {level: np.array([band(h, level, errors) for h in range(1, horizon + 1)]) for level in (0.8, 0.95)}
    lo80, hi80 = point * np.exp(-bands[0.8]), point * np.exp(bands[0.8])
    lo95, hi95 = point * np.exp(-bands[0.95]), point * np.exp(bands[0.95])
else:
    method, model_mape, naive_mape = "ETS", float("nan"), float("nan")
    coverage80 = coverage95 = float("nan")
    backtest = pd.DataFrame()
    print(
        f"backtest skipped: {len(series)} months leave fewer than 6 origins with two years before them (it needs "
        "30); the forecast is the ETS model's, its intervals the model's own, not checked against its errors"
    )
    if broken:
        print(broken + "; the history is too short to refit after it: the model below spans the break")
    fitted = ets_fit(series)
    frames = {
        a: fitted.get_prediction(start=len(series), end=len(series) + horizon - 1).summary_frame(alpha=a)
        for a in (0.2, 0.05)
    }
    point = frames[0.2]["mean"].to_numpy()
    lo80, hi80 = frames[0.2]["pi_lower"].to_numpy(), frames[0.2]["pi_upper"].to_numpy()
    lo95, hi95 = frames[0.05]["pi_lower"].to_numpy(), frames[0.05]["pi_upper"].to_numpy()

chosen_mape = float(mape_by_method[method]) if len(backtest) else float("nan")
reliable = bool(broken or not chosen_mape > MAX_ERROR)
months = pd.date_range(series.index[-1] + pd.offsets.MonthBegin(1), periods=horizon, freq="MS")
forecast = pd.DataFrame(
    {
        "month": months.strftime("%Y-%m"),
        "forecast": np.round(point, 2),
        "lo80": np.round(lo80, 2),
        "hi80": np.round(hi80, 2),
        "lo95": np.round(lo95, 2),
        "hi95": np.round(hi95, 2),
    }
)
last_year = series[-12:].sum()
year_on_year = 100 * (forecast.forecast.iloc[: min(12, horizon)].to_numpy() / series[-12:].to_numpy()[: min(12, horizon)] - 1)
growth = 100 * (last_year / series[-24:-12].sum() - 1)
print(
    f"next {horizon} months ({method}): {forecast.forecast.sum():,.0f} "
    f"({100 * (forecast.forecast.sum() / last_year - 1):+.1f} % on the last 12 months, when horizon = 12; the last "
    f"12 months grew {growth:+.1f} % on the 12 before); month on the same month a year before: "
    f"{year_on_year.min():+.0f} % to {year_on_year.max():+.0f} %"
)

if not reliable:  # refused, said why: the numbers stay in `candidate` for a look, never as the forecast
    candidate = forecast
    forecast = forecast.iloc[0:0]
    print(
        f"NO FORECAST: the best method's backtest error is {chosen_mape:.1f} %, above the {MAX_ERROR:g} % bar "
        "(MAX_ERROR_PCT) - this history does not predict its next months well enough to plan on; look for a "
        "break the check did not see (a new product, a lost customer, a changed calendar), or forecast "
        "quarters; the numbers are in `candidate`"
    )

fig, ax = plt.subplots(figsize=(10, 4.5))
ax.plot(series.index, series.values, label="history")
if len(forecast):
    ax.plot(months, forecast.forecast, label=f"forecast ({method})")
    ax.fill_between(months, forecast.lo95, forecast.hi95, alpha=0.2, label="95 % interval")
ax.set_title("Monthly forecast")
ax.legend()
forecast
