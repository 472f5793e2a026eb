//! A small SVG chart writer: categorical x axis (evenly spaced ticks, which for powers of two is
//! a log2 axis), linear y axis from zero or a log10 y axis over the data's decades, lines or
//! grouped bars, and a legend.

use std::fmt::Write;

/// Lines through the points, or bars grouped per x tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One polyline per series.
    Lines,
    /// One bar per series in each group.
    Bars,
}

/// One named series: a value (or none) per x tick.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// One entry per x tick.
    pub values: Vec<Option<f64>>,
}

/// A chart.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Title line.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Tick labels, left to right, evenly spaced.
    pub x_ticks: Vec<String>,
    /// The data.
    pub series: Vec<Series>,
    /// Lines or bars.
    pub kind: Kind,
    /// A log10 y axis spanning the decades of the positive finite values (others are not
    /// drawn); linear from zero otherwise.
    pub log_y: bool,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// A "nice" upper bound of the y axis and its tick step.
fn nice_axis(max: f64) -> (f64, f64) {
    let max = if max > 0.0 && max.is_finite() {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The y axis: where a value is drawn, and the grid lines with their labels.
struct YAxis {
    /// Lowest and highest value shown (log10 of them on a log axis).
    bottom: f64,
    top: f64,
    log: bool,
    ticks: Vec<(f64, String)>,
}

impl YAxis {
    /// Linear from zero (or symmetric around it with negative values).
    fn linear(values: &[f64]) -> YAxis {
        let max = values.iter().copied().fold(0.0, f64::max);
        let min = values.iter().copied().fold(0.0, f64::min);
        let (top, step) = nice_axis(max.max(-min));
        let bottom = if min < 0.0 { -top } else { 0.0 };
        let mut ticks = Vec::new();
        let mut v = bottom;
        for _ in 0..=40 {
            if v > top + step / 2.0 {
                break;
            }
            ticks.push((v, trim(v)));
            v += step;
        }
        YAxis {
            bottom,
            top,
            log: false,
            ticks,
        }
    }

    /// Log10 over the whole decades that hold the positive finite values, at most ~10 labels.
    fn log(values: &[f64]) -> YAxis {
        let decades: Vec<f64> = values
            .iter()
            .filter(|v| **v > 0.0 && v.is_finite())
            .map(|v| v.log10())
            .collect();
        let low = decades.iter().copied().fold(f64::INFINITY, f64::min);
        let high = decades.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (bottom, mut top) = if decades.is_empty() {
            (0.0, 1.0)
        } else {
            (low.floor(), high.ceil())
        };
        if top <= bottom {
            top = bottom + 1.0;
        }
        // Label every `every`-th decade, and end the axis on a labelled one.
        let every = ((top - bottom) as usize).div_ceil(10);
        let span = ((top - bottom) as usize).div_ceil(every) * every;
        top = bottom + span as f64;
        let ticks = (0..=span)
            .step_by(every)
            .map(|d| {
                let exponent = bottom as i64 + d as i64;
                (exponent as f64, format!("1e{exponent}"))
            })
            .collect();
        YAxis {
            bottom,
            top,
            log: true,
            ticks,
        }
    }

    /// The axis coordinate of a value, if it can be drawn.
    fn coordinate(&self, v: f64) -> Option<f64> {
        if !self.log {
            return v.is_finite().then_some(v);
        }
        (v > 0.0 && v.is_finite()).then(|| v.log10())
    }

    /// The axis coordinate bars grow from: zero, or the bottom of a log axis.
    fn base(&self) -> f64 {
        if self.log {
            self.bottom
        } else {
            0.0
        }
    }
}

/// The SVG document of `chart`.
pub fn render(chart: &Chart) -> String {
    let page = Page::new(chart);
    let mut svg = String::new();
    draw_frame(&mut svg, chart, &page);
    for (s, series) in chart.series.iter().enumerate() {
        let color = COLORS[s % COLORS.len()];
        match chart.kind {
            Kind::Lines => draw_line(&mut svg, &page, series, color),
            Kind::Bars => draw_bars(&mut svg, &page, series, s, color),
        }
        draw_legend_entry(&mut svg, &page, series, s, color);
    }
    svg.push_str("</svg>\n");
    svg
}

/// Where a chart's parts go on the page.
struct Page {
    plot_w: f64,
    plot_h: f64,
    axis: YAxis,
    /// Positions on the x axis (one per tick, at least one).
    ticks: f64,
    /// Label every this many x ticks (a time axis has many: about ten get labels).
    label_every: usize,
    /// Point markers on lines (not on a crowded x axis).
    markers: bool,
    /// Series sharing each bar group.
    series: f64,
}

impl Page {
    fn new(chart: &Chart) -> Page {
        let values: Vec<f64> = chart
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied())
            .collect();
        Page {
            plot_w: WIDTH - LEFT - RIGHT,
            plot_h: HEIGHT - TOP - BOTTOM,
            axis: if chart.log_y {
                YAxis::log(&values)
            } else {
                YAxis::linear(&values)
            },
            ticks: chart.x_ticks.len().max(1) as f64,
            label_every: round_count(chart.x_ticks.len().div_ceil(12)),
            markers: chart.x_ticks.len() <= 40,
            series: chart.series.len().max(1) as f64,
        }
    }

    /// The page's y of an axis coordinate (the value, or its log10).
    fn y(&self, c: f64) -> f64 {
        let axis = &self.axis;
        TOP + self.plot_h * (1.0 - (c - axis.bottom) / (axis.top - axis.bottom))
    }

    /// The page's x of tick `i`.
    fn x(&self, i: usize) -> f64 {
        LEFT + self.plot_w * (i as f64 + 0.5) / self.ticks
    }
}

/// The document's head, title, grid, axes and axis labels.
fn draw_frame(svg: &mut String, chart: &Chart, page: &Page) {
    let (plot_w, plot_h, axis) = (page.plot_w, page.plot_h, &page.axis);
    let _ = writeln!(
        *svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        *svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        *svg,
        r#"<text x="{}" y="25" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(&chart.title)
    );
    // Y grid and ticks.
    for (c, label) in &axis.ticks {
        let py = page.y(*c);
        let _ = writeln!(
            *svg,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            py + 4.0,
            label
        );
    }
    // Axes.
    let _ = writeln!(
        *svg,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="black"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"#,
        TOP + plot_h,
        page.y(axis.base()),
        LEFT + plot_w,
        page.y(axis.base())
    );
    for (i, label) in chart.x_ticks.iter().enumerate() {
        if i % page.label_every != 0 {
            continue;
        }
        let _ = writeln!(
            *svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            page.x(i),
            TOP + plot_h + 18.0,
            escape(label)
        );
    }
    let _ = writeln!(
        *svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 15.0,
        escape(&chart.x_label)
    );
    let _ = writeln!(
        *svg,
        r#"<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(&chart.y_label)
    );
}

/// One series as a line (with point markers unless the x axis is crowded).
fn draw_line(svg: &mut String, page: &Page, series: &Series, color: &str) {
    let points: Vec<String> = series
        .values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let c = page.axis.coordinate((*v)?)?;
            Some(format!("{:.1},{:.1}", page.x(i), page.y(c)))
        })
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
        points.join(" ")
    );
    for p in points.iter().filter(|_| page.markers) {
        if let Some((px, py)) = p.split_once(',') {
            let _ = writeln!(svg, r#"<circle cx="{px}" cy="{py}" r="3" fill="{color}"/>"#);
        }
    }
}

/// Series number `s` as bars, side by side with the other series' at each tick.
fn draw_bars(svg: &mut String, page: &Page, series: &Series, s: usize, color: &str) {
    let group_w = page.plot_w / page.ticks * 0.8;
    let bar_w = group_w / page.series;
    for (i, v) in series.values.iter().enumerate() {
        let Some(c) = v.and_then(|v| page.axis.coordinate(v)) else {
            continue;
        };
        let bx = page.x(i) - group_w / 2.0 + bar_w * s as f64;
        let (y0, y1) = (page.y(page.axis.base()), page.y(c));
        let _ = writeln!(
            svg,
            r#"<rect x="{bx:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"#,
            y0.min(y1),
            bar_w * 0.9,
            (y1 - y0).abs()
        );
    }
}

/// The legend's entry of series number `s`.
fn draw_legend_entry(svg: &mut String, page: &Page, series: &Series, s: usize, color: &str) {
    let ly = TOP + 10.0 + 20.0 * s as f64;
    let lx = LEFT + page.plot_w + 15.0;
    let _ = writeln!(
        svg,
        r#"<rect x="{lx:.1}" y="{:.1}" width="14" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
        ly - 9.0,
        lx + 20.0,
        ly,
        escape(&series.name)
    );
}

/// The smallest of 1, 2, 5, 10, 20, 50, ... at or above `n`.
fn round_count(n: usize) -> usize {
    let mut magnitude = 1;
    loop {
        for m in [1, 2, 5] {
            if m * magnitude >= n {
                return m * magnitude;
            }
        }
        magnitude *= 10;
    }
}

/// A tick value without trailing zeros.
fn trim(v: f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_its_series_ticks_and_legend() {
        let chart = Chart {
            title: "t <1>".into(),
            x_label: "N".into(),
            y_label: "steps".into(),
            x_ticks: vec!["1K".into(), "2K".into()],
            series: vec![
                Series {
                    name: "a".into(),
                    values: vec![Some(1.0), Some(3.0)],
                },
                Series {
                    name: "b".into(),
                    values: vec![None, Some(-2.0)],
                },
            ],
            kind: Kind::Bars,
            log_y: false,
        };
        let svg = render(&chart);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert_eq!(svg.matches("<rect").count(), 1 + 3 + 2);
        let lines = render(&Chart {
            kind: Kind::Lines,
            ..chart
        });
        assert_eq!(lines.matches("<polyline").count(), 2);
        assert_eq!(nice_axis(171.0), (200.0, 50.0));
    }

    #[test]
    fn a_log_axis_spans_the_decades_and_skips_what_it_cannot_draw() {
        let chart = Chart {
            title: "log".into(),
            x_label: "bit".into(),
            y_label: "error".into(),
            x_ticks: vec!["0".into(), "1".into(), "2".into()],
            series: vec![Series {
                name: "a".into(),
                values: vec![Some(3e-15), Some(0.0), Some(2e-3)],
            }],
            kind: Kind::Lines,
            log_y: true,
        };
        let svg = render(&chart);
        assert!(svg.contains(">1e-15<") && svg.contains(">1e-1<"));
        assert!(!svg.contains(">1e-16<") && !svg.contains(">1e-2<"));
        assert_eq!(svg.matches("<circle").count(), 2, "zero has no log");
        let axis = YAxis::log(&[1e-14, 5.0]);
        assert_eq!((axis.bottom, axis.top), (-14.0, 2.0));
        assert_eq!(axis.ticks.len(), 9, "every second decade");
        assert_eq!([0, 1, 3, 41, 100].map(round_count), [1, 1, 5, 50, 100]);
    }
}
