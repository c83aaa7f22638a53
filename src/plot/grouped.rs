//! Grouped bars, one panel per group of groups: the shape of the hybrid-UM
//! paper's Figures 11 and 12 (one panel per parameter preset, a group of
//! bars per operation, a bar per policy), with min–max whiskers and cells
//! that produced no number marked instead of drawn.

use std::path::Path;

use plotters::prelude::*;

use super::{FAMILY, plot_error, register_font};
use crate::Result;

/// One bar: a value with an optional range, or a mark where no value exists.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The series (legend entry, colour) the bar belongs to.
    pub series: usize,
    /// The bar's height; `None` draws [`Bar::mark`] instead.
    pub value: Option<f64>,
    /// The whisker's bottom and top (min and max), if any.
    pub range: Option<(f64, f64)>,
    /// What to write where no value exists (`over budget`, `timeout`, …).
    pub mark: Option<String>,
}

/// The bars of one category (an operation).
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    /// The category's label under the axis.
    pub label: String,
    /// Its bars, one per series present.
    pub bars: Vec<Bar>,
}

/// One panel (a preset).
#[derive(Debug, Clone, PartialEq)]
pub struct BarPanel {
    /// The panel's title.
    pub title: String,
    /// The categories, left to right.
    pub groups: Vec<BarGroup>,
}

/// The y range of all panels: `(low, high)`, positive for a log axis.
fn y_range(panels: &[BarPanel], log_y: bool) -> (f64, f64) {
    let values = panels
        .iter()
        .flat_map(|p| &p.groups)
        .flat_map(|g| &g.bars)
        .flat_map(|b| {
            let (lo, hi) = b.range.unwrap_or((f64::NAN, f64::NAN));
            [b.value, Some(lo), Some(hi)]
        })
        .flatten()
        .filter(|v| v.is_finite() && (!log_y || *v > 0.0))
        .filter_map(super::plottable);
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if lo > hi {
        return (if log_y { 0.1 } else { 0.0 }, 1.0);
    }
    if log_y {
        (lo / 4.0, hi * 4.0)
    } else {
        (0.0, hi * 1.15)
    }
}

/// Draws `panels` side by side into a PNG at `path`: per group, one bar per
/// series (coloured by series, named in the legend by `series_names`), a
/// whisker from min to max, and for bars without a value a red cross and
/// their mark at the bottom of the axis. `log_y` draws the y axis in log
/// scale (operations whose times differ by orders of magnitude).
///
/// # Errors
/// [`crate::Error::Plot`] for drawing or file errors; [`crate::Error::Font`].
pub fn grouped_bars(
    path: &Path,
    series_names: &[String],
    y_label: &str,
    log_y: bool,
    panels: &[BarPanel],
) -> Result<()> {
    register_font()?;
    let count = u32::try_from(panels.len().max(1)).unwrap_or(1);
    let root = BitMapBackend::new(path, (680 * count, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error(path))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    let (y0, y1) = y_range(panels, log_y);
    let series = series_names.len().max(1) as f64;
    let width = 0.8 / series;
    for (panel, area) in panels.iter().zip(&areas) {
        let n = panel.groups.len().max(1);
        let labels: Vec<String> = panel.groups.iter().map(|g| g.label.clone()).collect();
        let label_at = |x: &f64| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(&panel.title, (FAMILY, 20))
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70);
        // The two axis kinds are different types: draw through one closure
        // per kind.
        macro_rules! draw {
            ($chart:expr, $floor:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .x_labels(2 * n + 1)
                    .x_label_formatter(&label_at)
                    .y_desc(y_label)
                    .label_style((FAMILY, 12))
                    .draw()
                    .map_err(plot_error(path))?;
                for (s, name) in series_names.iter().enumerate() {
                    let color = Palette99::pick(s).to_rgba();
                    chart
                        .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                        .map_err(plot_error(path))?
                        .label(name.clone())
                        .legend(move |(x, y)| {
                            Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                        });
                }
                for (g, group) in panel.groups.iter().enumerate() {
                    for bar in &group.bars {
                        let left = g as f64 + 0.1 + bar.series as f64 * width;
                        let (right, middle) = (left + width * 0.9, left + width * 0.45);
                        let color = Palette99::pick(bar.series).to_rgba();
                        // Heights past the axis are drawn at its top (an
                        // infinite one overflowed plotters' pixel mapping).
                        let fit = |v: f64| v.max($floor).min(y1);
                        match bar.value.filter(|v| !v.is_nan()) {
                            Some(v) => {
                                chart
                                    .draw_series(std::iter::once(Rectangle::new(
                                        [(left, $floor), (right, fit(v))],
                                        color.filled(),
                                    )))
                                    .map_err(plot_error(path))?;
                                if let Some((lo, hi)) = bar.range {
                                    chart
                                        .draw_series(std::iter::once(PathElement::new(
                                            vec![(middle, fit(lo)), (middle, fit(hi))],
                                            BLACK.stroke_width(1),
                                        )))
                                        .map_err(plot_error(path))?;
                                }
                            }
                            None => {
                                chart
                                    .draw_series(std::iter::once(Cross::new(
                                        (middle, $floor),
                                        6,
                                        RED.stroke_width(2),
                                    )))
                                    .map_err(plot_error(path))?;
                                if let Some(mark) = &bar.mark {
                                    let style = TextStyle::from((FAMILY, 11).into_font())
                                        .color(&RED)
                                        .transform(FontTransform::Rotate270);
                                    chart
                                        .draw_series(std::iter::once(Text::new(
                                            mark.clone(),
                                            (left, $floor),
                                            style,
                                        )))
                                        .map_err(plot_error(path))?;
                                }
                            }
                        }
                    }
                }
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperLeft)
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .label_font((FAMILY, 12))
                    .draw()
                    .map_err(plot_error(path))?;
            }};
        }
        if log_y {
            let chart = builder
                .build_cartesian_2d(0.0..n as f64, (y0..y1).log_scale())
                .map_err(plot_error(path))?;
            draw!(chart, y0 * 1.5);
        } else {
            let chart = builder
                .build_cartesian_2d(0.0..n as f64, y0..y1)
                .map_err(plot_error(path))?;
            draw!(chart, y0);
        }
    }
    root.present().map_err(plot_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_values_and_whiskers() {
        let panel = BarPanel {
            title: "p".into(),
            groups: vec![BarGroup {
                label: "add".into(),
                bars: vec![
                    Bar {
                        series: 0,
                        value: Some(2.0),
                        range: Some((1.0, 8.0)),
                        mark: None,
                    },
                    Bar {
                        series: 1,
                        value: None,
                        range: None,
                        mark: Some("timeout".into()),
                    },
                ],
            }],
        };
        assert_eq!(y_range(std::slice::from_ref(&panel), true), (0.25, 32.0));
        let (lo, hi) = y_range(std::slice::from_ref(&panel), false);
        assert_eq!(lo, 0.0);
        assert!((hi - 9.2).abs() < 1e-9);
        assert_eq!(y_range(&[], true), (0.1, 1.0));
    }
}
