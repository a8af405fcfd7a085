//! `AUTO CDC FROM SNAPSHOT`: full snapshots, told apart by a version column, become a history of
//! inserts, updates and deletes; a late snapshot corrects it like a late event.

use crate::common;

use asof::{SessionOptions, SqlSession, Store};
use proptest::strategy::Strategy;

use common::{cells, sorted_sql_rows as rows};

const HISTORY: &str = "SELECT id, city, __START_AT, __END_AT FROM people";

#[test]
fn snapshots_become_scd2_history_and_a_late_one_corrects_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE people_snapshots (id BIGINT, city STRING, snap BIGINT); \
         INSERT INTO people_snapshots VALUES (1, 'Oslo', 1), (2, 'Rome', 1); \
         INSERT INTO people_snapshots VALUES (1, 'Oslo', 3), (3, 'Lima', 3); \
         CREATE FLOW people_cdc AS AUTO CDC FROM SNAPSHOT people_snapshots INTO people \
           KEYS (id) SEQUENCE BY snap COLUMNS * EXCEPT (snap) STORED AS SCD TYPE 2",
    )
    .unwrap();
    // Snapshot 3 drops key 2 and adds key 3.
    assert_eq!(
        rows(&mut s, HISTORY),
        [
            vec![
                Some("1".into()),
                Some("Oslo".into()),
                Some("1".into()),
                None
            ],
            cells(&["2", "Rome", "1", "3"]),
            vec![
                Some("3".into()),
                Some("Lima".into()),
                Some("3".into()),
                None
            ],
        ]
    );
    // Snapshot 2 arrives late: key 1 moved to Bergen in it, key 3 appeared already; key 2 is
    // gone from it.
    s.execute(
        "INSERT INTO people_snapshots VALUES (1, 'Bergen', 2), (3, 'Lima', 2); \
         REFRESH STREAMING TABLE people",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, HISTORY),
        [
            cells(&["1", "Bergen", "2", "3"]),
            cells(&["1", "Oslo", "1", "2"]),
            vec![
                Some("1".into()),
                Some("Oslo".into()),
                Some("3".into()),
                None
            ],
            cells(&["2", "Rome", "1", "2"]),
            vec![
                Some("3".into()),
                Some("Lima".into()),
                Some("2".into()),
                None
            ],
        ]
    );
    // A refresh with nothing new, and the statement run again: nothing changes.
    let before = rows(&mut s, "DESCRIBE HISTORY people").len();
    s.execute("REFRESH STREAMING TABLE people").unwrap();
    s.execute(
        "CREATE FLOW people_cdc AS AUTO CDC FROM SNAPSHOT people_snapshots INTO people \
         KEYS (id) SEQUENCE BY snap COLUMNS * EXCEPT (snap) STORED AS SCD TYPE 2",
    )
    .unwrap();
    assert_eq!(rows(&mut s, "DESCRIBE HISTORY people").len(), before);
    // An SCD1 flow over the same snapshots: the latest snapshot's rows.
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE current_people FLOW AUTO CDC FROM SNAPSHOT \
         people_snapshots KEYS (id) SEQUENCE BY snap COLUMNS * EXCEPT (snap) STORED AS SCD TYPE 1",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, city FROM current_people"),
        [cells(&["1", "Oslo"]), cells(&["3", "Lima"])]
    );
}

/// The snapshot table's INSERT of snapshot `v`: `(key, value)` rows.
fn insert_snapshot(v: i64, rows: &[(i64, i64)]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|(k, x)| format!("({k}, 'c{x}', {v})"))
        .collect();
    format!("INSERT INTO snaps VALUES {}", values.join(", "))
}

/// The SCD2 history of `people` after the snapshots are inserted in `order`, each followed by a
/// refresh (the first creates the flow).
fn history_after(snapshots: &[Vec<(i64, i64)>], order: &[usize]) -> Vec<Vec<Option<String>>> {
    history_with(snapshots, order, SessionOptions::default())
}

/// [`history_after`], the session given `options`.
fn history_with(
    snapshots: &[Vec<(i64, i64)>],
    order: &[usize],
    options: SessionOptions,
) -> Vec<Vec<Option<String>>> {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::with_options(Store::open(dir.path()).unwrap(), options).unwrap();
    s.execute("CREATE TABLE snaps (id BIGINT, city STRING, snap BIGINT)")
        .unwrap();
    for (n, &i) in order.iter().enumerate() {
        if !snapshots[i].is_empty() {
            s.execute(&insert_snapshot(i as i64 + 1, &snapshots[i]))
                .unwrap();
        }
        if n == 0 {
            s.execute(
                "CREATE FLOW f AS AUTO CDC FROM SNAPSHOT snaps INTO people KEYS (id) \
                 SEQUENCE BY snap COLUMNS * EXCEPT (snap) STORED AS SCD TYPE 2",
            )
            .unwrap();
        } else {
            s.execute("REFRESH STREAMING TABLE people").unwrap();
        }
    }
    rows(&mut s, HISTORY)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    /// Snapshots arriving in any order give the history they give in version order.
    #[test]
    fn the_order_snapshots_arrive_in_never_changes_the_history(
        snapshots in proptest::collection::vec(
            proptest::collection::btree_map(0i64..4, 0i64..3, 1..4)
                .prop_map(|m| m.into_iter().collect::<Vec<_>>()),
            2..5,
        ),
        seed in 0u64..1000,
    ) {
        let in_order: Vec<usize> = (0..snapshots.len()).collect();
        let mut shuffled = in_order.clone();
        // A permutation from the seed (proptest shrinks the seed, not the order).
        let mut x = seed;
        for i in (1..shuffled.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (x >> 33) as usize % (i + 1));
        }
        proptest::prop_assert_eq!(
            history_after(&snapshots, &shuffled),
            history_after(&snapshots, &in_order)
        );
    }
}

/// The SCD2 history of `snapshots` (snapshot `i` has version `i + 1`; an empty one never
/// arrives), worked out key by key: a row version opens where a key appears or its value
/// changes, and ends at the next snapshot that lacks it or changes it.
fn model_history(snapshots: &[Vec<(i64, i64)>]) -> Vec<Vec<Option<String>>> {
    let arrived: Vec<(i64, &Vec<(i64, i64)>)> = (1i64..)
        .zip(snapshots)
        .filter(|(_, s)| !s.is_empty())
        .collect();
    let keys: std::collections::BTreeSet<i64> =
        snapshots.iter().flatten().map(|(k, _)| *k).collect();
    let row = |k: i64, c: i64, start: i64, end: Option<i64>| {
        vec![
            Some(k.to_string()),
            Some(format!("c{c}")),
            Some(start.to_string()),
            end.map(|e| e.to_string()),
        ]
    };
    let mut out = Vec::new();
    for k in keys {
        let mut open: Option<(i64, i64)> = None;
        for (v, snap) in &arrived {
            let now = snap.iter().find(|(key, _)| *key == k).map(|(_, c)| *c);
            match (open, now) {
                (None, Some(c)) => open = Some((c, *v)),
                (Some((was, start)), Some(c)) if was != c => {
                    out.push(row(k, was, start, Some(*v)));
                    open = Some((c, *v));
                }
                (Some((was, start)), None) => {
                    out.push(row(k, was, start, Some(*v)));
                    open = None;
                }
                _ => {}
            }
        }
        if let Some((was, start)) = open {
            out.push(row(k, was, start, None));
        }
    }
    out.sort();
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]

    /// The diff's sort spills to temporary files when its memory is small (here a record or
    /// two): the history is the model's all the same, snapshots arriving in any order.
    #[test]
    fn a_diff_whose_sort_spills_gives_the_history_of_the_model(
        snapshots in proptest::collection::vec(
            proptest::collection::btree_map(0i64..6, 0i64..3, 0..5)
                .prop_map(|m| m.into_iter().collect::<Vec<_>>()),
            1..6,
        ),
        seed in 0u64..1000,
        memory in 1usize..200,
    ) {
        let mut order: Vec<usize> = (0..snapshots.len()).collect();
        let mut x = seed;
        for i in (1..order.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (x >> 33) as usize % (i + 1));
        }
        let options = SessionOptions::default().with_sort_memory(memory);
        proptest::prop_assert_eq!(
            history_with(&snapshots, &order, options),
            model_history(&snapshots)
        );
    }
}

#[test]
fn a_folder_of_snapshot_files_becomes_history_in_file_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    std::fs::create_dir(&snaps).unwrap();
    let write = |name: &str, body: &str| common::write_settled(&snaps.join(name), body);
    write("2025-01-01.csv", "id,city\n1,Oslo\n2,Rome\n");
    write("2025-03-01.csv", "id,city\n1,Oslo\n3,Lima\n");
    let mut s = snapshot_folder_flow(dir.path(), &snaps);
    let history = "SELECT id, city, __START_AT, __END_AT FROM people";
    let open = |id: &str, city: &str, from: &str| {
        vec![Some(id.into()), Some(city.into()), Some(from.into()), None]
    };
    assert_eq!(
        rows(&mut s, history),
        [
            open("1", "Oslo", "2025-01-01.csv"),
            cells(&["2", "Rome", "2025-01-01.csv", "2025-03-01.csv"]),
            open("3", "Lima", "2025-03-01.csv"),
        ]
    );
    // A snapshot between the two arrives late: history is corrected around it.
    write("2025-02-01.csv", "id,city\n1,Bergen\n2,Rome\n");
    s.execute("REFRESH STREAMING TABLE people").unwrap();
    assert_eq!(
        rows(&mut s, history),
        [
            cells(&["1", "Bergen", "2025-02-01.csv", "2025-03-01.csv"]),
            cells(&["1", "Oslo", "2025-01-01.csv", "2025-02-01.csv"]),
            open("1", "Oslo", "2025-03-01.csv"),
            cells(&["2", "Rome", "2025-01-01.csv", "2025-03-01.csv"]),
            open("3", "Lima", "2025-03-01.csv"),
        ]
    );
    // The target holds the people, not the files.
    let (names, _) = common::sql_rows(&mut s, "SELECT * FROM people LIMIT 1");
    assert_eq!(names, ["id", "city", "__START_AT", "__END_AT"]);
}

#[test]
fn a_snapshot_flow_run_again_refreshes_takes_other_clauses_and_refuses_other_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    let flow = "CREATE FLOW people_cdc AS AUTO CDC FROM SNAPSHOT people_snapshots INTO people \
                KEYS (id) SEQUENCE BY snap COLUMNS * EXCEPT (snap) STORED AS SCD TYPE 2";
    s.execute(
        "CREATE TABLE people_snapshots (id BIGINT, city STRING, snap BIGINT); \
         INSERT INTO people_snapshots VALUES (1, 'Oslo', 1)",
    )
    .unwrap();
    s.execute(flow).unwrap();
    s.execute("INSERT INTO people_snapshots VALUES (1, 'Rome', 2)")
        .unwrap();
    s.execute(flow).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT city FROM people WHERE __END_AT IS NULL"),
        [cells(&["Rome"])]
    );
    // Other AUTO CDC clauses redefine it as an AUTO CDC flow is: the table is rebuilt from all
    // the snapshots, or the redefinition says what it may not change.
    let out = s
        .execute(&flow.replace("COLUMNS * EXCEPT (snap)", "COLUMNS (id, city)"))
        .unwrap();
    let Some(asof::SqlOutput::Done(line)) = out.last() else {
        panic!("a line")
    };
    assert!(
        line.starts_with("flow people_cdc redefined: commit 3 rebuilt people"),
        "{line}"
    );
    let e = s
        .execute(&format!("{flow} TRACK HISTORY ON * EXCEPT (city)"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot be redefined with another TRACK HISTORY"),
        "{e}"
    );
    assert_eq!(
        rows(&mut s, "SELECT city, __START_AT, __END_AT FROM people"),
        [
            cells(&["Oslo", "1", "2"]),
            vec![Some("Rome".to_string()), Some("2".to_string()), None]
        ]
    );
    // Other keys are the table's shape, as for any AUTO CDC flow: refused, with nothing changed.
    let e = s
        .execute(&flow.replace("KEYS (id)", "KEYS (city)"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("other keys or version"), "{e}");
    assert!(e.contains("nothing was changed"), "{e}");
    // Another table of snapshots likewise (its events would have to be derived again).
    s.execute("CREATE TABLE other_snapshots (id BIGINT, city STRING, snap BIGINT)")
        .unwrap();
    let e = s
        .execute(&flow.replace("SNAPSHOT people_snapshots", "SNAPSHOT other_snapshots"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("other snapshots (`other_snapshots`, not `people_snapshots`)"),
        "{e}"
    );
    assert_eq!(rows(&mut s, "SELECT count(*) FROM people"), [cells(&["2"])]);
}

#[test]
fn snapshot_files_take_no_schema_evolution() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    std::fs::create_dir(&snaps).unwrap();
    let mut s = SqlSession::new(Store::open(dir.path().join("db")).unwrap()).unwrap();
    let e = s
        .execute(&format!(
            "CREATE FLOW p AS AUTO CDC FROM SNAPSHOT read_files('{}', format => 'csv', \
             schemaEvolutionMode => 'addNewColumns') INTO people KEYS (id) STORED AS SCD TYPE 2",
            snaps.display()
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("schemaEvolutionMode"), "{e}");
}

/// A store in `dir` whose SCD TYPE 2 table `people` takes the snapshots of folder `snaps`.
fn snapshot_folder_flow(dir: &std::path::Path, snaps: &std::path::Path) -> SqlSession {
    let mut s = SqlSession::new(Store::open(dir.join("db")).unwrap()).unwrap();
    s.execute(&format!(
        "CREATE FLOW people_cdc AS AUTO CDC FROM SNAPSHOT read_files('{}', format => 'csv', header => true) \
         INTO people KEYS (id) STORED AS SCD TYPE 2",
        snaps.display()
    ))
    .unwrap();
    s
}

#[test]
fn a_subfolder_is_one_snapshot_taken_whole_once_it_holds_success_and_a_late_file_amends_it() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    common::write_settled(&snaps.join("2025-01/part-0.csv"), "id,city\n1,Oslo\n");
    common::write_settled(&snaps.join("2025-01/part-1.csv"), "id,city\n2,Rome\n");
    common::write_settled(&snaps.join("2025-01/_SUCCESS"), "");
    // Not complete yet: no _SUCCESS.
    common::write_settled(
        &snaps.join("2025-03/part-0.csv"),
        "id,city\n1,Oslo\n3,Lima\n",
    );
    let mut s = snapshot_folder_flow(dir.path(), &snaps);
    let open = |id: &str, city: &str, from: &str| {
        vec![Some(id.into()), Some(city.into()), Some(from.into()), None]
    };
    assert_eq!(
        rows(&mut s, HISTORY),
        [open("1", "Oslo", "2025-01"), open("2", "Rome", "2025-01")]
    );
    common::write_settled(&snaps.join("2025-03/_SUCCESS"), "");
    // A late snapshot in two files.
    common::write_settled(&snaps.join("2025-02/a.csv"), "id,city\n1,Bergen\n");
    common::write_settled(&snaps.join("2025-02/b.csv"), "id,city\n2,Rome\n");
    common::write_settled(&snaps.join("2025-02/_SUCCESS"), "");
    s.execute("REFRESH STREAMING TABLE people").unwrap();
    let history = [
        cells(&["1", "Bergen", "2025-02", "2025-03"]),
        cells(&["1", "Oslo", "2025-01", "2025-02"]),
        open("1", "Oslo", "2025-03"),
        cells(&["2", "Rome", "2025-01", "2025-03"]),
        open("3", "Lima", "2025-03"),
    ];
    assert_eq!(rows(&mut s, HISTORY), history);
    // A file arriving later in a subfolder taken already joins its snapshot: 2025-01 now holds
    // key 4 too, which 2025-02 does not.
    common::write_settled(&snaps.join("2025-01/part-2.csv"), "id,city\n4,Pisa\n");
    s.execute("REFRESH STREAMING TABLE people").unwrap();
    let mut amended = history.to_vec();
    amended.push(cells(&["4", "Pisa", "2025-01", "2025-02"]));
    amended.sort();
    assert_eq!(rows(&mut s, HISTORY), amended);
}

#[test]
fn a_table_replaced_in_place_is_a_snapshot_at_each_of_its_versions() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    // No SEQUENCE BY: the table holds one snapshot, and its commit version is the snapshot's.
    s.execute(
        "CREATE TABLE people_now (id BIGINT, city STRING); \
         INSERT INTO people_now VALUES (1, 'Oslo'), (2, 'Rome'); \
         CREATE FLOW people_cdc AS AUTO CDC FROM SNAPSHOT people_now INTO people \
           KEYS (id) STORED AS SCD TYPE 2",
    )
    .unwrap();
    let open = |id: &str, city: &str, start: &str| {
        vec![
            Some(id.to_string()),
            Some(city.to_string()),
            Some(start.to_string()),
            None,
        ]
    };
    assert_eq!(
        rows(&mut s, HISTORY),
        [open("1", "Oslo", "1"), open("2", "Rome", "1")]
    );
    // Replaced in one statement (version 2): key 1 moved, key 2 left, key 3 came.
    s.execute(
        "MERGE INTO people_now USING (VALUES (1, 'Bergen'), (3, 'Lima')) AS n(id, city) \
           ON people_now.id = n.id \
         WHEN MATCHED THEN UPDATE SET city = n.city \
         WHEN NOT MATCHED THEN INSERT (id, city) VALUES (n.id, n.city) \
         WHEN NOT MATCHED BY SOURCE THEN DELETE; \
         REFRESH STREAMING TABLE people",
    )
    .unwrap();
    let want = [
        open("1", "Bergen", "2"),
        cells(&["1", "Oslo", "1", "2"]),
        cells(&["2", "Rome", "1", "2"]),
        open("3", "Lima", "2"),
    ];
    assert_eq!(rows(&mut s, HISTORY), want);
    // A refresh with the table unchanged takes nothing; re-loaded with the same rows (a DELETE,
    // then an INSERT: versions 3 and 4), the snapshot at 4 is the one at 2: no change either.
    let commits = rows(&mut s, "DESCRIBE HISTORY people").len();
    s.execute("REFRESH STREAMING TABLE people").unwrap();
    assert_eq!(rows(&mut s, "DESCRIBE HISTORY people").len(), commits);
    s.execute(
        "DELETE FROM people_now; \
         INSERT INTO people_now VALUES (3, 'Lima'), (1, 'Bergen'); \
         REFRESH STREAMING TABLE people",
    )
    .unwrap();
    assert_eq!(rows(&mut s, HISTORY), want);
}
