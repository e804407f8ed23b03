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
//!
//! On several ranks each rank reads its rows of the file only (hyperslabs), every check is
//! agreed over the ranks in the one-process order (the message is one process's, with the rank
//! that found it), and the cloud is sorted along the Morton curve over the ranks: each rank
//! holds its range of the one-process cloud (decision 0035).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mote_cloud::cloud::{INTERIOR, LatticeOptions};
use mote_cloud::{Cloud, CloudError, Domain};
use mote_core::Real;
use mote_core::comm::{self, Comm};
use mote_core::sum::ExactSum;

use crate::files::{FileError, agree_rows};
use crate::snapshot::{self, Values};

/// The particles of a file, read and checked, in the file's order: every particle, or on
/// several ranks this rank's rows `first..first + len` of `total`.
#[derive(Clone, Debug)]
pub(super) struct FileParticles {
    path: PathBuf,
    /// The ranks sharing the file (one process: every row).
    comm: Arc<dyn Comm>,
    /// The file's index of the first row held.
    first: usize,
    /// The particles in the file.
    total: usize,
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

    /// Agrees a check of the rows over the ranks ([`agree_rows`]). Collective.
    fn agreed(&self, failure: Option<String>) -> Result<(), FileError> {
        agree_rows(self.comm.as_ref(), failure).map_err(|m| self.err(m))
    }

    /// The dataset `name` (`/PartType0/name`; a vector's component `j` as `name_j`), every
    /// value finite. Collective.
    pub(super) fn column(&self, name: &str) -> Result<&[f64], FileError> {
        let values = self.columns.get(name).ok_or_else(|| {
            let dataset = name
                .strip_suffix(|c: char| c.is_ascii_digit())
                .and_then(|s| s.strip_suffix('_'))
                .unwrap_or(name);
            self.err(format!("dataset /PartType0/{dataset} is missing"))
        })?;
        self.agreed(values.iter().position(|v| !v.is_finite()).map(|i| {
            format!(
                "dataset /PartType0/{name}: index {} is {}: every value must be finite",
                self.first + i,
                values[i]
            )
        }))?;
        Ok(values)
    }

    /// Whether the file has dataset `name`.
    pub(super) fn has(&self, name: &str) -> bool {
        self.columns.contains_key(name)
    }

    /// The dataset `name`, finite and > 0 everywhere. Collective.
    pub(super) fn positive(&self, name: &str) -> Result<&[f64], FileError> {
        let values = self.column(name)?;
        self.agreed(values.iter().position(|&v| v <= 0.0).map(|i| {
            format!(
                "dataset /PartType0/{name}: index {} is {}: it must be > 0",
                self.first + i,
                values[i]
            )
        }))?;
        Ok(values)
    }

    /// Number of particles held (this rank's rows).
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Number of particles in the file.
    pub(super) fn total(&self) -> usize {
        self.total
    }

    /// The state of the file's first particle (`state`: one array per variable of the rows
    /// held), on every rank. Collective.
    pub(super) fn first_state(&self, state: &[Vec<f64>]) -> Vec<f64> {
        let mine: Vec<f64> = state
            .iter()
            .map(|v| v.first().copied().unwrap_or(0.0))
            .collect();
        let bytes = comm::broadcast_bytes(self.comm.as_ref(), 0, bytemuck::cast_slice(&mine));
        bytemuck::pod_collect_to_vec(&bytes)
    }

    /// A small cloud standing in for the file's to price a run (the memory per particle): a
    /// lattice of `resolution` per unit length on the file's box, with `layers` boundary layers
    /// where it has faces, every particle in the state `sample`. The same on every rank
    /// (built alone; the file's cloud is split between the ranks).
    pub(super) fn prototype<R: Real, const D: usize>(
        periodic: bool,
        resolution: usize,
        layers: usize,
        sample: &[f64],
    ) -> Result<Cloud<R, D>, CloudError> {
        let domain = Domain::new_box([0.0; D], [1.0; D], [periodic; D])?;
        let options = LatticeOptions {
            spacing: 1.0 / resolution.max(2) as f64,
            jitter: 0.0,
            seed: 0,
            boundary_layers: layers,
        };
        let mut cloud = Cloud::<R, D>::lattice(domain, options, sample.len())?;
        for (k, &v) in sample.iter().enumerate() {
            cloud.state_var_mut(k).fill(R::cast(v));
        }
        Ok(cloud)
    }

    /// The cloud of these particles in `D` dimensions on the unit box (periodic or not), with
    /// `state` (one array per conserved variable, in the file's order) and the volumes, tags and
    /// ids of the file, in Morton order as every built-in problem's cloud: on several ranks
    /// this rank's range of the one-process cloud (`halo::reorder`). Collective.
    pub(super) fn cloud<R: Real, const D: usize>(
        &self,
        periodic: bool,
        state: &[Vec<f64>],
    ) -> Result<Cloud<R, D>, FileError> {
        let domain = Domain::new_box([0.0; D], [1.0; D], [periodic; D])
            .map_err(|e| self.err(e.to_string()))?;
        let positions: [&[f64]; D] = std::array::from_fn(|d| self.positions[d].as_slice());
        // The mean interior volume: an exact sum over the ranks, rounded once.
        let mean = {
            let mut sum = [ExactSum::new()];
            let mut count = 0u64;
            for i in (0..self.len()).filter(|&i| self.tags[i] == INTERIOR) {
                sum[0].add(self.volumes[i]);
                count += 1;
            }
            ExactSum::reduce(&mut sum, self.comm.as_ref());
            sum[0].value() / comm::sum_of(self.comm.as_ref(), count).max(1) as f64
        };
        // A mote snapshot's own spacing (so that the search radius, and every weight, is the
        // original run's bit for bit), else the mean interior volume's side.
        let spacing: [f64; D] = match &self.spacing {
            Some(s) => std::array::from_fn(|d| s[d]),
            None => [mean.powf(1.0 / D as f64); D],
        };
        let made = Cloud::<R, D>::from_particles(
            domain,
            spacing,
            positions,
            &self.volumes,
            &self.tags,
            &self.ids,
            state.len(),
        );
        self.agreed(made.as_ref().err().map(ToString::to_string))?;
        let mut cloud = made.map_err(|e| self.err(e.to_string()))?;
        for (k, values) in state.iter().enumerate() {
            for (dst, &v) in cloud.state_var_mut(k).iter_mut().zip(values) {
                *dst = R::cast(v);
            }
        }
        if self.comm.size() > 1 {
            mote_cloud::halo::reorder(&mut cloud, self.first, self.total, self.comm.as_ref())
                .map_err(|e| self.err(e.to_string()))?;
        } else {
            cloud.reorder_morton();
        }
        Ok(cloud)
    }
}

/// Reads and checks the particles of `path` for a `dim`-dimensional problem on the unit box:
/// on the ranks of `comm` (one process: `SingleProcess`), each rank its rows
/// (`halo::own_ranges`). Collective: a rank may fail to read where the others read, and every
/// check of the rows is agreed.
pub(super) fn read(
    path: &Path,
    dim: usize,
    periodic: bool,
    comm: Arc<dyn Comm>,
) -> Result<FileParticles, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let agreed = |failure: Option<String>| agree_rows(comm.as_ref(), failure).map_err(err);
    let rows = |n: usize| mote_cloud::halo::own_ranges(n, comm.size())[comm.rank()].clone();
    let read = snapshot::read_hdf5_rows(path, &rows);
    agreed(read.as_ref().err().map(|e| e.message.clone()))?;
    let mut c = read?;
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
    // The rows held (their index in the file from `first`) and the file's count `n`.
    let first = rows(n).start;
    let coords = coords.to_f64();
    let len = coords.len() / 3;
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
    let ids =
        take_ints("ParticleIDs")?.unwrap_or_else(|| (first as u64..(first + len) as u64).collect());
    let tags: Vec<u32> = match take_ints("Tag")? {
        Some(t) => {
            agreed(t.iter().position(|&x| x > (2 * dim) as u64).map(|i| {
                format!(
                    "dataset /PartType0/Tag: index {} is {}: tags are 0 (interior) or a face, 1 to {}",
                    first + i,
                    t[i],
                    2 * dim
                )
            }))?;
            t.into_iter().map(|x| x as u32).collect()
        }
        None => vec![INTERIOR; len],
    };
    if let Some(repeat) = crate::initial::repeated_id_over(&ids, first, comm.as_ref()) {
        return Err(err(format!("dataset /PartType0/ParticleIDs: {repeat}")));
    }
    let interior = comm::sum_of(
        comm.as_ref(),
        tags.iter().filter(|&&t| t == INTERIOR).count() as u64,
    ) as usize;
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
    let bad_position = (0..len).find_map(|i| {
        positions.iter().enumerate().find_map(|(d, p)| {
            let (x, at) = (p[i], first + i);
            if !x.is_finite() {
                return Some(format!(
                    "dataset /PartType0/Coordinates: index {at} (component {d}) is {x}: every value must be finite"
                ));
            }
            (tags[i] == INTERIOR && !(0.0..=1.0).contains(&x)).then(|| {
                format!(
                    "dataset /PartType0/Coordinates: index {at} (component {d}) is {x}: interior \
                     particles lie in the unit box [0, 1]^{dim}"
                )
            })
        })
    });
    agreed(bad_position)?;
    let mut columns = BTreeMap::new();
    for (name, (shape, values)) in c.datasets {
        let v = values.to_f64();
        match shape.as_slice() {
            [whole] if *whole == n => {
                columns.insert(name, v);
            }
            [whole, k] if *whole == n => {
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
            agreed(v.iter().position(|x| !(x.is_finite() && *x > 0.0)).map(|i| {
                format!(
                    "dataset /PartType0/Volume: index {} is {}: volumes must be finite and > 0",
                    first + i,
                    v[i]
                )
            }))?;
            v
        }
        // The unit box shared by the interior particles; boundary particles alike.
        None => vec![1.0 / interior as f64; len],
    };
    Ok(FileParticles {
        path: path.to_path_buf(),
        comm,
        first,
        total: n,
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

#[cfg(all(test, feature = "hdf5"))]
mod tests {
    use super::*;
    use mote_core::comm::{SingleProcess, on_thread_ranks, thread_ranks};

    /// A 1-D periodic gas of `n` particles, `edit` applied to its datasets (`Tag` and
    /// `ParticleIDs` written where `edit` fills them).
    fn write(path: &Path, n: usize, edit: impl Fn(&str, &mut Vec<f64>)) {
        let file = hdf5::File::create(path).unwrap();
        let g = file.create_group("PartType0").unwrap();
        for (name, comps) in [
            ("Coordinates", 3),
            ("Density", 1),
            ("Pressure", 1),
            ("Velocities", 3),
            ("Tag", 1),
            ("ParticleIDs", 1),
        ] {
            let mut v: Vec<f64> = (0..n * comps)
                .map(|i| match name {
                    // Shuffled positions: the Morton order is not the file's.
                    "Coordinates" if i % 3 == 0 => ((i / 3 * 389) % n) as f64 / n as f64,
                    "Density" | "Pressure" => 1.0 + (i as f64 * 0.1).sin().abs(),
                    _ => 0.0,
                })
                .collect();
            if matches!(name, "Tag" | "ParticleIDs") {
                v.clear();
            }
            edit(name, &mut v);
            if v.is_empty() {
                continue;
            }
            let shape = if comps == 1 {
                vec![v.len()]
            } else {
                vec![v.len() / comps, comps]
            };
            if matches!(name, "Tag" | "ParticleIDs") {
                let ints: Vec<u64> = v.iter().map(|&x| x as u64).collect();
                g.new_dataset::<u64>()
                    .shape(shape)
                    .create(name)
                    .unwrap()
                    .write_raw(&ints)
                    .unwrap();
            } else {
                g.new_dataset::<f64>()
                    .shape(shape)
                    .create(name)
                    .unwrap()
                    .write_raw(&v)
                    .unwrap();
            }
        }
    }

    /// The file's gas read on `comm`, its density and pressure checked, as a cloud.
    fn gas(path: &Path, comm: Arc<dyn Comm>) -> Result<Cloud<f64, 1>, FileError> {
        let f = read(path, 1, true, comm)?;
        let state = vec![
            f.positive("Density")?.to_vec(),
            f.column("Velocities_0")?.to_vec(),
            f.positive("Pressure")?.to_vec(),
        ];
        f.cloud::<f64, 1>(true, &state)
    }

    /// Read by rows on 1 to 4 ranks, the clouds are the ranks' ranges of the one-process
    /// cloud (Morton order: positions, ids, state); a bad file gets one process's message on
    /// every rank: the first failing check (a later check's earlier index does not win), the
    /// smallest repeated id.
    #[test]
    fn a_file_read_by_rows_is_the_one_process_cloud_and_fails_as_one_process() {
        let tmp = tempfile::tempdir().unwrap();
        let n = 1_100;
        let good = tmp.path().join("good.hdf5");
        write(&good, n, |_, _| {});
        let one = gas(&good, Arc::new(SingleProcess)).unwrap();
        for k in 1..=4 {
            let ranks = thread_ranks(k);
            let parts = on_thread_ranks(&ranks, |c| gas(&good, c).unwrap());
            let ranges = mote_cloud::halo::own_ranges(n, k);
            for (part, rows) in parts.iter().zip(ranges) {
                assert_eq!(part.ids(), &one.ids()[rows.clone()], "{k} ranks");
                for (i, r) in rows.clone().enumerate() {
                    assert_eq!(part.position_of(i), one.position_of(r));
                }
                for v in 0..3 {
                    assert_eq!(part.state(v), &one.state(v)[rows.clone()]);
                }
            }
        }
        type Edit = Box<dyn Fn(&str, &mut Vec<f64>)>;
        let cases: Vec<(&str, Edit, &str)> = vec![
            (
                "density",
                Box::new(|name, v| match name {
                    "Density" => v[1_000] = f64::NAN,
                    "Pressure" => v[3] = -1.0,
                    _ => {}
                }),
                "Density: index 1000 is NaN",
            ),
            (
                "tag",
                Box::new(|name, v| match name {
                    "Tag" => {
                        *v = vec![0.0; 1_100];
                        v[1_050] = 7.0;
                    }
                    "Coordinates" => v[3 * 2] = 5.0,
                    _ => {}
                }),
                "Tag: index 1050 is 7",
            ),
            (
                "ids",
                Box::new(|name, v| {
                    if name == "ParticleIDs" {
                        *v = (0..1_100).map(|i| (i + 10) as f64).collect();
                        (v[40], v[900], v[5], v[7]) = (3.0, 3.0, 500.0, 500.0);
                    }
                }),
                "ParticleIDs: index 900 repeats id 3 of index 40",
            ),
        ];
        for (name, edit, expected) in cases {
            let path = tmp.path().join(format!("{name}.hdf5"));
            write(&path, n, edit);
            let e = gas(&path, Arc::new(SingleProcess)).unwrap_err().to_string();
            assert!(e.contains(expected), "{name}: {e}");
            for k in 2..=4 {
                let ranks = thread_ranks(k);
                let errors = on_thread_ranks(&ranks, |c| gas(&path, c).unwrap_err().to_string());
                for e in &errors {
                    assert!(e.contains(expected), "{name}, {k} ranks: {e}");
                    assert_eq!(e, &errors[0], "{name}, {k} ranks: every rank's message");
                }
            }
        }
    }
}
