"""The hand-computed trap database of the time-intelligence tests (tests/test_time_metrics.py): each table's
columns (PostgreSQL's types) and rows. Spark's lake holds it too (tests/spark_server.py)."""

from __future__ import annotations

from typing import Any

TABLES: dict[str, tuple[str, list[tuple[Any, ...]]]] = {
    "customers": ("id int PRIMARY KEY, region text", [(1, "north"), (2, "north"), (3, "south")]),
    "orders": (
        "id int PRIMARY KEY, customer_id int, order_date date, amount numeric(12,2)",
        [
            (1, 1, "2024-01-10", 100),
            (2, 2, "2024-02-05", 200),
            (3, 3, "2024-02-20", 50),
            (4, 1, "2025-01-15", 150),
            (5, 2, "2025-02-10", 300),
            (6, 3, "2025-03-05", 40),
            (7, 3, "2025-04-02", 60),
        ],
    ),
    "products": ("id int PRIMARY KEY, category text", [(1, "chairs"), (2, "desks")]),
    "order_lines": (
        "id int PRIMARY KEY, order_id int, product_id int, qty int",
        [
            (1, 1, 1, 1),
            (2, 1, 2, 1),
            (3, 2, 1, 2),
            (4, 3, 1, 1),
            (5, 4, 2, 1),
            (6, 5, 2, 3),
            (7, 6, 1, 1),
            (8, 7, 1, 1),
        ],
    ),
    "tickets": (
        "id int PRIMARY KEY, customer_id int, opened_at date",
        [(1, 1, "2024-01-02"), (2, 1, "2024-03-01"), (3, 2, "2025-02-01"), (4, 3, "2025-02-28"), (5, 3, "2025-03-01")],
    ),
    "balances": (
        "account_id text, as_of date, balance numeric(12,2)",
        [
            ("a1", "2025-01-15", 100),
            ("a1", "2025-01-31", 120),
            ("a1", "2025-02-28", 90),
            ("a2", "2025-01-10", 50),
            ("a2", "2025-02-10", 60),
            ("a2", "2025-02-20", 70),
        ],
    ),
    "visits": (
        "id int PRIMARY KEY, customer_id int, visited_at date",
        [(1, 1, "2025-01-01"), (2, 2, "2025-01-03"), (3, 3, "2025-01-20"), (4, 1, "2025-02-01")],
    ),
}
