"""Drives `asof serve` from Python's ADBC Flight SQL driver and pyarrow (clients asof did not
write): queries on both timelines, statements, parameters, errors, browsing, and the token.
Run by tests/serve.rs with ASOF_FLIGHT_URI (and ASOF_FLIGHT_TOKEN for a server that needs one);
prints one line per check and exits non-zero on the first that fails."""

import os
import sys

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa

uri = os.environ["ASOF_FLIGHT_URI"]
token = os.environ.get("ASOF_FLIGHT_TOKEN")


def connect(with_token=True):
    kwargs = {}
    if token and with_token:
        kwargs[adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {token}"
    return flightsql.connect(uri, db_kwargs=kwargs, autocommit=True)


def check(name, got, want):
    if got != want:
        print(f"FAIL {name}: got {got!r}, want {want!r}")
        sys.exit(1)
    print(f"ok {name}")


if token:
    # Without the token, nothing is let in, and the message says what to send.
    try:
        with connect(with_token=False) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetch_arrow_table()
        print("FAIL a call without the token was let in")
        sys.exit(1)
    except adbc_driver_manager.Error as e:
        check("no token: refused", "Unauthenticated" in str(e) or "UNAUTHENTICATED" in str(e), True)
        check("no token: says how", "bearer token" in str(e), True)

with connect() as conn, conn.cursor() as cur:
    # The AUTO CDC DDL, a refresh and DML, as `asof sql` takes them.
    cur.execute(
        """CREATE TABLE moves (acct INT, balance BIGINT, seq INT, sys TIMESTAMP);
           INSERT INTO moves VALUES (1, 100, 1, TIMESTAMP '2025-01-01'), (2, 50, 1, TIMESTAMP '2025-01-01');
           CREATE OR REFRESH STREAMING TABLE accounts FLOW AUTO CDC FROM stream(moves) KEYS (acct)
             SEQUENCE BY seq SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (seq, sys) STORED AS BITEMPORAL"""
    )
    lines = cur.fetch_arrow_table().column("result").to_pylist()
    check("DDL answers the CLI's lines", lines[-1], "flow accounts into accounts: commit 1 read 2 events, upserted 2 rows")

    # Parameters, bound by the driver, of Arrow types it chose.
    cur.execute(
        "INSERT INTO moves VALUES (?, ?, ?, CAST(? AS TIMESTAMP))",
        parameters=(1, 80, 2, "2025-02-01T00:00:00"),
    )
    cur.fetch_arrow_table()
    cur.execute("REFRESH STREAMING TABLE accounts")
    cur.fetch_arrow_table()

    cur.execute("SELECT acct, balance FROM accounts WHERE __SYSTEM_END_AT IS NULL AND __END_AT IS NULL ORDER BY acct")
    check("now", cur.fetch_arrow_table().to_pylist(), [{"acct": 1, "balance": 80}, {"acct": 2, "balance": 50}])

    # What was believed before the correction, asked with a parameter.
    cur.execute(
        "SELECT acct, balance FROM accounts FOR SYSTEM_TIME AS OF ? FOR BUSINESS_TIME AS OF 5 WHERE acct = ?",
        parameters=("2025-01-15T00:00:00", 1),
    )
    table = cur.fetch_arrow_table()
    check("as of a system time", table.to_pylist(), [{"acct": 1, "balance": 100}])
    check("columns keep their Arrow types", table.schema.field("balance").type, pa.int64())

    # A result of many batches streams whole.
    cur.execute("SELECT count(*) AS n FROM (SELECT * FROM generate_series(1, 200000))")
    check("a large count", cur.fetch_arrow_table().column("n").to_pylist(), [200000])

    # Errors carry the CLI's message and a status code.
    try:
        cur.execute("SELECT * FROM no_such_table")
        cur.fetch_arrow_table()
        print("FAIL a query of a missing table succeeded")
        sys.exit(1)
    except adbc_driver_manager.ProgrammingError as e:
        check("missing table: message", "no_such_table" in str(e), True)

    # Browsing: the tables, with their schema.
    objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
    names = sorted(
        t["table_name"]
        for c in objects
        for s in c["catalog_db_schemas"]
        for t in s["db_schema_tables"]
    )
    check("tables listed", names, ["accounts", "moves"])
    schema = conn.adbc_get_table_schema("accounts")
    check("a table's columns", schema.names, ["acct", "balance", "__START_AT", "__END_AT", "__SYSTEM_START_AT", "__SYSTEM_END_AT"])

print("all ok")
