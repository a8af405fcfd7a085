//! `SELECT count(*)` of a target table's latest version, without time travel or filters, is
//! answered from the count of its rows the store keeps (in memory, or in the summary its last
//! checkpoint wrote), without a scan: the plan is a literal, and it equals what a scan counts.
//! Everything else (time travel, a filter, a table whose summary predates the count) is scanned.

use crate::common;

use asof::{KvStore, SledKv, SqlSession, Store, StoreOptions, WriteBatch};
use proptest::prelude::*;

/// A session on the store in `dir`, whose keys freeze into pages after one event.
fn session(dir: &std::path::Path) -> SqlSession {
    let options = StoreOptions {
        hot_events_per_key: 1,
        ..Default::default()
    };
    SqlSession::new(Store::open_with(dir, options).unwrap()).unwrap()
}

/// Makes target `t` (`mode`: `SCD TYPE 1`, `SCD TYPE 2` or `BITEMPORAL`) from source `ev`, and applies
/// `events` (`(key, value, business, system, delete)`) in refreshes of a few each.
fn table(s: &mut SqlSession, mode: &str, events: &[(i64, i64, i64, i64, bool)]) {
    s.execute("CREATE TABLE ev (id BIGINT, v BIGINT, seq BIGINT, sys BIGINT, op STRING)")
        .unwrap();
    let stored = match mode {
        "BITEMPORAL" => {
            "SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (seq, sys, op) STORED AS BITEMPORAL"
        }
        "SCD TYPE 1" => "COLUMNS * EXCEPT (seq, sys, op) STORED AS SCD TYPE 1",
        _ => "COLUMNS * EXCEPT (seq, sys, op) STORED AS SCD TYPE 2",
    };
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id) \
         APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq {stored}"
    ))
    .unwrap();
    for chunk in events.chunks(5) {
        let values: Vec<String> = chunk
            .iter()
            .map(|(k, v, b, sy, d)| {
                format!("({k}, {v}, {b}, {sy}, '{}')", if *d { "D" } else { "U" })
            })
            .collect();
        s.execute(&format!(
            "INSERT INTO ev VALUES {}; REFRESH STREAMING TABLE t",
            values.join(", ")
        ))
        .unwrap();
    }
}

/// The one number `sql` returns.
fn number(s: &mut SqlSession, sql: &str) -> i64 {
    let (_, rows) = common::sql_rows(s, sql);
    rows[0][0].as_deref().unwrap().parse().unwrap()
}

/// Whether the plan of `sql` reads the table (rather than a literal taken from its count).
fn scans(s: &mut SqlSession, sql: &str) -> bool {
    let (_, plan) = common::sql_rows(s, &format!("EXPLAIN {sql}"));
    let text = format!("{plan:?}");
    assert!(
        text.contains("StoreScanExec") != text.contains("PlaceholderRowExec"),
        "{text}"
    );
    text.contains("StoreScanExec")
}

/// `count(*)` answered without a scan, equal to `count(id)` (the key, never NULL), which scans.
fn counted_without_a_scan(s: &mut SqlSession) -> i64 {
    assert!(!scans(s, "SELECT count(*) FROM t"));
    assert!(scans(s, "SELECT count(id) FROM t"));
    let n = number(s, "SELECT count(*) FROM t");
    assert_eq!(n, number(s, "SELECT count(id) FROM t"));
    n
}

fn events() -> impl Strategy<Value = Vec<(i64, i64, i64, i64, bool)>> {
    proptest::collection::vec(
        (
            0..5i64,
            0..50i64,
            0..40i64,
            0..40i64,
            prop::bool::weighted(0.15),
        ),
        1..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// In memory after the commits, then read from the store's records after a reopen: the
    /// count is the same, and a scan agrees with it.
    #[test]
    fn count_star_of_the_latest_version_equals_a_scan_in_memory_and_after_a_reopen(
        bitemporal in any::<bool>(),
        events in events(),
    ) {
        let mode = if bitemporal { "BITEMPORAL" } else { "SCD TYPE 2" };
        let dir = tempfile::tempdir().unwrap();
        let mut s = session(dir.path());
        table(&mut s, mode, &events);
        let in_memory = counted_without_a_scan(&mut s);
        drop(s);
        let mut s = session(dir.path());
        prop_assert_eq!(counted_without_a_scan(&mut s), in_memory);
    }
}

#[test]
fn count_star_with_time_travel_or_a_filter_is_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let events = [
        (1, 10, 1, 1, false),
        (2, 20, 2, 2, false),
        (1, 11, 3, 3, false),
        (2, 21, 4, 4, true),
        (3, 30, 5, 5, false),
        (1, 12, 6, 6, false),
    ];
    table(&mut s, "BITEMPORAL", &events);
    assert_eq!(counted_without_a_scan(&mut s), 8);
    for (sql, rows) in [
        ("SELECT count(*) FROM t WHERE v > 11", 4),
        ("SELECT count(*) FROM t WHERE id = 1", 5),
        ("SELECT count(*) FROM t FOR SYSTEM_TIME AS OF 3", 3),
        ("SELECT count(*) FROM t FOR BUSINESS_TIME AS OF 4", 4),
    ] {
        assert!(scans(&mut s, sql), "{sql}");
        assert_eq!(number(&mut s, sql), rows, "{sql}");
    }
    // An earlier version: the count kept is the latest's.
    let first = "SELECT count(*) FROM t VERSION AS OF 1";
    assert!(scans(&mut s, first));
    assert_eq!(
        number(&mut s, first),
        number(&mut s, "SELECT count(id) FROM t VERSION AS OF 1")
    );
}

/// The tables' summaries (`G`, JSON) as an earlier build wrote them: without the count of their
/// rows. Returns how many it rewrote.
fn forget_counts(dir: &std::path::Path) -> usize {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let mut b = WriteBatch::default();
    let mut n = 0;
    for pair in kv.scan_prefix(b"G") {
        let (key, value) = pair.unwrap();
        let json = String::from_utf8(value).unwrap();
        let at = json.find(",\"live\":").unwrap();
        b.put(key, format!("{}}}", &json[..at]).into_bytes());
        n += 1;
    }
    kv.write(b).unwrap();
    n
}

#[test]
fn a_summary_written_before_the_count_was_kept_is_counted_by_a_scan_until_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let events = [
        (1, 10, 1, 1, false),
        (2, 20, 2, 2, false),
        (1, 11, 3, 3, false),
    ];
    table(&mut s, "SCD TYPE 2", &events);
    assert_eq!(counted_without_a_scan(&mut s), 3);
    drop(s);
    assert_eq!(forget_counts(dir.path()), 1);
    let mut s = session(dir.path());
    assert!(scans(&mut s, "SELECT count(*) FROM t"));
    assert_eq!(number(&mut s, "SELECT count(*) FROM t"), 3);
    s.execute("INSERT INTO ev VALUES (3, 30, 4, 4, 'U'); REFRESH STREAMING TABLE t")
        .unwrap();
    assert_eq!(counted_without_a_scan(&mut s), 4);
    drop(s);
    let mut s = session(dir.path());
    assert_eq!(counted_without_a_scan(&mut s), 4);
}

/// After each statement that changes rows (or only the table's properties), in memory and after a
/// reopen, `count(*)` is the kept count and equals a scan: DML on the streaming table, ERASE,
/// VACUUM, a full refresh, and a property commit after the last checkpoint (its summary is then
/// behind the table's last commit, which wrote no rows).
#[test]
fn count_star_follows_dml_erase_vacuum_a_full_refresh_and_a_property_commit() {
    for mode in ["SCD TYPE 1", "SCD TYPE 2", "BITEMPORAL"] {
        let dir = tempfile::tempdir().unwrap();
        let mut s = session(dir.path());
        let events: Vec<_> = (0..12).map(|i| (i % 4, i, i, i, i == 9)).collect();
        table(&mut s, mode, &events);
        s.execute(
            "ALTER STREAMING TABLE t SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false')",
        )
        .unwrap();
        // A bitemporal table takes statements only when its system sequence is a timestamp
        // (they are stamped with their commit time); this one's is a number.
        let dml = match mode {
            "BITEMPORAL" => &[][..],
            _ => &[
                "DELETE FROM t WHERE id = 2",
                "UPDATE t SET v = 99 WHERE id = 3",
            ][..],
        };
        let rest = [
            "ERASE FROM t WHERE id = 0 REASON 'test'",
            "VACUUM t RETAIN 0 HOURS",
            "INSERT INTO ev VALUES (5, 50, 40, 40, 'U'); REFRESH STREAMING TABLE t FULL",
        ];
        for sql in dml.iter().chain(&rest) {
            s.execute(sql)
                .unwrap_or_else(|e| panic!("{mode}: {sql}: {e}"));
            let in_memory = counted_without_a_scan(&mut s);
            drop(s);
            s = session(dir.path());
            assert_eq!(counted_without_a_scan(&mut s), in_memory, "{mode}: {sql}");
        }
        // A property commit on a table read from its records: no rows written, and the count
        // of its summary (at the commit before) answers for it.
        let before = s.store().live_rows("t").unwrap().unwrap();
        s.execute("ALTER STREAMING TABLE t SET TBLPROPERTIES ('owner' = 'audit')")
            .unwrap();
        let after = s.store().live_rows("t").unwrap().unwrap();
        assert_eq!(after.version, before.version + 1, "{mode}");
        assert_eq!(after.rows, before.rows, "{mode}");
        assert_eq!(counted_without_a_scan(&mut s), after.rows as i64, "{mode}");
    }
}

/// A count in a summary that the row directories do not bear out is damage: `verify` reports it.
#[test]
fn a_summary_whose_count_the_rows_do_not_bear_out_fails_verify() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    table(
        &mut s,
        "SCD TYPE 2",
        &[(1, 10, 1, 1, false), (1, 11, 2, 2, false)],
    );
    assert_eq!(counted_without_a_scan(&mut s), 2);
    drop(s);
    {
        let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
        let mut b = WriteBatch::default();
        for pair in kv.scan_prefix(b"G") {
            let (key, value) = pair.unwrap();
            let json = String::from_utf8(value).unwrap();
            assert!(json.contains("\"live\":2"), "{json}");
            b.put(key, json.replace("\"live\":2", "\"live\":3").into_bytes());
        }
        kv.write(b).unwrap();
    }
    let s = session(dir.path());
    let report = s.store().verify().unwrap();
    assert!(!report.ok(), "{report:?}");
    let text = format!("{report:?}");
    assert!(
        text.contains("the row directories hold 2 rows not retired, the summary says 3"),
        "{text}"
    );
}
