//! Dashboard panels drawn as one SVG page: each panel a line chart of the series its queries
//! returned over a time range (or, for a table, the rows), titled, with a legend. There is no
//! Grafana here: this is how a person sees what a test's dashboard showed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One series of a panel: its legend and its points (seconds from the range's start, value).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub legend: String,
    pub points: Vec<(f64, f64)>,
}

/// One panel: a chart of `lines`, or a table of `rows` when it has no lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Panel {
    pub title: String,
    pub unit: String,
    pub lines: Vec<Line>,
    pub rows: Vec<String>,
}

const WIDTH: f64 = 460.0;
const HEIGHT: f64 = 260.0;
const PLOT: (f64, f64, f64, f64) = (52.0, 28.0, 440.0, 170.0); // left, top, right, bottom
const LEGEND_ROWS: usize = 4;
/// Characters of a table row that fit a panel's width.
const TABLE_CHARS: usize = 72;
const PALETTE: [&str; 8] =
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// A Grafana legend format (`{{renderpool}} {{outcome}}`) filled from `labels`; an empty format
/// lists the labels.
pub fn legend(format: &str, labels: &BTreeMap<String, String>) -> String {
    if format.is_empty() {
        let all: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        return all.join(", ");
    }
    let mut out = format.to_string();
    while let Some(open) = out.find("{{") {
        let Some(close) = out[open..].find("}}").map(|c| open + c) else { break };
        let name = out[open + 2..close].trim().to_string();
        out.replace_range(open..close + 2, labels.get(&name).map_or("", String::as_str));
    }
    out.trim().to_string()
}

/// The page: `panels` in `columns` columns, a heading on top; every chart's time axis runs
/// from 0 to `span` seconds.
pub fn page(heading: &str, panels: &[Panel], columns: usize, span: f64) -> String {
    let columns = columns.max(1);
    let rows = panels.len().div_ceil(columns);
    let (width, height) = (WIDTH * columns as f64, 30.0 + HEIGHT * rows as f64);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="8" y="20" font-size="15" font-weight="bold">{}</text>"#,
        escape(heading)
    );
    for (i, panel) in panels.iter().enumerate() {
        let (x, y) = ((i % columns) as f64 * WIDTH, 30.0 + (i / columns) as f64 * HEIGHT);
        let _ = write!(svg, r#"<g transform="translate({x},{y})">"#);
        draw(&mut svg, panel, span.max(1.0));
        svg.push_str("</g>");
    }
    svg.push_str("</svg>");
    svg
}

fn draw(svg: &mut String, panel: &Panel, t_max: f64) {
    let (left, top, right, bottom) = PLOT;
    let _ = write!(
        svg,
        r##"<rect x="2" y="2" width="{}" height="{}" fill="none" stroke="#ccc"/><text x="8" y="18" font-weight="bold">{}</text>"##,
        WIDTH - 4.0,
        HEIGHT - 4.0,
        escape(&panel.title)
    );
    if panel.lines.is_empty() {
        for (i, row) in panel.rows.iter().take(14).enumerate() {
            let row: String = row.chars().take(TABLE_CHARS).collect();
            let _ = write!(
                svg,
                r#"<text x="10" y="{}">{}</text>"#,
                38.0 + 15.0 * i as f64,
                escape(&row)
            );
        }
        return;
    }
    let finite = || panel.lines.iter().flat_map(|l| &l.points).filter(|(_, v)| v.is_finite());
    let v_max = finite().fold(0.0_f64, |v, p| v.max(p.1));
    let v_min = finite().fold(0.0_f64, |v, p| v.min(p.1));
    let span = if v_max > v_min { v_max - v_min } else { 1.0 };
    let x = |t: f64| left + (right - left) * t / t_max;
    let y = |v: f64| bottom - (bottom - top) * (v - v_min) / span;
    let _ = write!(
        svg,
        r##"<path d="M{left} {top}V{bottom}H{right}" fill="none" stroke="#888"/><text x="{}" y="{}" text-anchor="end">{}</text><text x="{}" y="{}" text-anchor="end">{}</text><text x="{right}" y="{}" text-anchor="end">{:.0} s</text>"##,
        left - 4.0,
        top + 4.0,
        number(v_max, &panel.unit),
        left - 4.0,
        bottom,
        number(v_min, &panel.unit),
        bottom + 13.0,
        t_max
    );
    for (i, line) in panel.lines.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut d = String::new();
        let mut pen_down = false;
        for (t, v) in &line.points {
            if !v.is_finite() {
                pen_down = false;
                continue;
            }
            let _ = write!(d, "{}{:.1} {:.1}", if pen_down { "L" } else { "M" }, x(*t), y(*v));
            pen_down = true;
        }
        let _ = write!(svg, r#"<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.5"/>"#);
        if i < LEGEND_ROWS {
            let ly = bottom + 28.0 + 13.0 * i as f64;
            let _ = write!(
                svg,
                r#"<rect x="10" y="{}" width="10" height="3" fill="{colour}"/><text x="24" y="{ly}">{}</text>"#,
                ly - 4.0,
                escape(&line.legend)
            );
        }
    }
    if panel.lines.len() > LEGEND_ROWS {
        let more = panel.lines.len() - LEGEND_ROWS;
        let ly = bottom + 28.0 + 13.0 * LEGEND_ROWS as f64;
        let _ = write!(svg, r#"<text x="24" y="{ly}">and {more} more</text>"#);
    }
}

/// An axis figure in the panel's unit.
fn number(value: f64, unit: &str) -> String {
    match unit {
        "percentunit" if value != 0.0 && value.abs() < 0.1 => format!("{:.2}%", value * 100.0),
        "percentunit" => format!("{:.0}%", value * 100.0),
        "s" if value < 1.0 => format!("{:.0} ms", value * 1000.0),
        "s" => format!("{value:.1} s"),
        "Bps" => format!("{:.0} KB/s", value / 1000.0),
        _ if value.abs() >= 100.0 || value == value.trunc() => format!("{value:.0}"),
        _ => format!("{value:.2}"),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legend_format_is_filled_from_the_labels() {
        let labels: BTreeMap<String, String> = [("renderpool", "previews"), ("outcome", "ok")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        assert_eq!(legend("{{renderpool}} {{ outcome }}", &labels), "previews ok");
        assert_eq!(legend("{{pod}}{{renderpool}}", &labels), "previews");
        assert_eq!(legend("", &labels), "outcome=ok, renderpool=previews");
    }

    #[test]
    fn a_page_draws_each_panel_its_lines_breaks_at_gaps_and_lists_table_rows() {
        let chart = Panel {
            title: "Jobs <per second>".into(),
            unit: "reqps".into(),
            lines: vec![Line {
                legend: "ok".into(),
                points: vec![(0.0, 1.0), (2.0, f64::NAN), (4.0, 3.0), (6.0, 2.0)],
            }],
            rows: vec![],
        };
        let table = Panel {
            title: "Conditions".into(),
            rows: vec!["Ready True".into()],
            ..Panel::default()
        };
        let svg = page("test", &[chart, table], 2, 6.0);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("Jobs &lt;per second&gt;"), "{svg}");
        assert!(svg.contains("Ready True"));
        // The gap starts a new stroke: two moves, one line.
        let path = svg.split(r#"<path d=""#).nth(2).unwrap_or_default();
        let path = path.split('"').next().unwrap_or_default();
        assert_eq!(path.matches('M').count(), 2, "{path}");
        assert_eq!(path.matches('L').count(), 1, "{path}");
    }
}
