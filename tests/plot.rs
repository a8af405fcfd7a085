//! `asof plot` and `plot_history(...)`: the bitemporal history of one key as SVG, read back with
//! an XML parser (roxmltree) and checked against the table: one rectangle per row version,
//! placed in the order of its bounds on both timelines, the late correction's cut visible, open
//! ends drawn as arrows, the as-of point inside the version a query at it returns.

use crate::common;

use std::collections::BTreeSet;

/// `(x, y, width, height)` and the four bounds of each `rect.version` of `svg`.
type Rect = ([f64; 4], [String; 4]);

fn versions(svg: &str) -> Vec<Rect> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("version"))
        .map(|n| {
            let num = |a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
            let text = |a: &str| n.attribute(a).unwrap().to_string();
            (
                [num("x"), num("y"), num("width"), num("height")],
                [
                    text("data-start"),
                    text("data-end"),
                    text("data-system-start"),
                    text("data-system-end"),
                ],
            )
        })
        .collect()
}

fn count(svg: &str, tag: &str, class: &str) -> usize {
    roxmltree::Document::parse(svg)
        .unwrap()
        .descendants()
        .filter(|n| n.has_tag_name(tag) && n.attribute("class") == Some(class))
        .count()
}

#[test]
fn a_keys_history_is_one_rectangle_per_version_in_the_order_of_its_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, err) = common::run_asof(&db, &["example", "examples/company_points"]);
    assert!(ok, "{err}");
    let (ok, history, err) = common::run_asof(
        &db,
        &["scan", "company_points", "--key", "A", "--format", "csv"],
    );
    assert!(ok, "{err}");
    let rows: BTreeSet<[String; 4]> = history
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            [c[2], c[3], c[4], c[5]].map(str::to_string)
        })
        .collect();
    assert_eq!(rows.len(), 6);
    let out = dir.path().join("a.svg");
    let (ok, _, err) = common::run_asof(
        &db,
        &[
            "plot",
            "company_points",
            "--key",
            "A",
            "--business-as-of",
            "2025-07-18T12:10:00",
            "--system-as-of",
            "2025-07-18T12:22:00",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    let svg = std::fs::read_to_string(&out).unwrap();
    let rects = versions(&svg);
    // One rectangle per row version, with its bounds.
    let drawn: BTreeSet<[String; 4]> = rects.iter().map(|r| r.1.clone()).collect();
    assert_eq!((rects.len(), &drawn), (rows.len(), &rows));
    // Business time across, system time up, in the order of the bounds.
    for (a, b) in rects.iter().flat_map(|a| rects.iter().map(move |b| (a, b))) {
        if a.1[0] < b.1[0] {
            assert!(a.0[0] < b.0[0], "{:?} left of {:?}", a.1, b.1);
        }
        if a.1[2] < b.1[2] {
            assert!(
                a.0[1] + a.0[3] > b.0[1] + b.0[3],
                "{:?} below {:?}",
                a.1,
                b.1
            );
        }
    }
    // A version that stopped being believed ends where a later one starts on system time: the
    // late correction at 12:25 cuts the XFv1 believed since 12:20.
    let cut = rects
        .iter()
        .find(|r| r.1[1] == "2025-07-18T12:15:43" && r.1[3] == "2025-07-18T12:25:00")
        .expect("XFv1 as believed from 12:20 to 12:25");
    let correction = rects
        .iter()
        .find(|r| r.1[0] == "2025-07-18T12:05:00")
        .expect("XFv3");
    assert_eq!(correction.1[2], "2025-07-18T12:25:00");
    assert!((correction.0[1] + correction.0[3] - cut.0[1]).abs() < 0.2);
    // Open ends are arrows.
    let open = |i: usize| rows.iter().filter(|r| r[i].is_empty()).count();
    assert_eq!(count(&svg, "line", "open business"), open(1));
    assert_eq!(count(&svg, "line", "open system"), open(3));
    // The as-of point lies in the version the query at it returns (XFv1 believed 12:20-12:25).
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let dot = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("as-of"))
        .unwrap();
    let (cx, cy) = (
        dot.attribute("cx").unwrap().parse::<f64>().unwrap(),
        dot.attribute("cy").unwrap().parse::<f64>().unwrap(),
    );
    let [x, y, w, h] = cut.0;
    assert!(
        cx > x && cx < x + w && cy > y && cy < y + h,
        "({cx}, {cy}) in {:?}",
        cut.0
    );
}

#[test]
fn plot_history_in_sql_and_what_it_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    assert!(common::run_asof(&db, &["example", "examples/company_points"]).0);
    let mut s = asof::SqlSession::new(asof::Store::open(&db).unwrap()).unwrap();
    let (names, rows) = common::sql_rows(
        &mut s,
        "SELECT svg FROM plot_history('company_points', 'A', TIMESTAMP '2025-07-18T12:10:00')",
    );
    assert_eq!(names, ["svg"]);
    let svg = rows[0][0].clone().unwrap();
    let (_, a) = common::sql_rows(
        &mut s,
        "SELECT count(*) FROM company_points WHERE CompanyId = 'A'",
    );
    assert_eq!(versions(&svg).len().to_string(), a[0][0].clone().unwrap());
    // Only a business time: a line across system time.
    assert_eq!(count(&svg, "line", "as-of business"), 1);
    assert_eq!(count(&svg, "circle", "as-of"), 0);
    for (sql, says) in [
        (
            "SELECT * FROM plot_history('company_points', 'nobody')",
            "no row for key",
        ),
        (
            "SELECT * FROM plot_history('company_points')",
            "plot_history('table', key",
        ),
    ] {
        let e = s.execute(sql).unwrap_err().to_string();
        assert!(e.contains(says), "{sql}: {e}");
    }
    s.execute(
        "CREATE TABLE ev (id INT, v STRING, seq INT);
         INSERT INTO ev VALUES (1, 'a', 1);
         CREATE OR REFRESH STREAMING TABLE hist FLOW AUTO CDC FROM stream(ev) KEYS (id)
           SEQUENCE BY seq STORED AS SCD TYPE 2",
    )
    .unwrap();
    let e = s
        .execute("SELECT * FROM plot_history('hist', 1)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no system time"), "{e}");
}
