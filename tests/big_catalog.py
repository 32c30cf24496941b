"""A company-sized catalog on the tests' PostgreSQL (tests/pg_server.py), shaped like AdventureWorks and Pagila.

Database ``bigcat`` (owned by ``owner``, read by ``analyst``): five schemas (``sales``, ``purchasing``,
``production``, ``hr``, ``person``) of ordinary tables with comments, keys and a domain-typed column (``"Name"``,
a varchar(50); ``"Flag"``, a boolean), one schema ``pu`` of alias views (``pu.poh``: ``SELECT id, * FROM
purchasing.purchaseorderheader``) beside views that compute, a declarative ``PARTITION BY RANGE`` table
(``sales.ledger``, six monthly partitions) and a Pagila-style inheritance parent (``public.payment``, empty, with
six ``payment_p2007_0N`` children holding every row). ``RELATIONS`` is how many tables and views it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.pg_server import Postgres

DATABASE = "bigcat"

_FILLER = {
    "sales": ["customer", "store", "territory", "currency", "currency_rate", "special_offer", "sales_reason"],
    "production": ["product", "product_category", "product_model", "location", "work_order", "bill_of_materials"],
    "hr": ["employee", "department", "shift", "job_candidate", "pay_history"],
    "person": ["address", "address_type", "contact_type", "country_region", "state_province", "email_address"],
}
_COPIES = 5  # each filler table in several variants (…_history, …_2, …) so the catalog is large


def _statements() -> list[str]:
    out = [
        'CREATE DOMAIN "Name" AS varchar(50)',
        'CREATE DOMAIN "Flag" AS boolean NOT NULL',
        "CREATE SCHEMA sales",
        "CREATE SCHEMA purchasing",
        "CREATE SCHEMA production",
        "CREATE SCHEMA hr",
        "CREATE SCHEMA person",
        "CREATE SCHEMA pu",
        'CREATE TABLE purchasing.vendor (businessentityid int PRIMARY KEY, name "Name" NOT NULL, '
        'creditrating smallint, preferredvendorstatus "Flag" DEFAULT true, activeflag "Flag" DEFAULT true)',
        "COMMENT ON TABLE purchasing.vendor IS 'Companies from whom Adventure Works Cycles purchases parts or "
        "other goods.'",
        "CREATE TABLE purchasing.purchaseorderheader (purchaseorderid int PRIMARY KEY, revisionnumber smallint, "
        "status smallint, employeeid int, vendorid int REFERENCES purchasing.vendor, shipmethodid int, "
        "orderdate timestamp NOT NULL, shipdate timestamp, subtotal numeric(19,4), taxamt numeric(19,4), "
        "freight numeric(19,4))",
        "COMMENT ON TABLE purchasing.purchaseorderheader IS 'General purchase order information. See "
        "PurchaseOrderDetail.'",
        "COMMENT ON COLUMN purchasing.purchaseorderheader.vendorid IS 'Vendor with whom the purchase order is placed. "
        "Foreign key to Vendor.BusinessEntityID.'",
        "CREATE TABLE purchasing.purchaseorderdetail (purchaseorderid int REFERENCES "
        "purchasing.purchaseorderheader, purchaseorderdetailid int, duedate timestamp, orderqty smallint, "
        "productid int, unitprice numeric(19,4), receivedqty numeric(8,2), rejectedqty numeric(8,2), "
        "PRIMARY KEY (purchaseorderid, purchaseorderdetailid))",
        "COMMENT ON TABLE purchasing.purchaseorderdetail IS 'Individual products associated with a specific "
        "purchase order. See PurchaseOrderHeader.'",
        'CREATE TABLE purchasing.shipmethod (shipmethodid int PRIMARY KEY, name "Name", shipbase numeric(19,4))',
        "CREATE TABLE purchasing.productvendor (productid int, businessentityid int REFERENCES purchasing.vendor, "
        "averageleadtime int, standardprice numeric(19,4), PRIMARY KEY (productid, businessentityid))",
        "INSERT INTO purchasing.vendor SELECT i, 'Vendor ' || i, 1 + i % 5, i % 7 <> 0, true "
        "FROM generate_series(1, 104) i",
        "INSERT INTO purchasing.purchaseorderheader SELECT i, 1, 1 + i % 4, 250 + i % 12, 1 + i % 104, 1 + i % 5, "
        "timestamp '2011-04-16' + (i % 1400) * interval '1 day', NULL, (i * 37) % 20000, 0, 0 "
        "FROM generate_series(1, 4012) i",
        # alias views (AdventureWorks' pu.poh …): one relation's columns under a short name, nothing computed
        "CREATE VIEW pu.poh AS SELECT purchaseorderid AS id, * FROM purchasing.purchaseorderheader",
        "CREATE VIEW pu.pod AS SELECT purchaseorderdetailid AS id, * FROM purchasing.purchaseorderdetail",
        "CREATE VIEW pu.v AS SELECT businessentityid AS id, * FROM purchasing.vendor",
        "CREATE VIEW pu.sm AS SELECT shipmethodid AS id, * FROM purchasing.shipmethod",
        "CREATE VIEW pu.pv AS SELECT productid AS id, * FROM purchasing.productvendor",
        # a view that computes (not an alias)
        "CREATE VIEW purchasing.vvendorspend AS SELECT v.name, sum(h.subtotal) AS spend FROM purchasing.vendor v "
        "JOIN purchasing.purchaseorderheader h ON h.vendorid = v.businessentityid GROUP BY v.name",
        # declarative partitions
        "CREATE TABLE sales.ledger (entry_id bigint, booked_on date NOT NULL, amount numeric(12,2)) "
        "PARTITION BY RANGE (booked_on)",
        "COMMENT ON TABLE sales.ledger IS 'General ledger entries, by month'",
    ]
    for m in range(1, 7):
        out.append(
            f"CREATE TABLE sales.ledger_2024_{m:02d} PARTITION OF sales.ledger FOR VALUES FROM "
            f"('2024-{m:02d}-01') TO ('2024-{m + 1:02d}-01')"
        )
    out.append(
        "INSERT INTO sales.ledger SELECT i, date '2024-01-01' + (i % 180), (i % 500) * 1.25 "
        "FROM generate_series(1, 6000) i"
    )
    # Pagila's payment: an empty parent, its rows in inheriting children
    out += [
        "CREATE TABLE public.payment (payment_id int, customer_id int, amount numeric(5,2), payment_date timestamp)",
        "COMMENT ON TABLE public.payment IS 'Payments by customers'",
    ]
    for m in range(1, 7):
        out.append(f"CREATE TABLE public.payment_p2007_{m:02d} () INHERITS (public.payment)")
        out.append(
            f"INSERT INTO public.payment_p2007_{m:02d} SELECT i, 1 + i % 599, (i % 11) + 0.99, "
            f"timestamp '2007-{m:02d}-01' + (i % 28) * interval '1 day' FROM generate_series(1, 2500) i"
        )
    for schema, names in _FILLER.items():
        for name in names:
            for copy in range(_COPIES):
                table = name if copy == 0 else f"{name}_{('history', 'archive', 'staging', 'snapshot')[copy - 1]}"
                out.append(
                    f'CREATE TABLE {schema}.{table} (id int PRIMARY KEY, name "Name", modifieddate timestamp, '
                    f"rowguid uuid, note text)"
                )
                out.append(f"COMMENT ON TABLE {schema}.{table} IS '{name.replace('_', ' ').title()} records'")
                if copy == 0:
                    out.append(f"CREATE VIEW pu.{schema[:2]}_{name} AS SELECT id AS {name}_id, * FROM {schema}.{table}")
    out.append("ANALYZE")
    return out


def relations(pg: Postgres) -> int:
    """How many tables, partitions and views ``bigcat`` holds in its own schemas."""
    rows = pg.sql(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema')",
        database=DATABASE,
    )
    return int(rows[0][0])


def make_catalog(pg: Postgres) -> str:
    """Database ``bigcat`` made once (idempotent across a run); its name."""
    exists = pg.sql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'", database="postgres")
    if not exists:
        pg.sql(f"CREATE DATABASE {DATABASE} OWNER owner", database="postgres")
        pg.sql(*_statements(), role="owner", database=DATABASE)
    return DATABASE
