-- asof quickstart: one change feed of customer addresses, three target tables.
-- Run it with:  cargo run --release -- sql -f examples/quickstart.sql
-- (it starts by dropping what an earlier run left, so it can be run again).

DROP TABLE IF EXISTS customers_scd1;
DROP TABLE IF EXISTS customers_scd2;
DROP TABLE IF EXISTS customers_bitemporal;
DROP TABLE IF EXISTS customer_changes;

-- The source: a change feed. `valid_at` is business time (when the address changed in the real
-- world), `recorded_at` is system time (when we learned it).
CREATE TABLE customer_changes (
  id BIGINT, city STRING, valid_at TIMESTAMP, recorded_at TIMESTAMP, op STRING
);
INSERT INTO customer_changes VALUES
  (1, 'Lyon',   TIMESTAMP '2025-01-01 00:00:00', TIMESTAMP '2025-01-02 09:00:00', 'UPSERT'),
  (2, 'Porto',  TIMESTAMP '2025-01-01 00:00:00', TIMESTAMP '2025-01-02 09:00:00', 'UPSERT'),
  (1, 'Paris',  TIMESTAMP '2025-03-01 00:00:00', TIMESTAMP '2025-03-02 09:00:00', 'UPSERT'),
  (2, NULL,     TIMESTAMP '2025-04-01 00:00:00', TIMESTAMP '2025-04-02 09:00:00', 'DELETE');

-- SCD TYPE 1: the latest state per key.
CREATE OR REFRESH STREAMING TABLE customers_scd1;
CREATE FLOW customers_scd1_cdc AS AUTO CDC INTO customers_scd1
FROM stream(customer_changes)
KEYS (id)
APPLY AS DELETE WHEN op = "DELETE"
SEQUENCE BY valid_at
COLUMNS * EXCEPT (op, recorded_at, valid_at)
STORED AS SCD TYPE 1;

-- SCD TYPE 2: history on business time.
CREATE OR REFRESH STREAMING TABLE customers_scd2;
CREATE FLOW customers_scd2_cdc AS AUTO CDC INTO customers_scd2
FROM stream(customer_changes)
KEYS (id)
APPLY AS DELETE WHEN op = "DELETE"
SEQUENCE BY valid_at
COLUMNS * EXCEPT (op, recorded_at, valid_at)
STORED AS SCD TYPE 2;

-- BITEMPORAL: history on business time, as known at each system time.
CREATE OR REFRESH STREAMING TABLE customers_bitemporal
FLOW AUTO CDC FROM stream(customer_changes)
KEYS (id)
APPLY AS DELETE WHEN op = "DELETE"
SEQUENCE BY valid_at
SYSTEM SEQUENCE BY recorded_at
COLUMNS * EXCEPT (op, recorded_at, valid_at)
STORED AS BITEMPORAL;

SELECT * FROM customers_scd1 ORDER BY id;
SELECT * FROM customers_scd2 ORDER BY id, __START_AT;

-- A late correction: on 2025-05-10 we learn that customer 1 had moved to Nice on 2025-02-01.
INSERT INTO customer_changes VALUES
  (1, 'Nice', TIMESTAMP '2025-02-01 00:00:00', TIMESTAMP '2025-05-10 09:00:00', 'UPSERT');
REFRESH STREAMING TABLE customers_scd2;
REFRESH STREAMING TABLE customers_bitemporal;

-- Business history now, with the correction in its place.
SELECT id, city, __START_AT, __END_AT FROM customers_scd2 WHERE id = 1 ORDER BY __START_AT;

-- Where did customer 1 live on 2025-02-15 ...
-- ... as we know it now:
SELECT id, city FROM customers_bitemporal
  FOR BUSINESS_TIME AS OF '2025-02-15T00:00:00' FOR SYSTEM_TIME AS OF '2025-06-01T00:00:00'
  WHERE id = 1;
-- ... as we believed it on 2025-04-01, before the correction (what last month's report said):
SELECT id, city FROM customers_bitemporal
  FOR BUSINESS_TIME AS OF '2025-02-15T00:00:00' FOR SYSTEM_TIME AS OF '2025-04-01T00:00:00'
  WHERE id = 1;

-- The whole bitemporal history of customer 1.
SELECT * FROM customers_bitemporal WHERE id = 1 ORDER BY __SYSTEM_START_AT, __START_AT;

-- Time travel and the change feed: the SCD2 table as the first refresh left it, and what the
-- correction changed (commit 2), row by row.
SELECT id, city, __START_AT, __END_AT FROM customers_scd2 VERSION AS OF 1
  WHERE id = 1 ORDER BY __START_AT;
SELECT id, city, __START_AT, __END_AT, _change_type, _commit_version
  FROM table_changes('customers_scd2', 2) ORDER BY _change_type;
