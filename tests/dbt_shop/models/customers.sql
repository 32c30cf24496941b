select * from (values (1, 'north'), (2, 'south')) as t(customer_id, region)
