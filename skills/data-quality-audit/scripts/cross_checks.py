"""Checks across rows of a line export, run after scripts/profile.py in the same session (it leaves `df`, `findings`,
`assumed`, PROFILE): SKILL.md step 4. Adds to `findings` (and leaves `cross`, its own rows):
- documents sent twice: a (document, line) key repeated - counted per document, the system's grain;
- negative units with no return reason: a negative quantity is a return when its reason is filled, as most are;
- a clock not moved at a DST change: one entity's (store's, register's) local hours shifted by about an hour, on
  exactly the days between two DST changes of PROFILE['store_timezone'], against every other entity's hours that
  season and its own in the other seasons. An entity whose zone has no DST (Arizona) keeps its local hours: no shift.
"""

import re
import zoneinfo

import pandas as pd

PROFILE = globals().get("PROFILE") or {}
rows_found, notes = [], []
cols = {str(c).lower(): c for c in df.columns}  # noqa: F821 - df from profile.py


def add(column, check, rows, examples, harm=4):
    rows_found.append(
        dict(severity="high", column=column, check=check, rows=int(rows), examples=", ".join(map(str, examples[:3])))
    )
    rows_found[-1]["harm"] = round(int(rows) * harm, 1)


def pick(pattern, numeric=None):
    for low, c in cols.items():
        if re.search(pattern, low) and (numeric is None or pd.api.types.is_numeric_dtype(df[c]) == numeric):  # noqa: F821
            return c
    return None


# documents sent twice: the same (document, line) twice; one finding per document
line = pick(r"(^|[_ ])(line|item|pos|position)(_?no|_?nr)?$")
doc = pick(r"(trans|document|invoice|order|receipt|beleg|return).*(id|no|number|nr)$|belegnummer")
if line is not None and doc is not None:
    twice = df.duplicated([doc, line], keep=False)  # noqa: F821
    if twice.any():
        docs = df.loc[twice, doc].drop_duplicates()  # noqa: F821
        add(doc, f"documents sent twice (a {doc} with its {line}s repeated)", len(docs), list(docs))

# negative units with no return reason (a return with a reason is a return)
qty = pick(r"^(units|qty|quantity|menge)$|units$|quantity$", numeric=True)
reason = pick(r"reason")
if qty is not None and reason is not None:
    neg = df[qty] < 0  # noqa: F821
    blank = df[reason].isna() | (df[reason].astype(str).str.strip() == "")  # noqa: F821
    if neg.sum() >= 10 and (neg & ~blank).sum() > 0.5 * neg.sum() and (neg & blank).any():
        idx = df.index[neg & blank]  # noqa: F821
        add(qty, f"negative units with no {reason}", len(idx), list(idx), harm=3)

# DST: an entity's local hours shifted by about 1 h for exactly one season between DST changes
entity = pick(r"store|location|register|shop|site|branch|terminal|till")
when = next(
    (c for low, c in cols.items() if re.search(r"time|timestamp|datetime|_at$", low) and c != entity),
    None,
)
if entity is not None and when is not None:
    zone = PROFILE.get("store_timezone")
    try:
        zone = zoneinfo.ZoneInfo(str(zone))
    except Exception:
        notes.append(f"store_timezone {zone!r} is no time-zone key: DST seasons of America/New_York (US rules)")
        zone = zoneinfo.ZoneInfo("America/New_York")
    codes, distinct = pd.factorize(df[when])  # noqa: F821
    parsed = pd.to_datetime(pd.Series(distinct).astype(str), errors="coerce")  # one format, each value once
    local = pd.Series(parsed.reindex(codes).to_numpy(), index=df.index)  # noqa: F821 - as written, no UTC
    if parsed.dt.tz is None and local.notna().mean() > 0.9 and (local.dt.hour > 0).mean() > 0.5:
        days = pd.Series(pd.date_range(local.min().normalize(), local.max().normalize(), freq="D"))
        dst = days.map(lambda d: bool(d.replace(hour=12).to_pydatetime().replace(tzinfo=zone).dst()))
        season = pd.Series((dst != dst.shift()).cumsum().to_numpy(), index=days)
        frame = pd.DataFrame(
            {"entity": df[entity].astype(str), "season": local.dt.normalize().map(season)}  # noqa: F821
        )
        frame["hour"] = local.dt.hour + local.dt.minute / 60
        frame = frame.dropna()
        cells = frame.groupby(["entity", "season"]).hour.agg(["mean", "std", "size"])
        cells["vs_all"] = (
            cells["mean"] - frame.groupby("season").hour.mean().reindex(cells.index.get_level_values(1)).to_numpy()
        )
        cells["shift"] = cells.vs_all - cells.groupby(level=0).vs_all.transform("median")
        sharp = cells["shift"].abs() / (cells["std"] / cells["size"] ** 0.5)
        shifted = cells[(cells["shift"].abs().between(0.6, 1.4)) & (sharp > 5) & (cells["size"] >= 30)]
        for (name, s_id), cell in shifted.iterrows():
            span = season.index[season == s_id]
            add(
                f"{when} / {entity}",
                f"local times shifted {cell['shift']:+.1f} h at {entity} {name} from {span.min().date()} to "
                f"{span.max().date()} (a clock not moved at the DST change)",
                cell["size"],
                [f"{entity} {name}", f"mean hour {cell['mean']:.1f}"],
                harm=2,
            )
        notes.append(f"DST seasons of {zone.key}; local times of {when} compared per {entity}")

cross = pd.DataFrame(rows_found, columns=["severity", "column", "check", "rows", "examples", "harm"])
findings = pd.concat([findings, cross], ignore_index=True)  # noqa: F821 - profile.py's
findings = findings.sort_values(
    ["severity", "harm"], key=lambda c: c.map({"high": 0, "medium": 1, "low": 2}) if c.name == "severity" else -c
).reset_index(drop=True)
assumed = "; ".join([globals().get("assumed") or "", *notes]).strip("; ")
print("Assumed:", assumed)
print(cross.to_string(index=False) if len(cross) else "cross checks: nothing found")
cross  # noqa: B018 - the cell's value
