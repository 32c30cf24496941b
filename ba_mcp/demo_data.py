"""The embedded demo database: a deterministic office-supplies retailer, 2022–2025.

Tables (see docs/databases.md): regions, channels, customers, products, orders, order_lines, calendar, budget
(the 2025 plan) and experiments (two A/B tests). 20,000 orders with growth from new customers, Q4
seasonality and weekday effects; no order before its customer signed up; quirks analysts meet: customers
without e-mail or region, cancelled orders without a ship date, returned orders, discounted lines, a
discontinued product with no price. Answers the skills' tests know are planted: the Ergo Chair's returns,
a key account sold below cost, a plan target for a deal that never closed, one A/B test with an effect and
one without. Generated with a fixed seed, so every machine gets the same data.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

N_ORDERS = 20_000
SEED = 20261122

REGIONS = [
    (1, "North", "Nordics", "SE"),
    (2, "South", "Iberia", "ES"),
    (3, "East", "Central Europe", "PL"),
    (4, "West", "Benelux", "NL"),
    (5, "Central", "DACH", "DE"),
]
CHANNELS = [
    (1, "online", "Web shop"),
    (2, "retail", "Own stores"),
    (3, "partner", "Resellers"),
    (4, "b2b", "Key accounts"),
]
PRODUCTS = [
    ("Laptop Pro 14", "Computers", "Laptops", 1299.0, 910.0),
    ("Laptop Air 13", "Computers", "Laptops", 999.0, 720.0),
    ("Monitor 27", "Computers", "Displays", 329.0, 210.0),
    ("Monitor 32 4K", "Computers", "Displays", 549.0, 380.0),
    ("Docking Station", "Computers", "Accessories", 189.0, 95.0),
    ("USB-C Hub", "Computers", "Accessories", 49.0, 18.0),
    ("Wireless Mouse", "Peripherals", "Mice", 24.5, 9.0),
    ("Ergo Mouse", "Peripherals", "Mice", 59.0, 24.0),
    ("Mechanical Keyboard", "Peripherals", "Keyboards", 129.0, 61.0),
    ("Slim Keyboard", "Peripherals", "Keyboards", 45.0, 17.0),
    ("Headset Pro", "Peripherals", "Audio", 199.0, 96.0),
    ("Webcam HD", "Peripherals", "Video", 79.0, 33.0),
    ("Office Chair", "Furniture", "Seating", 249.0, 140.0),
    ("Ergo Chair", "Furniture", "Seating", 489.0, 290.0),
    ("Standing Desk", "Furniture", "Desks", 549.0, 330.0),
    ("Desk Lamp", "Furniture", "Lighting", 39.9, 14.0),
    ("Filing Cabinet", "Furniture", "Storage", 179.0, 98.0),
    ("Whiteboard", "Furniture", "Storage", 89.0, 41.0),
    ("Printer Paper A4", "Supplies", "Paper", 6.5, 3.1),
    ("Notebook 5-pack", "Supplies", "Paper", 12.0, 4.2),
    ("Gel Pens 12-pack", "Supplies", "Writing", 9.9, 3.0),
    ("Toner Black", "Supplies", "Printing", 89.0, 44.0),
    ("Laser Printer", "Computers", "Printers", 299.0, 205.0),
    ("Label Maker", "Supplies", "Printing", 54.0, 26.0),
    ("Fax Machine", "Computers", "Printers", None, 120.0),  # discontinued: no list price
]
SEGMENTS = ["Consumer", "Small Business", "Corporate", "Public Sector"]
LOSS_MAKING_CUSTOMER = 162  # a key account sold everything at 45 % off
# a key-account rollout planned at 60,000 a month in April-June 2025 that never closed
BUDGET_MISS = ("West", "Computers", ("2025-04-01", "2025-05-01", "2025-06-01"), 60_000)
EXPERIMENTS = [  # name, start, visitors per variant, conversion of control and treatment
    ("one_page_checkout", "2025-10-01", 7000, 0.080, 0.092),  # a real lift of 1.2 points (15 %)
    ("green_buy_button", "2025-11-03", 6000, 0.080, 0.080),  # no effect
]


# What an analyst would want to know before writing SQL (shown by the db://demo/schema resource).
COMMENTS = [
    "COMMENT ON TABLE orders IS 'One row per order (2022-2025). Revenue lives in order_lines; use the view "
    "order_facts for revenue and margin per line.'",
    "COMMENT ON COLUMN orders.status IS 'completed, returned or cancelled; only completed orders count as revenue'",
    "COMMENT ON COLUMN orders.ship_date IS 'NULL for cancelled orders'",
    "COMMENT ON TABLE order_lines IS 'One row per product on an order: quantity, unit_price (list price at the "
    "time) and discount (a fraction, 0.1 = 10 %)'",
    "COMMENT ON COLUMN order_lines.discount IS 'a fraction of unit_price: 0.1 means 10 % off'",
    "COMMENT ON TABLE customers IS 'Customers; email and region_id may be missing'",
    "COMMENT ON COLUMN customers.segment IS 'the customer''s market segment'",
    "COMMENT ON TABLE products IS 'The catalogue; unit_cost is what the retailer pays, list_price what it asks'",
    "COMMENT ON TABLE regions IS 'Sales regions (markets) with a country code'",
    "COMMENT ON TABLE channels IS 'Where an order was placed: online, retail, partner or b2b'",
    "COMMENT ON TABLE calendar IS 'One row per day of 2022-2025 with year, quarter, month, ISO week, weekday'",
    "COMMENT ON TABLE budget IS 'The 2025 plan: monthly net-revenue targets (completed orders) by region and category'",
    "COMMENT ON TABLE experiments IS 'A/B tests on the web shop: one row per visitor with the variant shown, "
    "whether they ordered (converted) and the revenue of that order'",
    "COMMENT ON VIEW order_facts IS 'One row per order line joined with its order, customer, product, region "
    "and channel; net_revenue = quantity × unit_price × (1 − discount); gross_margin = quantity × "
    "(discounted unit price − unit_cost)'",
]


def ensure_demo_database(path: Path) -> None:
    """Create the demo database at ``path`` unless it exists. Atomic: built (or copied) beside it, then
    renamed. The first build on a machine is kept in the user's cache folder, under a name that changes
    with this module, so other workspaces get a copy instead of a second build (which imports pandas into
    the server and takes about a second)."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    cached = _cached_copy()
    try:
        if cached is not None and cached.is_file():
            shutil.copyfile(cached, tmp)
        else:
            _build_elsewhere(tmp)
            if cached is not None:
                _keep(tmp, cached)
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            if leftover.exists():
                leftover.unlink()


def _build_elsewhere(path: Path) -> None:
    """Build in a process of its own: the build imports pandas and DuckDB, which the server never holds."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-B", "-m", "ba_mcp.demo_data", str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the demo database could not be built: {done.stderr.strip()[-600:]}")


def _cached_copy() -> Path | None:
    """Where the built demo database is cached: the user's cache folder, named by this module's digest."""
    import hashlib

    import platformdirs

    try:
        digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    except OSError:
        return None
    return Path(platformdirs.user_cache_dir("ba-mcp", appauthor=False)) / f"demo-{digest}.duckdb"


def _keep(built: Path, cached: Path) -> None:
    """Copy a fresh build into the cache, atomically; a cache that cannot be written is skipped."""
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_name(f".{cached.name}.{uuid.uuid4().hex}.tmp")
        shutil.copyfile(built, part)
        os.replace(part, cached)
    except OSError:
        pass


def _build(path: Path) -> None:
    import duckdb
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(SEED)
    regions = pd.DataFrame(REGIONS, columns=["region_id", "region_name", "market", "country_code"])
    channels = pd.DataFrame(CHANNELS, columns=["channel_id", "channel_name", "description"])
    products = pd.DataFrame(PRODUCTS, columns=["product_name", "category", "subcategory", "list_price", "unit_cost"])
    products.insert(0, "product_id", range(101, 101 + len(products)))
    products["launched_on"] = pd.to_datetime("2021-06-01") + pd.to_timedelta(rng.integers(0, 500, len(products)), "D")

    n_cust = 2_500
    first = [
        "Anna",
        "Ben",
        "Chen",
        "Dora",
        "Eli",
        "Fatima",
        "Goran",
        "Hana",
        "Ivo",
        "Jules",
        "Kai",
        "Lena",
        "Marta",
        "Nils",
        "Olga",
        "Pavel",
        "Quinn",
        "Rosa",
        "Sven",
        "Tara",
    ]
    last = [
        "Berg",
        "Costa",
        "Dvorak",
        "Eriksen",
        "Fischer",
        "Garcia",
        "Horvat",
        "Ivanova",
        "Jansen",
        "Kowalski",
        "Lopez",
        "Muller",
        "Novak",
        "Olsen",
        "Peeters",
        "Rossi",
        "Schmidt",
        "Texeira",
        "Visser",
        "Weber",
    ]
    names = [f"{rng.choice(first)} {rng.choice(last)}" for _ in range(n_cust)]
    segment = rng.choice(SEGMENTS, n_cust, p=[0.45, 0.3, 0.2, 0.05])
    # Half the customers existed before the orders start (signed up 2019-2021), half join during 2022-2025;
    # no customer orders before signing up, each buys at a steady rate of their own, and nobody churns.
    existed = rng.random(n_cust) < 0.5
    signup_day = np.where(existed, rng.integers(-1096, 0, n_cust), rng.integers(0, 1461, n_cust))  # from 2022-01-01
    customers = pd.DataFrame(
        {
            "customer_id": range(1, n_cust + 1),
            "customer_name": names,
            "segment": segment,
            "region_id": rng.choice(regions.region_id, n_cust, p=[0.15, 0.2, 0.2, 0.2, 0.25]).astype("float"),
            "signup_date": pd.to_datetime("2022-01-01") + pd.to_timedelta(signup_day, "D"),
            "email": [f"{n.split()[0].lower()}.{i}@example.com" for i, n in enumerate(names, 1)],
        }
    )
    customers.loc[rng.random(n_cust) < 0.08, "email"] = None  # missing contact data
    customers.loc[rng.random(n_cust) < 0.02, "region_id"] = np.nan  # unassigned region
    customers["region_id"] = customers["region_id"].astype("Int64")

    # Orders: demand grows with the customer base, peaks in Q4, dips in summer, drops at weekends.
    days = pd.date_range("2022-01-01", "2025-12-31", freq="D")
    cust_weight = rng.pareto(1.6, n_cust) + 0.2  # a few customers buy a lot
    by_signup = np.argsort(signup_day, kind="stable")
    cumulative = np.cumsum(cust_weight[by_signup])
    signed_up = np.searchsorted(signup_day[by_signup], np.arange(len(days)), side="right")  # customers per day
    base = cumulative[signed_up - 1]  # the buying weight of everyone signed up by that day
    month = days.month.to_numpy()
    seasonal = 1 + 0.35 * np.isin(month, [11, 12]) + 0.15 * (month == 9) - 0.2 * np.isin(month, [7, 8])
    weekday = np.where(days.day_of_week.to_numpy() >= 5, 0.55, 1.0)
    weight = base * seasonal * weekday
    order_days = np.sort(rng.choice(len(days), N_ORDERS, p=weight / weight.sum()))
    order_dates = days[order_days]
    # each order's customer: one of those signed up by its day, in proportion to their buying weight
    buyer = by_signup[np.searchsorted(cumulative, rng.random(N_ORDERS) * base[order_days], side="right")]
    channel = rng.choice(channels.channel_id, N_ORDERS, p=[0.45, 0.25, 0.2, 0.1])
    status = rng.choice(["completed", "returned", "cancelled"], N_ORDERS, p=[0.9, 0.06, 0.04])
    ship_lag = rng.integers(0, 6, N_ORDERS)
    orders = pd.DataFrame(
        {
            "order_id": range(100001, 100001 + N_ORDERS),
            "customer_id": customers.customer_id.to_numpy()[buyer],
            "order_date": order_dates,
            "channel_id": channel,
            "status": status,
            "ship_date": order_dates + pd.to_timedelta(ship_lag, "D"),
        }
    )
    orders.loc[orders.status == "cancelled", "ship_date"] = pd.NaT

    lines_per_order = rng.choice([1, 1, 1, 2, 2, 3, 4, 6], N_ORDERS)
    n_lines = int(lines_per_order.sum())
    prod_pop = np.array([5, 4, 6, 3, 4, 8, 10, 5, 4, 6, 4, 5, 4, 2, 3, 6, 2, 2, 12, 8, 9, 5, 2, 3, 0.3], dtype=float)
    prod_idx = rng.choice(len(products), n_lines, p=prod_pop / prod_pop.sum())
    list_price = products.list_price.to_numpy()[prod_idx]
    unit_cost = products.unit_cost.to_numpy()[prod_idx]
    qty = np.where(
        products.category.to_numpy()[prod_idx] == "Supplies", rng.integers(1, 25, n_lines), rng.integers(1, 4, n_lines)
    )
    discount = rng.choice([0, 0, 0, 0, 0.05, 0.1, 0.15, 0.25], n_lines)
    order_of_line = np.repeat(orders.order_id.to_numpy(), lines_per_order)
    line_no = np.concatenate([np.arange(1, k + 1) for k in lines_per_order])
    # b2b key accounts get a contract discount on top
    b2b = np.repeat(channel == 4, lines_per_order)
    discount = np.where(b2b, np.maximum(discount, 0.12), discount)
    unit_price = np.where(np.isnan(list_price), unit_cost * 1.3, list_price)  # discontinued item sold at cost+30 %
    order_lines = pd.DataFrame(
        {
            "order_id": order_of_line,
            "line_no": line_no,
            "product_id": products.product_id.to_numpy()[prod_idx],
            "quantity": qty,
            "unit_price": np.round(unit_price, 2),
            "discount": discount,
        }
    )

    # Answers planted for the skills' tests (docs/databases.md, "The demo database and your own"): a completed order
    # with an Ergo Chair becomes a return 1 time in 5, on top of the 6 % every order has ...
    chair = products.product_id[products.product_name == "Ergo Chair"].iloc[0]
    with_chair = orders.order_id.isin(order_lines.order_id[order_lines.product_id == chair])
    orders.loc[with_chair & (orders.status == "completed") & (rng.random(N_ORDERS) < 0.2), "status"] = "returned"
    # ... and one key account buys everything at 45 % off, below cost.
    of_key_account = orders.customer_id == LOSS_MAKING_CUSTOMER
    orders.loc[of_key_account, "channel_id"] = 4
    order_lines.loc[order_lines.order_id.isin(orders.order_id[of_key_account]), "discount"] = 0.45
    budget = _budget(orders, order_lines, products, customers, regions, days, weight)
    experiments = _experiments(rng)

    calendar = pd.DataFrame({"date": days})
    calendar["year"] = calendar.date.dt.year
    calendar["quarter"] = calendar.date.dt.quarter
    calendar["month"] = calendar.date.dt.month
    calendar["month_name"] = calendar.date.dt.month_name()
    calendar["iso_week"] = calendar.date.dt.isocalendar().week.astype(int)
    calendar["weekday"] = calendar.date.dt.day_name()
    calendar["is_weekend"] = calendar.date.dt.day_of_week >= 5

    con = duckdb.connect(str(path))
    try:
        con.execute("SET threads = 1")
        for name, frame in [
            ("regions", regions),
            ("channels", channels),
            ("products", products),
            ("customers", customers),
            ("orders", orders),
            ("order_lines", order_lines),
            ("calendar", calendar),
            ("budget", budget),
            ("experiments", experiments),
        ]:
            con.register("frame", frame)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
            con.unregister("frame")
        con.execute("""
            CREATE VIEW order_facts AS
            SELECT o.order_id, o.order_date, o.status, c.customer_id, c.segment, r.region_name, ch.channel_name,
                   p.product_name, p.category, l.quantity, l.unit_price, l.discount,
                   round(l.quantity * l.unit_price * (1 - l.discount), 2) AS net_revenue,
                   round(l.quantity * (l.unit_price * (1 - l.discount) - p.unit_cost), 2) AS gross_margin
            FROM orders o
            JOIN order_lines l USING (order_id)
            JOIN products p USING (product_id)
            JOIN customers c USING (customer_id)
            LEFT JOIN regions r USING (region_id)
            JOIN channels ch USING (channel_id)
        """)
        for statement in COMMENTS:
            con.execute(statement)
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _budget(orders, order_lines, products, customers, regions, days, weight):  # type: ignore[no-untyped-def]
    """The 2025 plan: monthly net-revenue targets by region and category. Each month's total follows the
    demand curve, split by each region and category's share of the year; 2 % stretch. BUDGET_MISS plants
    targets raised for a deal that never closed."""
    import pandas as pd

    lines = order_lines.merge(orders, on="order_id").merge(products, on="product_id")
    lines = lines.merge(customers[["customer_id", "region_id"]], on="customer_id").merge(regions, on="region_id")
    lines = lines[(lines.status == "completed") & (lines.order_date.dt.year == 2025)]
    revenue = (
        (lines.quantity * lines.unit_price * (1 - lines.discount)).groupby([lines.region_name, lines.category]).sum()
    )
    in_2025 = days.year == 2025
    month_share = pd.Series(weight[in_2025], index=days[in_2025]).groupby(lambda d: d.month).sum()
    month_share = month_share / month_share.sum()
    rows = []
    for (region, category), total in revenue.items():
        for month, share in month_share.items():
            target = round(float(total * share * 1.02), -2)
            rows.append((pd.Timestamp(f"2025-{month:02d}-01"), region, category, target))
    budget = pd.DataFrame(rows, columns=["month", "region_name", "category", "target_revenue"])
    region, category, months, extra = BUDGET_MISS
    planted = (budget.region_name == region) & (budget.category == category) & budget.month.isin(pd.to_datetime(months))
    budget.loc[planted, "target_revenue"] += extra
    return budget.sort_values(["month", "region_name", "category"], ignore_index=True)


def _experiments(rng):  # type: ignore[no-untyped-def]
    """Two A/B tests on the web shop, one row per visitor: one with a real effect, one without."""
    import numpy as np
    import pandas as pd

    frames = []
    next_visitor = 1
    for name, start, per_variant, control, treatment in EXPERIMENTS:
        n = 2 * per_variant
        variant = rng.permutation(np.repeat(["control", "treatment"], per_variant))
        rate = np.where(variant == "control", control, treatment)
        converted = rng.random(n) < rate
        revenue = np.where(converted, np.round(rng.lognormal(4.6, 0.8, n), 2), 0.0)
        frames.append(
            pd.DataFrame(
                {
                    "experiment": name,
                    "visitor_id": np.arange(next_visitor, next_visitor + n),
                    "variant": variant,
                    "visited_on": pd.to_datetime(start) + pd.to_timedelta(rng.integers(0, 28, n), "D"),
                    "converted": converted,
                    "revenue": revenue,
                }
            )
        )
        next_visitor += n
    return pd.concat(frames, ignore_index=True)


if __name__ == "__main__":
    import sys

    _build(Path(sys.argv[1]))
