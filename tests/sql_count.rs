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

/// Makes target `t` (`mode`: `SCD TYPE 2` or `BITEMPORAL`) from source `ev`, and applies
/// `events` (`(key, value, business, system, delete)`) in refreshes of a few each.
fn table(s: &mut SqlSession, mode: &str, events: &[(i64, i64, i64, i64, bool)]) {
    s.execute("CREATE TABLE ev (id BIGINT, v BIGINT, seq BIGINT, sys BIGINT, op STRING)")
        .unwrap();
    let stored = match mode {
        "BITEMPORAL" => {
            "SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (seq, sys, op) STORED AS BITEMPORAL"
        }
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
