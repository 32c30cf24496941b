"""Loss-making cells across every pair of dimensions: a loss that lives in one country x product (or product x
channel, segment x region …) cell is averaged away in one-way rankings (the country earns overall, the product
earns overall), and a search of one chosen pair misses the cells of every other pair.

Input: SOURCE, the id of a table artifact with one row per combination of the dimensions present (any text
columns: country, product, channel, segment …), net_revenue and gross_margin (the contribution: revenue minus
the costs of the goods sold and of serving them) and optionally overhead (allocated fixed costs) — as
query_metrics(metrics=["net_revenue", "gross_margin"], dimensions=[<every dimension>]) returns them.
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Method (said in the output; the standard contribution-margin analysis): every pair of the dimensions present
is searched, each pair's cells summed over the other dimensions; a cell whose contribution margin is negative
is a loss whatever its row's and column's totals; loss cells are ranked by the money they lose, with their share
of revenue, and those the one-way views hide (both totals profitable) are marked. Allocated overhead is shown
beside the contribution, never mixed into it: a cell that covers its own costs but not its share of overhead is
listed apart (it is not sold below cost).
Output: `loss_cells` (the cell's value: the pair, each dimension's value, revenue, margin, margin %, share of
revenue, hidden), `cells` (every cell of every pair), `below_overhead` (cells covering their costs, not their
allocated overhead), `pairs` (the pairs searched).
"""

import itertools

import pandas as pd

table = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
measures = [c for c in ("net_revenue", "gross_margin", "overhead") if c in table.columns]
dims = [c for c in table.columns if c not in measures and not pd.api.types.is_numeric_dtype(table[c])]
dims += [c for c in table.columns if c not in measures and c not in dims and table[c].nunique() <= 50]
table[measures] = table[measures].astype(float)
total_revenue = float(table.net_revenue.sum())
pairs = list(itertools.combinations(dims, 2)) or [(dims[0], dims[0])]
found = []
for a, b in pairs:
    part = table.groupby([a, b] if a != b else [a], dropna=False)[measures].sum().reset_index()
    for dim in dict.fromkeys((a, b)):
        totals = table.groupby(dim, dropna=False)[["net_revenue", "gross_margin"]].sum()
        share = (100 * totals.gross_margin / totals.net_revenue.where(totals.net_revenue != 0)).round(1)
        part[f"{dim}_margin_pct"] = part[dim].map(share)
    part.insert(0, "dimensions", f"{a} x {b}")
    found.append(part)
cells = pd.concat(found, ignore_index=True)
cells["margin_pct"] = (100 * cells.gross_margin / cells.net_revenue.where(cells.net_revenue != 0)).round(1)
cells["revenue_share_pct"] = (100 * cells.net_revenue / total_revenue).round(2) if total_revenue else 0.0
cells = cells.sort_values("gross_margin").reset_index(drop=True)
loss_cells = cells[cells.gross_margin < 0].copy()


def hidden(row: pd.Series) -> bool:
    a, b = row.dimensions.split(" x ")
    return bool(row[f"{a}_margin_pct"] > 0 and row[f"{b}_margin_pct"] > 0)


loss_cells["hidden_in_one_way_views"] = loss_cells.apply(hidden, axis=1) if len(loss_cells) else []
below_overhead = cells.iloc[0:0]
if "overhead" in cells.columns:
    below_overhead = cells[(cells.gross_margin >= 0) & (cells.gross_margin - cells.overhead < 0)].copy()

names = ", ".join(f"{a} x {b}" for a, b in pairs)
print(
    f"Method: every pair of the {len(dims)} dimensions searched ({names}), each cell summed over the others and "
    "ranked by its contribution margin; a negative cell is a loss whatever its row's and column's totals (a "
    "one-way ranking averages it away)"
    + ("; allocated overhead shown apart, never in the margin" if "overhead" in cells.columns else "")
)
shown = ["dimensions", *dims, "net_revenue", "gross_margin", "margin_pct", "revenue_share_pct"]
print(f"the {min(10, len(cells))} lowest-margin cells of {len(cells)}:")
print(cells[[c for c in shown if c in cells.columns]].head(10).round(1).to_string(index=False))
if len(loss_cells):
    hidden_count = int(loss_cells.hidden_in_one_way_views.sum())
    print(
        f"LOSS-MAKING CELLS: {len(loss_cells)} (margin {loss_cells.gross_margin.sum():,.0f}); {hidden_count} of "
        "them invisible in one-way rankings; the largest loss first:"
    )
    for r in loss_cells.head(5).itertuples():
        where = " x ".join(str(getattr(r, d)) for d in r.dimensions.split(" x "))
        print(
            f"- {r.dimensions} = {where}: loses {-r.gross_margin:,.0f} on {r.net_revenue:,.0f} of revenue "
            f"({r.margin_pct:+.1f} %, {r.revenue_share_pct:.1f} % of all revenue)"
        )
else:
    print(f"no {' or '.join(f'{a} x {b}' for a, b in pairs)} cell loses money")
if len(below_overhead):
    print(
        f"{len(below_overhead)} cell(s) cover their own costs but not their allocated overhead (not sold below "
        "cost; the allocation key decides them): "
        + "; ".join(
            f"{r.dimensions} = {' x '.join(str(getattr(r, d)) for d in r.dimensions.split(' x '))}"
            for r in below_overhead.head(5).itertuples()
        )
    )
loss_cells
