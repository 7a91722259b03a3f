//! The figures of `fastmm bench --out`: one PNG and one SVG per figure,
//! each with a title, axis labels with units, a legend beside the plot
//! (never over the data) and the machine in a footer. The x axis is
//! labelled at the data's own values (sizes 64, 128, 256 on a log axis;
//! thread counts as whole numbers). Each series has its own colour,
//! marker and dash pattern, so that one line on top of another still
//! shows; a series timed fewer than `MIN_RELIABLE_REPS` times is drawn
//! with hollow markers and marked in the legend. Text is drawn with
//! DejaVu Sans embedded in the binary, so figures look the same on a
//! machine without fonts.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Result};
use fastmm::partial::PartialFile;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{Point, FEW_REPS_MARK, MIN_RELIABLE_REPS};
use super::{AxisKind, Sweep};

/// Pixels of every figure.
const FIGURE_SIZE: (u32, u32) = (1000, 640);
/// Most lines a size figure draws before it keeps other axes at their
/// first values.
const MAX_SERIES: usize = 10;
/// Height of the footer that names the machine.
const FOOTER_HEIGHT: u32 = 28;
/// Most x values labelled; more are thinned to every second, third, ….
const MAX_X_LABELS: usize = 12;
/// Font size of the legend, in pixels.
const LEGEND_FONT: u32 = 14;

/// Line colours, in order (Tableau 10): distinct on white and in grey.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// A tick label: whole numbers without decimals, others to three
/// significant digits.
fn compact(v: &f64) -> String {
    let v = *v;
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1.0 && (v - v.round()).abs() < 1e-9 * v.abs() {
        format!("{}", v.round())
    } else {
        let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
        let text = format!("{v:.digits$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    }
}

/// A figure: series of (x, y) points, one line each.
struct Figure {
    /// File name without extension.
    file: String,
    title: String,
    x_label: String,
    y_label: String,
    log_x: bool,
    log_y: bool,
    /// Names for x = 0, 1, … when the x values are categories.
    categories: Option<Vec<String>>,
    series: Vec<Series>,
}

/// One line of a figure.
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    /// Every point timed at least `MIN_RELIABLE_REPS` times, against a
    /// baseline that was too.
    reliable: bool,
}

/// Draws every figure the sweep supports into `dir` and returns their
/// file names (without extensions).
pub fn draw_all(dir: &Path, sweep: &Sweep, points: &[Point], machine: &str) -> Result<Vec<String>> {
    let figures = figures(sweep, points);
    if figures.is_empty() {
        return Ok(Vec::new());
    }
    let footer = match &sweep.source {
        Some(source) => format!("{source} · {machine}"),
        None => machine.to_string(),
    };
    let machine = footer.as_str();
    register_font();
    let mut names = Vec::new();
    for figure in figures.iter().filter(|f| !f.series.is_empty()) {
        // Each figure is drawn to a temporary file (named with its
        // extension, which picks the encoder) and renamed when complete.
        let png = PartialFile::keeping_extension(&dir.join(format!("{}.png", figure.file)));
        {
            let root = BitMapBackend::new(png.path(), FIGURE_SIZE).into_drawing_area();
            draw(&root, figure, machine)?;
            root.present()
                .map_err(|e| anyhow!("cannot write {}: {e}", png.path().display()))?;
        }
        png.commit()?;
        let svg = PartialFile::keeping_extension(&dir.join(format!("{}.svg", figure.file)));
        {
            let root = SVGBackend::new(svg.path(), FIGURE_SIZE).into_drawing_area();
            draw(&root, figure, machine)?;
            root.present()
                .map_err(|e| anyhow!("cannot write {}: {e}", svg.path().display()))?;
        }
        svg.commit()?;
        names.push(figure.file.clone());
    }
    Ok(names)
}

fn register_font() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // DejaVu Sans is a valid font; a failure would only lose the text.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// The x position of a shape: n for squares, ∛(mkn) otherwise.
fn size_of(p: &Point) -> f64 {
    let r = &p.record;
    if r.m == r.k && r.k == r.n {
        r.n as f64
    } else {
        (r.m as f64 * r.k as f64 * r.n as f64).cbrt()
    }
}

/// Series names: the algorithm, plus whatever else varies among the
/// points drawn (dtype, shape, settings) except what is on the x axis.
fn label(p: &Point, points: &[&Point], x_axis: Option<&str>) -> String {
    let r = &p.record;
    let mut label = r.algorithm.to_string();
    let varies = |f: &dyn Fn(&Point) -> String| {
        points
            .iter()
            .filter(|q| q.record.algorithm == r.algorithm)
            .map(|q| f(q))
            .collect::<BTreeSet<_>>()
            .len()
            > 1
    };
    if varies(&|q| q.record.dtype.to_string()) {
        label += &format!(" {}", r.dtype);
    }
    if x_axis.is_some() && varies(&|q| format!("{}x{}x{}", q.record.m, q.record.k, q.record.n)) {
        if r.m == r.k && r.k == r.n {
            label += &format!(" n={}", r.n);
        } else {
            label += &format!(" {}×{}×{}", r.m, r.k, r.n);
        }
    }
    for (axis, value) in &p.settings {
        if Some(*axis) != x_axis && varies(&|q| q.settings.get(axis).cloned().unwrap_or_default()) {
            label += &format!(" {axis}={value}");
        }
    }
    label
}

/// Groups points into series by label, each sorted by x.
fn series(
    points: &[&Point],
    x_axis: Option<&str>,
    xy: &dyn Fn(&Point) -> Option<(f64, f64)>,
) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for p in points {
        let Some((x, y)) = xy(p).filter(|(x, y)| x.is_finite() && y.is_finite()) else {
            continue;
        };
        let name = label(p, points, x_axis);
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                s.points.push((x, y));
                s.reliable &= p.reliable;
            }
            None => series.push(Series {
                name,
                points: vec![(x, y)],
                reliable: p.reliable,
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !s.reliable {
            s.name += &format!(" {FEW_REPS_MARK} <{MIN_RELIABLE_REPS} reps");
        }
    }
    series
}

fn figures(sweep: &Sweep, points: &[Point]) -> Vec<Figure> {
    let mut figures = Vec::new();
    let all: Vec<&Point> = points.iter().collect();
    let title = &sweep.title;
    if sweep.shapes.len() >= 2 {
        let rectangles = sweep.shapes.iter().any(|&(m, k, n)| m != k || k != n);
        let x_label = if rectangles {
            "size ∛(m·k·n) (elements)"
        } else {
            "matrix size n (elements)"
        };
        // With other axes swept, the size figures draw a line per
        // combination while that stays readable, else the first values.
        let lines = series(&all, None, &|p| Some((size_of(p), p.record.median_ms))).len();
        let (firsts, held): (Vec<&Point>, String) = if lines <= MAX_SERIES {
            (all.clone(), String::new())
        } else {
            let firsts = all
                .iter()
                .copied()
                .filter(|p| {
                    sweep.axes.iter().all(|axis| {
                        p.settings
                            .get(axis.kind.name())
                            .is_none_or(|v| *v == axis.values[0])
                    })
                })
                .collect();
            let held = sweep
                .axes
                .iter()
                .filter(|a| a.values.len() > 1)
                .map(|a| format!(", {} {}", a.kind.name(), a.values[0]))
                .collect();
            (firsts, held)
        };
        let by_size = |f: fn(&Point) -> f64| move |p: &Point| Some((size_of(p), f(p)));
        figures.push(Figure {
            file: "time-vs-size".into(),
            title: format!("{title}: time against size{held}"),
            x_label: x_label.into(),
            y_label: "median time (ms)".into(),
            log_x: true,
            log_y: true,
            categories: None,
            series: series(&firsts, None, &by_size(|p| p.record.median_ms)),
        });
        figures.push(Figure {
            file: "gflops-vs-size".into(),
            title: format!("{title}: throughput against size{held}"),
            x_label: x_label.into(),
            y_label: "GFLOP/s (2mnk / time)".into(),
            log_x: true,
            log_y: false,
            categories: None,
            series: series(&firsts, None, &by_size(|p| p.record.gflops)),
        });
        if sweep.targets.len() > 1 {
            figures.push(Figure {
                file: "speedup-vs-size".into(),
                title: format!(
                    "{title}: speedup over {} against size{held}",
                    sweep.baseline
                ),
                x_label: x_label.into(),
                y_label: format!("speedup over {} (×)", sweep.baseline),
                log_x: true,
                log_y: false,
                categories: None,
                series: series(&firsts, None, &by_size(|p| p.speedup_vs_baseline)),
            });
        }
    }
    for axis in sweep.axes.iter().filter(|a| a.values.len() >= 2) {
        let name = axis.kind.name();
        let swept: Vec<&Point> = all
            .iter()
            .copied()
            .filter(|p| p.settings.contains_key(name))
            .collect();
        let value = |p: &Point| p.settings.get(name).and_then(|v| v.parse::<f64>().ok());
        if axis.kind == AxisKind::Threads {
            figures.push(Figure {
                file: "speedup-vs-threads".into(),
                title: format!("{title}: speedup against threads"),
                x_label: "threads".into(),
                y_label: "speedup over one thread (×)".into(),
                log_x: false,
                log_y: false,
                categories: None,
                series: series(&swept, Some(name), &|p| {
                    Some((value(p)?, p.speedup_vs_one_thread?))
                }),
            });
            figures.push(Figure {
                file: "efficiency-vs-threads".into(),
                title: format!("{title}: parallel efficiency against threads"),
                x_label: "threads".into(),
                y_label: "efficiency (speedup / threads)".into(),
                log_x: false,
                log_y: false,
                categories: None,
                series: series(&swept, Some(name), &|p| {
                    Some((
                        value(p)?,
                        p.efficiency
                            .filter(|_| p.efficiency_per == Some("threads"))?,
                    ))
                }),
            });
            continue;
        }
        let file = format!("time-vs-{}", name.replace(' ', "-"));
        let title = format!("{title}: time against {}", axis.kind.label());
        if axis.kind.numeric() {
            let log = axis.kind != AxisKind::Depth;
            figures.push(Figure {
                file,
                title,
                x_label: axis.kind.label().into(),
                y_label: "median time (ms)".into(),
                log_x: log,
                log_y: true,
                categories: None,
                series: series(&swept, Some(name), &|p| {
                    Some((value(p)?, p.record.median_ms))
                }),
            });
        } else {
            let position = |p: &Point| {
                let v = p.settings.get(name)?;
                axis.values.iter().position(|a| a == v).map(|i| i as f64)
            };
            figures.push(Figure {
                file,
                title,
                x_label: axis.kind.label().into(),
                y_label: "median time (ms)".into(),
                log_x: false,
                log_y: true,
                categories: Some(axis.values.clone()),
                series: series(&swept, Some(name), &|p| {
                    Some((position(p)?, p.record.median_ms))
                }),
            });
        }
    }
    figures
}

/// Bounds of the data with a margin; positive for log axes.
fn bounds(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        lo = lo.max(f64::MIN_POSITIVE);
        hi = hi.max(lo);
        (lo / 1.3, hi * 1.3)
    } else {
        if from_zero {
            lo = lo.min(0.0);
        }
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        (if from_zero { lo } else { lo - pad }, hi + pad)
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
    machine: &str,
) -> Result<()> {
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (chart, footer) = root.split_vertically(FIGURE_SIZE.1 - FOOTER_HEIGHT);
    footer
        .draw_text(
            machine,
            &("sans-serif", 14).into_font().color(&BLACK.mix(0.75)),
            (12, 6),
        )
        .map_err(|e| anyhow!("{e}"))?;
    // The legend gets its own column to the right of the plot.
    let longest = fig.series.iter().map(|s| s.name.chars().count()).max();
    let legend_width = longest.map_or(0, |chars| {
        (chars as f64 * 0.58 * f64::from(LEGEND_FONT) + 64.0).clamp(140.0, 420.0) as u32
    });
    let (chart, legend) = chart.split_horizontally(FIGURE_SIZE.0 - legend_width);
    draw_legend(&legend, fig)?;
    let xs = fig.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = fig.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = match &fig.categories {
        Some(names) => (-0.5, names.len() as f64 - 0.5),
        None => bounds(xs, fig.log_x, false),
    };
    let x = DataAxis {
        lo,
        hi,
        log: fig.log_x,
        ticks: data_ticks(fig),
    };
    let (y0, y1) = bounds(ys, fig.log_y, true);
    match fig.log_y {
        true => {
            let y = DataAxis {
                lo: y0,
                hi: y1,
                log: true,
                ticks: log_ticks(y0, y1),
            };
            plot(&chart, fig, x, y)
        }
        false => plot(&chart, fig, x, y0..y1),
    }
}

/// Values to label on a logarithmic axis from `lo` to `hi`: enough of
/// them (at least three) that every series can be read, however narrow
/// the range. Powers of ten over several decades; 1, 2, 5 over one to
/// three; every digit within a decade; and evenly spaced round values
/// where even those leave fewer than three.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const WANTED: usize = 3;
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let mantissas: [&[f64]; 3] = [
        &[1.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ];
    for set in mantissas {
        let ticks: Vec<f64> = (first..=last)
            .flat_map(|e| set.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect();
        if ticks.len() >= WANTED {
            return ticks;
        }
    }
    // Less than a decade's worth of digits in range: round linear steps.
    let raw = (hi - lo) / 4.0;
    let magnitude = 10f64.powi(raw.log10().floor() as i32);
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude);
    let mut ticks = Vec::new();
    let mut at = (lo / step).ceil();
    while at * step <= hi {
        ticks.push(at * step);
        at += 1.0;
    }
    ticks
}

/// An axis, linear or logarithmic, ticked at given values (the x data's,
/// or [`log_ticks`] for a logarithmic y), which plotters' own axes do not
/// offer for linear f64 and thin to one label on a narrow log range.
#[derive(Clone)]
struct DataAxis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

impl Ranged for DataAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, (from, to): (i32, i32)) -> i32 {
        let t = if self.log {
            (value.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (value - self.lo) / (self.hi - self.lo)
        };
        from + (t * f64::from(to - from)).round() as i32
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Labels and their grid lines at the data only; no light lines.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// The x values to label: the data's own (every category), thinned to at
/// most [`MAX_X_LABELS`] evenly.
fn data_ticks(fig: &Figure) -> Vec<f64> {
    if let Some(names) = &fig.categories {
        return (0..names.len()).map(|i| i as f64).collect();
    }
    let mut xs: Vec<f64> = fig
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs().max(1.0));
    let step = xs.len().div_ceil(MAX_X_LABELS).max(1);
    xs.into_iter().step_by(step).collect()
}

/// Series i's line and marker: colour by i mod 10, dash pattern by i
/// mod 3 and marker by i mod 5, so that no two of the first thirty
/// series look alike and a line on top of another still shows.
#[derive(Clone, Copy)]
struct Look {
    color: RGBAColor,
    /// (dash, gap) in pixels; `None` for a solid line.
    dash: Option<(u32, u32)>,
    marker: usize,
    hollow: bool,
}

impl Look {
    fn of(i: usize, reliable: bool) -> Look {
        Look {
            color: PALETTE[i % PALETTE.len()].to_rgba(),
            dash: [None, Some((10, 5)), Some((3, 4))][i % 3],
            marker: i % 5,
            hollow: !reliable,
        }
    }

    /// The marker at a pixel position.
    fn marker<DB: DrawingBackend>(
        self,
        area: &DrawingArea<DB, Shift>,
        (x, y): (i32, i32),
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let style = if self.hollow {
            self.color.stroke_width(2)
        } else {
            self.color.filled()
        };
        const R: i32 = 5;
        // A filled polygon, or for a hollow marker its closed outline only
        // (plotters fills a Polygon whatever its style).
        let polygon = |corners: Vec<(i32, i32)>| match self.hollow {
            true => {
                let mut outline = corners;
                outline.push(outline[0]);
                area.draw(&PathElement::new(outline, style))
            }
            false => area.draw(&Polygon::new(corners, style)),
        };
        match self.marker {
            0 => area.draw(&Circle::new((x, y), R, style)),
            1 => area.draw(&Rectangle::new(
                [(x - R + 1, y - R + 1), (x + R - 1, y + R - 1)],
                style,
            )),
            2 => polygon(vec![(x, y - R - 1), (x + R, y + R - 1), (x - R, y + R - 1)]),
            3 => polygon(vec![
                (x, y - R - 1),
                (x + R + 1, y),
                (x, y + R + 1),
                (x - R - 1, y),
            ]),
            _ => area
                .draw(&PathElement::new(
                    vec![(x - R, y - R), (x + R, y + R)],
                    self.color.stroke_width(2),
                ))
                .and_then(|()| {
                    area.draw(&PathElement::new(
                        vec![(x - R, y + R), (x + R, y - R)],
                        self.color.stroke_width(2),
                    ))
                }),
        }
    }

    /// A line through pixel positions, in this look's dash pattern.
    fn line<DB: DrawingBackend>(
        self,
        area: &DrawingArea<DB, Shift>,
        pixels: &[(i32, i32)],
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let style = self.color.stroke_width(2);
        let Some((dash, gap)) = self.dash else {
            return area.draw(&PathElement::new(pixels.to_vec(), style));
        };
        // Walk the polyline, drawing `dash` pixels on and `gap` off.
        let (mut on, mut left) = (true, f64::from(dash));
        for pair in pixels.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let (dx, dy) = (f64::from(b.0 - a.0), f64::from(b.1 - a.1));
            let length = dx.hypot(dy);
            let mut at = 0.0;
            while at < length {
                let step = left.min(length - at);
                if on {
                    let p = |t: f64| {
                        (
                            a.0 + (dx * t / length) as i32,
                            a.1 + (dy * t / length) as i32,
                        )
                    };
                    area.draw(&PathElement::new(vec![p(at), p(at + step)], style))?;
                }
                at += step;
                left -= step;
                if left <= 0.0 {
                    on = !on;
                    left = f64::from(if on { dash } else { gap });
                }
            }
        }
        Ok(())
    }
}

/// The legend column: each series' line, marker and name, top down.
fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, fig: &Figure) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    let row = LEGEND_FONT as i32 + 10;
    let top = 60;
    for (i, s) in fig.series.iter().enumerate() {
        let look = Look::of(i, s.reliable);
        let y = top + i as i32 * row;
        look.line(area, &[(8, y), (44, y)]).map_err(err)?;
        look.marker(area, (26, y)).map_err(err)?;
        area.draw_text(
            &s.name,
            &("sans-serif", LEGEND_FONT).into_font().color(&BLACK),
            (52, y - LEGEND_FONT as i32 / 2 - 1),
        )
        .map_err(err)?;
    }
    Ok(())
}

fn plot<DB, X, Y>(area: &DrawingArea<DB, Shift>, fig: &Figure, x: X, y: Y) -> Result<()>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    // Shrink a long title to the width (DejaVu Sans averages about 0.55
    // em per character).
    let width = f64::from(FIGURE_SIZE.0) - 40.0;
    let title_size = (width / (0.55 * fig.title.chars().count() as f64)).clamp(12.0, 22.0);
    let mut chart = ChartBuilder::on(area)
        .caption(&fig.title, ("sans-serif", title_size))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    let category = |v: &f64| {
        let names = fig.categories.as_deref().unwrap_or_default();
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(fig.x_label.as_str())
        .y_desc(fig.y_label.as_str())
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16));
    match &fig.categories {
        Some(names) => mesh.x_labels(names.len()).x_label_formatter(&category),
        None => mesh.x_label_formatter(&compact),
    };
    mesh.y_label_formatter(&compact);
    mesh.draw().map_err(err)?;
    // Lines and markers in pixels, on the plotting area, so that dash
    // patterns and marker shapes are the same in PNG and SVG.
    let (px, py) = chart.plotting_area().get_pixel_range();
    let plotting = chart.plotting_area().strip_coord_spec();
    let to_pixels = |points: &[(f64, f64)]| -> Vec<(i32, i32)> {
        points
            .iter()
            .map(|&p| {
                let (x, y) = chart.backend_coord(&p);
                (x - px.start, y - py.start)
            })
            .collect()
    };
    for (i, s) in fig.series.iter().enumerate() {
        let look = Look::of(i, s.reliable);
        let pixels = to_pixels(&s.points);
        look.line(&plotting, &pixels).map_err(err)?;
        for &p in &pixels {
            look.marker(&plotting, p).map_err(err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every range, however narrow, gets at least three labels, all in
    /// range and increasing; wide ranges get powers of ten only.
    #[test]
    fn log_axes_label_enough_ticks() {
        for (lo, hi) in [
            (0.077, 0.16),
            (0.1, 0.13),
            (0.3, 0.9),
            (1.2, 1.25),
            (0.08, 3.0),
            (5.0, 700.0),
            (1e-3, 1e4),
        ] {
            let ticks = log_ticks(lo, hi);
            assert!(ticks.len() >= 3, "{lo}..{hi}: {ticks:?}");
            assert!(ticks.len() <= 12, "{lo}..{hi}: {ticks:?}");
            assert!(ticks.iter().all(|t| (lo..=hi).contains(t)), "{ticks:?}");
            assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
            let labels: Vec<String> = ticks.iter().map(compact).collect();
            let mut distinct = labels.clone();
            distinct.dedup();
            assert_eq!(distinct, labels, "labels repeat: {labels:?}");
        }
        assert_eq!(log_ticks(1e-3, 1e4).len(), 8);
        assert!(log_ticks(0.0, 1.0).is_empty());
    }
}
