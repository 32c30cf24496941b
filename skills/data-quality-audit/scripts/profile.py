"""Data-quality audit of a table (SKILL.md step 3). In: SOURCE or DF; PROFILE; LAYOUT, RELATED (optional).
Out: `findings` ranked by harm, `assumed` (printed `Assumed: …`), WARNING lines, a profile."""

import re
import zoneinfo

import pandas as pd

PROFILE = globals().get("PROFILE") or {}
df = globals().get("DF")
if df is None:
    df = load_artifact(SOURCE) if str(SOURCE).startswith("artifact_") else load_file(SOURCE)  # noqa: F821
df = df.copy()
findings, assumed_facts, warnings = [], [], []
if not PROFILE:
    warnings.append("no PROFILE: run business-profile first - layout, units and time zones read from this file alone")

WEIGHT = dict(date=5, duplicate=4, arithmetic=4, currency=4, range=3, type=3, extreme=3, missing=1, format=0.5)
WEIGHT.update(spelling=0.5, outlier=0.2)


def finding(severity: str, column: str, check: str, rows: int, examples=(), kind: str = "type") -> None:
    examples = ", ".join(str(e) for e in list(examples)[:3])
    findings.append(dict(severity=severity, column=column, check=check, rows=int(rows), examples=examples))
    findings[-1]["harm"] = round(int(rows) * WEIGHT[kind], 1)


def is_text(s: pd.Series) -> bool:
    return pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s)


ID_LIKE = re.compile(r"(^|[_ ])(id|key|no|nr|number|line|item|code)$")
FULL_DATE = re.compile(r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})([ T].*)?$")
OFFSET = re.compile(r"(?:[+-]\d{2}:?\d{2}|Z)$")
TIME_NAME = re.compile(r"([ _]at|date|time|timestamp|created|updated|period_start|period_end)$", re.I)
EVENT = re.compile(r"refund|return|cancel|credit|ship|deliver|fulfil|paus|end", re.I)
STORE_TZ = PROFILE.get("store_timezone")
try:
    STORE_TZ and zoneinfo.ZoneInfo(str(STORE_TZ))
except Exception:  # prose ("Central, Milwaukee") or a typo
    warnings.append(f"store_timezone {STORE_TZ!r} is no time-zone key (America/Chicago): local times left as written")
    STORE_TZ = None
TIMES = {}


def unix_unit(s: pd.Series, name: str):
    if not TIME_NAME.search(str(name).strip()) or pd.api.types.is_bool_dtype(s):
        return None
    n = pd.to_numeric(s, errors="coerce").dropna()
    if len(n) == 0 or n.size < 0.9 * s.notna().sum():
        return None
    if n.between(9e8, 2.2e9).mean() > 0.9:
        return "s"
    return "ms" if n.between(9e11, 2.2e12).mean() > 0.9 else None


def as_times(s: pd.Series, name: str) -> pd.Series:
    """Naive UTC: offsets parsed with utc=True, Unix seconds, day first; local times in store_timezone."""
    if (name, len(s)) in TIMES and TIMES[name, len(s)].index.equals(s.index):
        return TIMES[name, len(s)]
    codes, distinct = pd.factorize(s)  # each distinct value parsed once
    t = parse_times(pd.Series(distinct), name).reindex(codes)
    TIMES[name, len(s)] = t = pd.Series(t.to_numpy(), index=s.index)
    return t


def parse_times(s: pd.Series, name: str) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(s):
        t = pd.to_datetime(s, errors="coerce")
        return t.dt.tz_convert("UTC").dt.tz_localize(None) if t.dt.tz is not None else t
    unit = unix_unit(s, name)
    if unit is not None:
        return pd.to_datetime(pd.to_numeric(s, errors="coerce"), unit=unit, errors="coerce")
    text = s.astype(str).str.strip().where(s.notna() & (s.astype(str).str.strip() != ""))
    filled = text.dropna()
    utc = bool(len(filled)) and filled.str.contains(OFFSET).mean() > 0.5
    parts = filled.str.extract(r"^(\d{1,2})([./])(\d{1,2})[./]\d{2,4}")
    dayfirst = (parts[1] == ".").mean() > 0.5 or (pd.to_numeric(parts[0], errors="coerce") > 12).any()
    try:
        t = pd.to_datetime(text, errors="coerce", utc=utc, dayfirst=dayfirst)
    except (ValueError, TypeError):
        t = pd.to_datetime(text.where(text.isna()), utc=utc)
    miss = t.isna() & text.notna()
    if miss.any():
        t[miss] = pd.to_datetime(text[miss], errors="coerce", utc=utc, format="mixed", dayfirst=dayfirst)
    if utc:
        return t.dt.tz_localize(None)
    if STORE_TZ and (t.dt.normalize() < t).any():  # a bare date is a day, not midnight local
        t = t.dt.tz_localize(STORE_TZ, ambiguous=(t != t).to_numpy(), nonexistent="shift_forward")
        t = t.dt.tz_convert("UTC").dt.tz_localize(None)
    return t


def detect_layout(frame: pd.DataFrame):
    """A key repeated on consecutive rows, fields filled on its first row only: the order's fields."""
    best = None
    blank = frame.isna() | frame.astype(str).apply(lambda c: c.str.strip().isin(["", "nan", "None", "NaT"]))
    for key in frame.columns[:60]:
        values = frame[key].astype(str).str.strip()
        if frame[key].isna().any() or values.eq("").any() or values.is_unique:
            continue
        if values.ne(values.shift()).sum() != values.nunique() or values.nunique() < 0.05 * len(values):
            continue
        multi = values.duplicated(keep=False)
        first = ~values.duplicated()
        later = multi & ~first
        order_level = [
            c
            for c in frame.columns
            if c != key and (~blank.loc[multi & first, c]).mean() > 0.5 and (~blank.loc[later, c]).mean() < 0.05
        ]
        if order_level and (best is None or len(order_level) > len(best["first_line_only"])):
            best = {"key": key, "first_line_only": order_level}
    return best


def given_layout():
    if globals().get("LAYOUT"):
        return dict(LAYOUT), "LAYOUT"  # noqa: F821
    rows = PROFILE.get("files")
    if rows is None and isinstance(globals().get("files"), pd.DataFrame):
        rows = globals()["files"]
    if isinstance(rows, pd.DataFrame):
        rows = rows.to_dict("records")
    best = None
    for row in rows or []:
        cols = row.get("first_line_only") or []
        cols = [c.strip() for c in cols.split(",")] if isinstance(cols, str) else list(cols)
        key = row.get("key") or (re.search(r"several rows per (.+)\)", str(row.get("grain", ""))) or [None, None])[1]
        if cols and {key, *cols} <= set(df.columns) and len(cols) > len((best or {}).get("first_line_only", ())):
            best = {"key": key, "first_line_only": cols}
    return best, "business-profile"


layout, layout_from = given_layout()
if layout is None:
    layout, layout_from = detect_layout(df), "detected in this file"
first_line = pd.Series(True, index=df.index)
if layout is not None:
    key = layout["key"]
    first_line = ~df[key].astype(str).duplicated()
    order_level = set()
    for c in layout["first_line_only"]:
        filled = (df.loc[~first_line, c].notna() & (df.loc[~first_line, c].astype(str).str.strip() != "")).mean()
        if filled > 0.05:
            warnings.append(f"{c} is said to be on first lines only, but {filled:.0%} of later lines fill it")
            continue
        keys = df[key].astype(str)
        df[c] = keys.map(pd.Series(df.loc[first_line, c].to_numpy(), index=keys[first_line]))
        order_level.add(c)
    assumed_facts.append(
        f"one row per line, several per {key}; order-level fields ({', '.join(map(str, order_level))}) "
        f"filled from each {key}'s first line ({layout_from})"
    )
else:
    order_level = set()
    assumed_facts.append("one row per record (no multi-row layout)")


def scope(col) -> pd.Series:
    return first_line if col in order_level else pd.Series(True, index=df.index)


COUNT = re.compile(r"price|cost|seats|after|balance|stock|on.?hand|level|headcount|inventory", re.I)
RATE_NAME = re.compile(r"rate|pct|percent|%|share|ratio", re.I)
AMOUNT_NAME = re.compile(r"amount|amt|value|total|sum|eur|usd|gbp|price|cost|betrag", re.I)
units = {}


def unit_of(col, s: pd.Series) -> str:
    name = str(col)
    listed = PROFILE.get("files") if isinstance(PROFILE.get("files"), list) else []
    for row in listed:
        for unit in ("rate", "amount"):
            if name in str(row.get(unit + "s", "")).split(", "):
                return unit
    if RATE_NAME.search(name) or AMOUNT_NAME.search(name):
        return "rate" if RATE_NAME.search(name) else "amount"
    nonzero = s[s.fillna(0) != 0].dropna()
    return "rate" if len(nonzero) == 0 or nonzero.between(-1, 1).mean() >= 0.9 else "amount"


def groups_for(col):
    """The text column explaining over half a number's spread (a product for its price): outliers by group."""
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


def spread(s: pd.Series, labels) -> pd.Series:
    """Distance beyond the group's quartiles (5 values or more) in IQRs; IQR 0: a quarter of the median."""
    g = s.groupby(labels)
    q1, q3, med = (g.transform("quantile", q) for q in (0.25, 0.75, 0.5))
    iqr = (q3 - q1).where(q3 > q1, 0.25 * med.abs())
    score = ((q1 - s).clip(lower=0) + (s - q3).clip(lower=0)) / iqr
    return score.where((iqr > 0) & (g.transform("size") >= 5), 0.0)


def blank_by_design(col, empty: pd.Series) -> str:
    """'<column> is <values>' when a text column of at most 20 kinds, itself never blank, has values that hold every
    blank of ``col`` and no filled row: the field does not apply to those rows (a layout, not a fault). Else ''."""
    if empty.sum() < 10:  # a few blanks sharing a rare value by chance are not a layout
        return ""
    for other in df.columns:
        kinds = df[other]
        if other == col or not is_text(kinds) or kinds.isna().any() or kinds.nunique() > 20:
            continue
        on_blank, on_filled = set(kinds[empty]), set(kinds[~empty & scope(col)])
        if not on_blank & on_filled and len(on_blank) <= 3:
            return f"{other} is {' or '.join(sorted(map(str, on_blank)))}"
    return ""


time_columns = {c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and unix_unit(df[c], c)}
profile = []
for col in df.columns:
    s = df[col]
    judged = scope(col)
    empty = s.isna() | (s.astype(str).str.strip() == "") if is_text(s) else s.isna()
    empty = empty & judged
    pct = round(100 * empty.sum() / max(judged.sum(), 1), 1)
    example = s.dropna().iloc[0] if s.notna().any() else None
    profile.append(dict(column=col, dtype=str(s.dtype), missing=int(empty.sum()), missing_pct=pct, example=example))
    if empty.any() and not (EVENT.search(str(col)) and TIME_NAME.search(str(col))):
        where = f" (on {layout['key']} first lines)" if col in order_level else ""
        design = blank_by_design(col, empty)
        if design:  # blank exactly on the rows of a kind (a gift-receipt return has no original transaction)
            finding("low", col, f"blank exactly when {design} (by design? confirm)", empty.sum(), df.index[empty][:3], "format")
        else:
            finding("medium", col, "missing values" + where, empty.sum(), df.index[empty][:3], "missing")
    if col in time_columns:
        continue
    if is_text(s):
        text = s[judged].dropna().astype(str)
        text = text[text.str.strip() != ""]
        normalised = text.str.strip().str.lower()
        spellings = text.groupby([normalised, text]).size()
        clashing = spellings[spellings.groupby(level=0).transform("size") > 1]
        if len(clashing):
            to_fix = int(clashing.sum() - clashing.groupby(level=0).max().sum())
            examples = [list(v.index.get_level_values(1)) for _, v in clashing.groupby(level=0)]
            finding("medium", col, "same category spelled differently", to_fix, examples[:3], "spelling")
        n = text.value_counts()  # each value judged once, its rows counted
        u = pd.Series(n.index.astype(str))
        n = pd.Series(n.to_numpy(), index=u.index)
        full_dates = u.str.match(FULL_DATE)
        if n[full_dates].sum() > 0.5 * len(text):
            bad = text[as_times(df[col], col)[text.index].isna()]
            if len(bad):
                finding("high", col, "values that are not dates in a date column", len(bad), bad.unique()[:3])
        bad = u[pd.to_numeric(u, errors="coerce").isna()]
        label = n[bad.index] >= 10  # a repeated label (DC-RETURNS): a code
        if 0 < n[bad.index].sum() < 0.5 * len(text) and not ID_LIKE.search(str(col).lower()) and not label.all():
            bad = bad[~label]
            finding("high", col, "values that are not numbers in a number column", n[bad.index].sum(), bad[:3])
        body = u.str.strip().str.replace(r"^[+-]|-$", "", regex=True)  # SAP's 123,45- is no format
        body = body[body.str.fullmatch(r"\d{1,3}([.,]\d{3})+([.,]\d+)?|\d+([.,]\d+)?")]
        if n[body.index].sum() > 0.9 * len(text) and body.str.contains(r"[.,]").any():
            mark = body.str.extract(r"([.,])\d{1,2}$")[0].mode()
            mark = mark.iloc[0] if len(mark) else "."
            group = "," if mark == "." else "."
            whole = body.str.replace(rf"\{mark}\d+$", "", regex=True)
            big, grouped = whole.str.len() >= 4, whole.str.contains(rf"\{group}")
            usual = grouped[big].mean() > 0.5 if big.any() else False
            other = body.str.contains(rf"\{group}\d{{1,2}}$") | (big & (grouped != usual))
            if other.any():  # 1.234,56 among 1234,56
                finding("high", col, "numbers written in another format", n[other].sum(), body[other][:3])
    elif pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) and s.notna().sum() >= 8:
        s = s[judged].astype(float)
        name = str(col).lower()
        if COUNT.search(name) and not re.search(r"delta|change|diff|adjust", name) and (s < 0).any():
            finding("high", col, "negative values", (s < 0).sum(), s[s < 0].head(3), "range")
        if "discount" in name or RATE_NAME.search(name):
            units[col] = unit_of(col, s)
            wrong = (s < 0) | (s > 1)
            if units[col] == "rate" and wrong.any():
                finding("high", col, "discount outside 0-1", wrong.sum(), s[wrong].head(3), "range")
        if ID_LIKE.search(name):
            continue
        group = groups_for(col)  # a laptop's price is far from a pen's
        labels = 0 * s if group is None else df.loc[s.index, group].fillna("(missing)")
        rule = "outliers beyond 3 x IQR" + (f" within each {group}" if group else "")
        score = spread(s, labels)
        far = score > 3
        absurd = far & (score > 20)  # a typo, a unit, a test row
        if absurd.any():
            ranked = score[absurd].sort_values(ascending=False).index
            check = "extreme values (over 20 x IQR out, most extreme first)"
            finding("high", col, check, absurd.sum(), s[ranked].head(3).round(2), "extreme")
        if (far & ~absurd).any():
            ranked = score[far & ~absurd].sort_values(ascending=False).index
            finding("low", col, rule, (far & ~absurd).sum(), s[ranked].head(3).round(2), "outlier")
if units:
    assumed_facts.append("units: " + ", ".join(f"{c} is a {u}" for c, u in units.items()) + " (a rate is in 0-1)")

duplicates = df.duplicated()
if duplicates.any():
    finding("high", "(all)", "exact duplicate rows", duplicates.sum(), df.index[duplicates][:3], "duplicate")

id_columns = [c for c in df.columns if ID_LIKE.search(str(c).lower()) and df[c].notna().all()]
lines = [c for c in id_columns if re.search(r"(^|[_ ])(line|item|pos)", str(c), re.I)]
keys = [] if lines else [c for c in id_columns if df[c].duplicated().mean() <= 0.05]
doc = df.columns[0] if lines and df.columns[0] not in lines and df.iloc[:, 0].duplicated().any() else None
if doc is not None:
    assumed_facts.append(f"a {doc}'s lines: date faults counted per {doc}")
for key in keys:
    if df[key].duplicated().any():
        repeated = df[key][df[key].duplicated(keep=False)]
        finding("high", key, "duplicate ids", repeated.shape[0], repeated.unique()[:3], "duplicate")
if not keys:
    for i, a in enumerate(id_columns):
        for b in [c for c in lines or id_columns[i + 1 :] if c != a and a not in lines]:
            pair = df[[a, b]].duplicated(keep=False) & ~df.duplicated(keep=False)
            if 0 < df[[a, b]].duplicated().mean() <= 0.05 and pair.any():
                examples = df.loc[pair, [a, b]].drop_duplicates().head(3).itertuples(index=False, name=None)
                finding("high", f"{a}, {b}", "duplicate composite keys", pair.sum(), list(examples), "duplicate")

today = pd.Timestamp.now(tz="UTC").tz_localize(None).normalize() + pd.Timedelta(days=1)
dates, mixed, offsets = {}, set(), set()


def date_columns(frame: pd.DataFrame):
    found, odd = {}, {}
    for col in frame.columns:
        s = frame[col]
        if pd.api.types.is_datetime64_any_dtype(s) or (pd.api.types.is_numeric_dtype(s) and unix_unit(s, col)):
            found[col] = as_times(s, col)
        elif is_text(s):
            n = s.dropna().astype(str).str.strip().value_counts()
            text = pd.Series(n.index.astype(str), index=n.to_numpy())
            full = text.str.match(FULL_DATE)
            if n.to_numpy()[full.to_numpy()].sum() > 0.5 * n[n.index != ""].sum():
                text = text[full]
                offsets.update(text.str.extract(r"([+-]\d{2}:?\d{2}|Z)$")[0].dropna().unique())
                day = text.str.replace(r"[ T].*$", "", regex=True)
                shape = day.str.match(r"^\d{4}").map({True: "year first ", False: "year last "})
                shape = shape + day.str.replace(r"\d", "", regex=True).str[:1]
                kinds = pd.Series(shape.index, index=shape.to_numpy()).groupby(level=0).sum().sort_values()
                if len(kinds) > 1:
                    odd[col] = (kinds.iloc[:-1].sum(), text[shape != kinds.index[-1]].head(3))
                found[col] = as_times(s, col)
            elif unix_unit(s, col):
                found[col] = as_times(s, col)
    return found, odd


dates, odd = date_columns(df)
for col, (rows, examples) in odd.items():
    mixed.add(col)
    finding("medium", col, "mixed date formats", rows, examples, "format")
for col, values in dates.items():
    future = (values > today) & scope(col)
    if future.any():
        finding("high", col, "dates in the future", future.sum(), values[future].dt.date.head(3), "date")

CLASSES = [
    ("signup", r"sign.?up|regist|account.?creat|joined|opened|subscribed|first.?seen"),
    ("ship", r"ship|deliver|fulfil|dispatch|lieferdatum"),
    ("after", r"refund|return|cancel|credit|churn|chargeback"),
    ("order", r"order|placed|processed|posting|purchase|sale|paid|invoice|created|buchungsdatum|transaction|^date$"),
]
FOLLOWS = {("ship", "order"), ("after", "order"), ("order", "signup"), ("after", "signup"), ("ship", "signup")}


def date_class(col):
    return next((k for k, pattern in CLASSES if re.search(pattern, str(col), re.I)), None)


def compared(first, later):
    """Day precision when either is a bare date (the same day is no fault)."""
    if (first.dropna().dt.normalize() == first.dropna()).all() or (
        later.dropna().dt.normalize() == later.dropna()
    ).all():
        return first.dt.normalize(), later.dt.normalize()
    return first, later


ordered = {c: v for c, v in dates.items() if c not in mixed}
for a, first_values in ordered.items():
    for b, later in ordered.items():
        rows = scope(a) & scope(b) if a in order_level and b in order_level else pd.Series(True, index=df.index)
        both = first_values.notna() & later.notna() & rows
        if a == b or both.sum() < 3:
            continue
        f, g = compared(first_values, later)
        wrong = both & (g < f)
        named = (date_class(b), date_class(a)) in FOLLOWS
        in_order = 1 - wrong.sum() / both.sum()
        if named and wrong.any() and in_order < 0.5:
            warnings.append(f"{b} before {a} on {1 - in_order:.0%} of rows: not what the names say?")
        elif wrong.any() and (named or (both.sum() >= 10 and in_order >= 0.9)):
            n = df.loc[wrong, doc].nunique() if doc else wrong.sum()
            finding("high" if named else "medium", f"{a} / {b}", f"{b} before {a}", n, df.index[wrong][:3], "date")

norm = lambda c: re.sub(r"[^a-z0-9]", "", str(c).lower())  # noqa: E731
related = globals().get("RELATED") or {}
for rname, ref in related.items():
    spec = ref if isinstance(ref, dict) else {"source": ref}
    other = spec["source"]
    if not isinstance(other, pd.DataFrame):
        other = load_artifact(other) if str(other).startswith("artifact_") else load_file(other)  # noqa: F821
    on = spec.get("on")
    if not on:
        shared = {norm(c): c for c in other.columns}
        on = {
            c: shared[norm(c)]
            for c in df.columns
            if norm(c) in shared
            and (ID_LIKE.search(str(c).lower()) or re.search(r"email|customer|account|kunde", str(c), re.I))
        }
        on = dict(list(on.items())[:1])
    if not on:
        warnings.append(f"RELATED {rname}: no column shared with this table by name - give 'on'")
        continue
    ((mine, theirs),) = on.items()
    their_dates, _ = date_columns(other)
    since = next((c for c in their_dates if date_class(c) == "signup"), None) or next(
        (c for c in their_dates if date_class(c) == "order"), next(iter(their_dates), None)
    )
    event = next((c for c in ordered if date_class(c) == "order"), None) or next(
        (c for c in ordered if date_class(c) in ("after", "ship")), None
    )
    if since is None or event is None:
        warnings.append(f"RELATED {rname}: no date to compare ({since=}, {event=})")
        continue
    keyed = lambda s: s.astype(str).str.strip().str.lower().str.replace(r"\.0$", "", regex=True)  # noqa: E731
    starts = pd.Series(their_dates[since].values, index=keyed(other[theirs])).groupby(level=0).min()
    theirs_at = keyed(df[mine]).map(starts)
    rows = scope(event)
    f, g = compared(theirs_at, ordered[event])
    wrong = rows & f.notna() & g.notna() & (g < f)
    assumed_facts.append(f"{rname} joined on {mine} = {theirs}: {event} must not precede {rname}.{since}")
    if wrong.any():
        n = df.loc[wrong, doc].nunique() if doc else wrong.sum()
        check = f"{event} before {rname}.{since}"
        finding("high", f"{event} / {rname}.{since}", check, n, df.loc[wrong, mine].head(3), "date")
if offsets:
    assumed_facts.append(f"timestamps compared in UTC (offsets seen: {', '.join(sorted(offsets))})")
if time_columns:
    assumed_facts.append(f"{', '.join(map(str, time_columns))}: Unix seconds (UTC)")
if STORE_TZ:
    assumed_facts.append(f"local times without an offset are in {STORE_TZ}")
elif any(c not in time_columns for c in dates) and not offsets and PROFILE.get("utc_offsets"):
    warnings.append("PROFILE has UTC offsets but this file's times have none: give PROFILE['store_timezone']")

columns = {str(c).lower(): c for c in df.columns}
currency = next((columns[k] for k in columns if "currency" in k), None)
country = next((columns[k] for k in columns if k in ("country", "country_code", "market") or "country" in k), None)
if currency is not None and country is not None:
    pairs = df.loc[scope(currency), [country, currency]].dropna().astype(str)
    pairs = pairs[(pairs[country].str.strip() != "") & (pairs[currency].str.strip() != "")]
    usual = pairs.groupby(country)[currency].agg(lambda c: c.value_counts().index[0])
    share = pairs.groupby(country)[currency].agg(lambda c: c.value_counts(normalize=True).iloc[0])
    odd = pairs[country].map(usual).ne(pairs[currency]) & pairs[country].map(share).ge(0.9)
    if odd.any():
        examples = [f"row {i}: {pairs.at[i, country]} in {pairs.at[i, currency]}" for i in pairs.index[odd][:3]]
        check = "currency not the country's (its other rows use one)"
        finding("high", f"{country} / {currency}", check, odd.sum(), examples, "currency")
if all(k in columns for k in ("quantity", "unit_price", "discount", "revenue")):
    q, p, d, r = (
        pd.to_numeric(df[columns[k]].astype(str).str.strip(), errors="coerce").astype(float)
        for k in ("quantity", "unit_price", "discount", "revenue")
    )
    if units.get(columns["discount"], "rate") == "amount":
        expected = q * p - d
        rule = "revenue != quantity x unit_price - discount"
    else:
        expected = q * p * (1 - d)
        rule = "revenue != quantity x unit_price x (1 - discount)"
    off = ((r - expected).abs() > 0.01 * expected.abs().clip(lower=1)).fillna(False)
    if off.any():
        finding("high", columns["revenue"], rule, off.sum(), df.index[off][:3], "arithmetic")

print(f"{len(df):,} rows x {len(df.columns)} columns")
print(pd.DataFrame(profile).to_string(index=False))
assumed = "; ".join(assumed_facts)
print("Assumed:", assumed)
for line in warnings:
    print("WARNING:", line)
order = {"high": 0, "medium": 1, "low": 2}
findings = pd.DataFrame(findings, columns=["severity", "column", "check", "rows", "examples", "harm"])
findings = findings.sort_values(["severity", "harm"], key=lambda c: c.map(order) if c.name == "severity" else -c)
findings = findings.reset_index(drop=True)
print(f"{len(findings)} findings" if len(findings) else "no findings: the file passed every check")
findings  # noqa: B018 - the cell's value
