"""Loss-making cells across two dimensions: a loss that lives in one product x channel cell is averaged away
in one-way rankings (the product earns overall, the channel earns overall).

Input: SOURCE, the id of a table artifact with one row per cell: two dimension columns, net_revenue and
gross_margin — as query_metrics(metrics=["net_revenue", "gross_margin"], dimensions=[<a>, <b>]) returns them.
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Method (said in the output): every cell ranked by gross margin; a cell with a negative margin is a loss whatever
its row's and column's totals; each is shown with its row's and column's margin %, and the cells the one-way
views hide (both totals profitable) are marked.
Output: `loss_cells` (the cell's value), `cells` (every cell with its margin % and its row's and column's).
"""


cells = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
a, b = [c for c in cells.columns if c not in ("net_revenue", "gross_margin")][:2]
cells[["net_revenue", "gross_margin"]] = cells[["net_revenue", "gross_margin"]].astype(float)
cells["margin_pct"] = (100 * cells.gross_margin / cells.net_revenue.where(cells.net_revenue != 0)).round(1)
for dim in (a, b):
    totals = cells.groupby(dim, dropna=False)[["net_revenue", "gross_margin"]].sum()
    share = (100 * totals.gross_margin / totals.net_revenue.where(totals.net_revenue != 0)).round(1)
    cells[f"{dim}_margin_pct"] = cells[dim].map(share)
cells = cells.sort_values("gross_margin").reset_index(drop=True)
loss_cells = cells[cells.gross_margin < 0].copy()
loss_cells["hidden_in_one_way_views"] = (loss_cells[f"{a}_margin_pct"] > 0) & (loss_cells[f"{b}_margin_pct"] > 0)

print(
    f"Method: every {a} x {b} cell ranked by gross margin; a negative cell is a loss whatever its {a}'s and its "
    f"{b}'s totals (a one-way ranking averages it away)"
)
print(f"the {min(10, len(cells))} lowest-margin cells of {len(cells)}:")
print(cells.head(10).round(1).to_string(index=False))
if len(loss_cells):
    hidden = int(loss_cells.hidden_in_one_way_views.sum())
    print(
        f"LOSS-MAKING CELLS: {len(loss_cells)} (margin {loss_cells.gross_margin.sum():,.0f}); {hidden} of them "
        f"invisible in one-way rankings (their {a} and their {b} are each profitable)"
    )
else:
    print(f"no {a} x {b} cell loses money")
loss_cells
