"""The fixtures of OSI's compliance vectors (compliance/foundation/DATA_TESTS.md §3, open-semantic-interchange/OSI),
as one DuckDB file and bare OSI models over it (sources ``osi.<table>``)."""

from __future__ import annotations

from pathlib import Path

TABLES = {
    # F-PRELUDE
    "customers": (
        "id INTEGER, region VARCHAR, segment VARCHAR",
        [(1, "EAST", "retail"), (2, "EAST", "retail"), (3, "WEST", "wholesale"), (4, "NORTH", "retail")],
    ),
    "orders": (
        "id INTEGER, customer_id INTEGER, amount DECIMAL(10,2), status VARCHAR",
        [
            (101, 1, 100, "completed"),
            (102, 1, 50, "completed"),
            (103, 2, 200, "pending"),
            (104, 3, 75, "completed"),
            (105, 99, 30, "completed"),
        ],
    ),
    "returns": ("id INTEGER, customer_id INTEGER, amount DECIMAL(10,2)", [(201, 1, 10), (202, 3, 5), (203, 4, 15)]),
    "premium_customers": ("id INTEGER", [(1,), (3,)]),
    # F-BRIDGE
    "actors": (
        "actor_id INTEGER, name VARCHAR, height INTEGER",
        [(1, "Alice", 170), (2, "Bob", 170), (3, "Carol", 180)],
    ),
    "movies": (
        "movie_id INTEGER, title VARCHAR, gross DECIMAL(10,2)",
        [(10, "Action", 100), (11, "Drama", 200), (12, "Comedy", 50)],
    ),
    "appearances": ("actor_id INTEGER, movie_id INTEGER", [(1, 10), (1, 11), (2, 10), (3, 12)]),
    # F-AMBIG
    "ambig_orders": (
        "id INTEGER, placed_by_id INTEGER, fulfilled_by_id INTEGER, amount DECIMAL(10,2)",
        [(301, 1, 2, 100), (302, 2, 2, 50)],
    ),
    "users": ("id INTEGER, region VARCHAR", [(1, "EAST"), (2, "WEST")]),
    # F-NOPATH
    "inventory_movements": ("movement_id INTEGER, warehouse_id INTEGER, quantity INTEGER", [(1, 1, 5), (2, 1, 7)]),
}


def make_database(path: Path) -> Path:
    import duckdb

    con = duckdb.connect(str(path))
    try:
        for name, (columns, rows) in TABLES.items():
            con.execute(f"CREATE TABLE {name} ({columns})")
            marks = ", ".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
    finally:
        con.close()
    return path


def _fields(*names: str, measures: tuple[str, ...] = ()) -> str:
    lines = [f"      - {{name: {n}, expression: {n}, dimension: {{}}}}" for n in names]
    lines += [f"      - {{name: {n}, expression: {n}}}" for n in measures]
    return "\n".join(lines)


PRELUDE = f"""\
name: f_prelude_model
datasets:
  - name: customers
    source: osi.customers
    primary_key: [id]
    fields:
{_fields("id", "region", "segment")}
  - name: orders
    source: osi.orders
    primary_key: [id]
    fields:
{_fields("id", "customer_id", "status", measures=("amount",))}
  - name: returns
    source: osi.returns
    primary_key: [id]
    fields:
{_fields("id", "customer_id", measures=("amount",))}
  - name: premium_customers
    source: osi.premium_customers
    primary_key: [id]
    fields:
{_fields("id")}
relationships:
  - {{name: orders_to_customer,  from: orders,  to: customers, from_columns: [customer_id], to_columns: [id]}}
  - {{name: returns_to_customer, from: returns, to: customers, from_columns: [customer_id], to_columns: [id]}}
metrics:
  - {{name: revenue, expression: "SUM(orders.amount)"}}
  - {{name: return_total, expression: "SUM(returns.amount)"}}
  - {{name: total_order_amount, expression: "SUM(orders.amount)"}}
  - {{name: avg_order_amount, expression: "AVG(orders.amount)"}}
  - {{name: distinct_order_statuses, expression: "COUNT(DISTINCT orders.status)"}}
  - name: order_count
    expression: "COUNT(*)"
    custom_extensions: [{{vendor_name: COMMON, data: '{{"dataset": "orders"}}'}}]
  - {{name: customer_count, expression: "COUNT(customers.id)"}}
"""

BRIDGE = f"""\
name: f_bridge_model
datasets:
  - name: actors
    source: osi.actors
    primary_key: [actor_id]
    fields:
{_fields("actor_id", "name", "height")}
  - name: movies
    source: osi.movies
    primary_key: [movie_id]
    fields:
{_fields("movie_id", "title", measures=("gross",))}
  - name: appearances
    source: osi.appearances
    primary_key: [actor_id, movie_id]
    fields:
{_fields("actor_id", "movie_id")}
relationships:
  - {{name: app_to_actor, from: appearances, to: actors, from_columns: [actor_id], to_columns: [actor_id]}}
  - {{name: app_to_movie, from: appearances, to: movies, from_columns: [movie_id], to_columns: [movie_id]}}
metrics:
  - {{name: total_gross, expression: "SUM(movies.gross)"}}
  - {{name: avg_gross, expression: "AVG(movies.gross)"}}
"""

AMBIG = f"""\
name: f_ambig_model
datasets:
  - name: ambig_orders
    source: osi.ambig_orders
    primary_key: [id]
    fields:
{_fields("id", "placed_by_id", "fulfilled_by_id", measures=("amount",))}
  - name: users
    source: osi.users
    primary_key: [id]
    fields:
{_fields("id", "region")}
relationships:
  - {{name: order_placed_by,    from: ambig_orders, to: users, from_columns: [placed_by_id],    to_columns: [id]}}
  - {{name: order_fulfilled_by, from: ambig_orders, to: users, from_columns: [fulfilled_by_id], to_columns: [id]}}
metrics:
  - {{name: ambig_order_count, expression: "COUNT(ambig_orders.id)"}}
"""

NOPATH = f"""\
name: f_nopath_model
datasets:
  - name: nopath_orders
    source: osi.orders
    primary_key: [id]
    fields:
{_fields("id", "customer_id", measures=("amount",))}
  - name: inventory_movements
    source: osi.inventory_movements
    primary_key: [movement_id]
    fields:
{_fields("movement_id", "warehouse_id", measures=("quantity",))}
metrics:
  - {{name: nopath_revenue, expression: "SUM(nopath_orders.amount)"}}
  - {{name: moved_quantity, expression: "SUM(inventory_movements.quantity)"}}
"""

MODELS = {"prelude.yml": PRELUDE, "bridge.yml": BRIDGE, "ambig.yml": AMBIG, "nopath.yml": NOPATH}
