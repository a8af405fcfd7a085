"""`import asof` from Python, tested with pytest (python/run-tests.sh installs and runs it)."""

import datetime

import pandas as pd
import pyarrow as pa
import pytest

import asof


@pytest.fixture
def db(tmp_path):
    with asof.connect(str(tmp_path / "store")) as db:
        db.sql(
            """CREATE TABLE moves (acct INT, balance BIGINT, seq INT, sys TIMESTAMP);
               CREATE OR REFRESH STREAMING TABLE accounts FLOW AUTO CDC FROM stream(moves) KEYS (acct)
                 SEQUENCE BY seq SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (seq, sys) STORED AS BITEMPORAL"""
        )
        yield db


def test_a_query_answers_a_pyarrow_table_with_the_columns_types(db):
    db.sql(
        "INSERT INTO moves VALUES (1, 100, 1, TIMESTAMP '2025-01-01'); REFRESH STREAMING TABLE accounts"
    )
    t = db.sql("SELECT acct, balance, __START_AT, __SYSTEM_START_AT FROM accounts")
    assert isinstance(t, pa.Table)
    assert t.to_pylist() == [
        {"acct": 1, "balance": 100, "__START_AT": 1, "__SYSTEM_START_AT": datetime.datetime(2025, 1, 1)}
    ]
    assert t.schema.field("balance").type == pa.int64()


def test_statements_answer_the_lines_asof_sql_prints(db):
    t = db.sql("INSERT INTO moves VALUES (2, 5, 1, TIMESTAMP '2025-01-01'); REFRESH STREAMING TABLE accounts")
    assert t.column_names == ["result"]
    assert t.column("result").to_pylist()[-1] == "accounts: commit 1 read 1 events, upserted 1 and deleted 0 rows"


def test_append_takes_pandas_and_pyarrow_and_a_late_correction_reads_on_both_timelines(db):
    first = pd.DataFrame(
        {"acct": [1, 2], "balance": [100, 50], "seq": [1, 1], "sys": pd.to_datetime(["2025-01-01", "2025-01-01"])}
    )
    assert db.append("moves", first) == 2
    db.sql("REFRESH STREAMING TABLE accounts")
    late = pa.table(
        {
            "acct": pa.array([1], pa.int32()),
            "balance": pa.array([80], pa.int64()),
            "seq": pa.array([2], pa.int32()),
            "sys": pa.array([datetime.datetime(2025, 2, 1)], pa.timestamp("us")),
        }
    )
    assert db.append("moves", late) == 3
    db.sql("REFRESH STREAMING TABLE accounts")
    # Without a system-time selection a query sees every belief (ALL); the latest is asked for.
    now = db.sql(
        "SELECT acct, balance FROM accounts FOR SYSTEM_TIME AS OF TIMESTAMP '2025-03-01' FOR BUSINESS_TIME AS OF 5 "
        "ORDER BY acct"
    ).to_pandas()
    assert now.to_dict("records") == [{"acct": 1, "balance": 80}, {"acct": 2, "balance": 50}]
    before = db.sql(
        "SELECT balance FROM accounts FOR SYSTEM_TIME AS OF TIMESTAMP '2025-01-15' FOR BUSINESS_TIME AS OF 5 WHERE acct = 1"
    )
    assert before.column("balance").to_pylist() == [100]


def test_a_record_batch_appends_too(db):
    batch = pa.record_batch({"acct": [7], "balance": [1], "seq": [1], "sys": [datetime.datetime(2025, 1, 1)]})
    assert db.append("moves", batch) == 1


def test_errors_carry_the_cli_message_and_change_nothing(db):
    with pytest.raises(asof.AsofError, match="no_such"):
        db.sql("SELECT * FROM no_such")
    with pytest.raises(asof.AsofError):
        db.append("moves", pa.table({"acct": ["not a number"]}))
    assert db.sql("SELECT count(*) AS n FROM moves").column("n").to_pylist() == [0]
    with pytest.raises(ValueError, match="append takes"):
        db.append("moves", 42)


def test_a_closed_store_opens_again_with_everything_committed(tmp_path):
    path = str(tmp_path / "s")
    db = asof.connect(path)
    db.sql("CREATE TABLE t (x INT); INSERT INTO t VALUES (1), (2)")
    db.close()
    with pytest.raises(asof.AsofError, match="closed"):
        db.sql("SELECT 1")
    with asof.connect(path) as again:
        assert again.sql("SELECT sum(x) AS s FROM t").column("s").to_pylist() == [3]


def test_threads_sharing_a_store_take_turns_without_deadlock(db):
    import threading

    db.sql("INSERT INTO moves VALUES (1, 1, 1, TIMESTAMP '2025-01-01'); REFRESH STREAMING TABLE accounts")
    failures = []

    def work():
        try:
            for _ in range(20):
                assert db.sql("SELECT count(*) AS n FROM accounts").column("n").to_pylist() == [1]
                db.tables()
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    assert failures == []


def test_sql_reader_hands_a_large_result_over_batch_by_batch(db):
    db.sql(
        """INSERT INTO moves SELECT CAST(value AS INT) AS acct, value AS balance, 1 AS seq,
             TIMESTAMP '2025-01-01' AS sys FROM generate_series(1, 200000);
           REFRESH STREAMING TABLE accounts"""
    )
    reader = db.sql_reader("SELECT acct, balance FROM accounts")
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == ["acct", "balance"]
    sizes = []
    total = 0
    for batch in reader:
        sizes.append(batch.num_rows)
        total += sum(batch.column("balance").to_pylist())
    # Several batches, none of them the whole result, and every row once.
    assert len(sizes) > 1 and max(sizes) < 200000
    assert sum(sizes) == 200000
    assert total == 200000 * 200001 // 2
    # Computed as it is read: the rows before one that fails come out before the error does.
    reader = db.sql_reader("SELECT acct, 10 / (acct - 150000) AS x FROM accounts")
    assert reader.read_next_batch().num_rows > 0
    with pytest.raises(Exception, match="(?i)divide by zero"):
        for _ in reader:
            pass


def test_sql_reader_reads_the_tables_as_they_were_when_it_was_made(tmp_path):
    db = asof.connect(str(tmp_path / "store"))
    db.sql("CREATE TABLE s AS SELECT value AS id FROM generate_series(1, 3)")
    reader = db.sql_reader("SELECT id FROM s")
    db.sql("INSERT INTO s VALUES (4)")
    db.close()
    # Made before the insert, read after it and after the store was closed.
    assert sorted(reader.read_all().column("id").to_pylist()) == [1, 2, 3]
    db = asof.connect(str(tmp_path / "store"))
    # A statement that changes something answers the lines sql() answers.
    lines = db.sql_reader("INSERT INTO s VALUES (5)").read_all()
    assert lines.column_names == ["result"] and len(lines) == 1
    assert db.sql("SELECT count(*) AS n FROM s").column("n").to_pylist() == [5]
    db.close()
