//! PNG plots for the benchmark and trace commands (plotters, bitmap backend,
//! with an embedded DejaVu Sans Mono font so no system fonts are needed):
//! line panels, a bar chart, grouped bars per panel (the oversubscription
//! sweep's figure) and a scatter of points.

mod grouped;

pub use grouped::{Bar, BarGroup, BarPanel, grouped_bars};

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::{Error, Result};

/// DejaVu Sans Mono (Bitstream Vera license, see `DejaVu-LICENSE`).
const FONT: &[u8] = include_bytes!("DejaVuSansMono.ttf");
const FAMILY: &str = "sans-serif";

fn register_font() -> Result<()> {
    static REGISTER: Once = Once::new();
    let mut result = Ok(());
    REGISTER.call_once(|| {
        result = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| Error::Font);
    });
    result
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend.
    pub name: String,
    /// Points, x ascending.
    pub points: Vec<(f64, f64)>,
}

/// A panel of line series.
#[derive(Debug, Clone)]
pub struct Panel {
    /// The panel's title.
    pub title: String,
    /// The x axis label.
    pub x_label: String,
    /// The y axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Formats an x tick.
    pub x_ticks: fn(&f64) -> String,
}

/// Wraps a drawing error with the file being drawn.
fn plot_error<E: std::error::Error + Send + Sync + 'static>(path: &Path) -> impl Fn(E) -> Error {
    move |e| Error::Plot {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
}

/// The largest magnitude an axis spans: a range past it (`inf`, or
/// `±1e308`, whose width overflows) sends plotters' tick search into an
/// endless loop, so values are clamped to it and non-finite ones dropped.
pub(crate) const MAX_AXIS: f64 = 1e300;

/// `v` clamped to `±MAX_AXIS`, or `None` when it is not a number.
pub(crate) fn plottable(v: f64) -> Option<f64> {
    (!v.is_nan()).then(|| v.clamp(-MAX_AXIS, MAX_AXIS))
}

/// `p` moved onto the chart's `((x0, x1), (y0, y1))`, or `None` when a
/// coordinate is not a number: points off the axes are drawn at their
/// edge (an infinite one overflowed plotters' pixel mapping).
fn on_chart(p: (f64, f64), ((x0, x1), (y0, y1)): ((f64, f64), (f64, f64))) -> Option<(f64, f64)> {
    (!p.0.is_nan() && !p.1.is_nan()).then(|| (p.0.clamp(x0, x1), p.1.clamp(y0, y1)))
}

fn bounds(panels: &[Panel]) -> Vec<((f64, f64), (f64, f64))> {
    panels
        .iter()
        .map(|p| {
            let points = || p.series.iter().flat_map(|s| s.points.iter());
            let xs = points().filter_map(|q| plottable(q.0));
            let ys = points().filter_map(|q| plottable(q.1));
            let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
            let y1 = ys.fold(0.0f64, f64::max);
            let (x0, x1) = if x0 <= x1 {
                (x0, x1.max(x0 + 1.0))
            } else {
                (0.0, 1.0)
            };
            ((x0, x1), (0.0, if y1 > 0.0 { y1 * 1.1 } else { 1.0 }))
        })
        .collect()
}

/// Draws `panels` side by side into a PNG at `path`.
///
/// # Errors
/// Drawing or file errors.
pub fn line_panels(path: &Path, panels: &[Panel]) -> Result<()> {
    register_font()?;
    let width = 720 * u32::try_from(panels.len().max(1)).unwrap_or(1);
    let root = BitMapBackend::new(path, (width, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error(path))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for ((panel, area), bound) in panels.iter().zip(&areas).zip(bounds(panels)) {
        let mut chart = xy_chart(area, panel, bound, path)?;
        for (i, series) in panel.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter_map(|&p| on_chart(p, bound))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(plot_error(path))?
                .label(series.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, color.filled())),
                )
                .map_err(plot_error(path))?;
        }
        draw_legend(&mut chart, path)?;
    }
    root.present().map_err(plot_error(path))
}

type XyChart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A chart of `panel` on `area` over `((x0, x1), (y0, y1))`: its caption,
/// axis descriptions and tick labels drawn.
fn xy_chart<'a, 'b>(
    area: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>,
    panel: &Panel,
    ((x0, x1), (y0, y1)): ((f64, f64), (f64, f64)),
    path: &Path,
) -> Result<XyChart<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(plot_error(path))?;
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .x_label_formatter(&panel.x_ticks)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(plot_error(path))?;
    Ok(chart)
}

/// The series' legend, in the chart's upper right corner.
fn draw_legend<'a, 'b: 'a>(chart: &mut XyChart<'a, 'b>, path: &Path) -> Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font((FAMILY, 13))
        .draw()
        .map_err(plot_error(path))
}

/// Draws a bar chart of `values` over the category `labels` into a PNG.
///
/// # Errors
/// Drawing or file errors.
pub fn bars(
    path: &Path,
    title: &str,
    labels: &[String],
    values: &[f64],
    y_label: &str,
) -> Result<()> {
    register_font()?;
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error(path))?;
    let top = values
        .iter()
        .filter_map(|&v| plottable(v))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let n = labels.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n as f64, 0.0..top)
        .map_err(plot_error(path))?;
    let label_at = |x: &f64| {
        let i = x.floor() as usize;
        if (x - x.floor() - 0.5).abs() < 1e-6 {
            labels.get(i).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * n + 1)
        .x_label_formatter(&label_at)
        .y_desc(y_label)
        .label_style((FAMILY, 12))
        .draw()
        .map_err(plot_error(path))?;
    chart
        .draw_series(values.iter().enumerate().map(|(i, &v)| {
            let x = i as f64;
            let v = plottable(v).unwrap_or(0.0).clamp(0.0, top);
            Rectangle::new([(x + 0.1, 0.0), (x + 0.9, v)], BLUE.mix(0.7).filled())
        }))
        .map_err(plot_error(path))?;
    root.present().map_err(plot_error(path))
}

/// Draws each series of `panel` as points only (no lines) into a PNG at
/// `path`: the hybrid-UM paper's Figure 7, allocation and free times against
/// the allocation's id.
///
/// # Errors
/// [`Error::Plot`] for drawing or file errors; [`Error::Font`].
pub fn scatter(path: &Path, panel: &Panel) -> Result<()> {
    register_font()?;
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error(path))?;
    let bound = bounds(std::slice::from_ref(panel));
    let bound = bound.first().copied().unwrap_or(((0.0, 1.0), (0.0, 1.0)));
    let mut chart = xy_chart(&root, panel, bound, path)?;
    for (i, series) in panel.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(
                series
                    .points
                    .iter()
                    .filter_map(|&p| on_chart(p, bound))
                    .map(|p| Circle::new(p, 2, color.filled())),
            )
            .map_err(plot_error(path))?
            .label(series.name.clone())
            .legend(move |(x, y)| Circle::new((x + 6, y), 4, color.filled()));
    }
    draw_legend(&mut chart, path)?;
    root.present().map_err(plot_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One panel of one series through `points`.
    fn panel(points: Vec<(f64, f64)>) -> Panel {
        Panel {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "a".into(),
                points,
            }],
            x_ticks: |x| format!("{x:.0}"),
        }
    }

    /// Values no axis can span (infinite, or ±1e308 whose width
    /// overflows) are clamped or dropped: plotters' tick search looped
    /// forever on them (`bench oversub --plot-only` of such a CSV hung).
    #[test]
    fn plots_of_unplottable_values_finish() {
        let dir = std::env::temp_dir().join(format!("hemem-plot-inf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        for points in [
            vec![(0.0, f64::INFINITY), (1.0, 2.0)],
            vec![(-1e308, 1.0), (1e308, 2.0)],
            vec![(f64::NAN, f64::NAN), (0.0, f64::NEG_INFINITY)],
        ] {
            line_panels(&dir.join("lines.png"), &[panel(points)]).expect("lines");
        }
        bars(
            &dir.join("bars.png"),
            "t",
            &["a".into(), "b".into()],
            &[f64::INFINITY, 1e308],
            "ms",
        )
        .expect("bars");
        for log_y in [false, true] {
            let panels = vec![BarPanel {
                title: "p".into(),
                groups: vec![BarGroup {
                    label: "add".into(),
                    bars: vec![Bar {
                        series: 0,
                        value: Some(1e308),
                        range: Some((1.0, 1e308)),
                        mark: None,
                    }],
                }],
            }];
            grouped_bars(
                &dir.join("grouped.png"),
                &["s".into()],
                "ms",
                log_y,
                &panels,
            )
            .expect("grouped");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn plots_are_written() {
        let dir = std::env::temp_dir().join(format!("hemem-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let panel = panel(vec![(0.0, 1.0), (50.0, 3.0), (95.0, 2.0)]);
        let lines = dir.join("lines.png");
        line_panels(&lines, &[panel.clone(), panel.clone()]).expect("lines");
        let dots = dir.join("scatter.png");
        scatter(&dots, &panel).expect("scatter");
        let grouped = dir.join("grouped.png");
        let panels = vec![BarPanel {
            title: "test-FGb".into(),
            groups: vec![BarGroup {
                label: "add".into(),
                bars: vec![
                    Bar {
                        series: 0,
                        value: Some(1.5),
                        range: Some((1.0, 2.0)),
                        mark: None,
                    },
                    Bar {
                        series: 1,
                        value: None,
                        range: None,
                        mark: Some("over budget".into()),
                    },
                ],
            }],
        }];
        let names = ["device".to_owned(), "managed".to_owned()];
        grouped_bars(&grouped, &names, "ms", true, &panels).expect("grouped, log");
        grouped_bars(&grouped, &names, "ms", false, &panels).expect("grouped, linear");
        let bar = dir.join("bars.png");
        bars(
            &bar,
            "b",
            &["<1s".into(), ">=1s".into()],
            &[3.0, 1.0],
            "count",
        )
        .expect("bars");
        for p in [lines, bar, dots, grouped] {
            let bytes = std::fs::read(&p).expect("png");
            assert_eq!(bytes.get(1..4), Some(&b"PNG"[..]));
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
