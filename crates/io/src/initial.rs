//! Initial conditions from a file (`[initial_conditions] kind = "file"`): an HDF5 file in the
//! layout mote's snapshots use (`/PartType1` with `Coordinates`, `Velocities`, `Masses` or
//! `/Header/MassTable`, optionally `ParticleIDs`; the `hdf5` feature), or a text table for small
//! systems (`.csv`/`.txt`: a header line naming the columns `x y z vx vy vz m` and optionally
//! `id`, separated by commas or white space; `#` starts a comment).
//!
//! Every value is checked before anything is allocated for the run or written: a missing
//! dataset or column, datasets of different lengths, a NaN or infinite value, a mass that is not
//! positive, a repeated id. The error names the file, the dataset (or line) and the first bad
//! index, and the program exits with status 2 (a mistake in the input), having written nothing.

use std::ops::Range;
use std::path::Path;

use mote_core::comm::{self, Comm, SingleProcess};

use crate::files::{FileError, agree_rows};

/// Bodies read from a file, in the file's (the run's) units, as f64.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bodies {
    /// Positions, `x`, `y`, `z` arrays.
    pub position: [Vec<f64>; 3],
    /// Velocities.
    pub velocity: [Vec<f64>; 3],
    /// Masses (> 0).
    pub mass: Vec<f64>,
    /// Ids, unique (`0..n` when the file has none).
    pub ids: Vec<u64>,
    /// The file's time (`/Header/Time`; 0 for a text file).
    pub time: f64,
}

impl Bodies {
    /// Number of bodies.
    pub fn len(&self) -> usize {
        self.mass.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.mass.is_empty()
    }
}

/// A rank's rows of the bodies of a file: the rows `first..first + bodies.len()` of `total`.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyRows {
    /// The rows' bodies (the file's time with them).
    pub bodies: Bodies,
    /// The file's index of the first.
    pub first: usize,
    /// The bodies in the file.
    pub total: usize,
}

/// Reads and checks the bodies in `path` (HDF5 by the extension `.hdf5`/`.h5`, text by
/// `.csv`/`.txt`).
pub fn read_bodies(path: &Path) -> Result<Bodies, FileError> {
    Ok(read_bodies_rows(path, &SingleProcess)?.bodies)
}

/// [`read_bodies`] on the ranks of `comm`, each keeping its even range of the file's bodies
/// (`comm::even_ranges`): an HDF5 file is read by rows (a hyperslab of each dataset), a text
/// table (small systems) whole and cut. Each check runs on the rows and is agreed over the ranks
/// before the next, so a failure is the one process's (the first bad index of the first failing
/// check), named with the rank that found it; repeated ids are found by sending each id to a
/// rank chosen by its value. No rank holds every body. Collective.
pub fn read_bodies_rows(path: &Path, comm: &dyn Comm) -> Result<BodyRows, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let rows = |n: usize| comm::even_ranges(n, comm.size())[comm.rank()].clone();
    let read = match ext.as_str() {
        "hdf5" | "h5" => read_hdf5(path, &rows),
        "csv" | "txt" => read_text(path).map(|mut b| {
            let total = b.len();
            let r = rows(total);
            for v in b.position.iter_mut().chain(b.velocity.iter_mut()) {
                *v = v[r.clone()].to_vec();
            }
            b.mass = b.mass[r.clone()].to_vec();
            b.ids = b.ids[r.clone()].to_vec();
            BodyRows {
                bodies: b,
                first: r.start,
                total,
            }
        }),
        _ => Err(err(
            "unknown kind of file: expected .hdf5 or .h5 (HDF5, the snapshot layout) or .csv \
             or .txt (a table with the columns x y z vx vy vz m [id])"
                .into(),
        )),
    };
    // A rank may fail to read where the others read: agreed before the checks' collectives.
    agree_rows(comm, read.as_ref().err().map(|e| e.message.clone())).map_err(err)?;
    let part = read?;
    check(&part, &ext, comm).map_err(err)?;
    Ok(part)
}

/// The checks every file passes, with the quantities named as the file calls them. Collective.
fn check(part: &BodyRows, ext: &str, comm: &dyn Comm) -> Result<(), String> {
    let hdf5 = ext == "hdf5" || ext == "h5";
    let names = if hdf5 {
        [
            "dataset /PartType1/Coordinates",
            "dataset /PartType1/Velocities",
            "dataset /PartType1/Masses",
            "dataset /PartType1/ParticleIDs",
        ]
    } else {
        ["columns x y z", "columns vx vy vz", "column m", "column id"]
    };
    check_rows(&part.bodies, part.first, part.total, names, comm)
}

/// The checks every source of bodies passes (a file, or arrays from the Python module):
/// finite values, positive masses, unique ids, at least one body. `names`: how the source calls
/// the positions, velocities, masses and ids, for the message.
pub fn check_bodies(b: &Bodies, names: [&str; 4]) -> Result<(), String> {
    check_rows(b, 0, b.len(), names, &SingleProcess)
}

/// [`check_bodies`] of a rank's rows `first..first + b.len()` of `total` bodies: each check
/// agreed over the ranks in turn (the lowest failing rank holds the lowest bad index), so the
/// message is one process's. Collective.
fn check_rows(
    b: &Bodies,
    first: usize,
    total: usize,
    names: [&str; 4],
    comm: &dyn Comm,
) -> Result<(), String> {
    let [pos, vel, mass, ids] = names;
    if total == 0 {
        return Err("holds no bodies".into());
    }
    let agreed = |failure: Option<String>| agree_rows(comm, failure);
    for (what, arrays) in [(pos, &b.position), (vel, &b.velocity)] {
        agreed(
            (0..b.len())
                .flat_map(|i| (0..3).map(move |d| (i, d)))
                .map(|(i, d)| (i, d, arrays[d][i]))
                .find(|(_, _, v)| !v.is_finite())
                .map(|(i, d, v)| {
                    format!(
                        "{what}: index {} (component {}) is {v}: every value must be finite",
                        first + i,
                        ["x", "y", "z"][d]
                    )
                }),
        )?;
    }
    agreed(
        b.mass
            .iter()
            .enumerate()
            .find(|(_, m)| !(m.is_finite() && **m > 0.0))
            .map(|(i, m)| {
                format!(
                    "{mass}: index {} is {m}: masses must be finite and > 0",
                    first + i
                )
            }),
    )?;
    if let Some(repeat) = repeated_id_over(&b.ids, first, comm) {
        return Err(format!("{ids}: {repeat}"));
    }
    if !b.time.is_finite() {
        return Err(format!("/Header/Time is {}: it must be finite", b.time));
    }
    Ok(())
}

/// Where `ids` repeats an id, if it does: "index S repeats id X of index F: ids must be
/// unique" (X the smallest repeated id, F and S its first two indices). Sorts a list of indices
/// (n log n, once per file).
pub(crate) fn repeated_id(ids: &[u64]) -> Option<String> {
    let mut order: Vec<[u64; 2]> = ids.iter().zip(0..).map(|(&id, i)| [id, i]).collect();
    order.sort_unstable();
    first_repeat(&order)
}

/// The first repeat of a sorted list of `[id, index]`, as [`repeated_id`] words it.
fn first_repeat(sorted: &[[u64; 2]]) -> Option<String> {
    let w = sorted.windows(2).find(|w| w[0][0] == w[1][0])?;
    Some(format!(
        "index {} repeats id {} of index {}: ids must be unique",
        w[1][1], w[0][0], w[0][1]
    ))
}

/// [`repeated_id`] of every rank's `ids` (rank r's from index `first`), the same answer on
/// every rank: each id is sent with its index to the rank `id mod K` (no rank holds every id),
/// each rank finds its smallest repeat, and the smallest over the ranks is told by its rank.
/// Collective.
pub(crate) fn repeated_id_over(ids: &[u64], first: usize, comm: &dyn Comm) -> Option<String> {
    let k = comm.size();
    if k == 1 {
        return repeated_id(ids);
    }
    let mut groups: Vec<Vec<u64>> = vec![Vec::new(); k];
    for (i, &id) in ids.iter().enumerate() {
        groups[(id % k as u64) as usize].extend([id, (first + i) as u64]);
    }
    let bytes: Vec<usize> = groups.iter().map(|g| g.len() * 8).collect();
    let flat: Vec<u64> = groups.concat();
    let (got, _) = comm::exchange(comm, bytemuck::cast_slice(&flat), &bytes);
    let words: Vec<u64> = bytemuck::pod_collect_to_vec(&got);
    let mut mine: Vec<[u64; 2]> = words.chunks_exact(2).map(|w| [w[0], w[1]]).collect();
    mine.sort_unstable();
    let local = mine
        .windows(2)
        .find(|w| w[0][0] == w[1][0])
        .map(|w| w[0][0]);
    if comm::max_of(comm, u64::from(local.is_some())) == 0 {
        return None;
    }
    // The smallest repeated id (a rank without one offers the complement of the largest).
    let id = u64::MAX - comm::max_of(comm, local.map_or(0, |id| u64::MAX - id));
    let owner = (id % k as u64) as usize;
    let message = if comm.rank() == owner {
        first_repeat(&mine).expect("the owner found it")
    } else {
        String::new()
    };
    let told = comm::broadcast_bytes(comm, owner, message.as_bytes());
    Some(String::from_utf8_lossy(&told).into_owned())
}

/// Reads the rows `rows(n)` of `/PartType1` of an HDF5 file of `n` bodies.
fn read_hdf5(path: &Path, rows: &dyn Fn(usize) -> Range<usize>) -> Result<BodyRows, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let mut r = crate::snapshot::read_hdf5_rows(path, rows)?;
    if r.part_type != 1 {
        return Err(err(format!(
            "has no /PartType1 (gravitating bodies); its first particle group is /PartType{}",
            r.part_type
        )));
    }
    // Each dataset's rows and its whole row count.
    let mut take =
        |name: &str, components: usize| -> Result<Option<(Vec<f64>, usize)>, FileError> {
            let Some((shape, values)) = r.datasets.remove(name) else {
                return Ok(None);
            };
            let ok = match components {
                1 => shape.len() == 1 || (shape.len() == 2 && shape[1] == 1),
                c => shape.len() == 2 && shape[1] == c,
            };
            if !ok {
                return Err(err(format!(
                    "dataset /PartType1/{name} has shape {shape:?}: expected {}",
                    if components == 1 {
                        "(N,)".to_string()
                    } else {
                        format!("(N, {components})")
                    }
                )));
            }
            Ok(Some((values.to_f64(), shape[0])))
        };
    let missing = |name: &str| err(format!("dataset /PartType1/{name} is missing"));
    let (coords, n) = take("Coordinates", 3)?.ok_or_else(|| missing("Coordinates"))?;
    let mine = rows(n);
    let (vels, n_vels) = take("Velocities", 3)?.ok_or_else(|| missing("Velocities"))?;
    let (masses, n_masses) = match take("Masses", 1)? {
        Some(m) => m,
        None if r.table_mass > 0.0 => (vec![r.table_mass; mine.len()], n),
        None => {
            return Err(err(
                "dataset /PartType1/Masses is missing (and /Header/MassTable[1] gives no mass \
                 for every body)"
                    .into(),
            ));
        }
    };
    // Ids as stored (integers), not through f64.
    let ids = match r.datasets.remove("ParticleIDs") {
        Some((shape, crate::snapshot::Values::U64(v))) => Some((v, shape[0])),
        Some(_) => {
            return Err(err(
                "dataset /PartType1/ParticleIDs holds floating-point values: ids are integers"
                    .into(),
            ));
        }
        None => None,
    };
    for (name, len) in [
        ("Velocities", n_vels),
        ("Masses", n_masses),
        ("ParticleIDs", ids.as_ref().map_or(n, |(_, len)| *len)),
    ] {
        if len != n {
            return Err(err(format!(
                "dataset /PartType1/{name} has {len} rows, /PartType1/Coordinates {n}: every \
                 dataset needs one row per body"
            )));
        }
    }
    let split = |v: &[f64]| -> [Vec<f64>; 3] {
        std::array::from_fn(|d| v.iter().skip(d).step_by(3).copied().collect())
    };
    Ok(BodyRows {
        bodies: Bodies {
            position: split(&coords),
            velocity: split(&vels),
            mass: masses,
            ids: ids.map_or_else(
                || (mine.start as u64..mine.end as u64).collect(),
                |(v, _)| v,
            ),
            time: r.time,
        },
        first: mine.start,
        total: n,
    })
}

/// Reads a text table: a header naming the columns, then one body per line.
fn read_text(path: &Path) -> Result<Bodies, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| FileError::io(path, e))?;
    let split = |line: &str| -> Vec<String> {
        line.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(k, l)| (k + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((header_line, header)) = lines.next() else {
        return Err(err(
            "is empty: expected a header line `x y z vx vy vz m [id]`".into(),
        ));
    };
    let names = split(header);
    const REQUIRED: [&str; 7] = ["x", "y", "z", "vx", "vy", "vz", "m"];
    if let Some(unknown) = names
        .iter()
        .find(|n| !REQUIRED.contains(&n.as_str()) && n.as_str() != "id")
    {
        return Err(err(format!(
            "line {header_line}: unknown column `{unknown}`; the columns are x y z vx vy vz m \
             and optionally id"
        )));
    }
    let column = |name: &str| names.iter().position(|n| n == name);
    let mut index = [0usize; 7];
    for (slot, name) in index.iter_mut().zip(REQUIRED) {
        *slot = column(name).ok_or_else(|| {
            err(format!(
                "line {header_line}: column `{name}` is missing (header: `{header}`)"
            ))
        })?;
    }
    let id_col = column("id");
    let mut b = Bodies::default();
    let mut ids = Vec::new();
    for (line, text) in lines {
        let fields = split(text);
        if fields.len() != names.len() {
            return Err(err(format!(
                "line {line}: {} values for {} columns",
                fields.len(),
                names.len()
            )));
        }
        let number = |k: usize| -> Result<f64, FileError> {
            fields[k].parse::<f64>().map_err(|_| {
                err(format!(
                    "line {line}, column {}: `{}` is not a number",
                    names[k], fields[k]
                ))
            })
        };
        for d in 0..3 {
            b.position[d].push(number(index[d])?);
            b.velocity[d].push(number(index[3 + d])?);
        }
        b.mass.push(number(index[6])?);
        if let Some(k) = id_col {
            ids.push(fields[k].parse::<u64>().map_err(|_| {
                err(format!(
                    "line {line}, column id: `{}` is not a non-negative integer",
                    fields[k]
                ))
            })?);
        }
    }
    b.ids = if id_col.is_some() {
        ids
    } else {
        (0..b.mass.len() as u64).collect()
    };
    Ok(b)
}
