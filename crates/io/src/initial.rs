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

use std::path::Path;

use crate::files::FileError;

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

/// Reads and checks the bodies in `path` (HDF5 by the extension `.hdf5`/`.h5`, text by
/// `.csv`/`.txt`).
pub fn read_bodies(path: &Path) -> Result<Bodies, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let bodies = match ext.as_str() {
        "hdf5" | "h5" => read_hdf5(path)?,
        "csv" | "txt" => read_text(path)?,
        _ => {
            return Err(err(
                "unknown kind of file: expected .hdf5 or .h5 (HDF5, the snapshot layout) or \
                 .csv or .txt (a table with the columns x y z vx vy vz m [id])"
                    .into(),
            ));
        }
    };
    check(&bodies, &ext).map_err(err)?;
    Ok(bodies)
}

/// The checks every file passes, with the quantities named as the file calls them.
fn check(b: &Bodies, ext: &str) -> Result<(), String> {
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
    check_bodies(b, names)
}

/// The checks every source of bodies passes (a file, or arrays from the Python module):
/// finite values, positive masses, unique ids, at least one body. `names`: how the source calls
/// the positions, velocities, masses and ids, for the message.
pub fn check_bodies(b: &Bodies, names: [&str; 4]) -> Result<(), String> {
    let [pos, vel, mass, ids] = names;
    if b.is_empty() {
        return Err("holds no bodies".into());
    }
    for (what, arrays) in [(pos, &b.position), (vel, &b.velocity)] {
        if let Some((i, d, v)) = (0..b.len())
            .flat_map(|i| (0..3).map(move |d| (i, d)))
            .map(|(i, d)| (i, d, arrays[d][i]))
            .find(|(_, _, v)| !v.is_finite())
        {
            return Err(format!(
                "{what}: index {i} (component {}) is {v}: every value must be finite",
                ["x", "y", "z"][d]
            ));
        }
    }
    if let Some((i, m)) = b
        .mass
        .iter()
        .enumerate()
        .find(|(_, m)| !(m.is_finite() && **m > 0.0))
    {
        return Err(format!(
            "{mass}: index {i} is {m}: masses must be finite and > 0"
        ));
    }
    if let Some(repeat) = repeated_id(&b.ids) {
        return Err(format!("{ids}: {repeat}"));
    }
    if !b.time.is_finite() {
        return Err(format!("/Header/Time is {}: it must be finite", b.time));
    }
    Ok(())
}

/// Where `ids` repeats an id, if it does: "index S repeats id X of index F: ids must be
/// unique" (S the later index). Sorts a list of indices (n log n, once per file).
pub(crate) fn repeated_id(ids: &[u64]) -> Option<String> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| (ids[i], i));
    let w = order.windows(2).find(|w| ids[w[0]] == ids[w[1]])?;
    let (first, second) = (w[0].min(w[1]), w[0].max(w[1]));
    Some(format!(
        "index {second} repeats id {} of index {first}: ids must be unique",
        ids[second]
    ))
}

/// Reads `/PartType1` of an HDF5 file.
fn read_hdf5(path: &Path) -> Result<Bodies, FileError> {
    let err = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let mut r = crate::snapshot::read_hdf5(path)?;
    if r.part_type != 1 {
        return Err(err(format!(
            "has no /PartType1 (gravitating bodies); its first particle group is /PartType{}",
            r.part_type
        )));
    }
    let mut take = |name: &str, components: usize| -> Result<Option<Vec<f64>>, FileError> {
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
        Ok(Some(values.to_f64()))
    };
    let missing = |name: &str| err(format!("dataset /PartType1/{name} is missing"));
    let coords = take("Coordinates", 3)?.ok_or_else(|| missing("Coordinates"))?;
    let n = coords.len() / 3;
    let vels = take("Velocities", 3)?.ok_or_else(|| missing("Velocities"))?;
    let masses = match take("Masses", 1)? {
        Some(m) => m,
        None if r.table_mass > 0.0 => vec![r.table_mass; n],
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
        Some((_, crate::snapshot::Values::U64(v))) => Some(v),
        Some(_) => {
            return Err(err(
                "dataset /PartType1/ParticleIDs holds floating-point values: ids are integers"
                    .into(),
            ));
        }
        None => None,
    };
    for (name, len) in [
        ("Velocities", vels.len() / 3),
        ("Masses", masses.len()),
        ("ParticleIDs", ids.as_ref().map_or(n, Vec::len)),
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
    Ok(Bodies {
        position: split(&coords),
        velocity: split(&vels),
        mass: masses,
        ids: ids.unwrap_or_else(|| (0..n as u64).collect()),
        time: r.time,
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
