//! Filters on the temporal columns (comparisons, and the period predicates that mean them) are
//! pushed into the storage scan, which skips pages and rows that cannot pass them: the answers
//! stay those of the same query over a plain copy of the table, and the plan shows the bounds.

use crate::common;

use asof::{SqlSession, Store, StoreOptions};
use common::sorted_sql_rows;
use proptest::prelude::*;

/// A bitemporal table `t` of `keys` keys with late events on both timelines, most of its history
/// frozen into pages; and `copy`, a source table with the same rows (no push-down).
fn tables(dir: &std::path::Path, events: &[(i64, i64, i64, i64)]) -> SqlSession {
    let options = StoreOptions {
        hot_events_per_key: 1,
        ..Default::default()
    };
    let mut s = SqlSession::new(Store::open_with(dir, options).unwrap()).unwrap();
    s.execute("CREATE TABLE ev (id BIGINT, v BIGINT, seq BIGINT, sys BIGINT)")
        .unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id) \
         SEQUENCE BY seq SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (seq, sys) STORED AS BITEMPORAL",
    )
    .unwrap();
    // Several refreshes, so that later ones are late on both timelines.
    for chunk in events.chunks(7) {
        let values: Vec<String> = chunk
            .iter()
            .map(|(k, v, b, sy)| format!("({k}, {v}, {b}, {sy})"))
            .collect();
        s.execute(&format!(
            "INSERT INTO ev VALUES {}; REFRESH STREAMING TABLE t",
            values.join(", ")
        ))
        .unwrap();
    }
    s.execute("CREATE TABLE copy AS SELECT * FROM t").unwrap();
    s
}

fn events() -> impl Strategy<Value = Vec<(i64, i64, i64, i64)>> {
    proptest::collection::vec((0..5i64, 0..50i64, 0..40i64, 0..40i64), 1..40)
}

/// The filters a query may put on the temporal columns, with `a <= b`.
fn filters(a: i64, b: i64) -> Vec<String> {
    vec![
        format!("PERIOD(__START_AT, __END_AT) OVERLAPS PERIOD({a}, {b})"),
        format!("PERIOD(__SYSTEM_START_AT, __SYSTEM_END_AT) CONTAINS {a}"),
        format!("__START_AT <= {a} AND (__END_AT > {a} OR __END_AT IS NULL)"),
        format!("__START_AT < {b} AND __SYSTEM_END_AT >= {a}"),
        format!("{a} >= __SYSTEM_START_AT AND __END_AT = {b}"),
        format!(
            "PERIOD(__START_AT, __END_AT) CONTAINS {b} AND \
             PERIOD(__SYSTEM_START_AT, __SYSTEM_END_AT) OVERLAPS PERIOD({a}, {b})"
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn pushed_down_filters_answer_as_the_plain_query_does(
        events in events(),
        (a, span) in (0..40i64, 0..20i64),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = tables(dir.path(), &events);
        for f in filters(a, a + span) {
            let q = |t: &str| format!(
                "SELECT id, v, __START_AT, __END_AT, __SYSTEM_START_AT, __SYSTEM_END_AT \
                 FROM {t} WHERE {f}"
            );
            prop_assert_eq!(sorted_sql_rows(&mut s, &q("t")), sorted_sql_rows(&mut s, &q("copy")), "{}", f);
            // With a temporal clause too.
            let q = |t: &str, clause: &str| format!(
                "SELECT id, v FROM {t} {clause} WHERE {f}"
            );
            prop_assert_eq!(
                sorted_sql_rows(&mut s, &q("t", &format!("FOR SYSTEM_TIME AS OF {a}"))),
                sorted_sql_rows(
                    &mut s,
                    &q("copy", "")
                        .replace(" WHERE ", &format!(
                            " WHERE __SYSTEM_START_AT <= {a} AND (__SYSTEM_END_AT IS NULL OR __SYSTEM_END_AT > {a}) AND "
                        ))
                ),
                "{}", f
            );
        }
    }
}

#[test]
fn the_plan_shows_the_bounds_the_scan_takes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = tables(dir.path(), &[(1, 1, 1, 1), (1, 2, 5, 2), (2, 3, 3, 3)]);
    let (_, plan) = common::sql_rows(
        &mut s,
        "EXPLAIN SELECT id FROM t WHERE PERIOD(__START_AT, __END_AT) OVERLAPS PERIOD(2, 4) \
         AND __SYSTEM_START_AT <= 2",
    );
    let text = format!("{plan:?}");
    assert!(
        text.contains("business_bounds=[StartsBelow { value: Int(4), inclusive: false }, EndsAbove { value: Int(2), inclusive: false }]")
            || text.contains("business_bounds=[EndsAbove { value: Int(2), inclusive: false }, StartsBelow { value: Int(4), inclusive: false }]"),
        "{text}"
    );
    assert!(
        text.contains("system_bounds=[StartsBelow { value: Int(2), inclusive: true }]"),
        "{text}"
    );
    assert_eq!(
        sorted_sql_rows(
            &mut s,
            "SELECT id, v FROM t WHERE PERIOD(__START_AT, __END_AT) OVERLAPS PERIOD(2, 4) \
             AND __SYSTEM_END_AT IS NULL"
        ),
        [common::cells(&["1", "1"]), common::cells(&["2", "3"])]
    );
}
