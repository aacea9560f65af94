//! SVG charts: lines against a numeric axis, grouped bars over categories,
//! and latency CDFs. Drawn with `plotters`' SVG backend (no font or bitmap
//! dependencies: text is left to the SVG viewer).
//!
//! What a reader of the papers expects, and this draws:
//! - linear or logarithmic axes (`log_x`, `log_y`), with ticks at round
//!   values (1, 2, 5 × 10^k on a log axis) printed without a useless `.0`;
//! - a title that fits the width (a smaller font, then wrapped lines);
//! - each series its own colour *and* marker shape: 10 colours and 7 shapes
//!   cycled together, so that no two of the first 70 series share both;
//! - the legend in a column right of the plot area, never over the data;
//! - hollow markers for points the plot marks (clients, not servers, bound
//!   their throughput), explained by a legend entry;
//! - an optional horizontal reference line (a normalized plot's 1).

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChartKind {
    Line,
    Bar,
    Cdf,
}

#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    /// (x, y); for bars x is the category's index.
    pub points: Vec<(f64, f64)>,
    /// Per point, whether to draw it hollow (see [`Chart::hollow_note`]);
    /// empty when none is.
    pub hollow: Vec<bool>,
}

#[derive(Clone, Debug)]
pub struct Chart {
    pub kind: ChartKind,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Bar charts: one name per group.
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    pub log_x: bool,
    pub log_y: bool,
    /// A horizontal reference line at this y, with its legend name.
    pub reference: Option<(f64, String)>,
    /// The legend's explanation of hollow markers, shown when a point is hollow.
    pub hollow_note: String,
    /// Line charts: named x ticks (a sweep's labelled points, e.g. "4:1" at
    /// x = 2), used instead of round numbers when their names do not
    /// overlap.
    pub x_ticks: Vec<(f64, String)>,
}

impl Chart {
    pub fn new(kind: ChartKind, title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            kind,
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            categories: Vec::new(),
            series: Vec::new(),
            log_x: false,
            log_y: false,
            reference: None,
            hollow_note: String::new(),
            x_ticks: Vec::new(),
        }
    }

    fn any_hollow(&self) -> bool {
        self.series.iter().any(|s| s.hollow.iter().any(|&h| h))
    }
}

pub const SIZE: (u32, u32) = (820, 500);
const FONT: &str = "sans-serif";
/// Tableau's ten colours.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Marker shapes; their count is prime to the colours' so that the pair
/// (colour, shape) of series i repeats only after 70 series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Plus,
    Star,
}

const MARKERS: [Marker; 7] = [
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Plus,
    Marker::Star,
];

/// The colour and marker of series `i`.
pub fn style(i: usize) -> (RGBColor, Marker) {
    (COLORS[i % COLORS.len()], MARKERS[i % MARKERS.len()])
}

/// The outline of a marker of radius `r` around (0, 0), in pixels; `None`
/// for a circle.
fn outline(m: Marker, r: i32) -> Option<Vec<(i32, i32)>> {
    let polar = |n: usize, rot: f64, radii: &[f64]| -> Vec<(i32, i32)> {
        (0..n)
            .map(|k| {
                let a = rot + k as f64 * std::f64::consts::TAU / n as f64;
                let rr = radii[k % radii.len()] * r as f64;
                ((rr * a.cos()).round() as i32, (rr * a.sin()).round() as i32)
            })
            .collect()
    };
    let up = -std::f64::consts::FRAC_PI_2;
    Some(match m {
        Marker::Circle => return None,
        Marker::Square => {
            let s = (r as f64 * 0.85).round() as i32;
            vec![(-s, -s), (s, -s), (s, s), (-s, s)]
        }
        Marker::TriangleUp => polar(3, up, &[1.2]),
        Marker::TriangleDown => polar(3, -up, &[1.2]),
        Marker::Diamond => polar(4, up, &[1.2]),
        Marker::Star => polar(10, up, &[1.35, 0.55]),
        Marker::Plus => {
            let (a, b) = (r, (r as f64 * 0.38).round().max(1.0) as i32);
            vec![
                (-b, -a),
                (b, -a),
                (b, -b),
                (a, -b),
                (a, b),
                (b, b),
                (b, a),
                (-b, a),
                (-b, b),
                (-a, b),
                (-a, -b),
                (-b, -b),
            ]
        }
    })
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Draw a marker centred at pixel `at` on `root`.
fn marker(root: &Area<'_>, at: (i32, i32), m: Marker, col: RGBColor, hollow: bool) -> DrawResult {
    const R: i32 = 5;
    let fill = if hollow { WHITE.filled() } else { col.filled() };
    match outline(m, R) {
        None => {
            root.draw(&Circle::new(at, R, fill))?;
            if hollow {
                root.draw(&Circle::new(at, R, col.stroke_width(2)))?;
            }
        }
        Some(pts) => {
            let abs: Vec<(i32, i32)> = pts.iter().map(|&(x, y)| (at.0 + x, at.1 + y)).collect();
            root.draw(&Polygon::new(abs.clone(), fill))?;
            if hollow {
                let mut closed = abs.clone();
                closed.push(abs[0]);
                root.draw(&PathElement::new(closed, col.stroke_width(2)))?;
            }
        }
    }
    Ok(())
}

/// About how wide `s` is in pixels at `size` px of a sans-serif font.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().map(|c| if c.is_ascii_uppercase() || c == 'm' || c == 'w' { 0.7 } else { 0.52 }).sum::<f64>() * size
}

/// Break `s` into lines of at most `width` pixels at `size` px, at spaces
/// (a word wider than the line gets a line of its own).
pub fn wrap(s: &str, width: f64, size: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split_whitespace() {
        let candidate = if cur.is_empty() { word.to_string() } else { format!("{cur} {word}") };
        if !cur.is_empty() && text_width(&candidate, size) > width {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        } else {
            cur = candidate;
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// The title's lines and font size: the largest size from 20 px down to
/// 15 px at which it fits on one line, else wrapped at 15 px.
pub fn title_layout(title: &str, width: f64) -> (Vec<String>, u32) {
    for size in (15..=20).rev() {
        if text_width(title, size as f64) <= width {
            return (vec![title.to_string()], size);
        }
    }
    // As many lines as wrapping at the full width takes, but balanced: the
    // narrowest width that needs no more lines.
    let n = wrap(title, width, 15.0).len();
    let (mut lo, mut hi) = (width / n as f64, width);
    for _ in 0..20 {
        let mid = (lo + hi) / 2.0;
        if wrap(title, mid, 15.0).len() <= n { hi = mid } else { lo = mid }
    }
    (wrap(title, hi, 15.0), 15)
}

/// A number as an axis or table shows it: integers without decimals,
/// others with at most three significant decimals, trailing zeros trimmed.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    if (v - v.round()).abs() <= 1e-9 * v.abs().max(1.0) {
        return format!("{}", v.round() as i64);
    }
    let decimals = (3 - v.abs().log10().floor() as i32).clamp(1, 6) as usize;
    let s = format!("{v:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// An axis: its range and ticks, in plotted coordinates (log10 of the
/// value on a log axis).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<f64>,
}

impl Axis {
    /// An axis over data from `lo` to `hi`: on a linear one from zero when
    /// `from_zero`, with about six round steps; on a log one from the
    /// 1-2-5 value at or below `lo` to the one at or above `hi` (only
    /// positive data can be drawn on it).
    pub fn new(lo: f64, hi: f64, log: bool, from_zero: bool) -> Axis {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() && lo <= hi { (lo, hi) } else { (0.0, 1.0) };
        if log {
            if hi <= 0.0 {
                (lo, hi) = (1.0, 10.0);
            }
            if lo <= 0.0 {
                lo = hi / 10.0;
            }
            let candidates: Vec<f64> = (lo.log10().floor() as i32 - 1..=hi.log10().ceil() as i32 + 1)
                .flat_map(|d| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(d)))
                .collect();
            let a = candidates.iter().copied().filter(|&c| c <= lo * (1.0 + 1e-9)).fold(f64::MIN, f64::max);
            let mut b = candidates.iter().copied().filter(|&c| c >= hi * (1.0 - 1e-9)).fold(f64::MAX, f64::min);
            if b <= a {
                b = candidates.iter().copied().find(|&c| c > a).unwrap_or(a * 10.0);
            }
            let in_range: Vec<f64> = candidates.into_iter().filter(|&c| c >= a && c <= b).collect();
            let mut ticks: Vec<f64> = if in_range.len() <= 10 {
                in_range
            } else {
                let decades: Vec<f64> =
                    in_range.iter().copied().filter(|c| (c.log10() - c.log10().round()).abs() < 1e-9).collect();
                let step = decades.len().div_ceil(8).max(1);
                decades.into_iter().step_by(step).collect()
            };
            ticks.dedup();
            return Axis { log: true, lo: a.log10(), hi: b.log10(), ticks: ticks.iter().map(|t| t.log10()).collect() };
        }
        if from_zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if hi - lo < 1e-12 {
            hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        }
        let raw = (hi - lo) / 7.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
        let a = (lo / step + 1e-9).floor() * step;
        let b = (hi / step - 1e-9).ceil() * step;
        let n = ((b - a) / step).round() as i64;
        let ticks = (0..=n).map(|k| a + k as f64 * step).map(|t| if t.abs() < step * 1e-9 { 0.0 } else { t }).collect();
        Axis { log: false, lo: a, hi: b, ticks }
    }

    /// Where `v` is plotted; `None` when it cannot be (not finite, or not
    /// positive on a log axis).
    pub fn to(&self, v: f64) -> Option<f64> {
        if !v.is_finite() || (self.log && v <= 0.0) {
            None
        } else if self.log {
            Some(v.log10())
        } else {
            Some(v)
        }
    }

    /// The value at plotted coordinate `p`.
    pub fn from(&self, p: f64) -> f64 {
        if self.log { 10f64.powf(p) } else { p }
    }

    /// A tick's label.
    pub fn label(&self, p: f64) -> String {
        let v = self.from(p);
        if self.log { num(v) } else { num((v * 1e9).round() / 1e9) }
    }
}

/// An [`Axis`] as a plotters coordinate: linear in plotted coordinates,
/// with the axis's ticks as its key points.
struct Ticked(Axis);

impl Ranged for Ticked {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v - self.0.lo) / (self.0.hi - self.0.lo);
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() { Vec::new() } else { self.0.ticks.clone() }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.0.lo..self.0.hi
    }
}

/// The font size and lines of bar categories `width` pixels apart: 13 px
/// down to 10 px on one line, else 11 px wrapped.
pub fn category_layout(categories: &[String], width: f64) -> (u32, Vec<Vec<String>>) {
    for size in (10..=13).rev() {
        if categories.iter().all(|c| text_width(c, size as f64) <= width) {
            return (size, categories.iter().map(|c| vec![c.clone()]).collect());
        }
    }
    (11, categories.iter().map(|c| wrap(c, width, 11.0)).collect())
}

/// Where the parts of a chart go, in pixels of the whole picture.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub title_lines: Vec<String>,
    pub title_size: u32,
    /// Height of the title band at the top.
    pub title_h: u32,
    /// Width of the legend column at the right (0 for none).
    pub legend_w: u32,
    /// The legend's entries, each wrapped to the column.
    pub legend: Vec<Vec<String>>,
    /// The legend's font size and line height.
    pub legend_font: f64,
    pub legend_line: i32,
}

const LEGEND_KEY: u32 = 34;
/// Space between legend entries.
const LEGEND_GAP: i32 = 6;

/// The legend's names: each series, the reference line, the hollow note.
fn legend_names(chart: &Chart) -> Vec<String> {
    let mut names: Vec<String> = chart.series.iter().map(|s| s.name.clone()).collect();
    if let Some((_, name)) = &chart.reference {
        names.push(name.clone());
    }
    if chart.any_hollow() && !chart.hollow_note.is_empty() {
        names.push(chart.hollow_note.clone());
    }
    names
}

pub fn layout(chart: &Chart) -> Layout {
    let (w, _) = SIZE;
    let (title_lines, title_size) = title_layout(&chart.title, w as f64 - 24.0);
    let title_h = 10 + title_lines.len() as u32 * (title_size + 5);
    let names = legend_names(chart);
    // A column as wide as the longest name needs, from 120 to 242 px; longer
    // names wrap. A legend taller than the picture widens the column, then
    // takes a smaller font.
    let room = (SIZE.1 - title_h) as i32 - 24;
    let mut fit = None;
    for (font, max_w) in [(13.0, 196.0), (13.0, 260.0), (12.0, 260.0), (11.0, 280.0), (10.0, 300.0), (9.0, 300.0)] {
        let widest = names.iter().map(|n| text_width(n, font)).fold(0.0, f64::max);
        let text_w: f64 = widest.clamp(86.0, max_w);
        let legend: Vec<Vec<String>> = names.iter().map(|n| wrap(n, text_w, font)).collect();
        let line = font as i32 + 3;
        let height: i32 = legend.iter().map(|e| e.len() as i32 * line + LEGEND_GAP).sum();
        let this = (text_w, legend, font, line);
        if height <= room {
            fit = Some(this);
            break;
        }
        fit = Some(this);
    }
    let (text_w, legend, legend_font, legend_line) = fit.expect("at least one layout is tried");
    let legend_w = if names.is_empty() { 0 } else { LEGEND_KEY + text_w.ceil() as u32 + 12 };
    Layout { title_lines, title_size, title_h, legend_w, legend, legend_font, legend_line }
}

/// Render `chart` as an SVG document.
pub fn render_svg(chart: &Chart) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let drawn = draw(&root, chart);
        drawn.map_err(|e| format!("drawing {:?}: {e}", chart.title))?;
        root.present().map_err(|e| format!("drawing {:?}: {e}", chart.title))?;
    }
    Ok(out)
}

fn draw(root: &Area<'_>, chart: &Chart) -> DrawResult {
    root.fill(&WHITE)?;
    let l = layout(chart);
    let (w, h) = SIZE;
    for (i, line) in l.title_lines.iter().enumerate() {
        let style = (FONT, l.title_size).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(line.clone(), ((w / 2) as i32, 8 + i as i32 * (l.title_size as i32 + 5)), style))?;
    }
    let (_, body) = root.split_vertically(l.title_h);
    let (plot, _) = body.split_horizontally(w - l.legend_w);
    let keys = match chart.kind {
        ChartKind::Line | ChartKind::Cdf => lines(&plot, root, chart)?,
        ChartKind::Bar => bars(&plot, root, chart)?,
    };
    legend(root, chart, &l, (w - l.legend_w) as i32, l.title_h as i32 + 12, h, &keys)?;
    Ok(())
}

/// What a legend entry shows left of its name.
#[derive(Clone, Copy)]
enum Key {
    Line(RGBColor, Option<Marker>),
    Bar(RGBColor),
    Reference,
    Hollow,
}

fn legend(root: &Area<'_>, chart: &Chart, l: &Layout, x: i32, y: i32, h: u32, keys: &[Key]) -> DrawResult {
    if l.legend.is_empty() {
        return Ok(());
    }
    let mut all: Vec<Key> = keys.to_vec();
    if chart.reference.is_some() {
        all.push(Key::Reference);
    }
    if chart.any_hollow() && !chart.hollow_note.is_empty() {
        all.push(Key::Hollow);
    }
    let mut y = y;
    let font = (FONT, l.legend_font).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let line_h = l.legend_line;
    for (lines, key) in l.legend.iter().zip(all) {
        if y > h as i32 - 10 {
            break;
        }
        let (kx, ky) = (x + 6, y + line_h / 2);
        match key {
            Key::Line(col, m) => {
                root.draw(&PathElement::new(vec![(kx, ky), (kx + 24, ky)], col.stroke_width(2)))?;
                if let Some(m) = m {
                    marker(root, (kx + 12, ky), m, col, false)?;
                }
            }
            Key::Bar(col) => root.draw(&Rectangle::new([(kx + 4, ky - 6), (kx + 20, ky + 6)], col.filled()))?,
            Key::Reference => {
                let grey = RGBColor(90, 90, 90);
                for s in 0..3 {
                    let a = kx + s * 9;
                    root.draw(&PathElement::new(vec![(a, ky), (a + 5, ky)], grey.stroke_width(2)))?;
                }
            }
            Key::Hollow => marker(root, (kx + 12, ky), Marker::Circle, RGBColor(90, 90, 90), true)?,
        }
        for (i, line) in lines.iter().enumerate() {
            root.draw(&Text::new(
                line.clone(),
                (x + LEGEND_KEY as i32, y + line_h / 2 + i as i32 * line_h),
                font.clone(),
            ))?;
        }
        y += lines.len() as i32 * line_h + LEGEND_GAP;
    }
    Ok(())
}

fn finite(series: &[Series]) -> impl Iterator<Item = (f64, f64)> + '_ {
    series.iter().flat_map(|s| s.points.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite())
}

/// The axes of a line chart or CDF, from its data.
pub fn line_axes(chart: &Chart) -> (Axis, Axis) {
    let pos = |v: f64, log: bool| !log || v > 0.0;
    let pts: Vec<(f64, f64)> =
        finite(&chart.series).filter(|&(x, y)| pos(x, chart.log_x) && pos(y, chart.log_y)).collect();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in pts {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if let Some((r, _)) = chart.reference {
        (y0, y1) = (y0.min(r), y1.max(r));
    }
    if chart.kind == ChartKind::Cdf {
        let x = Axis::new(if chart.log_x { x0 } else { 0.0 }, x1, chart.log_x, !chart.log_x);
        return (x, Axis { log: false, lo: 0.0, hi: 1.0, ticks: (0..=5).map(|i| i as f64 / 5.0).collect() });
    }
    // Lines: x spans the data; y starts at zero unless logarithmic, with
    // room above the highest point.
    let y1 = if chart.log_y || y1 < y0 { y1 } else { y1 + (y1 - y0.min(0.0)) * 0.04 };
    (Axis::new(x0, x1, chart.log_x, false), Axis::new(y0, y1, chart.log_y, true))
}

/// The named x ticks of a line chart on axis `xa` as (plotted x, name),
/// when there are some, all can be drawn, and no two names overlap over a
/// plot `width` pixels wide.
fn named_ticks(chart: &Chart, xa: &Axis, width: f64) -> Option<Vec<(f64, String)>> {
    let mut ticks: Vec<(f64, String)> =
        chart.x_ticks.iter().map(|(x, n)| Some((xa.to(*x)?, n.clone()))).collect::<Option<_>>()?;
    if ticks.is_empty() {
        return None;
    }
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    let px = |p: f64| (p - xa.lo) / (xa.hi - xa.lo) * width;
    let fits = ticks.windows(2).all(|w| {
        let need = (text_width(&w[0].1, 13.0) + text_width(&w[1].1, 13.0)) / 2.0 + 8.0;
        px(w[1].0) - px(w[0].0) >= need
    });
    fits.then_some(ticks)
}

fn lines(plot: &Area<'_>, root: &Area<'_>, chart: &Chart) -> Result<Vec<Key>, Box<dyn std::error::Error>> {
    let (mut xa, ya) = line_axes(chart);
    let named = named_ticks(chart, &xa, plot.dim_in_pixel().0 as f64 - 98.0);
    if let Some(named) = &named {
        xa.ticks = named.iter().map(|(p, _)| *p).collect();
    }
    let mut c = ChartBuilder::on(plot)
        .margin_left(12)
        .margin_right(16)
        .margin_top(12)
        .margin_bottom(8)
        .x_label_area_size(46)
        .y_label_area_size(70)
        .build_cartesian_2d(Ticked(xa.clone()), Ticked(ya.clone()))?;
    let xl = |v: &f64| match &named {
        Some(named) => named.iter().find(|(p, _)| (p - v).abs() < 1e-9).map_or_else(String::new, |(_, n)| n.clone()),
        None => xa.label(*v),
    };
    let yl = |v: &f64| ya.label(*v);
    c.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_label_formatter(&xl)
        .y_label_formatter(&yl)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .bold_line_style(RGBColor(225, 225, 225))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    if let Some((r, _)) = chart.reference
        && let Some(ry) = ya.to(r)
    {
        let grey = RGBColor(90, 90, 90);
        c.draw_series(DashedLineSeries::new(vec![(xa.lo, ry), (xa.hi, ry)], 6, 4, grey.stroke_width(2)))?;
    }
    let mut keys = Vec::new();
    for (i, s) in chart.series.iter().enumerate() {
        let (col, m) = style(i);
        let pts: Vec<(f64, f64, bool)> = s
            .points
            .iter()
            .enumerate()
            .filter_map(|(k, &(x, y))| Some((xa.to(x)?, ya.to(y)?, s.hollow.get(k).copied().unwrap_or(false))))
            .collect();
        c.draw_series(LineSeries::new(pts.iter().map(|&(x, y, _)| (x, y)), col.stroke_width(2)))?;
        // A CDF's markers every tenth quantile, to tell the curves apart.
        let every = if chart.kind == ChartKind::Cdf { 10 } else { 1 };
        for (k, &(x, y, hollow)) in pts.iter().enumerate() {
            if k % every == every - 1 || every == 1 {
                marker(root, c.backend_coord(&(x, y)), m, col, hollow)?;
            }
        }
        keys.push(Key::Line(col, Some(m)));
    }
    Ok(keys)
}

fn bars(plot: &Area<'_>, root: &Area<'_>, chart: &Chart) -> Result<Vec<Key>, Box<dyn std::error::Error>> {
    let groups = chart.categories.len().max(1);
    let k = chart.series.len().max(1);
    // Each group is k bar slots and one empty slot between groups.
    let slots = groups * (k + 1);
    let ys = finite(&chart.series).map(|(_, y)| y).filter(|&y| !chart.log_y || y > 0.0);
    let (mut y0, mut y1) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
    if let Some((r, _)) = chart.reference {
        (y0, y1) = (y0.min(r), y1.max(r));
    }
    let y1 = if chart.log_y || y1 < y0 { y1 } else { y1 * 1.04 };
    let ya = Axis::new(y0, y1, chart.log_y, true);
    // Category names centred under their groups, in a smaller font or on
    // two lines when they are wider than a group.
    let group_w = (plot.dim_in_pixel().0 as f64 - 98.0) / groups as f64 - 6.0;
    let (cat_size, cat_lines) = category_layout(&chart.categories, group_w);
    let rows = cat_lines.iter().map(Vec::len).max().unwrap_or(1) as u32;
    let mut c = ChartBuilder::on(plot)
        .margin_left(12)
        .margin_right(16)
        .margin_top(12)
        .margin_bottom(8)
        .x_label_area_size(30 + rows * (cat_size + 3))
        .y_label_area_size(70)
        .build_cartesian_2d((0..slots as u32).into_segmented(), Ticked(ya.clone()))?;
    let yl = |v: &f64| ya.label(*v);
    c.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_labels(slots + 1)
        .x_label_formatter(&|_: &SegmentValue<u32>| String::new())
        .set_tick_mark_size(LabelAreaPosition::Bottom, 0)
        .y_label_formatter(&yl)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .disable_x_mesh()
        .bold_line_style(RGBColor(225, 225, 225))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let font = (FONT, cat_size).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (g, lines) in cat_lines.iter().enumerate() {
        let first = (g * (k + 1)) as u32;
        let a = c.backend_coord(&(SegmentValue::Exact(first), ya.lo));
        let b = c.backend_coord(&(SegmentValue::Exact(first + k as u32), ya.lo));
        for (i, line) in lines.iter().enumerate() {
            let at = ((a.0 + b.0) / 2, a.1 + 6 + i as i32 * (cat_size as i32 + 3));
            root.draw(&Text::new(line.clone(), at, font.clone()))?;
        }
    }
    let mut keys = Vec::new();
    for (j, s) in chart.series.iter().enumerate() {
        let (col, _) = style(j);
        for (n, &(g, y)) in s.points.iter().enumerate() {
            let Some(top) = ya.to(y) else { continue };
            let slot = g as u32 * (k as u32 + 1) + j as u32;
            let corners = [(SegmentValue::Exact(slot), ya.lo), (SegmentValue::Exact(slot + 1), top)];
            if s.hollow.get(n).copied().unwrap_or(false) {
                c.draw_series(std::iter::once(Rectangle::new(corners.clone(), WHITE.filled())))?;
                let (a, b) = (c.backend_coord(&corners[0]), c.backend_coord(&corners[1]));
                root.draw(&Rectangle::new([(a.0 + 1, b.1 + 1), (b.0 - 1, a.1 - 1)], col.stroke_width(2)))?;
            } else {
                c.draw_series(std::iter::once(Rectangle::new(corners, col.filled())))?;
            }
        }
        keys.push(Key::Bar(col));
    }
    if let Some((r, _)) = chart.reference
        && let Some(ry) = ya.to(r)
    {
        let grey = RGBColor(90, 90, 90);
        let ends = vec![(SegmentValue::Exact(0), ry), (SegmentValue::Exact(slots as u32), ry)];
        c.draw_series(DashedLineSeries::new(ends, 6, 4, grey.stroke_width(2)))?;
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(kind: ChartKind) -> Chart {
        let mut c = Chart::new(kind, "t", "x axis", "y axis");
        c.categories = vec!["a".into(), "b".into()];
        c.series = vec![
            Series { name: "alpha".into(), points: vec![(0.0, 1.0), (1.0, 3.0)], hollow: vec![] },
            Series { name: "beta".into(), points: vec![(0.0, 2.0), (1.0, f64::NAN)], hollow: vec![] },
        ];
        c
    }

    /// The text of every `<text>` element of an SVG.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
            .collect()
    }

    #[test]
    fn every_kind_renders_its_labels() {
        for kind in [ChartKind::Line, ChartKind::Bar, ChartKind::Cdf] {
            let svg = render_svg(&chart(kind)).unwrap();
            assert!(svg.starts_with("<svg"), "{kind:?}");
            for text in ["alpha", "beta", "x axis", "y axis"] {
                assert!(svg.contains(text), "{kind:?} lacks {text}");
            }
        }
        let bar = texts(&render_svg(&chart(ChartKind::Bar)).unwrap());
        assert!(bar.iter().any(|t| t == "a") && bar.iter().any(|t| t == "b"), "category labels: {bar:?}");
    }

    #[test]
    fn numbers_print_integers_without_decimals() {
        assert_eq!(num(10000.0), "10000");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(2.5), "2.5");
        assert_eq!(num(0.25), "0.25");
        assert_eq!(num(1.23456), "1.235");
        assert_eq!(num(-4.0), "-4");
        let mut c = chart(ChartKind::Line);
        c.series[0].points = vec![(0.0, 20_000.0), (4.0, 60_000.0)];
        let t = texts(&render_svg(&c).unwrap());
        assert!(t.iter().any(|t| t == "60000"), "{t:?}");
        assert!(!t.iter().any(|t| t.ends_with(".0")), "no tick ends in .0: {t:?}");
    }

    #[test]
    fn log_axes_tick_at_round_values_and_drop_what_they_cannot_show() {
        let a = Axis::new(3.0, 700.0, true, true);
        let ticks: Vec<String> = a.ticks.iter().map(|&t| a.label(t)).collect();
        assert_eq!(ticks, ["2", "5", "10", "20", "50", "100", "200", "500", "1000"]);
        assert!(a.from(a.lo) <= 3.0 && a.from(a.hi) >= 700.0);
        // Less than a decade still has ticks.
        let a = Axis::new(20.0, 80.0, true, true);
        assert_eq!(a.ticks.iter().map(|&t| a.label(t)).collect::<Vec<_>>(), ["20", "50", "100"]);
        // Many decades: powers of ten only.
        let a = Axis::new(0.01, 1e6, true, true);
        assert!(a.ticks.iter().all(|t| (t - t.round()).abs() < 1e-9), "{:?}", a.ticks);
        assert_eq!(a.to(0.0), None);
        assert_eq!(a.to(100.0), Some(2.0));
        // A linear axis from zero, in round steps.
        let a = Axis::new(3.0, 47.0, false, true);
        assert_eq!((a.lo, a.hi), (0.0, 50.0));
        assert_eq!(a.ticks.iter().map(|&t| a.label(t)).collect::<Vec<_>>(), ["0", "10", "20", "30", "40", "50"]);
        // A log chart draws the ticks' values, not their logarithms.
        let mut c = chart(ChartKind::Line);
        c.log_y = true;
        c.series[0].points = vec![(0.0, 1.0), (1.0, 1000.0)];
        let t = texts(&render_svg(&c).unwrap());
        assert!(t.iter().any(|t| t == "1000") && t.iter().any(|t| t == "100"), "{t:?}");
    }

    #[test]
    fn long_titles_shrink_then_wrap_within_the_width() {
        let (lines, size) = title_layout("Short title", 796.0);
        assert_eq!((lines.len(), size), (1, 20));
        let long = "Contrarian (1½ and 2 rounds), CC-LO and Cure: ROT latency against throughput, 1 DC (Didona et al., Figs 4, 5, 7)";
        let (lines, size) = title_layout(long, 796.0);
        assert!(size < 20);
        for l in &lines {
            assert!(text_width(l, size as f64) <= 796.0, "{l:?} is too wide at {size}px");
        }
        let longer = format!("{long}: {long}");
        let (lines, size) = title_layout(&longer, 796.0);
        assert!(lines.len() >= 2, "{lines:?}");
        let widths: Vec<f64> = lines.iter().map(|l| text_width(l, size as f64)).collect();
        assert!(widths[1] > 0.6 * widths[0], "balanced lines: {lines:?}");
        assert_eq!(lines.join(" "), longer, "wrapping keeps every word");
        assert!(lines.iter().all(|l| text_width(l, size as f64) <= 796.0));
        let mut c = chart(ChartKind::Line);
        c.title = longer;
        let t = texts(&render_svg(&c).unwrap());
        assert!(t.contains(&lines[0]) && t.contains(&lines[1]), "{t:?}");
    }

    #[test]
    fn no_two_of_the_first_seventy_series_share_colour_and_marker() {
        let styles: Vec<(RGBColor, Marker)> = (0..70).map(style).collect();
        for i in 0..70 {
            for j in 0..i {
                assert!(styles[i] != styles[j], "series {i} and {j} look alike");
            }
        }
        // The first seven differ in both.
        for i in 0..7 {
            for j in 0..i {
                assert!(styles[i].0 != styles[j].0 && styles[i].1 != styles[j].1);
            }
        }
    }

    #[test]
    fn the_legend_is_a_column_beside_the_plot_and_wraps_long_names() {
        let mut c = chart(ChartKind::Line);
        c.series[1].name = "a rather long series name that cannot fit in one legend line at all".into();
        c.series[0].hollow = vec![true, false];
        c.hollow_note = "hollow: clients, not servers, bound the throughput".into();
        let l = layout(&c);
        assert!(l.legend_w >= 120 && l.legend_w <= 250, "{}", l.legend_w);
        assert_eq!(l.legend.len(), 3, "two series and the hollow note");
        assert!(l.legend[1].len() >= 2, "{:?}", l.legend[1]);
        for e in &l.legend {
            for line in e {
                assert!(text_width(line, l.legend_font) <= (l.legend_w - LEGEND_KEY) as f64, "{line:?}");
            }
        }
        let svg = render_svg(&c).unwrap();
        let t = texts(&svg);
        assert!(t.iter().any(|t| t.starts_with("hollow:")), "{t:?}");
        // Every data point lies left of the legend column.
        let (xa, ya) = line_axes(&c);
        assert!(xa.hi >= 1.0 && ya.hi >= 3.0);
        let legend_x = SIZE.0 - l.legend_w;
        for circle in svg.split("<circle").skip(1) {
            let cx: f64 = circle.split("cx=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
            let is_key = cx > legend_x as f64;
            assert!(is_key || cx + 5.0 < legend_x as f64, "a point at x={cx} under the legend");
        }
        // Without the note, no hollow entry.
        c.series[0].hollow.clear();
        assert_eq!(layout(&c).legend.len(), 2);
    }

    #[test]
    fn a_long_legend_still_fits_the_picture() {
        let mut c = chart(ChartKind::Line);
        c.series = (0..24)
            .map(|i| Series {
                name: format!("Contrarian (2 rounds), series value number {i}"),
                points: vec![(0.0, i as f64), (1.0, i as f64 + 1.0)],
                hollow: vec![],
            })
            .collect();
        let l = layout(&c);
        let height: i32 = l.legend.iter().map(|e| e.len() as i32 * l.legend_line + LEGEND_GAP).sum();
        assert!(height <= (SIZE.1 - l.title_h) as i32 - 24, "{height} px of legend, font {}", l.legend_font);
        let t = texts(&render_svg(&c).unwrap());
        for i in 0..24 {
            assert!(t.iter().any(|t| t.ends_with(&format!("number {i}"))), "entry {i} drawn: {t:?}");
        }
    }

    #[test]
    fn named_x_ticks_replace_numbers_when_they_fit() {
        let mut c = chart(ChartKind::Line);
        c.series[0].points = vec![(6.0, 1.0), (0.0, 2.0), (-6.0, 3.0)];
        c.x_ticks = vec![(6.0, "64:1".into()), (0.0, "1:1".into()), (-6.0, "1:64".into())];
        let t = texts(&render_svg(&c).unwrap());
        assert!(["64:1", "1:1", "1:64"].iter().all(|n| t.iter().any(|t| t == n)), "{t:?}");
        // Crowded names fall back to round numbers.
        c.x_ticks = (0..40).map(|i| (i as f64 * 0.3 - 6.0, format!("point number {i}"))).collect();
        let t = texts(&render_svg(&c).unwrap());
        assert!(!t.iter().any(|t| t.starts_with("point number")), "{t:?}");
        assert!(t.iter().any(|t| t == "0"), "{t:?}");
    }

    #[test]
    fn hollow_points_are_drawn_white_inside() {
        let mut c = chart(ChartKind::Line);
        c.series[0].hollow = vec![true, true];
        c.hollow_note = "hollow: clients bound it".into();
        let white_circles = |svg: &str| {
            svg.split("<circle")
                .skip(1)
                .filter(|c| c.split('>').next().unwrap_or("").contains("fill=\"#FFFFFF\""))
                .count()
        };
        // Two hollow points and the legend's hollow key; none when no point is hollow.
        assert_eq!(white_circles(&render_svg(&c).unwrap()), 3);
        c.series[0].hollow.clear();
        assert_eq!(white_circles(&render_svg(&c).unwrap()), 0);
        let mut b = chart(ChartKind::Bar);
        b.series[0].hollow = vec![true, false];
        b.hollow_note = "hollow: clients bound it".into();
        assert!(texts(&render_svg(&b).unwrap()).iter().any(|t| t.starts_with("hollow:")));
    }
}
