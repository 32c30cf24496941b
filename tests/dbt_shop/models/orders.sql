select * from (values
    (1, 1, date '2024-01-10', 100.0),
    (2, 2, date '2024-02-05', 200.0),
    (3, 1, date '2025-01-15', 150.0),
    (4, 2, date '2025-02-10', 300.0)
) as t(order_id, customer_id, ordered_at, amount)
