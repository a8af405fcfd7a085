//! Redefining a flow (`Store::redefine_flow`, a re-run of its statement with another definition):
//! the table is rebuilt from its sources in one commit, the commits before it keep what they
//! showed, and a replay of the log gives the same table at every version.

use crate::common;

use asof::{Condition, KvStore, SledKv, SqlSession, Store, WriteBatch};

const SETUP: &str = "CREATE TABLE ev (id BIGINT, v STRING, seq BIGINT, op STRING); \
    INSERT INTO ev VALUES (1, 'a', 1, 'U'), (2, 'b', 1, 'U'), (1, 'a2', 2, 'U'), (2, 'b', 3, 'D'); \
    CREATE FLOW f AS AUTO CDC INTO t FROM stream(ev) KEYS (id) SEQUENCE BY seq \
      COLUMNS * EXCEPT (op, seq) STORED AS SCD TYPE 2; \
    INSERT INTO ev VALUES (3, 'c', 4, 'U'); REFRESH STREAMING TABLE t";

/// A store holding `SETUP`, and the session that ran it.
fn set_up() -> (tempfile::TempDir, Store, SqlSession) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut s = SqlSession::new(store.clone()).unwrap();
    s.execute(SETUP).unwrap();
    (dir, store, s)
}

/// Every version of `t`, as model rows.
fn every_version(store: &Store) -> Vec<Vec<common::model::MRow>> {
    let latest = store.history("t").unwrap().last().unwrap().version;
    (0..=latest)
        .map(|v| common::engine_rows_at(store, "t", Some(v)))
        .collect()
}

#[test]
fn a_redefined_flow_rebuilds_its_table_and_a_replay_gives_the_same_history() {
    let (dir, store, s) = set_up();
    let before = every_version(&store);
    let mut spec = store.flows("t").unwrap().remove(0);
    spec.delete_when = Some(Condition::equals("op", "D"));
    let flow = asof::Flow::new(spec.clone()).unwrap();
    let c = store
        .redefine_flow(flow.clone())
        .unwrap()
        .expect("a commit");
    assert_eq!(
        c.parameters.get(asof::REDEFINED).map(String::as_str),
        Some("f")
    );
    assert_eq!(
        c.parameters.get(asof::FULL_REFRESH).map(String::as_str),
        Some("true")
    );
    assert!(
        store.redefine_flow(flow).unwrap().is_none(),
        "the same again: nothing"
    );
    assert_eq!(store.flows("t").unwrap()[0].delete_when, spec.delete_when);
    let after = every_version(&store);
    assert_eq!(&after[..before.len()], &before[..], "the past is kept");
    let open_of_2 = |rows: &[common::model::MRow]| {
        rows.iter()
            .filter(|r| r.values[0] == asof::Value::Int(2) && r.end.is_none())
            .count()
    };
    assert_eq!(open_of_2(before.last().unwrap()), 1, "key 2 was current");
    assert_eq!(open_of_2(after.last().unwrap()), 0, "key 2 is deleted now");
    drop(s);
    drop(store);
    // Replayed from the log: no summary, so every table is rebuilt.
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    let mut b = WriteBatch::default();
    for r in kv.scan_prefix(b"G") {
        b.delete(r.unwrap().0);
    }
    kv.write(b).unwrap();
    drop(kv);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(every_version(&store), after);
    assert_eq!(store.flows("t").unwrap()[0].delete_when, spec.delete_when);
}

#[test]
fn a_redefinition_that_would_change_the_tables_shape_changes_nothing() {
    let (_dir, store, _session) = set_up();
    let before = every_version(&store);
    let mut spec = store.flows("t").unwrap().remove(0);
    spec.stored_as = asof::StoredAs::Scd1;
    let e = store
        .redefine_flow(asof::Flow::new(spec.clone()).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot be redefined") && e.contains("`f`"),
        "{e}"
    );
    let mut spec = store.flows("t").unwrap().remove(0);
    spec.track_history = Some(asof::ColumnSelection::Only(vec!["id".into()]));
    let e = store
        .redefine_flow(asof::Flow::new(spec).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("TRACK HISTORY"), "{e}");
    assert_eq!(every_version(&store), before);
    assert_eq!(store.history("t").unwrap().len(), before.len());
}
