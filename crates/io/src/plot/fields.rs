//! Pictures of a run's fields, drawn from its snapshots (`snapshots.pvd` and the `.vtu` files it
//! lists, so a running or interrupted run shows what it has written so far):
//!
//! - meshless, 1-D: `profile.png`, every shown variable against x with the exact solution as a
//!   line where the run has one;
//! - meshless, 2-D (3-D: the slice through the middle of z): `fields.png`, colour maps with a
//!   colour bar of the shown variables, the reconstruction order (MOOD's reductions show as
//!   lower orders) and, with an exact solution, the first variable's error;
//! - gravity: `surface_density.png`, the projected mass density in x-y and x-z (log scale), and
//!   for at most [`ORBIT_BODIES`] bodies `orbits.png`, the paths through every snapshot;
//! - with `movie`, `movie.gif`: one frame per snapshot (the profile, the first map or the x-y
//!   surface density), on axes and colour scales fixed over the whole run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;

use crate::config::{Config, Source};
use crate::files::FileError;
use crate::units::Units;

/// Runs with at most this many bodies also get `orbits.png`.
pub const ORBIT_BODIES: usize = 16;

/// Which snapshot the still pictures show, and whether to write the movie.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldOptions {
    /// The snapshot's index in `snapshots.pvd` (default: the last).
    pub snapshot: Option<usize>,
    /// Also write `movie.gif`.
    pub movie: bool,
}

/// One snapshot read back: its time, positions and named point fields.
struct Snapshot {
    time: f64,
    points: Vec<[f64; 3]>,
    fields: BTreeMap<String, Vec<f64>>,
}

/// What kind of run a directory holds.
#[derive(Clone, Debug, PartialEq)]
enum Family {
    Gravity(Units),
    Meshless { dim: usize },
}

/// Draws the field pictures of the run in `dir` (see the module's documentation); returns the
/// files written. A run without snapshots yet gets none (and no error).
pub fn plot_fields(dir: &Path, options: &FieldOptions) -> Result<Vec<PathBuf>, FileError> {
    super::register_font();
    let family = family(dir)?;
    let list = snapshot_list(dir)?;
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let index = match options.snapshot {
        None => list.len() - 1,
        Some(k) if k < list.len() => k,
        Some(k) => {
            return Err(FileError {
                path: dir.join("snapshots.pvd"),
                message: format!(
                    "no snapshot {k}: the run has {} (0 to {})",
                    list.len(),
                    list.len() - 1
                ),
            });
        }
    };
    let snap = read_snapshot(&list[index])?;
    if matches!(family, Family::Meshless { .. }) {
        shown(&snap, &list[index])?;
    }
    let mut files = Vec::new();
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |message: String| FileError { path, message }
    };
    match &family {
        Family::Meshless { dim: 1 } => {
            let out = dir.join("profile.png");
            atomic_png(&out, |tmp| draw_profiles(tmp, &snap, None)).map_err(fail(&out))?;
            files.push(out);
        }
        Family::Meshless { dim } => {
            let out = dir.join("fields.png");
            atomic_png(&out, |tmp| draw_maps(tmp, &snap, *dim)).map_err(fail(&out))?;
            files.push(out);
        }
        Family::Gravity(units) => {
            // A few bodies make no density field: their orbits are the picture.
            if snap.points.len() > ORBIT_BODIES {
                let out = dir.join("surface_density.png");
                atomic_png(&out, |tmp| draw_surface_density(tmp, &snap, units))
                    .map_err(fail(&out))?;
                files.push(out);
            } else {
                let out = dir.join("orbits.png");
                let all = list
                    .iter()
                    .map(|p| read_snapshot(p))
                    .collect::<Result<Vec<_>, _>>()?;
                atomic_png(&out, |tmp| draw_orbits(tmp, &all, units)).map_err(fail(&out))?;
                files.push(out);
            }
        }
    }
    if options.movie {
        let out = dir.join("movie.gif");
        write_movie(&out, &list, &family)?;
        files.push(out);
    }
    Ok(files)
}

/// The run's family and dimension, from its `config.toml`.
fn family(dir: &Path) -> Result<Family, FileError> {
    let path = dir.join("config.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| FileError {
        path: path.clone(),
        message: format!("{e} (is this a run directory?)"),
    })?;
    let config = Config::parse(
        &Source {
            file: Some(&path),
            text: &text,
        },
        &[],
    )
    .map_err(|e| FileError {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Ok(match config {
        Config::Gravity(c) => Family::Gravity(c.units()),
        Config::Meshless(c) => Family::Meshless { dim: c.dimension() },
    })
}

/// The snapshot files `snapshots.pvd` lists, in its order, that exist; without a `.pvd` (an
/// HDF5-only run), those `snapshots.json` lists.
fn snapshot_list(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let pvd = dir.join("snapshots.pvd");
    let Ok(text) = std::fs::read_to_string(&pvd) else {
        return Ok(crate::snapshot::hdf5_index(dir));
    };
    Ok(text
        .split("file=\"")
        .skip(1)
        .filter_map(|s| s.find('"').map(|e| dir.join(&s[..e])))
        .filter(|p| p.is_file())
        .collect())
}

fn read_snapshot(path: &Path) -> Result<Snapshot, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    if path.extension().is_some_and(|e| e == "hdf5" || e == "h5") {
        let contents = crate::snapshot::read_hdf5(path)?;
        let (points, fields) = crate::snapshot::hdf5_as_fields(&contents);
        return Ok(Snapshot {
            time: contents.time,
            points,
            fields: fields.into_iter().collect(),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let arrays = crate::vtk::read_vtu(&bytes).map_err(err)?;
    let points = arrays
        .get("Points")
        .ok_or_else(|| err("no Points".into()))?
        .to_f64();
    let time = arrays
        .get("TimeValue")
        .map(|a| a.to_f64())
        .and_then(|t| t.first().copied())
        .unwrap_or(f64::NAN);
    // The cells' arrays (one vertex per particle) are the file's bookkeeping, not fields.
    let bookkeeping = ["TimeValue", "connectivity", "offsets", "types"];
    let fields = arrays
        .iter()
        .filter(|(name, a)| a.components == 1 && !bookkeeping.contains(&name.as_str()))
        .map(|(name, a)| (name.clone(), a.to_f64()))
        .collect();
    Ok(Snapshot {
        time,
        points: points.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect(),
        fields,
    })
}

/// Writes a PNG through `draw` into a temporary name, then renames it to `out`.
fn atomic_png(out: &Path, draw: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    let tmp = super::partial_png(out);
    draw(&tmp)?;
    std::fs::rename(&tmp, out).map_err(|e| e.to_string())
}

/// The variables a meshless picture shows: density, velocity and pressure for a gas, else every
/// state variable (the bookkeeping fields and the exact solution left out).
fn shown_variables(snap: &Snapshot) -> Vec<String> {
    if snap.fields.contains_key("pressure") {
        let mut v = vec!["density".to_string()];
        v.extend(
            ["velocity_x", "velocity_y", "velocity_z"]
                .iter()
                .filter(|n| snap.fields.contains_key(**n))
                .map(|n| n.to_string()),
        );
        v.push("pressure".to_string());
        v
    } else {
        snap.fields
            .keys()
            .filter(|k| {
                !["id", "tag", "order", "volume"].contains(&k.as_str()) && !k.starts_with("exact_")
            })
            .cloned()
            .collect()
    }
}

/// The variables a meshless picture of `snap` (read from `path`) shows: an error, not a panic,
/// for a snapshot without any (a file that is not a meshless snapshot).
fn shown(snap: &Snapshot, path: &Path) -> Result<Vec<String>, FileError> {
    let names = shown_variables(snap);
    if names.is_empty() {
        return Err(FileError {
            path: path.to_path_buf(),
            message: "no state variables to draw: not a meshless snapshot".into(),
        });
    }
    Ok(names)
}

/// Checks that `snap` (read from `path`) has every field of `names` (a movie's frames are drawn
/// with the first snapshot's variables).
fn has_fields(snap: &Snapshot, names: &[String], path: &Path) -> Result<(), FileError> {
    match names.iter().find(|n| !snap.fields.contains_key(*n)) {
        Some(missing) => Err(FileError {
            path: path.to_path_buf(),
            message: format!("no field `{missing}`, which the run's first snapshot has"),
        }),
        None => Ok(()),
    }
}

/// The interior particles (tag 0) of a meshless snapshot.
fn interior(snap: &Snapshot) -> Vec<usize> {
    match snap.fields.get("tag") {
        Some(tags) => (0..tags.len()).filter(|&i| tags[i] == 0.0).collect(),
        None => (0..snap.points.len()).collect(),
    }
}

/// The smallest and largest finite value of `values` at `index`, widened where they are equal.
fn range_of(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if lo > hi {
        (0.0, 1.0)
    } else if hi - lo <= 1e-12 * hi.abs().max(lo.abs()).max(1e-300) {
        (lo - 0.5 * lo.abs().max(1e-3), hi + 0.5 * hi.abs().max(1e-3))
    } else {
        (lo, hi)
    }
}

/// A single value (a time, a position) short: 3 significant digits, scientific outside
/// `[1e-3, 1e4)`; axes use [`ticks_for`].
fn tick(v: f64) -> String {
    let a = v.abs();
    if a < 1e-12 {
        "0".into()
    } else if !(1e-3..1e4).contains(&a) {
        format!("{v:.2e}")
    } else {
        let digits = (2 - a.log10().floor() as i32).max(0) as usize;
        let text = format!("{v:.digits$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    }
}

/// A tick formatter for an axis over `[lo, hi]`: enough digits that ticks about a sixth of the
/// span apart read differently (2.5912 and 2.5937, not 2.59 twice), scientific notation for
/// magnitudes outside `[1e-3, 1e4)`, and 0 for rounding noise about zero.
fn ticks_for(lo: f64, hi: f64) -> impl Fn(&f64) -> String {
    let big = lo.abs().max(hi.abs());
    let step = ((hi - lo).abs() / 6.0).max(big * 1e-12).max(1e-300);
    move |&v: &f64| {
        let a = v.abs();
        if a < step * 1e-6 || a < 1e-12 * big.max(1e-300) {
            return "0".into();
        }
        if !(1e-3..1e4).contains(&big) {
            // Significant digits to tell ticks `step` apart at this magnitude.
            let digits = ((a / step).log10().ceil().max(0.0) as usize + 1).min(8);
            return format!("{v:.digits$e}", digits = digits.saturating_sub(1).max(1));
        }
        let decimals = (-(step.log10().floor()) as i32 + 1).clamp(0, 10) as usize;
        let text = format!("{v:.decimals$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    }
}

/// 1-D profiles: one panel per shown variable, the particles as dots and the exact solution as
/// a line. `ranges` fixes the y ranges (for movie frames).
fn draw_profiles(
    path: &Path,
    snap: &Snapshot,
    ranges: Option<&BTreeMap<String, (f64, f64)>>,
) -> Result<(), String> {
    let names = shown_variables(snap);
    let root = BitMapBackend::new(path, (1000, 300 * names.len() as u32 + 50)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    draw_profile_panels(&root, snap, &names, ranges)?;
    root.present().map_err(|e| e.to_string())
}

fn draw_profile_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    snap: &Snapshot,
    names: &[String],
    ranges: Option<&BTreeMap<String, (f64, f64)>>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let root = root
        .titled(
            &format!("t = {}", tick(snap.time)),
            ("sans-serif", 26).into_font(),
        )
        .map_err(err)?;
    let inside = interior(snap);
    let x: Vec<f64> = inside.iter().map(|&i| snap.points[i][0]).collect();
    let (x0, x1) = range_of(x.iter().copied());
    for (area, name) in root.split_evenly((names.len(), 1)).iter().zip(names) {
        let values = &snap.fields[name];
        let exact = snap.fields.get(&format!("exact_{name}"));
        let mut order: Vec<usize> = (0..inside.len()).collect();
        order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
        let ys = || {
            inside
                .iter()
                .map(|&i| values[i])
                .chain(exact.into_iter().flat_map(|e| inside.iter().map(|&i| e[i])))
        };
        let (lo, hi) = ranges
            .and_then(|r| r.get(name).copied())
            .unwrap_or_else(|| range_of(ys()));
        let pad = 0.06 * (hi - lo);
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(x0..x1, (lo - pad)..(hi + pad))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("x")
            .y_desc(name.as_str())
            .x_labels(11)
            .y_labels(6)
            .x_label_formatter(&ticks_for(x0, x1))
            .y_label_formatter(&ticks_for(lo - pad, hi + pad))
            .draw()
            .map_err(err)?;
        if let Some(e) = exact {
            chart
                .draw_series(LineSeries::new(
                    order.iter().map(|&k| (x[k], e[inside[k]])),
                    BLACK.stroke_width(2),
                ))
                .map_err(err)?
                .label("exact")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2))
                });
        }
        let colour = Palette99::pick(0).to_rgba();
        chart
            .draw_series(
                inside
                    .iter()
                    .zip(&x)
                    .map(|(&i, &xi)| Circle::new((xi, values[i]), 2, colour.filled())),
            )
            .map_err(err)?
            .label("mote")
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, colour.filled()));
        super::legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

/// The particles a 2-D map shows: the interior ones, in 3-D those within half a spacing of the
/// middle of z. Returns their indices, the spacing, and a note for the title.
fn map_particles(snap: &Snapshot, dim: usize) -> (Vec<usize>, f64, String) {
    let inside = interior(snap);
    let (xa, xb) = range_of(inside.iter().map(|&i| snap.points[i][0]));
    let (ya, yb) = range_of(inside.iter().map(|&i| snap.points[i][1]));
    if dim == 3 {
        let (za, zb) = range_of(inside.iter().map(|&i| snap.points[i][2]));
        let h = ((xb - xa) * (yb - ya) * (zb - za) / inside.len().max(1) as f64).cbrt();
        let mid = 0.5 * (za + zb);
        let slice = inside
            .into_iter()
            .filter(|&i| (snap.points[i][2] - mid).abs() <= 0.5 * h)
            .collect();
        (slice, h, format!(", slice z = {}", tick(mid)))
    } else {
        let h = ((xb - xa) * (yb - ya) / inside.len().max(1) as f64).sqrt();
        (inside, h, String::new())
    }
}

/// The maps of a 2-D (or sliced 3-D) meshless snapshot: the shown variables, the order and the
/// first variable's error, two per row, each with a colour bar.
fn draw_maps(path: &Path, snap: &Snapshot, dim: usize) -> Result<(), String> {
    let (idx, h, note) = map_particles(snap, dim);
    let mut maps: Vec<(String, Vec<f64>)> = Vec::new();
    let names = shown_variables(snap);
    for name in &names {
        if !name.starts_with("velocity_") {
            maps.push((name.clone(), snap.fields[name].clone()));
        }
    }
    // A gas's velocity as its magnitude (the components are in the snapshot for ParaView).
    let components: Vec<&Vec<f64>> = names
        .iter()
        .filter(|n| n.starts_with("velocity_"))
        .map(|n| &snap.fields[n])
        .collect();
    if !components.is_empty() {
        let speed = (0..snap.points.len())
            .map(|i| components.iter().map(|c| c[i] * c[i]).sum::<f64>().sqrt())
            .collect();
        maps.insert(1, ("speed |v|".to_string(), speed));
    }
    if let (Some(exact), Some(first)) = (
        snap.fields.get(&format!("exact_{}", names[0])),
        snap.fields.get(&names[0]),
    ) {
        let error = first.iter().zip(exact).map(|(u, e)| u - e).collect();
        maps.push((format!("{} - exact", names[0]), error));
    }
    if let Some(order) = snap.fields.get("order") {
        maps.push(("reconstruction order".to_string(), order.clone()));
    }
    // The order's scale starts at 1 (where MOOD reduced a particle all the way), so a run at
    // full order everywhere shows one colour at the top of the bar.
    let fixed = |name: &str, values: &[f64], range: (f64, f64)| {
        if name == "reconstruction order" {
            let top = idx.iter().map(|&i| values[i]).fold(2.0, f64::max);
            (1.0, top)
        } else {
            range
        }
    };
    let (xa, xb) = range_of(idx.iter().map(|&i| snap.points[i][0]));
    let (ya, yb) = range_of(idx.iter().map(|&i| snap.points[i][1]));
    let aspect = ((yb - ya + h) / (xb - xa + h)).clamp(0.2, 2.0);
    let (cols, panel_w) = (2u32, 620u32);
    // The plotting area's width is the panel's less the colour bar (140), the y labels (60) and
    // the margins (16); its height the map's less the caption, the x labels and the margins
    // (about 86): a square domain draws as a square.
    let map_h = ((panel_w - 216) as f64 * aspect) as u32 + 86;
    let rows = maps.len().div_ceil(cols as usize) as u32;
    let root = BitMapBackend::new(path, (cols * panel_w, rows * map_h + 50)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(
            &format!("t = {}{note}", tick(snap.time)),
            ("sans-serif", 26).into_font(),
        )
        .map_err(|e| e.to_string())?;
    let areas = root.split_evenly((rows as usize, cols as usize));
    for (area, (name, values)) in areas.iter().zip(&maps) {
        let range = fixed(name, values, range_of(idx.iter().map(|&i| values[i])));
        draw_map(area, snap, &idx, h, name, values, range)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Values on a regular grid of cells over a rectangle (NaN: nothing there).
struct Raster {
    nx: usize,
    ny: usize,
    x: (f64, f64),
    y: (f64, f64),
    values: Vec<f64>,
}

/// Cells across the longer side of a map.
const MAP_CELLS: usize = 240;

/// `values` at the particles `idx` rasterised by nearest particle (a cell farther than 1.5
/// spacings from every particle stays empty), so jittered clouds show no gaps.
fn raster_nearest(snap: &Snapshot, idx: &[usize], h: f64, values: &[f64]) -> Raster {
    let (xa, xb) = range_of(idx.iter().map(|&i| snap.points[i][0]));
    let (ya, yb) = range_of(idx.iter().map(|&i| snap.points[i][1]));
    let (x, y) = ((xa - 0.5 * h, xb + 0.5 * h), (ya - 0.5 * h, yb + 0.5 * h));
    let (w, hgt) = (x.1 - x.0, y.1 - y.0);
    let cell = w.max(hgt) / MAP_CELLS as f64;
    let (nx, ny) = (
        ((w / cell).ceil() as usize).max(1),
        ((hgt / cell).ceil() as usize).max(1),
    );
    // Particles bucketed by spacing-sized bins.
    let (bx, by) = (
        ((w / h).ceil() as usize).max(1),
        ((hgt / h).ceil() as usize).max(1),
    );
    let bin = |px: f64, py: f64| {
        let u = (((px - x.0) / h) as usize).min(bx - 1);
        let v = (((py - y.0) / h) as usize).min(by - 1);
        (u, v)
    };
    let mut bins: Vec<Vec<usize>> = vec![Vec::new(); bx * by];
    for &i in idx {
        let (u, v) = bin(snap.points[i][0], snap.points[i][1]);
        bins[v * bx + u].push(i);
    }
    let mut out = vec![f64::NAN; nx * ny];
    for cy in 0..ny {
        for cx in 0..nx {
            let (px, py) = (
                x.0 + (cx as f64 + 0.5) * cell,
                y.0 + (cy as f64 + 0.5) * cell,
            );
            let (u, v) = bin(px, py);
            let mut best = (2.25 * h * h, None);
            for vv in v.saturating_sub(2)..(v + 3).min(by) {
                for uu in u.saturating_sub(2)..(u + 3).min(bx) {
                    for &i in &bins[vv * bx + uu] {
                        let p = snap.points[i];
                        let d = (p[0] - px).powi(2) + (p[1] - py).powi(2);
                        if d < best.0 {
                            best = (d, Some(i));
                        }
                    }
                }
            }
            if let Some(i) = best.1 {
                out[cy * nx + cx] = values[i];
            }
        }
    }
    Raster {
        nx,
        ny,
        x,
        y,
        values: out,
    }
}

/// One colour map of `values` at the particles `idx` over the value range `range`, with its
/// colour bar on the right.
fn draw_map<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    snap: &Snapshot,
    idx: &[usize],
    h: f64,
    name: &str,
    values: &[f64],
    range: (f64, f64),
) -> Result<(), String> {
    let raster = raster_nearest(snap, idx, h, values);
    draw_raster(area, &raster, name, ("x", "y"), range, "")
}

/// A raster as a colour map (viridis; empty cells in its darkest colour) titled `title`, with
/// axis labels `labels` and a colour bar over `(lo, hi)` labelled `bar`.
fn draw_raster<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    r: &Raster,
    title: &str,
    labels: (&str, &str),
    (lo, hi): (f64, f64),
    bar: &str,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (w, _) = area.dim_in_pixel();
    let bar_width = if bar.is_empty() { 100 } else { 140 };
    let (map_area, bar_area) = area.split_horizontally(w.saturating_sub(bar_width));
    let mut chart = ChartBuilder::on(&map_area)
        .caption(title, ("sans-serif", 20))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(r.x.0..r.x.1, r.y.0..r.y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(labels.0)
        .y_desc(labels.1)
        .x_labels(6)
        .y_labels(6)
        .label_style(("sans-serif", 14))
        .x_label_formatter(&ticks_for(r.x.0, r.x.1))
        .y_label_formatter(&ticks_for(r.y.0, r.y.1))
        .draw()
        .map_err(err)?;
    let (dx, dy) = ((r.x.1 - r.x.0) / r.nx as f64, (r.y.1 - r.y.0) / r.ny as f64);
    let background = ViridisRGB::get_color(0.0);
    chart
        .draw_series((0..r.nx * r.ny).map(|k| {
            let (u, v) = (k % r.nx, k / r.nx);
            let (x, y) = (r.x.0 + u as f64 * dx, r.y.0 + v as f64 * dy);
            let g = r.values[k];
            let colour = if g.is_finite() && hi > lo {
                ViridisRGB::get_color(((g - lo) / (hi - lo)).clamp(0.0, 1.0))
            } else {
                background
            };
            Rectangle::new([(x, y), (x + dx, y + dy)], colour.filled())
        }))
        .map_err(err)?;
    colour_bar(&bar_area, lo, hi, bar)
}

/// A vertical colour bar from `lo` to `hi` (viridis) with tick labels, titled `label`.
fn colour_bar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lo: f64,
    hi: f64,
    label: &str,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut bar = ChartBuilder::on(area)
        .margin_top(40)
        .margin_bottom(42)
        .margin_right(8)
        .y_label_area_size(0)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..1.0, lo..hi)
        .map_err(err)?;
    bar.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_desc(label)
        .y_labels(6)
        .label_style(("sans-serif", 14))
        .y_label_formatter(&ticks_for(lo, hi))
        .draw()
        .map_err(err)?;
    let steps = 100;
    bar.draw_series((0..steps).map(|k| {
        let (a, b) = (k as f64 / steps as f64, (k + 1) as f64 / steps as f64);
        let (va, vb) = (lo + a * (hi - lo), lo + b * (hi - lo));
        Rectangle::new(
            [(0.0, va), (1.0, vb)],
            ViridisRGB::get_color((a + b) * 0.5).filled(),
        )
    }))
    .map_err(err)?;
    Ok(())
}

/// The projected surface density of a gravity snapshot on a `cells`-square grid over the
/// square of half-width `half` around `centre`, in the plane of axes `a` and `b`: log10 of mass
/// per area (NaN in empty cells).
fn surface_density(
    snap: &Snapshot,
    (a, b): (usize, usize),
    centre: [f64; 3],
    half: f64,
    cells: usize,
) -> Vec<f64> {
    let mass = snap.fields.get("mass");
    let mut grid = vec![0.0; cells * cells];
    let cell = 2.0 * half / cells as f64;
    for (i, p) in snap.points.iter().enumerate() {
        let u = ((p[a] - centre[a] + half) / cell).floor();
        let v = ((p[b] - centre[b] + half) / cell).floor();
        if u >= 0.0 && v >= 0.0 && (u as usize) < cells && (v as usize) < cells {
            grid[v as usize * cells + u as usize] += mass.map_or(1.0, |m| m[i]);
        }
    }
    grid.iter()
        .map(|&m| {
            if m > 0.0 {
                (m / (cell * cell)).log10()
            } else {
                f64::NAN
            }
        })
        .collect()
}

/// The centre of mass of a gravity snapshot and the half-width of the square that holds 90 %
/// of its bodies in every axis (times 1.1): the outskirts of a cluster (a Plummer sphere's
/// tail) would otherwise shrink its core to a few cells.
fn frame_of(snap: &Snapshot) -> ([f64; 3], f64) {
    let mass = snap.fields.get("mass");
    let (mut c, mut total) = ([0.0; 3], 0.0);
    for (i, p) in snap.points.iter().enumerate() {
        let m = mass.map_or(1.0, |m| m[i]);
        for d in 0..3 {
            c[d] += m * p[d];
        }
        total += m;
    }
    let c = c.map(|x| if total > 0.0 { x / total } else { 0.0 });
    let mut reach: Vec<f64> = snap
        .points
        .iter()
        .map(|p| (0..3).map(|d| (p[d] - c[d]).abs()).fold(0.0, f64::max))
        .filter(|r| r.is_finite())
        .collect();
    reach.sort_by(f64::total_cmp);
    let r = reach
        .get(((reach.len() as f64 * 0.9) as usize).min(reach.len().saturating_sub(1)))
        .copied()
        .unwrap_or(1.0);
    (c, if r > 0.0 { 1.1 * r } else { 1.0 })
}

/// Cells across a surface-density map of `n` bodies: about four bodies per cell in a uniform
/// square, between 32 and 400.
fn grid_cells(n: usize) -> usize {
    ((n as f64 / 4.0).sqrt() as usize).clamp(32, 400)
}

/// The x-y and x-z surface densities of a gravity snapshot side by side, with colour bars.
fn draw_surface_density(path: &Path, snap: &Snapshot, units: &Units) -> Result<(), String> {
    let (centre, half) = frame_of(snap);
    let cells = grid_cells(snap.points.len());
    let maps = [
        ((0, 1), surface_density(snap, (0, 1), centre, half, cells)),
        ((0, 2), surface_density(snap, (0, 2), centre, half, cells)),
    ];
    let range = range_of(maps.iter().flat_map(|(_, g)| g.iter().copied()));
    let root = BitMapBackend::new(path, (1400, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(
            &format!(
                "projected surface density, {} bodies, t = {} [{}]",
                snap.points.len(),
                tick(snap.time),
                units.time
            ),
            ("sans-serif", 26).into_font(),
        )
        .map_err(|e| e.to_string())?;
    for (area, ((a, b), grid)) in root.split_evenly((1, 2)).iter().zip(&maps) {
        draw_grid(area, grid, cells, (*a, *b), centre, half, range, units)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// A surface-density grid (from [`surface_density`]) as a colour map with its colour bar.
#[allow(clippy::too_many_arguments)]
fn draw_grid<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    grid: &[f64],
    cells: usize,
    (a, b): (usize, usize),
    centre: [f64; 3],
    half: f64,
    range: (f64, f64),
    units: &Units,
) -> Result<(), String> {
    let axis = ["x", "y", "z"];
    let raster = Raster {
        nx: cells,
        ny: cells,
        x: (centre[a] - half, centre[a] + half),
        y: (centre[b] - half, centre[b] + half),
        values: grid.to_vec(),
    };
    draw_raster(
        area,
        &raster,
        &format!("{}-{} plane", axis[a], axis[b]),
        (
            &format!("{} [{}]", axis[a], units.length),
            &format!("{} [{}]", axis[b], units.length),
        ),
        range,
        &format!("log10 Σ [{} / ({})^2]", units.mass, units.length),
    )
}

/// The paths of every body (x-y) through the snapshots, with the last positions marked.
fn draw_orbits(path: &Path, all: &[Snapshot], units: &Units) -> Result<(), String> {
    let points = || all.iter().flat_map(|s| s.points.iter());
    let (xa, xb) = range_of(points().map(|p| p[0]));
    let (ya, yb) = range_of(points().map(|p| p[1]));
    // Equal scales on both axes: the larger extent, centred.
    let half = 0.55 * (xb - xa).max(yb - ya);
    let (cx, cy) = (0.5 * (xa + xb), 0.5 * (ya + yb));
    let root = BitMapBackend::new(path, (800, 850)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let last = all.last().ok_or("no snapshots")?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "orbits in the x-y plane, t = {} to {} [{}]",
                tick(all[0].time),
                tick(last.time),
                units.time
            ),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((cx - half)..(cx + half), (cy - half)..(cy + half))
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(format!("x [{}]", units.length))
        .y_desc(format!("y [{}]", units.length))
        .x_label_formatter(&ticks_for(cx - half, cx + half))
        .y_label_formatter(&ticks_for(cy - half, cy + half))
        .draw()
        .map_err(|e| e.to_string())?;
    // Bodies keep their index in gravity snapshots (ids in order).
    for body in 0..last.points.len() {
        let colour = Palette99::pick(body).to_rgba();
        let path: Vec<(f64, f64)> = all
            .iter()
            .filter_map(|s| s.points.get(body).map(|p| (p[0], p[1])))
            .collect();
        chart
            .draw_series(LineSeries::new(path, colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("body {body}"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        let p = last.points[body];
        chart
            .draw_series([Circle::new((p[0], p[1]), 5, colour.filled())])
            .map_err(|e| e.to_string())?;
    }
    super::legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(|e| e.to_string())
}

/// `movie.gif`: one frame per snapshot at 5 frames per second, with the axes and colour scale
/// of the whole run (a first pass over the snapshots finds them).
fn write_movie(out: &Path, list: &[PathBuf], family: &Family) -> Result<(), FileError> {
    let fail = |message: String| FileError {
        path: out.to_path_buf(),
        message,
    };
    let tmp = out.with_file_name("movie.partial.gif");
    let delay_ms = 200;
    match family {
        Family::Meshless { dim: 1 } => {
            let mut ranges: BTreeMap<String, (f64, f64)> = BTreeMap::new();
            for path in list {
                let snap = read_snapshot(path)?;
                let inside = interior(&snap);
                for name in shown_variables(&snap) {
                    let exact = snap.fields.get(&format!("exact_{name}"));
                    let (lo, hi) = range_of(
                        inside
                            .iter()
                            .map(|&i| snap.fields[&name][i])
                            .chain(exact.into_iter().flat_map(|e| inside.iter().map(|&i| e[i]))),
                    );
                    let r = ranges.entry(name).or_insert((lo, hi));
                    *r = (r.0.min(lo), r.1.max(hi));
                }
            }
            let first = read_snapshot(&list[0])?;
            let names = shown(&first, &list[0])?;
            let size = (1000, 300 * names.len() as u32 + 50);
            let root = BitMapBackend::gif(&tmp, size, delay_ms)
                .map_err(|e| fail(e.to_string()))?
                .into_drawing_area();
            for path in list {
                let snap = read_snapshot(path)?;
                has_fields(&snap, &names, path)?;
                root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
                draw_profile_panels(&root, &snap, &names, Some(&ranges)).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
        }
        &Family::Meshless { dim } => {
            let first = read_snapshot(&list[0])?;
            let name = shown(&first, &list[0])?[0].clone();
            let mut range = (f64::INFINITY, f64::NEG_INFINITY);
            for path in list {
                let snap = read_snapshot(path)?;
                has_fields(&snap, std::slice::from_ref(&name), path)?;
                let (idx, _, _) = map_particles(&snap, dim);
                let (lo, hi) = range_of(idx.iter().map(|&i| snap.fields[&name][i]));
                range = (range.0.min(lo), range.1.max(hi));
            }
            let root = BitMapBackend::gif(&tmp, (900, 760), delay_ms)
                .map_err(|e| fail(e.to_string()))?
                .into_drawing_area();
            for path in list {
                let snap = read_snapshot(path)?;
                has_fields(&snap, std::slice::from_ref(&name), path)?;
                let (idx, h, note) = map_particles(&snap, dim);
                root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
                let titled = root
                    .titled(
                        &format!("t = {}{note}", tick(snap.time)),
                        ("sans-serif", 24).into_font(),
                    )
                    .map_err(|e| fail(e.to_string()))?;
                draw_map(&titled, &snap, &idx, h, &name, &snap.fields[&name], range)
                    .map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
        }
        Family::Gravity(units) => {
            let mut frame: Option<([f64; 3], f64)> = None;
            let mut range = (f64::INFINITY, f64::NEG_INFINITY);
            for path in list {
                let snap = read_snapshot(path)?;
                let (c, half) = frame_of(&snap);
                // The first snapshot's centre, the largest extent of any.
                let f = frame.get_or_insert((c, half));
                f.1 = f.1.max(half);
            }
            let (centre, half) = frame.expect("at least one snapshot");
            let first = read_snapshot(&list[0])?;
            let cells = grid_cells(first.points.len());
            let grids: Vec<(f64, Vec<f64>)> = list
                .iter()
                .map(|p| {
                    let snap = read_snapshot(p)?;
                    Ok((
                        snap.time,
                        surface_density(&snap, (0, 1), centre, half, cells),
                    ))
                })
                .collect::<Result<_, FileError>>()?;
            for (_, g) in &grids {
                let (lo, hi) = range_of(g.iter().copied());
                range = (range.0.min(lo), range.1.max(hi));
            }
            let root = BitMapBackend::gif(&tmp, (820, 720), delay_ms)
                .map_err(|e| fail(e.to_string()))?
                .into_drawing_area();
            for (time, grid) in &grids {
                root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
                let titled = root
                    .titled(
                        &format!(
                            "projected surface density, t = {} [{}]",
                            tick(*time),
                            units.time
                        ),
                        ("sans-serif", 24).into_font(),
                    )
                    .map_err(|e| fail(e.to_string()))?;
                draw_grid(&titled, grid, cells, (0, 1), centre, half, range, units)
                    .map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
        }
    }
    std::fs::rename(&tmp, out).map_err(|e| fail(e.to_string()))
}
