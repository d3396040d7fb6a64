//! Charts as SVG documents, drawn with `plotters` (its SVG backend, no fonts needed: text is
//! left to the browser). Each function takes what it plots and how to print its values
//! (the units of [`crate::units`]) and returns the SVG text.

use anyhow::{Result, anyhow};
use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, SegmentedCoord, ValueFormatter};
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of every chart, in pixels (the page scales it down on narrow screens).
const WIDTH: u32 = 960;
/// Height of one bar of a bar chart.
const BAR: u32 = 22;
/// Categorical colours (Tableau 10).
const PALETTE: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(89, 161, 79),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
];
/// The gridlines: one per labelled tick, faint (no minor lines).
const GRID: RGBColor = RGBColor(232, 235, 241);
/// A label longer than this is cut (with `…`).
const LABEL_CHARS: usize = 48;

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Every chart's axes: 13 px tick labels, 14 px titles, a faint gridline at each labelled tick
/// and none between, about 7 ticks across and 6 up (a caller may change any of them).
fn mesh<'a, 'b, X, Y, DB>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> MeshStyle<'a, 'b, X, Y, DB>
where
    DB: DrawingBackend,
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    let mut m = chart.configure_mesh();
    m.label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .x_labels(7)
        .y_labels(6);
    m
}

/// The highest point `top` of a chart spanning `x`, marked in red and labelled `text` on the
/// side of it with room.
fn mark_peak(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    top: (f64, f64),
    x: std::ops::Range<f64>,
    text: String,
) -> Result<()> {
    chart
        .draw_series([Circle::new(top, 4, RED.filled())])
        .map_err(err)?;
    let right = top.0 < (x.start + x.end) / 2.0;
    let style = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(
        if right { HPos::Left } else { HPos::Right },
        VPos::Bottom,
    ));
    chart
        .draw_series([Text::new(text, top, style)])
        .map_err(err)?;
    Ok(())
}

/// How a chart prints values of an axis.
pub type Fmt<'a> = &'a dyn Fn(f64) -> String;

/// One line (or set of points) of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e:?}")
}

fn short(label: &str) -> String {
    if label.chars().count() <= LABEL_CHARS {
        label.to_string()
    } else {
        let cut: String = label.chars().take(LABEL_CHARS - 1).collect();
        format!("{cut}…")
    }
}

/// Room for the longest of `labels`, in pixels.
fn label_width(labels: impl Iterator<Item = usize>) -> u32 {
    let longest = labels.max().unwrap_or(4).min(LABEL_CHARS);
    (longest as u32 * 7 + 16).clamp(60, 380)
}

fn draw<F>(height: u32, f: F) -> Result<String>
where
    F: FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
{
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        f(&root)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn upper(max: f64) -> f64 {
    if max > 0.0 && max.is_finite() {
        max * 1.05
    } else {
        1.0
    }
}

/// Horizontal bars, one per `(label, value)`, in the order given.
pub fn bars(items: &[(String, f64)], x_desc: &str, fmt: Fmt) -> Result<String> {
    let parts = vec![String::new()];
    let stacked: Vec<(String, Vec<f64>)> =
        items.iter().map(|(l, v)| (l.clone(), vec![*v])).collect();
    stacked_bars(&stacked, &parts, x_desc, fmt)
}

/// Horizontal stacked bars: each bar `(label, values)` has one value per part, drawn in
/// order; a legend names the parts (unless there is one unnamed part).
pub fn stacked_bars(
    bars: &[(String, Vec<f64>)],
    parts: &[String],
    x_desc: &str,
    fmt: Fmt,
) -> Result<String> {
    let n = bars.len().max(1);
    let legend = parts.len() > 1 || parts.iter().any(|p| !p.is_empty());
    let legend_h = if legend { legend_height(parts) } else { 0 };
    let height = n as u32 * BAR + 70 + legend_h;
    let max = bars
        .iter()
        .map(|(_, v)| v.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let labels: Vec<String> = bars.iter().map(|(l, _)| short(l)).collect();
    draw(height, |root| {
        let (area, legend_area) = if legend {
            let (l, a) = root.split_vertically(legend_h);
            (a, Some(l))
        } else {
            (root.clone(), None)
        };
        let mut chart = category_chart(&area, 0.0..upper(max), &labels, 30, x_desc, fmt)?;
        for (row, (_, values)) in bars.iter().enumerate() {
            // The first bar on top.
            let i = n - 1 - row;
            let mut x0 = 0.0;
            for (k, v) in values.iter().enumerate() {
                let x1 = x0 + v.max(0.0);
                let mut bar = Rectangle::new(
                    [
                        (x0, SegmentValue::Exact(i as i32)),
                        (x1, SegmentValue::Exact(i as i32 + 1)),
                    ],
                    color(k).filled(),
                );
                // A gap between neighbouring bars.
                bar.set_margin(3, 3, 0, 0);
                chart.draw_series(std::iter::once(bar)).map_err(err)?;
                x0 = x1;
            }
        }
        if let Some(l) = legend_area {
            draw_legend(&l, parts)?;
        }
        Ok(())
    })
}

/// A chart of one band per label (the first on top) over `x`, its axes drawn; `right` is the
/// room kept right of the plot for the last tick's label.
fn category_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x: std::ops::Range<f64>,
    labels: &[String],
    right: u32,
    x_desc: &str,
    fmt: Fmt,
) -> Result<
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordi32>>>,
> {
    let n = labels.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .margin_right(right)
        .x_label_area_size(40)
        .y_label_area_size(label_width(labels.iter().map(|l| l.chars().count())))
        .build_cartesian_2d(x, (0..n as i32).into_segmented())
        .map_err(err)?;
    mesh(&mut chart)
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| top_down(labels, v))
        .x_label_formatter(&|v| fmt(*v))
        .x_desc(x_desc)
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// The label of a band of a category axis whose first category is drawn on top.
fn top_down(labels: &[String], v: &SegmentValue<i32>) -> String {
    match v {
        SegmentValue::CenterOf(i) => labels
            .len()
            .checked_sub(1 + *i as usize)
            .and_then(|k| labels.get(k))
            .cloned()
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// Where each legend entry goes: `(row, x)`, rows of at most the chart's width.
fn legend_layout(names: &[String]) -> Vec<(u32, i32)> {
    let (mut row, mut x) = (0, 12);
    names
        .iter()
        .map(|name| {
            let w = 16 + short(name).chars().count() as i32 * 7 + 18;
            if x > 12 && x + w > WIDTH as i32 - 12 {
                row += 1;
                x = 12;
            }
            let at = (row, x);
            x += w;
            at
        })
        .collect()
}

/// The legend's height in pixels.
fn legend_height(names: &[String]) -> u32 {
    legend_layout(names)
        .last()
        .map_or(0, |l| (l.0 + 1) * LEGEND_ROW)
}

const LEGEND_ROW: u32 = 22;

/// Rows of coloured squares naming the parts.
fn draw_legend(area: &DrawingArea<SVGBackend, Shift>, names: &[String]) -> Result<()> {
    for (k, (name, (row, x))) in names.iter().zip(legend_layout(names)).enumerate() {
        let y = (row * LEGEND_ROW) as i32 + 6;
        area.draw(&Rectangle::new(
            [(x, y), (x + 12, y + 12)],
            color(k).filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(short(name), (x + 16, y), ("sans-serif", 13)))
            .map_err(err)?;
    }
    Ok(())
}

/// Lines with markers through each series' points (sorted by x); `log_base` draws the x
/// axis on a log scale of that base (positive x only; 2 puts byte sizes on round ticks).
/// `peak` marks the highest point with its label.
pub fn lines(
    series: &[Series],
    log_base: Option<f64>,
    (x_desc, x_fmt): (&str, Fmt),
    (y_desc, y_fmt): (&str, Fmt),
    peak: Option<&str>,
) -> Result<String> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.0), b.max(p.0))
    });
    if !x0.is_finite() {
        (x0, x1) = (1.0, 10.0);
    }
    if x1 <= x0 {
        (x0, x1) = if log_base.is_some() {
            (x0 / 2.0, x1 * 2.0)
        } else {
            (x0 - 1.0, x1 + 1.0)
        };
    }
    // Room around the outermost points, so that their markers and labels are not cut.
    (x0, x1) = match log_base {
        Some(_) => (x0 / 1.3, x1 * 1.3),
        None => (x0 - 0.02 * (x1 - x0), x1 + 0.02 * (x1 - x0)),
    };
    let y1 = upper(all().map(|p| p.1).fold(0.0, f64::max));
    let legend = series.len() > 1;
    let names: Vec<String> = series.iter().map(|s| s.name.clone()).collect();
    let legend_h = if legend { legend_height(&names) } else { 0 };
    let height = 380 + legend_h;
    draw(height, |root| {
        let (area, legend_area) = if legend {
            let (l, a) = root.split_vertically(legend_h);
            (a, Some(l))
        } else {
            (root.clone(), None)
        };
        if let Some(base) = log_base {
            let x0 = x0.max(f64::MIN_POSITIVE);
            let mut chart = axes(
                &area,
                (x0..x1).log_scale().base(base),
                y1,
                (x_desc, x_fmt),
                (y_desc, y_fmt),
            )?;
            for (k, s) in series.iter().enumerate() {
                let pts: Vec<(f64, f64)> = sorted(&s.points).filter(|p| p.0 > 0.0).collect();
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), color(k)))
                    .map_err(err)?;
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color(k).filled())))
                    .map_err(err)?;
            }
        } else {
            let mut chart = axes(&area, x0..x1, y1, (x_desc, x_fmt), (y_desc, y_fmt))?;
            for (k, s) in series.iter().enumerate() {
                chart
                    .draw_series(LineSeries::new(sorted(&s.points), color(k)))
                    .map_err(err)?;
            }
            if let (Some(label), Some(top)) =
                (peak, all().copied().max_by(|a, b| a.1.total_cmp(&b.1)))
            {
                mark_peak(&mut chart, top, x0..x1, format!("{label} {}", y_fmt(top.1)))?;
            }
        }
        if let Some(l) = legend_area {
            draw_legend(&l, &names)?;
        }
        Ok(())
    })
}

/// Points per message size (a log-2 x axis, no lines joining sizes: each size is its own
/// measurement), one colour per series, and `roof`, a labelled dashed line, when known.
pub fn points_by_size(
    series: &[Series],
    roof: Option<(String, f64)>,
    (x_desc, x_fmt): (&str, Fmt),
    (y_desc, y_fmt): (&str, Fmt),
) -> Result<String> {
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.0 > 0.0)
    };
    let (mut x0, mut x1) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.0), b.max(p.0))
    });
    if !x0.is_finite() {
        (x0, x1) = (1.0, 1024.0);
    }
    // A factor of 2 of room each side: the outermost sizes and their labels stay whole.
    let (x0, x1) = (x0 / 2.0, x1 * 2.0);
    let top = all().map(|p| p.1).fold(0.0, f64::max);
    let y1 = upper(top.max(roof.as_ref().map_or(0.0, |r| r.1 * 1.08)));
    let names: Vec<String> = series.iter().map(|s| s.name.clone()).collect();
    let legend_h = legend_height(&names);
    draw(380 + legend_h, |root| {
        let (legend_area, area) = root.split_vertically(legend_h);
        let mut chart = ChartBuilder::on(&area)
            .margin(10)
            .margin_right(30)
            .x_label_area_size(44)
            .y_label_area_size(84)
            .build_cartesian_2d((x0..x1).log_scale().base(2.0), 0.0..y1)
            .map_err(err)?;
        mesh(&mut chart)
            .x_labels(8)
            .x_label_formatter(&|v| x_fmt(*v))
            .y_label_formatter(&|v| y_fmt(*v))
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(err)?;
        if let Some((label, peak)) = &roof {
            let grey = RGBColor(90, 90, 90);
            chart
                .draw_series(DashedLineSeries::new(
                    [(x0, *peak), (x1, *peak)],
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(err)?;
            chart
                .draw_series([Text::new(
                    label.clone(),
                    (x0 * 1.2, *peak),
                    TextStyle::from(("sans-serif", 13).into_font())
                        .pos(Pos::new(HPos::Left, VPos::Bottom)),
                )])
                .map_err(err)?;
        }
        for (k, s) in series.iter().enumerate() {
            chart
                .draw_series(
                    s.points
                        .iter()
                        .filter(|p| p.0 > 0.0)
                        .map(|&p| Circle::new(p, 5, color(k).filled())),
                )
                .map_err(err)?;
        }
        draw_legend(&legend_area, &names)?;
        Ok(())
    })
}

/// A unit of bytes for an axis whose values reach `max`: its size and name, so that ticks
/// fall on round numbers of it (`5 MiB`, not `4.77 MiB`).
pub fn byte_unit(max: f64) -> (f64, &'static str) {
    let units = [
        (1.0, "B"),
        (1024.0, "KiB"),
        (1048576.0, "MiB"),
        (1073741824.0, "GiB"),
        (1099511627776.0, "TiB"),
    ];
    units
        .iter()
        .rev()
        .find(|(size, _)| max >= *size)
        .copied()
        .unwrap_or(units[0])
}

/// Axes over `x` (linear, or logarithmic: `(a..b).log_scale()`) and `0..y1` with their
/// labels, drawn on `area`.
fn axes<'a, 'b, X>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x: X,
    y1: f64,
    (x_desc, x_fmt): (&str, Fmt),
    (y_desc, y_fmt): (&str, Fmt),
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<X::CoordDescType, RangedCoordf64>>>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(30)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(x, 0.0..y1)
        .map_err(err)?;
    mesh(&mut chart)
        .x_label_formatter(&|v| x_fmt(*v))
        .y_label_formatter(&|v| y_fmt(*v))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// A quantity over time: each series is drawn as steps (its value holds until its next
/// point), `band` shades an interval of x (named in the legend), `limit` draws a labelled
/// horizontal line (a capacity).
pub fn steps_over_time(
    series: &[Series],
    band: Option<(&str, f64, f64)>,
    limit: Option<(&str, f64)>,
    (x_desc, x_fmt): (&str, Fmt),
    (y_desc, y_fmt): (&str, Fmt),
) -> Result<String> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.0), b.max(p.0))
    });
    if let Some((_, b0, b1)) = band {
        (x0, x1) = (x0.min(b0), x1.max(b1));
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let pad = 0.02 * (x1 - x0);
    let (x0, x1) = (x0 - pad, x1 + pad);
    let top = all()
        .map(|p| p.1)
        .fold(limit.map_or(0.0, |l| l.1), f64::max);
    let y1 = upper(top);
    let mut names: Vec<String> = series.iter().map(|s| s.name.clone()).collect();
    names.extend(band.map(|b| b.0.to_string()));
    names.extend(limit.map(|l| l.0.to_string()));
    let legend_h = legend_height(&names);
    draw(380 + legend_h, |root| {
        let (legend_area, area) = root.split_vertically(legend_h);
        let mut chart = axes(&area, x0..x1, y1, (x_desc, x_fmt), (y_desc, y_fmt))?;
        let k_band = series.len();
        if let Some((_, b0, b1)) = band {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(b0, 0.0), (b1, y1)],
                    color(k_band).mix(0.15).filled(),
                )))
                .map_err(err)?;
        }
        for (k, s) in series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = sorted(&s.points).collect();
            let mut stepped = Vec::with_capacity(pts.len() * 2);
            for (i, &(x, y)) in pts.iter().enumerate() {
                if i > 0 {
                    stepped.push((x, pts[i - 1].1));
                }
                stepped.push((x, y));
            }
            chart
                .draw_series(LineSeries::new(stepped, color(k).stroke_width(2)))
                .map_err(err)?;
        }
        // The peak, marked and labelled on the side with room.
        if let Some(top) = all().copied().max_by(|a, b| a.1.total_cmp(&b.1)) {
            mark_peak(&mut chart, top, x0..x1, format!("peak {}", y_fmt(top.1)))?;
        }
        if let Some((_, y)) = limit {
            let k = k_band + usize::from(band.is_some());
            chart
                .draw_series(LineSeries::new(
                    [(x0, y), (x1, y)],
                    color(k).stroke_width(1),
                ))
                .map_err(err)?;
        }
        draw_legend(&legend_area, &names)?;
        Ok(())
    })
}

/// A metric over a series of runs: each run's median as a point with its interval (a
/// vertical bar from `lo` to `hi`), the medians joined, and a dashed vertical line before each
/// change point (`changes`: run positions).
pub fn runs_over_time(
    points: &[(f64, f64, f64, f64)],
    changes: &[f64],
    (x_desc, x_fmt): (&str, Fmt),
    (y_desc, y_fmt): (&str, Fmt),
) -> Result<String> {
    let (x0, x1) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let (x0, x1) = if x0.is_finite() {
        (x0 - 0.5, x1 + 0.5)
    } else {
        (0.0, 1.0)
    };
    let y1 = upper(points.iter().map(|p| p.3.max(p.1)).fold(0.0, f64::max));
    draw(340, |root| {
        let mut chart = axes(root, x0..x1, y1, (x_desc, x_fmt), (y_desc, y_fmt))?;
        for &c in changes {
            let x = c - 0.5;
            let dashes: Vec<PathElement<(f64, f64)>> = (0..20)
                .step_by(2)
                .map(|i| {
                    let (a, b) = (y1 * i as f64 / 20.0, y1 * (i + 1) as f64 / 20.0);
                    PathElement::new(vec![(x, a), (x, b)], color(2).stroke_width(2))
                })
                .collect();
            chart.draw_series(dashes).map_err(err)?;
        }
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], color(0).mix(0.5))),
            )
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|p| (p.0, p.1)),
                color(0).mix(0.6),
            ))
            .map_err(err)?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new((p.0, p.1), 3, color(0).filled())),
            )
            .map_err(err)?;
        Ok(())
    })
}

fn sorted(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> {
    let mut p: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    p.into_iter()
}

/// `values` counted in `n` equal bins over their range: `(low, high, count)` per bin.
pub fn bin(values: &[f64], n: usize) -> Vec<(f64, f64, u64)> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return Vec::new();
    }
    // Counts of non-negative quantities (waits, durations) start at zero.
    let lo = lo.min(0.0);
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, hi + 0.5)
    };
    let n = n.max(1);
    let width = (hi - lo) / n as f64;
    let mut counts = vec![0u64; n];
    for v in &finite {
        counts[(((v - lo) / width) as usize).min(n - 1)] += 1;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(b, c)| (lo + b as f64 * width, lo + (b + 1) as f64 * width, c))
        .collect()
}

/// A histogram of binned counts (see [`bin`]).
pub fn histogram(bins: &[(f64, f64, u64)], x_desc: &str, fmt: Fmt) -> Result<String> {
    let lo = bins.first().map_or(0.0, |b| b.0);
    let hi = bins.last().map_or(1.0, |b| b.1);
    let counts: Vec<u64> = bins.iter().map(|b| b.2).collect();
    let most = counts.iter().copied().max().unwrap_or(0).max(1);
    let top = most as f64 * 1.05;
    draw(220, |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(lo..hi, 0.0..top)
            .map_err(err)?;
        mesh(&mut chart)
            .disable_x_mesh()
            .x_label_formatter(&|v| fmt(*v))
            .y_labels((most as usize + 1).min(6))
            // Counts are whole: a tick between two is left unlabelled.
            .y_label_formatter(&|v| {
                if (v - v.round()).abs() < 1e-6 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            })
            .x_desc(x_desc)
            .y_desc("count")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                bins.iter().map(|&(x0, x1, c)| {
                    Rectangle::new([(x0, 0.0), (x1, c as f64)], color(0).filled())
                }),
            )
            .map_err(err)?;
        Ok(())
    })
}

/// How a forest plot colours a row: worse, better, or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Worse,
    Better,
    Neither,
}

/// One row of a forest plot: a label, an estimate and its interval.
pub struct Interval {
    pub label: String,
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub tone: Tone,
}

/// A forest plot: per row (the first on top) a point with its interval, coloured by its
/// tone, and a line at zero.
pub fn forest(rows: &[Interval], x_desc: &str, fmt: Fmt) -> Result<String> {
    let n = rows.len().max(1);
    let height = n as u32 * BAR + 70;
    let reach = rows
        .iter()
        .flat_map(|r| [r.estimate.abs(), r.low.abs(), r.high.abs()])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let reach = if reach > 0.0 { reach * 1.1 } else { 1.0 };
    let labels: Vec<String> = rows.iter().map(|r| short(&r.label)).collect();
    draw(height, |root| {
        let mut chart = category_chart(root, -reach..reach, &labels, 40, x_desc, fmt)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (0.0, SegmentValue::Exact(0)),
                    (0.0, SegmentValue::Exact(n as i32)),
                ],
                BLACK.mix(0.6),
            )))
            .map_err(err)?;
        for (row, r) in rows.iter().enumerate() {
            let y = SegmentValue::CenterOf((n - 1 - row) as i32);
            let c = match r.tone {
                Tone::Worse => color(2),
                Tone::Better => color(4),
                Tone::Neither => RGBColor(120, 120, 120),
            };
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(r.low, y.clone()), (r.high, y.clone())],
                    c.stroke_width(2),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Circle::new((r.estimate, y), 4, c.filled())))
                .map_err(err)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> String {
        crate::units::duration_ms(v)
    }

    #[test]
    fn bars_draw_one_rectangle_per_value_with_labels() {
        let svg = bars(
            &[("fusion".into(), 2.0), ("all-gather".into(), 1.0)],
            "time",
            &ms,
        )
        .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("\nfusion\n</text>") && svg.contains("\nall-gather\n</text>"));
        // The two bars (filled with the first colour), the first on top.
        assert_eq!(svg.matches("fill=\"#4E79A7\"").count(), 2, "{svg}");
        let y = |label: &str| {
            let at = svg.find(&format!("\n{label}\n")).unwrap();
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y: f64 = tag
                .split("y=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            y
        };
        assert!(y("fusion") < y("all-gather"));
    }

    #[test]
    fn log_axis_lines_and_histograms_and_forests_draw() {
        let s = Series {
            name: "all-gather".into(),
            points: vec![(1024.0, 10.0), (1048576.0, 80.0), (65536.0, 40.0)],
        };
        let svg = lines(
            std::slice::from_ref(&s),
            Some(2.0),
            ("size", &|v| crate::units::bytes(v)),
            ("GB/s", &|v| format!("{v:.0}")),
            None,
        )
        .unwrap();
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(
            svg.contains("\n1.00 MiB\n") && svg.contains("\n64.0 KiB\n"),
            "{svg}"
        );
        // Sizes as points (no line joins them), the link's roof drawn and named.
        let svg = points_by_size(
            &[s],
            Some(("NVLink 450 GB/s per direction".into(), 450.0)),
            ("size", &|v| crate::units::bytes(v)),
            ("GB/s", &|v| format!("{v:.0}")),
        )
        .unwrap();
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("NVLink 450 GB/s per direction"), "{svg}");
        assert!(
            !svg.contains("<polyline fill=\"none\" opacity=\"1\" stroke=\"#4E79A7\""),
            "{svg}"
        );
        assert_eq!(byte_unit(40.0 * 1048576.0), (1048576.0, "MiB"));
        assert_eq!(byte_unit(10.0), (1.0, "B"));
        let bins = bin(&[1.0, 2.0, 2.5, 9.0], 4);
        assert_eq!(bins.iter().map(|b| b.2).collect::<Vec<_>>(), [2, 1, 0, 1]);
        assert_eq!((bins[0].0, bins[3].1), (0.0, 9.0));
        let h = histogram(&bins, "wait", &ms).unwrap();
        assert!(h.contains("\ncount\n</text>"));
        let row = |label: &str, estimate, low, high, tone| Interval {
            label: label.into(),
            estimate,
            low,
            high,
            tone,
        };
        let f = forest(
            &[
                row("a", 5.0, 2.0, 8.0, Tone::Worse),
                row("b", -1.0, -3.0, 1.0, Tone::Neither),
            ],
            "change",
            &|v| format!("{v:.0} %"),
        )
        .unwrap();
        assert_eq!(f.matches("<circle").count(), 2);
        // Worse in red.
        assert_eq!(f.matches("fill=\"#E15759\"").count(), 1, "{f}");
    }

    #[test]
    fn long_labels_are_cut() {
        let l = "x".repeat(100);
        assert_eq!(short(&l).chars().count(), LABEL_CHARS);
        assert!(short(&l).ends_with('…'));
    }
}

/// One op of a roofline chart.
pub struct RoofPoint {
    /// FLOP per byte.
    pub intensity: f64,
    pub tflops: f64,
    /// Its time: the marker's area grows with it.
    pub weight: f64,
    /// Its colour group (the math unit).
    pub series: String,
}

/// A log–log roofline: the memory roof (`bandwidth` GB/s × intensity) rising to each compute
/// ceiling (`(name, TFLOP/s)`), and the ops as points, their area their weight.
pub fn roofline(
    points: &[RoofPoint],
    ceilings: &[(String, f64)],
    bandwidth: f64,
) -> Result<String> {
    let finite = |x: f64| x.is_finite() && x > 0.0;
    let top = ceilings.iter().map(|c| c.1).fold(0.0, f64::max);
    // The ops that matter: all but the lightest that together hold under 1 % of the time,
    // and none more than four decades under the top ceiling (near-zero ops and bubbles
    // would stretch the axes to 1e-6).
    let mut pts: Vec<&RoofPoint> = points
        .iter()
        .filter(|p| finite(p.intensity) && finite(p.tflops))
        .collect();
    pts.sort_by(|a, b| b.weight.total_cmp(&a.weight));
    let total: f64 = pts.iter().map(|p| p.weight.max(0.0)).sum();
    let mut kept = 0.0;
    pts.retain(|p| {
        let keep = total <= 0.0 || kept < 0.99 * total;
        kept += p.weight.max(0.0);
        keep
    });
    let floor = if top > 0.0 { top / 1e4 } else { 0.0 };
    pts.retain(|p| p.tflops >= floor);
    let ridge = |peak: f64| peak * 1e3 / bandwidth;
    let (mut x0, mut x1) = pts.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
        (a.min(p.intensity), b.max(p.intensity))
    });
    for c in ceilings {
        x0 = x0.min(ridge(c.1));
        x1 = x1.max(ridge(c.1));
    }
    if !finite(x0) || !finite(x1) {
        (x0, x1) = (0.1, 1000.0);
    }
    let (x0, x1) = (x0 / 4.0, x1 * 4.0);
    let y_hi = top.max(pts.iter().map(|p| p.tflops).fold(0.0, f64::max)) * 2.0;
    let y_lo = pts
        .iter()
        .map(|p| p.tflops)
        .fold(x0 * bandwidth / 1e3, f64::min)
        .max(floor)
        / 2.0;
    let mut names: Vec<String> = Vec::new();
    for p in &pts {
        if !names.contains(&p.series) {
            names.push(p.series.clone());
        }
    }
    let heaviest = pts
        .iter()
        .map(|p| p.weight)
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let legend_h = legend_height(&names);
    draw(440 + legend_h, |root| {
        let (legend_area, area) = root.split_vertically(legend_h);
        let mut chart = ChartBuilder::on(&area)
            .margin(10)
            .margin_right(30)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d((x0..x1).log_scale(), (y_lo.max(1e-9)..y_hi).log_scale())
            .map_err(err)?;
        mesh(&mut chart)
            .x_label_formatter(&|v| crate::units::sig3(*v))
            .y_label_formatter(&|v| crate::units::sig3(*v))
            .x_desc("arithmetic intensity (FLOP/byte)")
            .y_desc("TFLOP/s")
            .draw()
            .map_err(err)?;
        let grey = RGBColor(90, 90, 90);
        for (name, peak) in ceilings {
            let r = ridge(*peak);
            chart
                .draw_series(LineSeries::new(
                    [(x0, x0 * bandwidth / 1e3), (r, *peak), (x1, *peak)],
                    grey.stroke_width(1),
                ))
                .map_err(err)?;
            chart
                // At the left, above the flat roof: ops under a compute roof sit right of
                // its ridge, so the label stays clear of them.
                .draw_series([Text::new(
                    format!("{name} {} TFLOP/s", crate::units::sig3(*peak)),
                    (x0 * 1.3, *peak * 1.05),
                    TextStyle::from(("sans-serif", 13).into_font())
                        .pos(Pos::new(HPos::Left, VPos::Bottom)),
                )])
                .map_err(err)?;
        }
        chart
            .draw_series([Text::new(
                format!("HBM {} GB/s", crate::units::sig3(bandwidth)),
                (x0 * 1.3, x0 * 1.3 * bandwidth / 1e3 * 1.25),
                ("sans-serif", 13),
            )])
            .map_err(err)?;
        for p in &pts {
            let k = names.iter().position(|n| *n == p.series).unwrap_or(0);
            let radius = (3.0 + 17.0 * (p.weight / heaviest).sqrt()).round() as i32;
            chart
                .draw_series([Circle::new(
                    (p.intensity, p.tflops),
                    radius,
                    color(k).mix(0.6).filled(),
                )])
                .map_err(err)?;
        }
        draw_legend(&legend_area, &names)?;
        Ok(())
    })
}
