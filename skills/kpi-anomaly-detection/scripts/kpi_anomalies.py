"""Anomalies in a KPI series: days (or weeks, months) far from what their trend, season and calendar predict.

Input: SOURCE, the id of a table artifact with a date column and a number column (the first of each, or
DATE and VALUE naming them), one row per period. ALPHA (0.01) is the chance of a false alarm over the
whole series. For days: COUNTRY ("US", an ISO code the `holidays` package knows; SUBDIVISION for a state or
region) gives the public holidays, and EVENTS ({"name": ["2024-11-29", ...]}) adds recurring events of your
own; days that recur far off at the same place of the calendar in most years (Black Friday where it is no
holiday, a year-end shutdown) are learned from the data and named. Run in run_python as:
SOURCE = "artifact_..."  then this script.
Output: `anomalies` (the cell's value: period, value, expected, direction, p_corrected), `expected` (the
model's value for every period) and `calendar` (the holidays and events the model knows); a chart marks
the anomalies.
"""

import holidays
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats

alpha = float(globals().get("ALPHA", 0.01))
country = str(globals().get("COUNTRY", "US"))
subdivision = globals().get("SUBDIVISION")
events = dict(globals().get("EVENTS") or {})
frame = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
date = globals().get("DATE") or next(
    c
    for c in frame.columns
    if "date" in str(c).lower() or "day" in str(c).lower() or pd.api.types.is_datetime64_any_dtype(frame[c])
)
value = globals().get("VALUE") or [c for c in frame.columns if c != date][-1]
s = frame.assign(**{date: pd.to_datetime(frame[date])}).set_index(date)[value].astype(float).sort_index()
counts = bool(((s % 1 == 0) & (s >= 0)).all())
step = s.index.to_series().diff().median()
daily = step <= pd.Timedelta(days=1)
calendar = pd.DataFrame(columns=["date", "name"])
uncertainty = None  # per day, the variance of the expectation's log (day_model sets it)


def nb_size(y: np.ndarray, mu: np.ndarray) -> float:
    """The negative binomial's size k (variance mu + mu^2 / k): first the k at which the median squared
    standardized residual is the chi-square's median (robust to anomalies), then the moment estimate over the
    periods within 4 of those standard deviations (efficient). inf: Poisson is spread enough."""

    def spread(k: float) -> float:
        return float(np.median((y - mu) ** 2 / (mu + mu**2 / k)) - stats.chi2.median(1))

    rough = float("inf")
    if spread(1e9) > 0:
        low, high = 1e-3, 1e9  # spread falls as k falls: bisect on a log scale
        for _ in range(100):
            mid = float(np.sqrt(low * high))
            low, high = (mid, high) if spread(mid) <= 0 else (low, mid)
        rough = low
    inside = np.abs(y - mu) <= 4 * np.sqrt(mu + mu**2 / rough)
    excess = float(np.mean(((y - mu) ** 2 - mu)[inside] / np.clip(mu[inside], 1e-9, None) ** 2))
    return 1 / excess if excess > 1e-9 else float("inf")


def day_model(s: pd.Series) -> tuple[pd.Series, str]:
    """Expected value of every day from a log-linear model of the whole series, fitted robustly:
    trend (piecewise linear, a bend allowed every quarter), weekday, month and a smooth yearly wave,
    and each public holiday and event with the days around it (2 before, 4 after: Black Friday and Cyber
    Monday are Thanksgiving + 1 and + 4) - a holiday that recurs is expected, not an alarm. Days the model
    misses by far are left out and the model refitted (three rounds), so that one outage or spike does not
    bend the expectation of the days around it."""
    global calendar
    t = np.arange(len(s), dtype=float)
    columns = {"trend": t / 365.25}
    for knot in range(91, len(s) - 91, 91):
        columns[f"bend_{knot}"] = np.clip(t - knot, 0, None) / 365.25
    index = s.index
    for d in range(1, 7):
        columns[f"weekday_{d}"] = (index.day_of_week == d).astype(float)
    span_years = len(s) / 365.25
    yearly = span_years >= 2
    if yearly:  # the yearly pattern needs two years to be told from the trend
        for m in range(2, 13):
            columns[f"month_{m}"] = (index.month == m).astype(float)
        angle = 2 * np.pi * index.day_of_year.to_numpy() / 365.25
        for k in range(1, 5):
            columns[f"sin_{k}"], columns[f"cos_{k}"] = np.sin(k * angle), np.cos(k * angle)
    base = dict(columns)  # the expectation without any calendar: where the days that recur far off are seen
    years = range(index.min().year, index.max().year + 1)
    days = holidays.country_holidays(country, subdiv=subdivision, years=years)
    named = pd.DataFrame(
        [(pd.Timestamp(d), str(n)) for d, n in days.items()]
        + [(pd.Timestamp(d), str(name)) for name, dates in events.items() for d in dates],
        columns=["date", "name"],
    ).sort_values("date")
    calendar = named[(named.date >= index.min()) & (named.date <= index.max())].reset_index(drop=True)
    recurring = calendar.name.value_counts()
    for name in recurring[recurring >= 2].index:  # each recurring holiday and event: its day and those around it
        when = pd.DatetimeIndex(calendar.date[calendar.name == name])
        for offset in range(-2, 5):
            hit = index.isin(when + pd.Timedelta(days=offset))
            if hit.sum() >= 2:
                columns[f"{name} {offset:+d}"] = hit.astype(float)
    # A public holiday seen once in the series (a jubilee, a state funeral, Liberation Day every five years, a
    # holiday's observed day) is still a day off by law: one shared term for them all, so the law's calendar,
    # not the data, says it was expected. An event of your own seen once stays unmodelled (its effect unknown).
    public = {str(n) for n in days.values()}
    once = calendar[calendar.name.map(recurring).lt(2) & calendar.name.isin(public)]
    if len(once):
        columns["public holiday seen once"] = index.isin(pd.DatetimeIndex(once.date)).astype(float)
    y = s.to_numpy()
    mu, keep, z, sd = fit(columns, index, y)
    # Learned from the data: a day far off in the same direction at the same place in the calendar in most years
    # (Black Friday where it is no holiday, a year-end shutdown, a yearly sale nobody listed) recurs: it is
    # expected, named in the output, not an alarm. A one-off outage has no twin in another year.
    learned: dict[str, pd.DatetimeIndex] = {}
    base_mu, _, z_base, base_sd = fit(base, index, y) if yearly else (mu, keep, z, sd)
    # where a day without any could not even be 2.5 off (a B2B Sunday), a drop cannot be seen: not counted
    can_drop = dict(zip(index, base_mu / base_sd > 2.5 if counts else np.ones(len(y), bool), strict=True))
    for _ in range(3 if yearly else 0):  # a place learned can show the next (Thanksgiving behind Black Friday)
        new = {k: w for k, w in recurring_offs(index, z, z_base, can_drop, learned).items() if k not in learned}
        if not new:
            break
        learned.update(new)
        for name, when in new.items():
            columns[f"learned: {name}"] = index.isin(when).astype(float)
        mu, keep, z, sd = fit(columns, index, y)
    if learned:
        calendar = pd.concat(
            [calendar, pd.DataFrame([(d, f"{n} (learned)") for n, w in learned.items() for d in w], columns=["date", "name"])]
        ).sort_values("date").reset_index(drop=True)
    terms = "trend, weekday" + (", month and yearly wave" if yearly else " (under two years: no yearly pattern)")
    held = int((~keep).sum())
    seen = f"; learned from the data as recurring: {', '.join(learned)}" if learned else ""
    return (
        pd.Series(mu, index=index),
        f"{terms}, {recurring[recurring >= 2].size} recurring holidays and events ({country}){seen}; "
        f"{held} day(s) left out of the fit as far off",
    )


def calendar_keys(day: pd.Timestamp) -> list[str]:
    """The places a day holds in the calendar every year: its date, its weekday's rank in the month from the start
    and from the end, and its distance from US Thanksgiving (Black Friday, Cyber Monday are sold worldwide)."""
    name = day.day_name()
    keys = [f"{day:%b} {day.day}", f"{name} #{(day.day - 1) // 7 + 1} of {day:%B}"]
    if day.day + 7 > day.days_in_month:
        keys.append(f"last {name} of {day:%B}")
    thanksgiving = pd.Timestamp(day.year, 11, 1) + pd.offsets.Week(weekday=3) * 4
    after = (day - thanksgiving).days
    if -1 <= after <= 4:
        keys.append({0: "US Thanksgiving", 1: "Black Friday", 4: "Cyber Monday"}.get(after, f"US Thanksgiving {after:+d}"))
    return keys


def recurring_offs(index: pd.DatetimeIndex, z: np.ndarray, z_base: np.ndarray, can_drop: dict, known: dict) -> dict:
    """Calendar places of the days the model leaves 3 standard deviations off where, without any calendar (z_base),
    days are 2.5 off in the same direction in at least two years and three quarters of the years the series covers
    that place (a holiday's calendar may miss one year's; a one-off outage needs two chance twins to pass):
    {name: the dates of that place in the series}."""
    places: dict[str, list[pd.Timestamp]] = {}
    for day in index:
        for key in calendar_keys(day):
            places.setdefault(key, []).append(day)
    off = {d: np.sign(r) for d, r in zip(index, z, strict=True) if abs(r) > 3}
    seen = {d: np.sign(r) for d, r in zip(index, z_base, strict=True) if abs(r) > 2.5}
    learned = {}
    for key in {k for d in off for k in calendar_keys(d)}:
        when = places[key]
        for sign in {off[d] for d in when if d in off}:
            years = {d.year for d in when if seen.get(d) == sign}
            possible = {d.year for d in when if sign > 0 or can_drop[d]}
            if len(years) >= max(2, 0.75 * len(possible)):
                learned[key] = pd.DatetimeIndex(when)
    # one event seen through several keys (a date and a weekday rank): the key that covers it best, once
    chosen: dict[str, pd.DatetimeIndex] = {}
    covered = {d for w in known.values() for d in w}
    for key, when in sorted(learned.items(), key=lambda kv: (-sum(d in off for d in kv[1]) / len(kv[1]), kv[0])):
        hits = {d for d in when if d in off}
        if not hits <= covered:  # a place whose far-off days another place already explains is no event
            chosen[key] = when
            covered |= set(when)
    return chosen


def fit(columns: dict, index: pd.DatetimeIndex, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """The expectation of every day, fitted three rounds, the days far off left out of the next: the expectation,
    the days kept, each day's standardized residual and its standard deviation (counts; the log's for amounts)."""
    X = sm.add_constant(pd.DataFrame(columns, index=index), has_constant="add")
    X = X.loc[:, ~X.T.duplicated()]  # a learned place that is a holiday's own days adds no column of its own
    keep = np.ones(len(y), dtype=bool)
    size = float("inf")
    for _ in range(3):
        if counts:  # a negative binomial GLM, its size estimated robustly from the days kept
            family = sm.families.Poisson() if np.isinf(size) else sm.families.NegativeBinomial(alpha=1 / size)
            result = sm.GLM(y[keep], X[keep], family=family).fit()
            mu = np.asarray(result.predict(X))
            size = nb_size(y[keep], mu[keep])
            sd = np.sqrt(np.clip(mu + mu**2 / size, 0.5, None))
            residual = (y - mu) / sd
            keep = np.abs(residual) <= 3
        else:  # amounts: a robust (Huber) fit of the log
            log_y = np.log(np.clip(y, 1e-9, None))
            result = sm.RLM(log_y[keep], X[keep], M=sm.robust.norms.HuberT()).fit()
            mu = np.exp(np.asarray(result.predict(X)))
            residual = log_y - np.log(mu)
            scale = 1.4826 * np.median(np.abs(residual[keep] - np.median(residual[keep])))
            sd = np.full(len(y), max(scale, 1e-9))
            residual = residual / sd
            keep = np.abs(residual) <= 3
    # How sure the expectation itself is, per day (the variance of its log, from the fit's covariance): a holiday's
    # term rests on three or four days, an ordinary Tuesday's on hundreds. The tests below add it to the spread.
    global uncertainty
    x = X.to_numpy()
    uncertainty = pd.Series(np.einsum("ij,jk,ik->i", x, np.asarray(result.cov_params()), x), index=index).clip(lower=0)
    return mu, keep, residual, sd


if daily:
    s = s.asfreq("D", fill_value=0.0)  # a day without a row had none
    expected, model = day_model(s)
else:  # weeks or months: the median of the 6 periods either side (the period itself left out)
    neighbours = pd.concat([s.shift(k) for k in range(-6, 7) if k], axis=1)
    expected = neighbours.median(axis=1).dropna()
    model = "the median of the 6 periods either side"
observed = s[expected.index]
n = len(expected)
unsure = (uncertainty if uncertainty is not None else pd.Series(0.0, index=s.index))[expected.index].to_numpy()

if counts:  # Poisson, or negative binomial when more spread than Poisson (its size judged robustly)
    size = nb_size(observed.to_numpy(), expected.clip(lower=1e-9).to_numpy())
    # the day's spread: the counts' own (Poisson or negative binomial) and the expectation's uncertainty, together a
    # negative binomial of size 1 / (1 / size + uncertainty) for that day
    inverse = (0.0 if np.isinf(size) else 1 / size) + unsure
    day_size = np.where(inverse > 0, 1 / np.clip(inverse, 1e-12, None), 1e12)
    prob = day_size / (day_size + expected.to_numpy())
    low, high = stats.nbinom.cdf(observed, day_size, prob), stats.nbinom.sf(observed - 1, day_size, prob)
    if np.isinf(size):
        method = "counts, Poisson"
    else:
        method = f"counts, negative binomial (size {size:.0f}: a day's spread is {100 / np.sqrt(size):.0f} % beyond Poisson)"
    method += ", widened by how sure each day's expectation is (a holiday's rests on a few days)"
else:  # amounts: the log ratio to the expectation, scaled robustly
    residual = np.log(observed.clip(lower=1e-9)) - np.log(expected.clip(lower=1e-9))
    scale = 1.4826 * (residual - residual.median()).abs().median()
    z = (residual - residual.median()) / np.sqrt(scale**2 + unsure)
    low, high = stats.norm.cdf(z), stats.norm.sf(z)
    method = "amounts, robust z of the log ratio"
# Drops and spikes are two questions (an outage, a surge), each a family of n one-sided tests with Bonferroni's
# correction: the chance of a false drop alarm anywhere in the series is ALPHA, and of a false spike alarm too.
# The exact tail of a count: a working day with none where 12 were expected (Poisson: 6e-6) is found over four
# years at 1 %, where a two-sided test's doubling missed it.
p = np.minimum(low, high)
p_corrected = np.minimum(np.asarray(p) * n, 1.0)
flagged = p_corrected < alpha
anomalies = pd.DataFrame(
    {
        "period": expected.index[flagged].strftime("%Y-%m-%d"),
        "value": observed[flagged].to_numpy(),
        "expected": expected[flagged].round(1).to_numpy(),
        "direction": np.where(observed[flagged] > expected[flagged], "high", "low"),
        "p_corrected": p_corrected[flagged],
    }
)
if len(calendar):
    names = calendar.assign(period=calendar.date.dt.strftime("%Y-%m-%d")).groupby("period").name.agg(", ".join)
    anomalies["holiday"] = anomalies.period.map(names).fillna("")
typical = float(expected.median())
if counts:  # the smallest drop a typical period can show and be flagged: the minimum detectable drop
    if np.isinf(size):
        floor = int(stats.poisson.ppf(alpha / n, typical)) - 1  # the largest count whose tail is below the bar
    else:
        prob = size / (size + typical)
        floor = int(stats.nbinom.ppf(alpha / n, size, prob)) - 1
    if floor >= 0:
        detectable = (
            f"a typical period (expected {typical:,.1f}) is flagged at {floor:,} or fewer: a drop of "
            f"{100 * (1 - floor / typical):.0f} % or more (smaller drops cannot be told from chance over {n:,} periods)"
        )
    else:
        detectable = (
            f"NOT DETECTABLE: even a typical period with none (expected {typical:,.1f}) is within chance over {n:,} "
            "periods at this volume - an outage needs a check of its own (the order log, a monitor), or weeks"
        )
else:
    scale = float(1.4826 * (residual - residual.median()).abs().median())
    drop = 1 - float(np.exp(stats.norm.ppf(alpha / n) * scale + residual.median()))
    detectable = f"a typical period is flagged when it falls by {100 * drop:.0f} % or more below its expectation"
print(
    f"{n:,} periods checked against {model}; {method}; one-sided tests per direction, Bonferroni-corrected: a false "
    f"drop alarm anywhere in the series has a chance of {alpha:g}, a false spike alarm too"
)
print(f"minimum detectable drop: {detectable}")
print(anomalies.to_string(index=False) if len(anomalies) else "no anomaly: every period is within its expected range")

fig, ax = plt.subplots(figsize=(10, 4))
ax.plot(s.index, s.to_numpy(), linewidth=0.6, label=str(value))
ax.plot(expected.index, expected.to_numpy(), linewidth=0.8, label="expected")
ax.scatter(pd.to_datetime(anomalies.period), anomalies.value, color="red", zorder=3, label="anomaly")
ax.legend()
ax.set_title(f"{value}: anomalies")
anomalies
