//! SVG charts: lines against a numeric axis, grouped bars over categories,
//! and latency CDFs. Drawn with `plotters`' SVG backend (no font or bitmap
//! dependencies: text is left to the SVG viewer).

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChartKind {
    Line,
    Bar,
    Cdf,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// (x, y); for bars x is the category's index.
    pub points: Vec<(f64, f64)>,
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
}

const SIZE: (u32, u32) = (820, 500);
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Render `chart` as an SVG document.
pub fn render_svg(chart: &Chart) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let drawn = match chart.kind {
            ChartKind::Line | ChartKind::Cdf => lines(&root, chart),
            ChartKind::Bar => bars(&root, chart),
        };
        drawn.map_err(|e| format!("drawing {:?}: {e}", chart.title))?;
        root.present().map_err(|e| format!("drawing {:?}: {e}", chart.title))?;
    }
    Ok(out)
}

fn finite(series: &[Series]) -> impl Iterator<Item = (f64, f64)> + '_ {
    series.iter().flat_map(|s| s.points.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite())
}

fn lines(root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>, chart: &Chart) -> DrawResult {
    root.fill(&WHITE)?;
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for (x, y) in finite(&chart.series) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x0 == x1 {
        x1 = x0 + 1.0;
    }
    let y1 = if chart.kind == ChartKind::Cdf { 1.0 } else { (y1 * 1.1).max(1e-9) };
    let x0 = if chart.kind == ChartKind::Cdf { 0.0 } else { x0 };
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..y1)?;
    c.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, s) in chart.series.iter().enumerate() {
        let col = color(i);
        let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
        c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
            .label(&s.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        if chart.kind == ChartKind::Line {
            c.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, col.filled())))?;
        }
    }
    let pos =
        if chart.kind == ChartKind::Cdf { SeriesLabelPosition::LowerRight } else { SeriesLabelPosition::UpperLeft };
    c.configure_series_labels().position(pos).background_style(WHITE.mix(0.85)).border_style(BLACK).draw()?;
    Ok(())
}

fn bars(root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>, chart: &Chart) -> DrawResult {
    root.fill(&WHITE)?;
    let groups = chart.categories.len().max(1);
    let k = chart.series.len().max(1);
    // Each group is k bar slots and one empty slot between groups.
    let slots = groups * (k + 1);
    let y1 = finite(&chart.series).map(|(_, y)| y).fold(0.0f64, f64::max) * 1.1;
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((0..slots as u32).into_segmented(), 0.0..y1.max(1e-9))?;
    let label = |v: &SegmentValue<u32>| match v {
        SegmentValue::CenterOf(i) if (*i as usize) % (k + 1) == k / 2 => {
            chart.categories.get(*i as usize / (k + 1)).cloned().unwrap_or_default()
        }
        _ => String::new(),
    };
    c.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_labels(slots + 1)
        .x_label_formatter(&label)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .disable_x_mesh()
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (j, s) in chart.series.iter().enumerate() {
        let col = color(j);
        let rects = s.points.iter().filter(|(_, y)| y.is_finite()).map(|&(g, y)| {
            let slot = g as u32 * (k as u32 + 1) + j as u32;
            Rectangle::new([(SegmentValue::Exact(slot), 0.0), (SegmentValue::Exact(slot + 1), y)], col.filled())
        });
        c.draw_series(rects)?
            .label(&s.name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], col.filled()));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(kind: ChartKind) -> Chart {
        Chart {
            kind,
            title: "t".into(),
            x_label: "x axis".into(),
            y_label: "y axis".into(),
            categories: vec!["a".into(), "b".into()],
            series: vec![
                Series { name: "alpha".into(), points: vec![(0.0, 1.0), (1.0, 3.0)] },
                Series { name: "beta".into(), points: vec![(0.0, 2.0), (1.0, f64::NAN)] },
            ],
        }
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
        let bar = render_svg(&chart(ChartKind::Bar)).unwrap();
        let texts: Vec<&str> = bar.lines().map(str::trim).collect();
        assert!(texts.contains(&"a") && texts.contains(&"b"), "category labels");
    }
}
