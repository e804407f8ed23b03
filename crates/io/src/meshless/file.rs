//! `[problem] kind = "file"`: a meshless state read from `/PartType0` of an HDF5 file in the
//! snapshot layout (a mote snapshot, or a file a user wrote with h5py), on the unit box of a
//! custom problem.
//!
//! The file gives `Coordinates` (`N x 3`; the first `dim` columns are used) and the state:
//! for the Euler equations the conserved `Density`, `momentum_x`... and `energy` where present
//! (a mote snapshot: the state bit for bit), else `Density`, `Velocities` (`N x 3`) and
//! `Pressure`; for a scalar equation `u`. Optional: `Volume` (default: the box's volume shared
//! by the interior particles), `Tag` (0 interior, else the boundary face; default all interior,
//! so a box with faces needs it), `ParticleIDs` (default `0..N`). Everything is checked before
//! the run directory exists; an error names the dataset and the first bad index.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mote_cloud::cloud::INTERIOR;
use mote_cloud::{Cloud, Domain};
use mote_core::Real;

use crate::files::FileError;
use crate::snapshot::{self, Values};

/// The particles of a file, read and checked, in the file's order.
#[derive(Clone, Debug)]
pub(super) struct FileParticles {
    path: PathBuf,
    /// Positions: `dim` arrays.
    positions: Vec<Vec<f64>>,
    volumes: Vec<f64>,
    tags: Vec<u32>,
    ids: Vec<u64>,
    /// The other scalar datasets as f64 (vectors split: `Velocities_0`, ...).
    columns: BTreeMap<String, Vec<f64>>,
    /// `/Header/Spacing` (a mote snapshot's), if it has `dim` entries.
    spacing: Option<Vec<f64>>,
}

impl FileParticles {
    fn err(&self, message: String) -> FileError {
        FileError {
            path: self.path.clone(),
            message,
        }
    }

    /// The dataset `name` (`/PartType0/name`; a vector's component `j` as `name_j`), every
    /// value finite.
    pub(super) fn column(&self, name: &str) -> Result<&[f64], FileError> {
        let values = self.columns.get(name).ok_or_else(|| {
            let dataset = name
                .strip_suffix(|c: char| c.is_ascii_digit())
                .and_then(|s| s.strip_suffix('_'))
                .unwrap_or(name);
            self.err(format!("dataset /PartType0/{dataset} is missing"))
        })?;
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(self.err(format!(
                "dataset /PartType0/{name}: index {i} is {}: every value must be finite",
                values[i]
            )));
        }
        Ok(values)
    }

    /// Whether the file has dataset `name`.
    pub(super) fn has(&self, name: &str) -> bool {
        self.columns.contains_key(name)
    }

    /// The dataset `name`, finite and > 0 everywhere.
    pub(super) fn positive(&self, name: &str) -> Result<&[f64], FileError> {
        let values = self.column(name)?;
        if let Some(i) = values.iter().position(|&v| v <= 0.0) {
            return Err(self.err(format!(
                "dataset /PartType0/{name}: index {i} is {}: it must be > 0",
                values[i]
            )));
        }
        Ok(values)
    }

    /// Number of particles.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The cloud of these particles in `D` dimensions on the unit box (periodic or not), with
    /// `state` (one array per conserved variable, in the file's order) and the volumes, tags and
    /// ids of the file, in Morton order as every built-in problem's cloud.
    pub(super) fn cloud<R: Real, const D: usize>(
        &self,
        periodic: bool,
        state: &[Vec<f64>],
    ) -> Result<Cloud<R, D>, FileError> {
        let domain = Domain::new_box([0.0; D], [1.0; D], [periodic; D])
            .map_err(|e| self.err(e.to_string()))?;
        let positions: [&[f64]; D] = std::array::from_fn(|d| self.positions[d].as_slice());
        let mean = {
            let interior: Vec<f64> = (0..self.len())
                .filter(|&i| self.tags[i] == INTERIOR)
                .map(|i| self.volumes[i])
                .collect();
            interior.iter().sum::<f64>() / interior.len().max(1) as f64
        };
        // A mote snapshot's own spacing (so that the search radius, and every weight, is the
        // original run's bit for bit), else the mean interior volume's side.
        let spacing: [f64; D] = match &self.spacing {
            Some(s) => std::array::from_fn(|d| s[d]),
            None => [mean.powf(1.0 / D as f64); D],
        };
        let mut cloud = Cloud::<R, D>::from_particles(
            domain,
            spacing,
            positions,
            &self.volumes,
            &self.tags,
            &self.ids,
            state.len(),
        )
        .map_err(|e| self.err(e.to_string()))?;
        for (k, values) in state.iter().enumerate() {
            for (dst, &v) in cloud.state_var_mut(k).iter_mut().zip(values) {
                *dst = R::cast(v);
            }
        }
        cloud.reorder_morton();
        Ok(cloud)
    }
}

/// Reads and checks the particles of `path` for a `dim`-dimensional problem on the unit box.
pub(super) fn read(path: &Path, dim: usize, periodic: bool) -> Result<FileParticles, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let mut c = snapshot::read_hdf5(path)?;
    if c.part_type != 0 {
        return Err(err(format!(
            "has no /PartType0 (meshless particles); its first particle group is /PartType{}",
            c.part_type
        )));
    }
    if c.config.is_some() && c.dimension != dim {
        return Err(err(format!(
            "holds a {}-D state (/Header/Dimension): the problem is {dim}-D",
            c.dimension
        )));
    }
    let Some((shape, coords)) = c.datasets.remove("Coordinates") else {
        return Err(err("dataset /PartType0/Coordinates is missing".into()));
    };
    if shape.len() != 2 || shape[1] != 3 {
        return Err(err(format!(
            "dataset /PartType0/Coordinates has shape {shape:?}: expected (N, 3)"
        )));
    }
    let n = shape[0];
    if n == 0 {
        return Err(err("holds no particles".into()));
    }
    let coords = coords.to_f64();
    let positions: Vec<Vec<f64>> = (0..dim)
        .map(|d| coords.iter().skip(d).step_by(3).copied().collect())
        .collect();
    let integers = |v: Values| -> Option<Vec<u64>> {
        match v {
            Values::U64(v) => Some(v),
            Values::U32(v) => Some(v.into_iter().map(u64::from).collect()),
            _ => None,
        }
    };
    let mut take_ints = |name: &str| -> Result<Option<Vec<u64>>, FileError> {
        match c.datasets.remove(name) {
            None => Ok(None),
            Some((shape, v)) => {
                if shape != [n] {
                    return Err(err(format!(
                        "dataset /PartType0/{name} has shape {shape:?}: expected ({n},), one per particle"
                    )));
                }
                integers(v).map(Some).ok_or_else(|| {
                    err(format!(
                        "dataset /PartType0/{name} holds floating-point values: expected integers"
                    ))
                })
            }
        }
    };
    let ids = take_ints("ParticleIDs")?.unwrap_or_else(|| (0..n as u64).collect());
    let tags: Vec<u32> = match take_ints("Tag")? {
        Some(t) => {
            if let Some(i) = t.iter().position(|&x| x > (2 * dim) as u64) {
                return Err(err(format!(
                    "dataset /PartType0/Tag: index {i} is {}: tags are 0 (interior) or a face, 1 to {}",
                    t[i],
                    2 * dim
                )));
            }
            t.into_iter().map(|x| x as u32).collect()
        }
        None => vec![INTERIOR; n],
    };
    if let Some(repeat) = crate::initial::repeated_id(&ids) {
        return Err(err(format!("dataset /PartType0/ParticleIDs: {repeat}")));
    }
    let interior = tags.iter().filter(|&&t| t == INTERIOR).count();
    if interior == 0 {
        return Err(err(
            "dataset /PartType0/Tag marks no particle interior (0)".into()
        ));
    }
    if !periodic && interior == n {
        return Err(err(
            "a box with faces needs its boundary particles: dataset /PartType0/Tag (0 interior, \
             else the face; mote's snapshots carry it), or set problem.periodic = true"
                .into(),
        ));
    }
    if periodic && interior != n {
        return Err(err(
            "dataset /PartType0/Tag marks boundary particles, but the box is periodic: set \
             problem.periodic = false (and problem.faces)"
                .into(),
        ));
    }
    for i in 0..n {
        for (d, p) in positions.iter().enumerate() {
            let x = p[i];
            if !x.is_finite() {
                return Err(err(format!(
                    "dataset /PartType0/Coordinates: index {i} (component {d}) is {x}: every value must be finite"
                )));
            }
            if tags[i] == INTERIOR && !(0.0..=1.0).contains(&x) {
                return Err(err(format!(
                    "dataset /PartType0/Coordinates: index {i} (component {d}) is {x}: interior \
                     particles lie in the unit box [0, 1]^{dim}"
                )));
            }
        }
    }
    let mut columns = BTreeMap::new();
    for (name, (shape, values)) in c.datasets {
        let v = values.to_f64();
        match shape.as_slice() {
            [rows] if *rows == n => {
                columns.insert(name, v);
            }
            [rows, k] if *rows == n => {
                for j in 0..*k {
                    columns.insert(
                        format!("{name}_{j}"),
                        v.iter().skip(j).step_by(*k).copied().collect(),
                    );
                }
            }
            _ => {
                return Err(err(format!(
                    "dataset /PartType0/{name} has shape {shape:?}: expected {n} rows, one per particle"
                )));
            }
        }
    }
    let volumes = match columns.remove("Volume") {
        Some(v) => {
            if let Some(i) = v.iter().position(|x| !(x.is_finite() && *x > 0.0)) {
                return Err(err(format!(
                    "dataset /PartType0/Volume: index {i} is {}: volumes must be finite and > 0",
                    v[i]
                )));
            }
            v
        }
        // The unit box shared by the interior particles; boundary particles alike.
        None => vec![1.0 / interior as f64; n],
    };
    Ok(FileParticles {
        path: path.to_path_buf(),
        positions,
        volumes,
        tags,
        ids,
        columns,
        spacing: c
            .spacing
            .filter(|s| s.len() == dim && s.iter().all(|x| x.is_finite() && *x > 0.0)),
    })
}
