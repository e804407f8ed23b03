//! Snapshots in the formats a run writes: VTK for ParaView ([`crate::vtk`]) and, with the `hdf5`
//! feature, HDF5 in the Gadget/SWIFT layout that h5py, yt and particle-code users read
//! ([`crate::h5`]). A runner describes a snapshot once, as named columns in the run's precision
//! ([`Snapshot`]); [`write`] writes it in the configured [`SnapshotFormat`] and keeps the run's
//! list of snapshot files and its indexes (`snapshots.pvd` for the VTK files,
//! `snapshots.json` for the HDF5 ones) up to date.

use std::path::Path;

use mote_core::comm::RootStream;
use mote_core::{Precision, Real};
use serde::{Deserialize, Serialize};

use crate::files::{FileError, write_json};
use crate::vtk::{self, Field};

/// `[output] format`: which files a snapshot is written as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotFormat {
    /// VTK XML (`snapshots/snap_NNNNN.vtu` + `snapshots.pvd`), for ParaView.
    #[default]
    Vtk,
    /// HDF5 in the Gadget/SWIFT layout (`snapshots/snap_NNNNN.hdf5` + `snapshots.json`).
    Hdf5,
    /// Both, at every output time.
    Both,
}

impl SnapshotFormat {
    /// Whether VTK files are written.
    pub fn vtk(self) -> bool {
        matches!(self, SnapshotFormat::Vtk | SnapshotFormat::Both)
    }

    /// Whether HDF5 files are written.
    pub fn hdf5(self) -> bool {
        matches!(self, SnapshotFormat::Hdf5 | SnapshotFormat::Both)
    }
}

/// Whether this program was built with HDF5 support (the `hdf5` feature).
pub const HDF5_BUILT: bool = cfg!(feature = "hdf5");

/// Checks `[output] format` and `compression`: HDF5 needs the `hdf5` feature, and the
/// compression level is deflate's, 0 (none) to 9, on HDF5 files only.
pub fn validate_format(format: SnapshotFormat, compression: u8) -> Result<(), (String, String)> {
    if format.hdf5() && !HDF5_BUILT {
        return Err((
            "output.format".into(),
            "this mote was built without HDF5: rebuild with `cargo build --release --features hdf5` \
             (needs libhdf5-dev), or use format = \"vtk\""
                .into(),
        ));
    }
    if compression > 9 {
        return Err((
            "output.compression".into(),
            format!("{compression} is not a deflate level: 0 (none) to 9"),
        ));
    }
    if compression > 0 && !format.hdf5() {
        return Err((
            "output.compression".into(),
            "compresses HDF5 snapshots: it needs format = \"hdf5\" or \"both\"".into(),
        ));
    }
    Ok(())
}

/// One column of values, in the type it is stored as.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Single precision (an f32 run's positions and fields).
    F32(Vec<f32>),
    /// Double precision.
    F64(Vec<f64>),
    /// Ids.
    U64(Vec<u64>),
    /// Tags and other small unsigned integers.
    U32(Vec<u32>),
}

impl Values {
    /// Values of the run's precision `R`, stored as `R` (f32 or f64).
    pub fn real<R: Real>(values: impl Iterator<Item = R>) -> Self {
        match R::PRECISION {
            // f32 -> f64 -> f32 is exact.
            Precision::F32 => Values::F32(values.map(|v| v.as_f64() as f32).collect()),
            Precision::F64 => Values::F64(values.map(R::as_f64).collect()),
        }
    }

    /// Values computed in f64 (diagnostic fields), stored in the run's precision `R`.
    pub fn real_from_f64<R: Real>(values: &[f64]) -> Self {
        match R::PRECISION {
            Precision::F32 => Values::F32(values.iter().map(|&v| v as f32).collect()),
            Precision::F64 => Values::F64(values.to_vec()),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::U32(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as f64 (exact for every variant but ids above 2^53).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            Values::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Values::F64(v) => v.clone(),
            Values::U64(v) => v.iter().map(|&x| x as f64).collect(),
            Values::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        }
    }
}

/// One per-particle dataset: `components` values per particle (1, or 3 for vectors stored
/// `N x 3`), interleaved.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// The dataset's name in the HDF5 layout (`Coordinates`, `Density`, `momentum_x`, ...).
    pub name: String,
    /// Values per particle.
    pub components: usize,
    /// The values, particle-major.
    pub values: Values,
}

impl Column {
    /// A column of one value per particle.
    pub fn scalar(name: &str, values: Values) -> Self {
        Self {
            name: name.to_string(),
            components: 1,
            values,
        }
    }

    /// A column of three values per particle (`x0 y0 z0 x1 ...`).
    pub fn vector(name: &str, values: Values) -> Self {
        Self {
            name: name.to_string(),
            components: 3,
            values,
        }
    }
}

/// Which particles a snapshot holds: the Gadget particle type it is stored under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Gravitating bodies: `/PartType1` (Gadget's collisionless particles).
    Gravity,
    /// Meshless (fluid) particles: `/PartType0` (Gadget's gas particles).
    Meshless,
}

impl Family {
    /// The Gadget particle type (0 gas, 1 collisionless).
    pub fn part_type(self) -> usize {
        match self {
            Family::Meshless => 0,
            Family::Gravity => 1,
        }
    }
}

/// What an HDF5 snapshot holds besides the particles.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// Gravity or meshless.
    pub family: Family,
    /// The run's dimension (1-3; coordinates are always stored with three components).
    pub dimension: usize,
    /// The simulation time.
    pub time: f64,
    /// Gadget's `BoxSize`: the periodic box's side (meshless runs on a box), or 0 for an open
    /// system.
    pub box_size: f64,
    /// The unit system as Gadget's `/Units` attributes in cgs (`UnitLength_in_cm`, ...), where
    /// the units are physical; N-body and dimensionless runs store 1 and say so in `System`.
    pub units_cgs: Option<[f64; 3]>,
    /// The units' names (`length`, `mass`, `velocity`, `time`), stored as strings in `/Units`.
    pub unit_names: [String; 4],
    /// `[output] compression`: the deflate level (0 = contiguous, uncompressed datasets).
    pub compression: u8,
    /// A meshless cloud's nominal particle spacing per axis (`/Header/Spacing`), from which a
    /// run started from the file measures its search radius; empty for gravity.
    pub spacing: Vec<f64>,
    /// The resolved configuration (TOML), stored in `/Code`.
    pub config: String,
    /// The commit the program was built from.
    pub commit: String,
}

/// A snapshot: its header and its per-particle columns (positions first, as `Coordinates`).
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Time, family and provenance.
    pub header: Header,
    /// The datasets (HDF5 names), each with one entry per particle.
    pub columns: Vec<Column>,
}

/// The number in a snapshot's name `snapshots/snap_NNNNN.EXT`.
fn snapshot_number(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("snapshots/snap_")?;
    let digits = rest
        .strip_suffix(".vtu")
        .or_else(|| rest.strip_suffix(".hdf5"))?;
    digits.parse().ok()
}

/// The number the next snapshot of a run gets (one more than the highest in `list`, 0 for the
/// first), with `dir/snapshots/` created.
pub fn next_number(dir: &Path, list: &[(f64, String)]) -> Result<u64, FileError> {
    let snap_dir = dir.join("snapshots");
    std::fs::create_dir_all(&snap_dir).map_err(|e| FileError::io(&snap_dir, e))?;
    Ok(list
        .iter()
        .filter_map(|(_, f)| snapshot_number(f))
        .max()
        .map_or(0, |k| k + 1))
}

/// Writes snapshot `number` as `snapshots/snap_NNNNN.vtu` with `points` (interleaved xyz) and
/// `fields`, appends it to `list` at `time` and rewrites `snapshots.pvd`. The points and fields
/// are this rank's rows of `stream`: rank 0 writes the file ([`vtk::write_vtu_ranks`]) and the
/// index; a failure is rank 0's. Collective.
pub fn add_vtk(
    dir: &Path,
    number: u64,
    time: f64,
    list: &mut Vec<(f64, String)>,
    points: &[f64],
    fields: &[Field<'_>],
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    let name = format!("snapshots/snap_{number:05}.vtu");
    vtk::write_vtu_ranks(&dir.join(&name), Some(time), points, fields, stream)?;
    if !stream.is_root() {
        return Ok(());
    }
    list.push((time, name));
    // The .pvd is ParaView's: the VTK files only (a `both` run lists its HDF5 files too).
    let vtk: Vec<(f64, String)> = list
        .iter()
        .filter(|(_, f)| f.ends_with(".vtu"))
        .cloned()
        .collect();
    vtk::write_pvd(&dir.join("snapshots.pvd"), &vtk)
}

/// Writes snapshot `number` as `snapshots/snap_NNNNN.hdf5`, appends it to `list` at its time
/// and rewrites `snapshots.json`. The snapshot's columns are this rank's rows of `stream`: rank
/// 0 writes the file and the index; a failure is rank 0's. Collective.
pub fn add_hdf5(
    dir: &Path,
    number: u64,
    list: &mut Vec<(f64, String)>,
    snapshot: &Snapshot,
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    let name = format!("snapshots/snap_{number:05}.hdf5");
    write_hdf5_ranks(&dir.join(&name), snapshot, stream)?;
    if !stream.is_root() {
        return Ok(());
    }
    list.push((snapshot.header.time, name));
    write_index(dir, list)
}

/// `snapshots.json`: the HDF5 snapshots of `list`, in order, as `{"time": t, "file": name}`.
pub fn write_index(dir: &Path, list: &[(f64, String)]) -> Result<(), FileError> {
    let entries: Vec<serde_json::Value> = list
        .iter()
        .filter(|(_, f)| f.ends_with(".hdf5"))
        .map(|(t, f)| serde_json::json!({ "time": t, "file": f }))
        .collect();
    write_json(
        &dir.join("snapshots.json"),
        &serde_json::json!({ "snapshots": entries }),
    )
}

/// The HDF5 snapshots `snapshots.json` in `dir` lists (none without one), in its order, that
/// exist.
pub fn hdf5_index(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(bytes) = std::fs::read(dir.join("snapshots.json")) else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Vec::new();
    };
    value["snapshots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["file"].as_str().map(|f| dir.join(f)))
        .filter(|p| p.is_file())
        .collect()
}

/// An HDF5 snapshot (or a user's initial conditions in the same layout) as read.
#[derive(Clone, Debug)]
pub struct Hdf5Contents {
    /// The particle group's type (`PartTypeK`): the first present of 0-5.
    pub part_type: usize,
    /// `/Header` `Time` (0 if absent).
    pub time: f64,
    /// `/Header` `Dimension` (3 if absent: Gadget files are 3-D).
    pub dimension: usize,
    /// `/Header` `MassTable[part_type]` (0 if absent): Gadget's mass of every particle of the
    /// type when the group has no `Masses`.
    pub table_mass: f64,
    /// The group's datasets: name, shape and values.
    pub datasets: std::collections::BTreeMap<String, (Vec<usize>, Values)>,
    /// `/Code` `Configuration`, if the file is mote's.
    pub config: Option<String>,
    /// `/Header` `Spacing` (mote's meshless snapshots), if present.
    pub spacing: Option<Vec<f64>>,
}

/// Reads the first particle group of the HDF5 file at `path`, every dataset in it.
#[cfg(feature = "hdf5")]
pub fn read_hdf5(path: &Path) -> Result<Hdf5Contents, FileError> {
    crate::h5::read(path)
}

/// [`read_hdf5`] of the rows `rows(n)` of the datasets with one row per particle (`n`, the
/// rows of `Coordinates`); their shapes stay the whole datasets'.
#[cfg(feature = "hdf5")]
pub fn read_hdf5_rows(
    path: &Path,
    rows: &dyn Fn(usize) -> std::ops::Range<usize>,
) -> Result<Hdf5Contents, FileError> {
    crate::h5::read_rows(path, rows)
}

/// Without the `hdf5` feature: refused, saying how to get it.
#[cfg(not(feature = "hdf5"))]
pub fn read_hdf5_rows(
    path: &Path,
    _rows: &dyn Fn(usize) -> std::ops::Range<usize>,
) -> Result<Hdf5Contents, FileError> {
    read_hdf5(path)
}

/// Without the `hdf5` feature: refused, saying how to get it.
#[cfg(not(feature = "hdf5"))]
pub fn read_hdf5(path: &Path) -> Result<Hdf5Contents, FileError> {
    Err(FileError {
        path: path.to_path_buf(),
        message: "this mote was built without HDF5: rebuild with `--features hdf5` (needs \
                  libhdf5-dev)"
            .into(),
    })
}

/// Named per-particle values.
pub type NamedFields = Vec<(String, Vec<f64>)>;

/// The fields of an HDF5 snapshot under the names its VTK twin uses (`density`, `velocity_x`,
/// `pressure`, `mass`, `id`, ...; vectors split into `_x`, `_y`, `_z` up to the dimension),
/// with the positions as xyz triples: what `mote plot` and `mote inspect` show.
pub fn hdf5_as_fields(c: &Hdf5Contents) -> (Vec<[f64; 3]>, NamedFields) {
    let rename = |name: &str| -> String {
        match name {
            "Density" => "density",
            "Pressure" => "pressure",
            "InternalEnergy" => "internal_energy",
            "Masses" => "mass",
            "ParticleIDs" => "id",
            "Order" => "order",
            "Volume" => "volume",
            "Tag" => "tag",
            "Velocities" => "velocity",
            "Accelerations" => "acceleration",
            other => other,
        }
        .to_string()
    };
    let mut points = Vec::new();
    let mut fields = Vec::new();
    for (name, (shape, values)) in &c.datasets {
        let v = values.to_f64();
        if name == "Coordinates" {
            points = v.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
            continue;
        }
        let comps = shape.get(1).copied().unwrap_or(1);
        if comps == 1 {
            fields.push((rename(name), v));
        } else {
            for d in 0..comps.min(c.dimension.max(1)) {
                let axis = ["x", "y", "z"].get(d).copied().unwrap_or("w");
                fields.push((
                    format!("{}_{axis}", rename(name)),
                    v.iter().skip(d).step_by(comps).copied().collect(),
                ));
            }
        }
    }
    (points, fields)
}

/// Writes `snapshot` as an HDF5 file at `path` (atomically: a temporary name, then a rename).
#[cfg(feature = "hdf5")]
pub fn write_hdf5(path: &Path, snapshot: &Snapshot) -> Result<(), FileError> {
    crate::h5::write(path, snapshot)
}

/// [`write_hdf5`] of a snapshot whose columns are this rank's rows of `stream`: rank 0 writes
/// the one-process file (`h5::write_ranks`). Collective.
#[cfg(feature = "hdf5")]
pub fn write_hdf5_ranks(
    path: &Path,
    snapshot: &Snapshot,
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    crate::h5::write_ranks(path, snapshot, stream)
}

/// Without the `hdf5` feature: refused.
#[cfg(not(feature = "hdf5"))]
pub fn write_hdf5_ranks(
    path: &Path,
    snapshot: &Snapshot,
    _stream: &RootStream<'_>,
) -> Result<(), FileError> {
    write_hdf5(path, snapshot)
}

/// Without the `hdf5` feature: refused (the configuration check refuses HDF5 output before a
/// run starts, so a run never gets here).
#[cfg(not(feature = "hdf5"))]
pub fn write_hdf5(path: &Path, _snapshot: &Snapshot) -> Result<(), FileError> {
    Err(FileError {
        path: path.to_path_buf(),
        message: "this mote was built without HDF5 (the `hdf5` feature)".into(),
    })
}
