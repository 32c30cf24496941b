"""Data-quality profile of a table file.

Input: SOURCE, the file's id or path (e.g. "upload_sales_2025"; run_python's load_file reads it) or a table
artifact's id (a query result; load_artifact reads it) - or set
DF to a DataFrame you already have. Run in run_python as:  SOURCE = "upload_..."  then this script.
Output: the findings table (severity, column, check, rows, examples) as the cell's value; the per-column
profile is printed.
"""

import re

import pandas as pd

df = globals().get("DF")
if df is None:  # SOURCE, load_file and load_artifact come from run_python
    df = load_artifact(SOURCE) if str(SOURCE).startswith("artifact_") else load_file(SOURCE)  # noqa: F821
findings = []


def finding(severity: str, column: str, check: str, rows: int, examples=()) -> None:
    findings.append(
        {
            "severity": severity,
            "column": column,
            "check": check,
            "rows": int(rows),
            "examples": ", ".join(str(e) for e in list(examples)[:3]),
        }
    )


def is_text(s: pd.Series) -> bool:
    """Text columns: object (pandas 2) or str (pandas 3), but not booleans or categories of numbers."""
    return pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s)


# a full date (2025-03-01, 01/03/2025, 1.3.2025, with a time or not); period labels (Jan, Q1, 2025-Q1, H2,
# FY25) are labels, not broken dates
ID_LIKE = re.compile(r"(^|_)(id|key|no|nr|number|line|code)$")  # labels, not quantities: no outliers, maybe keys
FULL_DATE = re.compile(r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})([ T].*)?$")


def groups_for(col):
    """The text column that explains most of a number column's spread (a product for its price), if it
    explains at least half: outliers are then judged within each group."""
    s = pd.to_numeric(df[col], errors="coerce")
    best, share = None, 0.5
    total = ((s - s.mean()) ** 2).sum()
    for other in df.columns:
        kinds = df[other].nunique()
        if other == col or not is_text(df[other]) or not 2 <= kinds <= min(50, len(df) / 5) or total <= 0:
            continue
        within = ((s - s.groupby(df[other]).transform("mean")) ** 2).sum()
        if 1 - within / total > share:
            best, share = other, 1 - within / total
    return best


def far_out(s: pd.Series, k: float = 3.0) -> pd.Series:
    """Beyond k x IQR from the quartiles (robust: a few extremes do not move the fences). Where most values
    are equal (IQR 0, a list price), the spread is taken as a quarter of the median."""
    q1, q3 = s.quantile([0.25, 0.75])
    iqr = q3 - q1 if q3 > q1 else 0.25 * abs(s.median())
    return (s < q1 - k * iqr) | (s > q3 + k * iqr) if iqr > 0 else pd.Series(False, index=s.index)


def extremeness(s: pd.Series) -> pd.Series:
    """How far each value lies from the quartiles, in IQRs (0 inside them): outliers are ranked by it, the most
    extreme first, so that two absurd quantities are not buried among two hundred long-tail values."""
    q1, q3 = s.quantile([0.25, 0.75])
    iqr = q3 - q1 if q3 > q1 else 0.25 * abs(s.median()) or 1.0
    return ((q1 - s).clip(lower=0) + (s - q3).clip(lower=0)) / iqr


profile = []
for col in df.columns:
    s = df[col]
    empty = s.isna() | (s.astype(str).str.strip() == "") if is_text(s) else s.isna()
    profile.append(
        {
            "column": col,
            "dtype": str(s.dtype),
            "missing": int(empty.sum()),
            "missing_pct": round(100 * empty.mean(), 1),
            "distinct": int(s.nunique()),
            "example": s.dropna().iloc[0] if s.notna().any() else None,
        }
    )
    if empty.any():
        finding("high" if empty.mean() > 0.2 else "medium", col, "missing values", empty.sum(), df.index[empty][:3])
    if is_text(s):
        text = s.dropna().astype(str)
        normalised = text.str.strip().str.lower()
        spellings = text.groupby([normalised, text]).size()
        clashing = spellings[spellings.groupby(level=0).transform("size") > 1]
        if len(clashing):  # the rows to fix: every spelling but the most common one of each value
            to_fix = int(clashing.sum() - clashing.groupby(level=0).max().sum())
            examples = [list(v.index.get_level_values(1)) for _, v in clashing.groupby(level=0)]
            finding("medium", col, "same category spelled differently", to_fix, examples[:3])
        full_dates = text.str.match(FULL_DATE)
        if full_dates.mean() > 0.5:
            as_dates = pd.to_datetime(text.where(full_dates), errors="coerce", format="mixed")
            bad = text[as_dates.isna()]
            if len(bad):
                finding("high", col, "values that are not dates in a date column", len(bad), bad.unique()[:3])
        as_numbers = pd.to_numeric(text, errors="coerce")
        if 0.5 < as_numbers.notna().mean() < 1:
            bad = text[as_numbers.isna()]
            finding("high", col, "values that are not numbers in a number column", len(bad), bad.unique()[:3])
    elif pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) and s.notna().sum() >= 8:
        s = s.astype(float)  # a flag column is no quantity: True/False has no quartiles (it crashed here)
        name = str(col).lower()
        if any(k in name for k in ("qty", "quantity", "price", "revenue", "amount", "cost")) and (s < 0).any():
            finding("high", col, "negative values", (s < 0).sum(), s[s < 0].head(3))
        if "discount" in name and ((s < 0) | (s > 1)).any():
            finding("high", col, "discount outside 0-1", ((s < 0) | (s > 1)).sum(), s[(s < 0) | (s > 1)].head(3))
        group = groups_for(col)
        if ID_LIKE.search(name):
            continue  # an id is a label: a large one is no outlier
        if group is None:
            far, rule = far_out(s), "outliers beyond 3 x IQR"
            score = extremeness(s)
        else:  # a laptop's price is far from a pen's, not from other laptops'
            far = s.groupby(df[group].fillna("(missing)")).transform(lambda g: far_out(g) if len(g) >= 5 else g != g)
            far, rule = far.astype(bool), f"outliers beyond 3 x IQR within each {group}"
            score = s.groupby(df[group].fillna("(missing)")).transform(
                lambda g: extremeness(g) if len(g) >= 5 else g * 0
            )
        absurd = far & (score > 20)  # 20 IQRs out: no long tail reaches there; a typo, a unit, a test row
        if absurd.any():
            ranked = score[absurd].sort_values(ascending=False).index
            finding("high", col, "extreme values (over 20 x IQR out, most extreme first)", absurd.sum(),
                    s[ranked].head(3).round(2))
        if (far & ~absurd).any():
            ranked = score[far & ~absurd].sort_values(ascending=False).index
            finding("low", col, rule, (far & ~absurd).sum(), s[ranked].head(3).round(2))  # most extreme first

duplicates = df.duplicated()
if duplicates.any():
    finding("high", "(all)", "exact duplicate rows", duplicates.sum(), df.index[duplicates][:3])

# Keys: a column is a key only when it is meant to be unique — an id-like name and at most 5 % of its rows
# repeated (an order_id on order lines repeats by design: no finding). Where no one column is such a key, a
# pair of id-like columns can be one (order_id, line_no): its repeats are duplicate composite keys.
id_columns = [c for c in df.columns if ID_LIKE.search(str(c).lower()) and df[c].notna().all()]
keys = [c for c in id_columns if df[c].duplicated().mean() <= 0.05]
for key in keys:
    if df[key].duplicated().any():
        repeated = df[key][df[key].duplicated(keep=False)]
        finding("high", key, "duplicate ids", repeated.shape[0], repeated.unique()[:3])
if not keys:
    for i, a in enumerate(id_columns):
        for b in id_columns[i + 1 :]:
            pair = df[[a, b]].duplicated(keep=False) & ~df.duplicated(keep=False)
            if 0 < df[[a, b]].duplicated().mean() <= 0.05 and pair.any():
                examples = df.loc[pair, [a, b]].drop_duplicates().head(3).itertuples(index=False, name=None)
                finding("high", f"{a}, {b}", "duplicate composite keys", pair.sum(), list(examples))

# Dates: each column holding dates (a date type, or text that is mostly full dates) — in the future, written in
# more than one format, or out of order with another date column (shipped before ordered).
today = pd.Timestamp.now().normalize()
dates, mixed = {}, set()
for col in df.columns:
    s = df[col]
    if pd.api.types.is_datetime64_any_dtype(s):
        dates[col] = pd.to_datetime(s, errors="coerce").dt.tz_localize(None)
    elif is_text(s):
        text = s.dropna().astype(str).str.strip()
        full = text.str.match(FULL_DATE)
        if len(text) and full.mean() > 0.5:
            text = text[full]
            shape = text.str.replace(r"[ T].*$", "", regex=True).map(
                lambda v: ("year first " if re.match(r"^\d{4}", v) else "year last ") + re.sub(r"[\d]", "", v)[:1]
            )
            kinds = shape.value_counts()
            if len(kinds) > 1:
                mixed.add(col)
                minority = shape[shape != kinds.index[0]]
                finding("medium", col, "mixed date formats", len(minority), text[minority.index].unique()[:3])
            dates[col] = pd.to_datetime(s.astype(str).str.strip().where(s.notna()), errors="coerce", format="mixed")
for col, values in dates.items():
    future = values > today
    if future.any():
        finding("high", col, "dates in the future", future.sum(), values[future].dt.date.head(3))
ordered = {c: v for c, v in dates.items() if c not in mixed}  # a column of mixed formats has ambiguous dates
for a, first_values in ordered.items():
    for b, later in ordered.items():
        both = first_values.notna() & later.notna()
        if a == b or both.sum() < 10:
            continue
        in_order = (first_values <= later)[both]
        if 0.9 <= in_order.mean() < 1:  # b follows a almost always: the rows where it does not are faults
            wrong = both & (later < first_values)
            finding("high", f"{a} / {b}", f"{b} before {a}", wrong.sum(), df.index[wrong][:3])

columns = {str(c).lower(): c for c in df.columns}
# Currency against country: where a country's rows are almost all in one currency (90 % or more), a row in
# another is invoiced in the wrong currency (or the wrong country): a cross-column rule no single column shows.
currency = next((columns[k] for k in columns if "currency" in k), None)
country = next((columns[k] for k in columns if k in ("country", "country_code", "market") or "country" in k), None)
if currency is not None and country is not None:
    pairs = df[[country, currency]].dropna().astype(str)
    usual = pairs.groupby(country)[currency].agg(lambda c: c.value_counts().index[0])
    share = pairs.groupby(country)[currency].agg(lambda c: c.value_counts(normalize=True).iloc[0])
    odd = pairs[country].map(usual).ne(pairs[currency]) & pairs[country].map(share).ge(0.9)
    if odd.any():
        examples = [f"row {i}: {pairs.at[i, country]} in {pairs.at[i, currency]}" for i in pairs.index[odd][:3]]
        finding("high", f"{country} / {currency}", "currency not the country's (its other rows use one)", odd.sum(),
                examples)
if all(k in columns for k in ("quantity", "unit_price", "discount", "revenue")):
    q, p, d, r = (
        pd.to_numeric(df[columns[k]].astype(str).str.strip(), errors="coerce").astype(float)
        for k in ("quantity", "unit_price", "discount", "revenue")
    )  # a value that is not a number ("ten", "1.234,50") is reported above, not a crash here
    expected = q * p * (1 - d)
    off = ((r - expected).abs() > 0.01 * expected.abs().clip(lower=1)).fillna(False)
    if off.any():
        finding("high", columns["revenue"], "revenue != quantity x unit_price x (1 - discount)", off.sum(), df.index[off][:3])

print(f"{len(df):,} rows x {len(df.columns)} columns")
print(pd.DataFrame(profile).to_string(index=False))
order = {"high": 0, "medium": 1, "low": 2}
findings = pd.DataFrame(findings, columns=["severity", "column", "check", "rows", "examples"])
findings = findings.sort_values(["severity", "rows"], key=lambda c: c.map(order) if c.name == "severity" else -c)
print(f"{len(findings)} findings" if len(findings) else "no findings: the file passed every check")
findings.reset_index(drop=True)
