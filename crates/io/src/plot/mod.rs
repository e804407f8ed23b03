//! Pictures of a run, drawn with `plotters` and an embedded DejaVu Sans font (no system fonts
//! needed): for gravity runs, the relative energy error (log scale) and the virial ratio
//! against time; for meshless runs, the relative change of every conserved total and the error
//! against the exact solution (or the range of the first variable, without one).

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::prelude::*;

use crate::files::FileError;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_err() {
            panic!("the embedded DejaVu Sans font is not a valid font file");
        }
    });
}

/// A diagnostics table: column names and rows.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<f64>>,
}

impl Table {
    fn read(path: &Path) -> Result<Self, FileError> {
        let err = |m: String| FileError {
            path: path.to_path_buf(),
            message: m,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut lines = text.lines();
        let header: Vec<String> = lines
            .next()
            .ok_or_else(|| err("empty".into()))?
            .split(',')
            .map(String::from)
            .collect();
        let rows = lines
            .enumerate()
            .map(|(n, l)| {
                l.split(',')
                    .map(|v| {
                        v.parse::<f64>()
                            .map_err(|_| err(format!("line {}: `{v}` is not a number", n + 2)))
                    })
                    .collect::<Result<Vec<f64>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { header, rows })
    }

    fn column(&self, name: &str) -> Option<Vec<f64>> {
        let k = self.header.iter().position(|h| h == name)?;
        Some(self.rows.iter().map(|r| r[k]).collect())
    }
}

pub mod fields;

pub use fields::FieldOptions;

/// Draws every picture of the run in `dir`: `diagnostics.png` and the field pictures of its
/// snapshots ([`fields`]); returns the files written. A running or interrupted run gets the
/// pictures of what it has written so far.
pub fn plot_run(dir: &Path, options: &FieldOptions) -> Result<Vec<PathBuf>, FileError> {
    let mut files = plot_diagnostics(dir)?;
    files.extend(fields::plot_fields(dir, options)?);
    Ok(files)
}

/// Draws `RUN_DIR/diagnostics.png` from `RUN_DIR/diagnostics.csv`; returns the file written.
pub fn plot_diagnostics(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    register_font();
    // An interrupted (or still running) run has only `diagnostics.csv.partial`.
    let finished = dir.join("diagnostics.csv");
    let csv = if finished.exists() {
        finished
    } else {
        crate::files::partial_path(&finished)
    };
    if !csv.exists() {
        return Err(FileError {
            path: dir.to_path_buf(),
            message: "no diagnostics.csv (nor the diagnostics.csv.partial of an unfinished run): \
                      is this a run directory?"
                .into(),
        });
    }
    let table = Table::read(&csv)?;
    let missing = |c: &str| FileError {
        path: csv.clone(),
        message: format!("no column `{c}` (is this a gravity run?)"),
    };
    let time = table.column("time").ok_or_else(|| missing("time"))?;
    let panels = if table.header.iter().any(|h| h.starts_with("total_")) {
        meshless_panels(&table)
    } else {
        let error = table
            .column("relative_energy_error")
            .ok_or_else(|| missing("relative_energy_error"))?;
        let virial = table
            .column("virial_ratio")
            .ok_or_else(|| missing("virial_ratio"))?;
        // Zeros (the first row) cannot be drawn on a log axis: floor them at 1e-17.
        [
            Panel {
                title: "relative energy error |E - E0| / |E0|".into(),
                log: true,
                lines: vec![(
                    "energy error".into(),
                    error.iter().map(|&e| e.max(1e-17)).collect(),
                )],
            },
            Panel {
                title: "virial ratio 2T/|W|".into(),
                log: false,
                lines: vec![("2T/|W|".into(), virial)],
            },
        ]
    };
    let out = dir.join("diagnostics.png");
    // The image encoder picks the format from the extension: keep `.png` last.
    let tmp = dir.join("diagnostics.partial.png");
    draw_panels(&tmp, &time, &panels, &time_label(dir)).map_err(|e| FileError {
        path: out.clone(),
        message: e,
    })?;
    std::fs::rename(&tmp, &out).map_err(|e| FileError {
        path: out.clone(),
        message: e.to_string(),
    })?;
    Ok(vec![out])
}

/// The time axis's label: with the unit of a gravity run's `[units]` (from its `config.toml`;
/// N-body or meshless runs: `time`).
fn time_label(dir: &Path) -> String {
    let path = dir.join("config.toml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return "time".into();
    };
    let source = crate::config::Source {
        file: Some(&path),
        text: &text,
    };
    match crate::config::Config::parse(&source, &[]) {
        Ok(crate::config::Config::Gravity(c)) if !c.units.is_unset() => {
            format!("time [{}]", c.units().time)
        }
        _ => "time".into(),
    }
}

/// Draws the legend of `chart`: a framed, mostly opaque box at `position` (a place the
/// chart's lines leave empty, so it hides none of them).
pub(crate) fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(|e| e.to_string())
}

/// Where a legend hides the fewest of `points` (each `(x, y)` in `[0, 1]^2` of the plotting
/// area): the corner or side whose quarter-width, third-height box holds the fewest.
fn emptiest_corner(points: &[(f64, f64)]) -> SeriesLabelPosition {
    use SeriesLabelPosition::*;
    let boxes = [
        (UpperRight, (0.7, 1.0), (0.67, 1.0)),
        (UpperLeft, (0.0, 0.3), (0.67, 1.0)),
        (LowerRight, (0.7, 1.0), (0.0, 0.33)),
        (LowerLeft, (0.0, 0.3), (0.0, 0.33)),
        (MiddleRight, (0.7, 1.0), (0.33, 0.67)),
        (MiddleLeft, (0.0, 0.3), (0.33, 0.67)),
    ];
    let inside = |(x, y): (f64, f64), (xa, xb): (f64, f64), (ya, yb): (f64, f64)| {
        (xa..=xb).contains(&x) && (ya..=yb).contains(&y)
    };
    boxes
        .into_iter()
        .min_by_key(|(_, xs, ys)| points.iter().filter(|&&p| inside(p, *xs, *ys)).count())
        .map(|(position, _, _)| position)
        .unwrap_or(UpperRight)
}

/// One panel of a run's picture: named lines against time.
struct Panel {
    title: String,
    log: bool,
    lines: Vec<(String, Vec<f64>)>,
}

/// The panels of a meshless run: the relative change of every conserved total, and the error
/// against the exact solution (or the first variable's range without one).
fn meshless_panels(table: &Table) -> [Panel; 2] {
    // With boundary particles the diagnostics carry what left through the faces
    // (`outflow_NAME`): the balance `T + outflow` is what stays constant.
    let balanced = table.header.iter().any(|h| h.starts_with("outflow_"));
    let totals: Vec<(String, Vec<f64>)> = table
        .header
        .iter()
        .filter_map(|h| h.strip_prefix("total_").map(|name| (name, h)))
        .map(|(name, h)| {
            let mut t = table.column(h).expect("a listed column");
            // Relative to the total's largest magnitude: a momentum that starts at 0 still
            // gets a meaningful scale.
            let scale = t.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            let scale = if scale > 0.0 { scale } else { 1.0 };
            if let Some(out) = table.column(&format!("outflow_{name}")) {
                for (x, o) in t.iter_mut().zip(out) {
                    *x += o;
                }
            }
            let change = t.iter().map(|x| (x - t[0]).abs() / scale).collect();
            (name.to_string(), change)
        })
        .collect();
    let second = match table.header.iter().find(|h| h.starts_with("l1_error_")) {
        Some(h) => Panel {
            title: format!("L1 error of {} against the exact solution", &h[9..]),
            log: true,
            lines: vec![("L1".into(), table.column(h).expect("a listed column"))],
        },
        None => {
            let lo = table.header.iter().find(|h| h.starts_with("min_"));
            let hi = table.header.iter().find(|h| h.starts_with("max_"));
            let name = lo.map_or("", |h| &h[4..]).to_string();
            Panel {
                title: format!("range of {name}"),
                log: false,
                lines: [lo, hi]
                    .into_iter()
                    .flatten()
                    .map(|h| (h.clone(), table.column(h).expect("a listed column")))
                    .collect(),
            }
        }
    };
    [
        Panel {
            title: if balanced {
                "conserved totals with the boundary fluxes: |T + outflow - T(0)| / max |T|".into()
            } else {
                "conserved totals: |T - T(0)| / max |T|".into()
            },
            log: true,
            lines: totals,
        },
        second,
    ]
}

/// Panels stacked vertically, each with its lines against `time` (zeros and non-finite values
/// are left out of a log axis).
fn draw_panels(
    path: &Path,
    time: &[f64],
    panels: &[Panel],
    time_label: &str,
) -> Result<(), String> {
    const COLOURS: [RGBColor; 5] = [RED, BLUE, GREEN, MAGENTA, BLACK];
    let root = BitMapBackend::new(path, (1000, 400 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let t_max = time.iter().copied().fold(0.0, f64::max).max(1e-300);
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let shown = |v: f64| v.is_finite() && (!panel.log || v > 0.0);
        let values = panel.lines.iter().flat_map(|(_, v)| v).copied();
        let (lo, hi) = values
            .filter(|&v| shown(v))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
                (l.min(v), h.max(v))
            });
        let (lo, hi) = if lo > hi { (1e-17, 1.0) } else { (lo, hi) };
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(&panel.title, ("sans-serif", 24))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(80);
        let series = |k: usize| {
            let (name, v) = &panel.lines[k];
            let points: Vec<(f64, f64)> = time
                .iter()
                .copied()
                .zip(v.iter().copied())
                .filter(|&(_, y)| shown(y))
                .collect();
            (name.clone(), points, COLOURS[k % COLOURS.len()])
        };
        macro_rules! draw_lines {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(time_label)
                    .y_label_formatter(&|v| format!("{v:.2e}"))
                    .draw()
                    .map_err(|e| e.to_string())?;
                for k in 0..panel.lines.len() {
                    let (name, points, colour) = series(k);
                    chart
                        .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                        .map_err(|e| e.to_string())?
                        .label(name)
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                        });
                }
                // A single line is named by the panel's title: no legend to hide it. Several
                // get their legend where the fewest of their points lie.
                if panel.lines.len() > 1 {
                    let points: Vec<(f64, f64)> = (0..panel.lines.len())
                        .flat_map(|k| series(k).1)
                        .map(|(t, y)| {
                            let v = if panel.log {
                                ((y.log10() - (lo / 2.0).log10())
                                    / ((hi * 2.0).log10() - (lo / 2.0).log10()))
                            } else {
                                (y - lo) / (hi - lo).max(1e-300)
                            };
                            (t / t_max, v)
                        })
                        .collect();
                    legend(&mut chart, emptiest_corner(&points))?;
                }
            }};
        }
        if panel.log {
            let chart = builder
                .build_cartesian_2d(
                    0.0..t_max,
                    (lo / 2.0..hi * 2.0)
                        .log_scale()
                        .with_key_points(log_ticks(lo / 2.0, hi * 2.0)),
                )
                .map_err(|e| e.to_string())?;
            draw_lines!(chart);
        } else {
            let pad = ((hi - lo) * 0.1).max(1e-3);
            let chart = builder
                .build_cartesian_2d(0.0..t_max, (lo - pad)..(hi + pad))
                .map_err(|e| e.to_string())?;
            draw_lines!(chart);
        }
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// The labels of a chart.
pub struct Axes<'a> {
    /// The x axis: the quantity and its unit.
    pub x: &'a str,
    /// The y axis: the quantity and its unit.
    pub y: &'a str,
    /// The title above the chart.
    pub title: &'a str,
}

/// A log-log line with markers of `points` (x, y > 0) into the PNG at `path`, atomically.
pub fn loglog(
    path: &Path,
    points: &[(f64, f64)],
    x_label: &str,
    title: &str,
) -> Result<(), FileError> {
    loglog_series(
        path,
        &[(String::new(), points.to_vec())],
        &Axes {
            x: x_label,
            y: "",
            title,
        },
        None,
    )
}

/// Log-log lines with markers, one per named series of points (x, y > 0; others left out),
/// into the PNG at `path`, atomically; with `slope`, a dashed reference line `y ~ x^slope`
/// through the first series' smallest-x point. Legends (for named series) sit in the upper left,
/// which lines of positive slope leave empty.
pub fn loglog_series(
    path: &Path,
    series: &[(String, Vec<(f64, f64)>)],
    axes: &Axes<'_>,
    slope: Option<f64>,
) -> Result<(), FileError> {
    register_font();
    let fail = |e: String| FileError {
        path: path.to_path_buf(),
        message: e,
    };
    let tmp = partial_png(path);
    let shown: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, points)| {
            let pos = points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0)
                .collect();
            (name.clone(), pos)
        })
        .collect();
    let all = || shown.iter().flat_map(|(_, p)| p.iter().copied());
    let (x0, x1) = all().fold((f64::INFINITY, 0.0f64), |(l, h), p| {
        (l.min(p.0), h.max(p.0))
    });
    let (y0, y1) = all().fold((f64::INFINITY, 0.0f64), |(l, h), p| {
        (l.min(p.1), h.max(p.1))
    });
    let empty = all().next().is_none();
    let (x0, x1) = if empty {
        (0.1, 1.0)
    } else {
        (x0 / 1.5, x1 * 1.5)
    };
    // Room above for the legend.
    let (y0, y1) = if empty {
        (0.1, 1.0)
    } else {
        (y0 / 3.0, y1 * 30.0)
    };
    let named = shown.iter().any(|(n, _)| !n.is_empty());
    {
        let root = BitMapBackend::new(&tmp, (900, 650)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(axes.title, ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d(
                (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
            )
            .map_err(|e| fail(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc(axes.x)
            .y_desc(axes.y)
            .x_label_formatter(&|v| format!("{v:.0e}"))
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .draw()
            .map_err(|e| fail(e.to_string()))?;
        for (k, (name, points)) in shown.iter().enumerate() {
            let colour = Palette99::pick(k).to_rgba();
            let drawn = chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(|e| fail(e.to_string()))?;
            if !name.is_empty() {
                drawn.label(name.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 5, colour.filled())))
                .map_err(|e| fail(e.to_string()))?;
        }
        let through = shown
            .first()
            .and_then(|(_, p)| p.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0)));
        if let (Some(slope), Some((xa, ya))) = (slope, through) {
            let xb = all().map(|p| p.0).fold(xa, f64::max);
            let line = [(xa, ya), (xb, ya * (xb / xa).powf(slope))];
            chart
                .draw_series(DashedLineSeries::new(line, 8, 6, BLACK.stroke_width(1)))
                .map_err(|e| fail(e.to_string()))?
                .label(format!("slope {slope}"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        }
        if named || slope.is_some() {
            legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(fail)?;
        }
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
}

/// A roofline chart into the PNG at `path`, atomically: for each `(name, GB/s)` bandwidth a
/// sloped memory roof, for each `(name, GFLOP/s)` peak a flat arithmetic roof, and each
/// `(label, flops per byte, GFLOP/s)` kernel as a marker, labelled.
pub fn roofline(
    path: &Path,
    bandwidths: &[(String, f64)],
    peaks: &[(String, f64)],
    kernels: &[(String, f64, f64)],
    title: &str,
) -> Result<(), FileError> {
    register_font();
    let fail = |e: String| FileError {
        path: path.to_path_buf(),
        message: e,
    };
    let tmp = partial_png(path);
    let ok = |x: f64| x.is_finite() && x > 0.0;
    let xs = kernels.iter().map(|k| k.1).filter(|&x| ok(x));
    let x0 = xs.clone().fold(0.05f64, f64::min) / 2.0;
    // Room on the right for the labels.
    let x1 = xs.fold(100.0f64, f64::max) * 8.0;
    let ys = kernels
        .iter()
        .map(|k| k.2)
        .chain(peaks.iter().map(|p| p.1))
        .filter(|&y| ok(y));
    let y0 = ys.clone().fold(1.0f64, f64::min) / 3.0;
    let y1 = ys.fold(1.0f64, f64::max) * 3.0;
    {
        let root = BitMapBackend::new(&tmp, (1000, 700)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(|e| fail(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (flop / byte)")
            .y_desc("GFLOP/s")
            .x_label_formatter(&|v| format!("{v:.2}"))
            .y_label_formatter(&|v| format!("{v:.1}"))
            .draw()
            .map_err(|e| fail(e.to_string()))?;
        let top = peaks.iter().map(|p| p.1).fold(0.0f64, f64::max).max(y0);
        for (k, (name, bw)) in bandwidths.iter().enumerate() {
            let colour = Palette99::pick(k).to_rgba();
            // The roof rises with slope 1 until it meets the highest arithmetic peak.
            let knee = (top / bw).clamp(x0, x1);
            chart
                .draw_series(LineSeries::new(
                    [(x0, bw * x0), (knee, bw * knee)],
                    colour.stroke_width(2),
                ))
                .map_err(|e| fail(e.to_string()))?
                .label(format!("{name}: {bw:.1} GB/s"))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour));
        }
        for (k, (name, peak)) in peaks.iter().enumerate() {
            let colour = Palette99::pick(k + bandwidths.len()).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    [(x0, *peak), (x1, *peak)],
                    colour.stroke_width(2),
                ))
                .map_err(|e| fail(e.to_string()))?
                .label(format!("{name}: {peak:.0} GFLOP/s"))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour));
        }
        let points: Vec<(f64, f64, &str)> = kernels
            .iter()
            .filter(|k| ok(k.1) && ok(k.2))
            .map(|k| (k.1, k.2, k.0.as_str()))
            .collect();
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, y, _)| Circle::new((x, y), 5, RED.filled())),
            )
            .map_err(|e| fail(e.to_string()))?;
        chart
            .draw_series(points.iter().map(|&(x, y, label)| {
                Text::new(label.to_string(), (x * 1.08, y), ("sans-serif", 13))
            }))
            .map_err(|e| fail(e.to_string()))?;
        legend(&mut chart, SeriesLabelPosition::LowerRight).map_err(fail)?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
}

/// Tick values for a log axis over `[lo, hi]`: 1, 2 and 5 times the powers of ten within two
/// decades, the powers of ten (every second or third one over a wide range) beyond, so that
/// labels neither crowd nor vanish.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let decades = b - a;
    let mantissas: &[f64] = if decades <= 2 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let stride = (decades / 10 + 1).max(1);
    (a..=b)
        .filter(|e| (e - a) % stride == 0)
        .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
        .filter(|&v| v >= lo && v <= hi)
        .collect()
}

/// `name.partial.png` beside `path`.
fn partial_png(path: &Path) -> PathBuf {
    path.with_file_name(format!(
        "{}.partial.png",
        path.file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default()
    ))
}
