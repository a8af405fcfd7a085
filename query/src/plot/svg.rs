//! The SVG of a key's history: axes, one rectangle per version, the as-of mark (see the
//! parent module).

use std::fmt::Write as _;

use super::Version;

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 95.0;

/// Text for SVG: `&`, `<`, `>` and quotes escaped.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// An axis: the bounds the versions have, evenly spaced in their order (what changed when
/// matters more than how long it lasted: a correction minutes after a version that lasted a
/// year stays visible), then one more step for open ends.
struct Axis {
    /// The distinct finite bounds, in order.
    stops: Vec<f64>,
    /// Pixels: where the first bound and the open end are.
    from: f64,
    to: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, from: f64, to: f64) -> Axis {
        let mut stops: Vec<f64> = values.filter(|v| v.is_finite()).collect();
        stops.sort_by(f64::total_cmp);
        stops.dedup();
        Axis { stops, from, to }
    }

    /// Where `v` goes (`None`: an open end), interpolated between the bounds around it.
    fn px(&self, v: Option<f64>) -> f64 {
        let n = self.stops.len().max(1) as f64;
        let rank = match v {
            None => n,
            Some(v) => {
                let i = self.stops.partition_point(|&s| s <= v);
                match (i.checked_sub(1).map(|j| self.stops[j]), self.stops.get(i)) {
                    (None, _) => 0.0,
                    (Some(lo), Some(&hi)) => (i - 1) as f64 + (v - lo) / (hi - lo),
                    // Past the last bound: halfway to the open end.
                    (Some(lo), None) if v > lo => n - 0.5,
                    (Some(_), None) => n - 1.0,
                }
            }
        };
        self.from + (self.to - self.from) * rank / n
    }
}

/// The picture of `table`'s key `key`: its versions, and `marks` (business, system) placed as
/// the versions' bounds are.
pub(super) fn draw(
    table: &str,
    key: &str,
    versions: &[Version],
    marks: (Option<f64>, Option<f64>),
) -> String {
    let finite = |i: usize| versions.iter().filter_map(move |v| v.at[i]);
    let x = Axis::new(
        finite(0).chain(finite(1)).chain(marks.0),
        LEFT,
        WIDTH - RIGHT,
    );
    // System time runs up: its pixels run from the bottom edge to the top.
    let y = Axis::new(
        finite(2).chain(finite(3)).chain(marks.1),
        HEIGHT - BOTTOM,
        TOP,
    );
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">
<title>{} key {}: bitemporal history</title>
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>
<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>
"##,
        esc(table),
        esc(key)
    );
    axes(&mut s, &x, &y, versions);
    rectangles(&mut s, &x, &y, versions);
    mark(&mut s, &x, &y, marks);
    s.push_str("</svg>\n");
    s
}

/// The axes, with a tick at every bound the versions have (thinned to about a dozen).
fn axes(s: &mut String, x: &Axis, y: &Axis, versions: &[Version]) {
    let _ = writeln!(
        s,
        r##"<g class="axes" stroke="#333"><line x1="{LEFT}" y1="{0}" x2="{1}" y2="{0}" marker-end="url(#arrow)"/><line x1="{LEFT}" y1="{0}" x2="{LEFT}" y2="{2}" marker-end="url(#arrow)"/></g>"##,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT + 15.0,
        TOP - 15.0
    );
    let _ = writeln!(
        s,
        r##"<text class="axis-label" x="{}" y="{}" text-anchor="middle">business time (__START_AT … __END_AT)</text>"##,
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(
        s,
        r##"<text class="axis-label" x="14" y="{}" transform="rotate(-90 14 {0})" text-anchor="middle">system time (__SYSTEM_START_AT … __SYSTEM_END_AT)</text>"##,
        (TOP + HEIGHT - BOTTOM) / 2.0
    );
    for (axis, starts) in [(&x, [0usize, 1]), (&y, [2, 3])] {
        let mut ticks: Vec<(f64, &str)> = versions
            .iter()
            .flat_map(|v| starts.map(|i| (v.at[i], v.text[i].as_str())))
            .filter_map(|(at, t)| at.map(|a| (a, t)))
            .collect();
        ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        ticks.dedup_by(|a, b| a.0 == b.0);
        let every = ticks.len().div_ceil(12).max(1);
        for (at, text) in ticks.iter().step_by(every) {
            let p = axis.px(Some(*at));
            if std::ptr::eq(axis, &x) {
                let _ = writeln!(
                    s,
                    r##"<g class="tick business"><line x1="{p:.1}" y1="{0}" x2="{p:.1}" y2="{1}" stroke="#333"/><text x="{p:.1}" y="{2}" text-anchor="end" transform="rotate(-30 {p:.1} {2})">{3}</text></g>"##,
                    HEIGHT - BOTTOM,
                    HEIGHT - BOTTOM + 4.0,
                    HEIGHT - BOTTOM + 14.0,
                    esc(text)
                );
            } else {
                let _ = writeln!(
                    s,
                    r##"<g class="tick system"><line x1="{0}" y1="{p:.1}" x2="{LEFT}" y2="{p:.1}" stroke="#333"/><text x="{1}" y="{2:.1}" text-anchor="end">{3}</text></g>"##,
                    LEFT - 4.0,
                    LEFT - 6.0,
                    p + 4.0,
                    esc(text)
                );
            }
        }
    }
}

/// One rectangle per version, with its open ends as arrows and its label.
fn rectangles(s: &mut String, x: &Axis, y: &Axis, versions: &[Version]) {
    const FILLS: [&str; 6] = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1",
    ];
    for (i, v) in versions.iter().enumerate() {
        let (x0, x1) = (x.px(v.at[0]), x.px(v.at[1]));
        let (y0, y1) = (y.px(v.at[2]), y.px(v.at[3]));
        let (w, h) = ((x1 - x0).max(1.0), (y0 - y1).max(1.0));
        let _ = writeln!(
            s,
            r##"<g class="version-group"><rect class="version" x="{x0:.1}" y="{y1:.1}" width="{w:.1}" height="{h:.1}" fill="{}" fill-opacity="0.35" stroke="{0}" data-start="{}" data-end="{}" data-system-start="{}" data-system-end="{}"><title>{}</title></rect>"##,
            FILLS[i % FILLS.len()],
            esc(&v.text[0]),
            esc(&v.text[1]),
            esc(&v.text[2]),
            esc(&v.text[3]),
            esc(&format!(
                "{}; business [{}, {}); system [{}, {})",
                v.title,
                v.text[0],
                if v.text[1].is_empty() {
                    "∞"
                } else {
                    &v.text[1]
                },
                v.text[2],
                if v.text[3].is_empty() {
                    "∞"
                } else {
                    &v.text[3]
                }
            ))
        );
        if v.at[1].is_none() {
            let ym = (y0 + y1) / 2.0;
            let _ = writeln!(
                s,
                r##"<line class="open business" x1="{x1:.1}" y1="{ym:.1}" x2="{:.1}" y2="{ym:.1}" stroke="#555" marker-end="url(#arrow)"/>"##,
                x1 + 14.0
            );
        }
        if v.at[3].is_none() {
            let xm = (x0 + x1) / 2.0;
            let _ = writeln!(
                s,
                r##"<line class="open system" x1="{xm:.1}" y1="{y1:.1}" x2="{xm:.1}" y2="{:.1}" stroke="#555" marker-end="url(#arrow)"/>"##,
                y1 - 14.0
            );
        }
        let _ = writeln!(
            s,
            r##"<text class="label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></g>"##,
            (x0 + x1) / 2.0,
            (y0 + y1) / 2.0 + 4.0,
            esc(&v.label)
        );
    }
}

/// The as-of point of a query, or a line for one of its times.
fn mark(s: &mut String, x: &Axis, y: &Axis, (mark_b, mark_s): (Option<f64>, Option<f64>)) {
    match (mark_b, mark_s) {
        (Some(b), Some(sys)) => {
            let _ = writeln!(
                s,
                r##"<circle class="as-of" cx="{:.1}" cy="{:.1}" r="5" fill="black"><title>as of business {b}, system {sys}</title></circle>"##,
                x.px(Some(b)),
                y.px(Some(sys))
            );
        }
        (Some(b), None) => {
            let p = x.px(Some(b));
            let _ = writeln!(
                s,
                r##"<line class="as-of business" x1="{p:.1}" y1="{TOP}" x2="{p:.1}" y2="{}" stroke="black" stroke-dasharray="4 3"/>"##,
                HEIGHT - BOTTOM
            );
        }
        (None, Some(sys)) => {
            let p = y.px(Some(sys));
            let _ = writeln!(
                s,
                r##"<line class="as-of system" x1="{LEFT}" y1="{p:.1}" x2="{}" y2="{p:.1}" stroke="black" stroke-dasharray="4 3"/>"##,
                WIDTH - RIGHT
            );
        }
        (None, None) => {}
    }
}
