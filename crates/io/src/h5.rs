//! HDF5 snapshots in the Gadget/SWIFT layout (the `hdf5` feature; hdf5-metno over the system's
//! libhdf5, decision 0025).
//!
//! A file holds `/Header` with the attributes yt's Gadget-HDF5 reader requires
//! (`NumPart_ThisFile`, `NumPart_Total`, `NumPart_Total_HighWord`, `MassTable`, `BoxSize`,
//! `Time`, `Redshift`, `NumFilesPerSnapshot`, `Omega0`, `OmegaLambda`, `HubbleParam`, the
//! `Flag_*` and mote's `Dimension`), `/Units` (Gadget's cgs attributes and the units' names),
//! `/Code` (the program, its version and commit, the resolved configuration) and one particle
//! group: `/PartType1` for gravitating bodies, `/PartType0` for meshless particles, with a
//! dataset per column of the [`Snapshot`] (vectors `N x 3`), in the run's precision.

use std::collections::BTreeMap;
use std::path::Path;

use hdf5::types::{FloatSize, TypeDescriptor, VarLenUnicode};
use hdf5::{Group, H5Type, Location};

use mote_core::comm::RootStream;

use crate::files::{FileError, partial_path};
use crate::snapshot::{Hdf5Contents as Read, Snapshot, Values};

/// Rows per chunk of a compressed dataset: 64 Ki rows (0.5-1.5 MiB per chunk of f64), large
/// enough that deflate and the chunk index cost little per byte, small enough that a reader of
/// a few particles decompresses little.
const CHUNK_ROWS: usize = 1 << 16;

/// Writes `snapshot` at `path`: into `path.partial`, renamed to `path` once HDF5 has closed the
/// file, so a killed write leaves no file that looks complete (and an existing one unchanged).
pub fn write(path: &Path, snapshot: &Snapshot) -> Result<(), FileError> {
    let n = snapshot
        .columns
        .first()
        .map_or(0, |c| c.values.len() / c.components.max(1));
    write_ranks(path, snapshot, &RootStream::one(n))
}

/// [`write`] of a snapshot whose columns hold this rank's rows (`stream`: rank `r`'s follow
/// those of the ranks below it): rank 0 writes the one file, each dataset's rows arriving rank
/// after rank ([`RootStream::stream`]) and written in whole chunks, so that the file is the one
/// process's, byte for byte, and no rank holds more than its rows and one group of pieces. A
/// failure is rank 0's (the other ranks return `Ok`). Collective.
pub fn write_ranks(
    path: &Path,
    snapshot: &Snapshot,
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    let tmp = partial_path(path);
    let mut file = if stream.is_root() {
        write_header(&tmp, snapshot, stream.total()).map(Some)
    } else {
        Ok(None)
    };
    let level = snapshot.header.compression;
    for c in &snapshot.columns {
        let (name, k) = (c.name.as_str(), c.components);
        match &c.values {
            Values::F32(v) => column(&mut file, name, v, k, level, stream),
            Values::F64(v) => column(&mut file, name, v, k, level, stream),
            Values::U64(v) => column(&mut file, name, v, k, level, stream),
            Values::U32(v) => column(&mut file, name, v, k, level, stream),
        }
    }
    let result = match file {
        Ok(None) => return Ok(()),
        Ok(Some((file, _))) => file.close(),
        Err(e) => Err(e),
    }
    .map_err(|e| FileError {
        path: path.to_path_buf(),
        message: format!("HDF5: {e}"),
    })
    .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| FileError::io(path, e)));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The file at `path` with its header, units and code groups, and its (empty) particle group
/// for `n` particles.
fn write_header(path: &Path, s: &Snapshot, n: usize) -> hdf5::Result<(hdf5::File, Group)> {
    let h = &s.header;
    let file = hdf5::File::create(path)?;
    let pt = h.family.part_type();
    let mut low = [0u32; 6];
    let mut high = [0u32; 6];
    low[pt] = (n as u64 & 0xffff_ffff) as u32;
    high[pt] = (n as u64 >> 32) as u32;

    let header = file.create_group("Header")?;
    array_attr(&header, "NumPart_ThisFile", &low)?;
    array_attr(&header, "NumPart_Total", &low)?;
    array_attr(&header, "NumPart_Total_HighWord", &high)?;
    array_attr(&header, "MassTable", &[0.0f64; 6])?;
    scalar_attr(&header, "Time", h.time)?;
    scalar_attr(&header, "Redshift", 0.0f64)?;
    scalar_attr(&header, "BoxSize", h.box_size)?;
    scalar_attr(&header, "NumFilesPerSnapshot", 1i32)?;
    scalar_attr(&header, "Omega0", 0.0f64)?;
    scalar_attr(&header, "OmegaLambda", 0.0f64)?;
    scalar_attr(&header, "HubbleParam", 1.0f64)?;
    for flag in [
        "Flag_Sfr",
        "Flag_Cooling",
        "Flag_Feedback",
        "Flag_StellarAge",
        "Flag_Metals",
        "Flag_Entropy_ICs",
    ] {
        scalar_attr(&header, flag, 0i32)?;
    }
    let double = s.columns.iter().any(|c| matches!(c.values, Values::F64(_)));
    scalar_attr(&header, "Flag_DoublePrecision", i32::from(double))?;
    scalar_attr(&header, "Dimension", h.dimension as i32)?;
    if !h.spacing.is_empty() {
        array_attr(&header, "Spacing", &h.spacing)?;
    }

    let units = file.create_group("Units")?;
    let [l, m, v] = h.units_cgs.unwrap_or([1.0; 3]);
    scalar_attr(&units, "UnitLength_in_cm", l)?;
    scalar_attr(&units, "UnitMass_in_g", m)?;
    scalar_attr(&units, "UnitVelocity_in_cm_per_s", v)?;
    scalar_attr(&units, "UnitTime_in_s", l / v)?;
    scalar_attr(&units, "UnitEnergy_in_cgs", m * v * v)?;
    let system = if h.units_cgs.is_some() {
        "physical (cgs values above)"
    } else {
        "the run's own units (the cgs values above are 1)"
    };
    string_attr(&units, "System", system)?;
    for (key, name) in ["Length", "Mass", "Velocity", "Time"]
        .iter()
        .zip(&h.unit_names)
    {
        string_attr(&units, key, name)?;
    }

    let code = file.create_group("Code")?;
    string_attr(&code, "Code", "mote")?;
    string_attr(&code, "Version", env!("CARGO_PKG_VERSION"))?;
    string_attr(&code, "Commit", &h.commit)?;
    string_attr(&code, "Configuration", &h.config)?;

    let group = file.create_group(&format!("PartType{pt}"))?;
    Ok((file, group))
}

/// One dataset of `components` values per particle (`N` or `N x components`; chunked, shuffled
/// and deflated at `level` when `level > 0`), from every rank's rows `mine`: created and written
/// on rank 0 in whole chunks as the rows arrive (where `file` holds the open file; a failure is
/// kept in it and the rows still taken). Collective.
fn column<T: H5Type + bytemuck::Pod>(
    file: &mut hdf5::Result<Option<(hdf5::File, Group)>>,
    name: &str,
    mine: &[T],
    components: usize,
    level: u8,
    stream: &RootStream<'_>,
) {
    let n = stream.total();
    let k = components.max(1);
    let mut dataset = match file {
        Ok(Some((_, group))) => Some(create_dataset::<T>(group, name, n, k, level)),
        _ => None,
    };
    let mut pending: Vec<T> = Vec::new();
    let mut written = 0;
    // Whole chunks only (and the rest at the end): each chunk is compressed once and stored
    // in order, as one process writes it, whatever the pieces' sizes (HDF5 would merge a chunk
    // written in parts, decompressing it again).
    let mut flush = |pending: &mut Vec<T>, all: bool, dataset: &mut Option<hdf5::Result<_>>| {
        let rows = pending.len() / k;
        let take = if all {
            rows
        } else {
            rows / CHUNK_ROWS * CHUNK_ROWS
        };
        if take == 0 {
            return;
        }
        if let Some(Ok(ds)) = dataset
            && let Err(e) = write_rows(ds, &pending[..take * k], written, k)
        {
            *dataset = Some(Err(e));
        }
        pending.drain(..take * k);
        written += take;
    };
    stream.stream(
        bytemuck::cast_slice(mine),
        k * size_of::<T>(),
        |_, bytes| {
            if !matches!(dataset, Some(Ok(_))) {
                return;
            }
            // Copied once into the typed buffer (the piece's bytes need not be aligned for `T`).
            let at = pending.len();
            pending.resize(at + bytes.len() / size_of::<T>(), T::zeroed());
            bytemuck::cast_slice_mut::<T, u8>(&mut pending[at..]).copy_from_slice(bytes);
            flush(&mut pending, false, &mut dataset);
        },
    );
    flush(&mut pending, true, &mut dataset);
    if let Some(Err(e)) = dataset {
        *file = Err(e);
    }
}

/// Creates dataset `name` of `n` rows of `k` values in `group`.
fn create_dataset<T: H5Type>(
    group: &Group,
    name: &str,
    n: usize,
    k: usize,
    level: u8,
) -> hdf5::Result<hdf5::Dataset> {
    let shape = |rows: usize| if k == 1 { vec![rows] } else { vec![rows, k] };
    let mut builder = group.new_dataset::<T>().shape(shape(n));
    if level > 0 && n > 0 {
        builder = builder
            .chunk(shape(n.min(CHUNK_ROWS)))
            .shuffle()
            .deflate(level);
    }
    builder.create(name)
}

/// Writes `data` (rows of `k` values) into `ds` from row `first`.
fn write_rows<T: H5Type>(
    ds: &hdf5::Dataset,
    data: &[T],
    first: usize,
    k: usize,
) -> hdf5::Result<()> {
    let rows = data.len() / k;
    if k == 1 {
        return ds.write_slice(data, first..first + rows);
    }
    let view = ndarray::ArrayView2::from_shape((rows, k), data)
        .map_err(|e| hdf5::Error::from(e.to_string()))?;
    ds.write_slice(view, ndarray::s![first..first + rows, ..])
}

fn scalar_attr<T: H5Type>(loc: &Location, name: &str, value: T) -> hdf5::Result<()> {
    loc.new_attr::<T>().create(name)?.write_scalar(&value)
}

fn array_attr<T: H5Type>(loc: &Location, name: &str, values: &[T]) -> hdf5::Result<()> {
    loc.new_attr::<T>()
        .shape(values.len())
        .create(name)?
        .write_raw(values)
}

fn string_attr(loc: &Location, name: &str, value: &str) -> hdf5::Result<()> {
    // A string with an interior NUL cannot be stored; none of ours has one.
    let v: VarLenUnicode = value
        .replace('\0', " ")
        .parse()
        .map_err(|e| hdf5::Error::from(format!("{e}")))?;
    loc.new_attr::<VarLenUnicode>()
        .create(name)?
        .write_scalar(&v)
}

/// The rows `part` of dataset `ds` of `shape` (one or two dimensions; a hyperslab), or with
/// `None` the whole dataset, as a flat array in row-major order.
fn read_part<T: H5Type + Clone>(
    ds: &hdf5::Dataset,
    shape: &[usize],
    part: Option<std::ops::Range<usize>>,
) -> hdf5::Result<Vec<T>> {
    match part {
        None => ds.read_raw::<T>(),
        Some(r) if r.is_empty() => Ok(Vec::new()),
        Some(r) if shape.len() == 1 => Ok(ds
            .read_slice_1d::<T, _>(ndarray::s![r])?
            .into_iter()
            .collect()),
        Some(r) => Ok(ds
            .read_slice_2d::<T, _>(ndarray::s![r, ..])?
            .into_iter()
            .collect()),
    }
}

/// Reads the first particle group of the HDF5 file at `path` with every dataset in it.
pub fn read(path: &Path) -> Result<Read, FileError> {
    read_rows(path, &|n| 0..n)
}

/// [`read`] of the rows `rows(n)` only of the datasets with one row per particle (`n` rows,
/// as `Coordinates`; a hyperslab of each), the others whole (their shapes are refused by the
/// callers). What each rank of a run on several reads: its rows, never the whole file.
pub fn read_rows(
    path: &Path,
    rows: &dyn Fn(usize) -> std::ops::Range<usize>,
) -> Result<Read, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let h5 = |e: hdf5::Error| err(format!("not a readable HDF5 snapshot: {e}"));
    let file = hdf5::File::open(path).map_err(h5)?;
    let Some(part_type) = (0..6).find(|k| file.link_exists(&format!("PartType{k}"))) else {
        return Err(err(
            "no particle group: expected /PartType0 (meshless particles) or /PartType1 \
             (gravitating bodies)"
                .into(),
        ));
    };
    let header = file.group("Header").ok();
    let attr_f64 = |name: &str| -> Option<Vec<f64>> {
        header
            .as_ref()
            .and_then(|h| h.attr(name).ok())
            .and_then(|a| a.read_raw::<f64>().ok())
    };
    let time = attr_f64("Time")
        .and_then(|v| v.first().copied())
        .unwrap_or(0.0);
    let dimension = attr_f64("Dimension")
        .and_then(|v| v.first().copied())
        .map_or(3, |d| d as usize);
    let table_mass = attr_f64("MassTable")
        .and_then(|v| v.get(part_type).copied())
        .unwrap_or(0.0);
    let config = file
        .group("Code")
        .ok()
        .and_then(|c| c.attr("Configuration").ok())
        .and_then(|a| a.read_scalar::<VarLenUnicode>().ok())
        .map(|s| s.as_str().to_string());
    let spacing = attr_f64("Spacing");
    let group = file.group(&format!("PartType{part_type}")).map_err(h5)?;
    // The particle count: the rows of `Coordinates` (absent or empty: every dataset whole).
    let n = group
        .dataset("Coordinates")
        .ok()
        .and_then(|c| c.shape().first().copied());
    let range = n.map(rows);
    let mut datasets = BTreeMap::new();
    for name in group.member_names().map_err(h5)? {
        let Ok(ds) = group.dataset(&name) else {
            continue;
        };
        let shape = ds.shape();
        // This rank's rows of a dataset with one row per particle, else the whole dataset.
        let per_row = n.is_some() && shape.first() == n.as_ref() && matches!(shape.len(), 1 | 2);
        let part = range
            .clone()
            .filter(|r| per_row && *r != (0..n.unwrap_or(0)));
        let values = match ds.dtype().and_then(|t| t.to_descriptor()).map_err(h5)? {
            TypeDescriptor::Float(FloatSize::U4) => {
                Values::F32(read_part::<f32>(&ds, &shape, part).map_err(h5)?)
            }
            TypeDescriptor::Float(_) => {
                Values::F64(read_part::<f64>(&ds, &shape, part).map_err(h5)?)
            }
            TypeDescriptor::Unsigned(_) | TypeDescriptor::Integer(_) => {
                Values::U64(read_part::<u64>(&ds, &shape, part).map_err(h5)?)
            }
            other => {
                return Err(err(format!(
                    "dataset /PartType{part_type}/{name} has type {other}: expected floating-point or integer values"
                )));
            }
        };
        datasets.insert(name, (shape, values));
    }
    Ok(Read {
        part_type,
        time,
        dimension,
        table_mass,
        datasets,
        config,
        spacing,
    })
}
