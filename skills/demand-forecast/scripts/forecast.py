"""Monthly forecast with prediction intervals and a backtest.

Input: SOURCE, the id of a table artifact with a month column (dates: `month`, else the first column) and
a value column (`value`, else VALUE names it, else the second column: query_metrics' first metric);
optional HORIZON (months ahead, default 12). Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: the forecast table (month, forecast, lo80, hi80, lo95, hi95) as the cell's value; the backtest and
a chart are printed / drawn.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
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


# The seasonal pattern may change only slowly: one unusual month must not become next year's peak (an
# unbounded fit gave gamma = 0.66 and turned one noisy May into a forecast May peak the data does not have).
MAX_SEASONAL_SMOOTHING = 0.1


def fit(y: pd.Series):
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


def mape(actual: np.ndarray, predicted: np.ndarray) -> float:
    return float(np.mean(np.abs((actual - predicted) / actual)) * 100)


holdout = 6
model_mape = naive_mape = float("nan")
if len(series) - holdout >= 24:  # the backtest's model needs two full years before the held-out months
    train, test = series[:-holdout], series[-holdout:]
    backtest = fit(train).forecast(holdout)
    naive = series.shift(12)[-holdout:]
    model_mape, naive_mape = mape(test.values, backtest.values), mape(test.values, naive.values)
    print(
        f"backtest on the last {holdout} months: model MAPE {model_mape:.1f} %, seasonal naive MAPE {naive_mape:.1f} %"
    )
else:
    print(f"backtest skipped: {len(series)} months leave fewer than 24 before the last {holdout} (it needs 30)")

result = fit(series)
frame80 = result.get_prediction(start=len(series), end=len(series) + horizon - 1).summary_frame(alpha=0.20)
frame95 = result.get_prediction(start=len(series), end=len(series) + horizon - 1).summary_frame(alpha=0.05)
forecast = pd.DataFrame(
    {
        "month": frame80.index.strftime("%Y-%m"),
        "forecast": frame80["mean"].round(2).values,
        "lo80": frame80["pi_lower"].round(2).values,
        "hi80": frame80["pi_upper"].round(2).values,
        "lo95": frame95["pi_lower"].round(2).values,
        "hi95": frame95["pi_upper"].round(2).values,
    }
)
last_year = series[-12:].sum()
print(
    f"next {horizon} months: {forecast.forecast.sum():,.0f} "
    f"({100 * (forecast.forecast.sum() / last_year - 1):+.1f} % on the last 12 months, when horizon = 12)"
)

fig, ax = plt.subplots(figsize=(10, 4.5))
ax.plot(series.index, series.values, label="history")
ax.plot(frame80.index, forecast.forecast, label="forecast")
ax.fill_between(frame95.index, forecast.lo95, forecast.hi95, alpha=0.2, label="95 % interval")
ax.set_title("Monthly forecast")
ax.legend()
forecast
