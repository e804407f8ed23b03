//! Checkpoints: the whole state of a run in one self-checking file, for gravity and meshless
//! runs.
//!
//! Layout (little-endian): the magic `MOTECKPT`, a format version (u32), the length of a JSON
//! header (u64) and the header, then the arrays, each as a byte count (u64) and raw bytes, and
//! last a CRC-32 of everything before it. Written to a temporary file and renamed, so a killed
//! run leaves either the previous checkpoint or the new one, never a torn file; a corrupt file is
//! refused on reading.
//!
//! A gravity header ([`Header`]: step, time, precision, the resolved configuration, the initial
//! energy, the snapshots so far) is followed by the ten component arrays and the ids. A meshless
//! header ([`MeshlessHeader`], with `"physics": "meshless"`) is followed by the particle ids and
//! one array per conserved variable; the cloud itself is rebuilt from the configuration on
//! resume (its construction is deterministic) and checked against the ids.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use mote_cloud::mood::MoodStats;
use mote_core::{COMPONENTS, Component, ParticleData, Precision, Real};
use serde::{Deserialize, Serialize};

use mote_core::comm::RootStream;

use crate::files::{FileError, Partial};

const MAGIC: &[u8; 8] = b"MOTECKPT";
const VERSION: u32 = 1;

/// What a checkpoint records besides the arrays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The mote version that wrote it.
    pub mote_version: String,
    /// Steps taken.
    pub step: u64,
    /// Simulated time.
    pub time: f64,
    /// Precision of the arrays.
    pub precision: Precision,
    /// The resolved configuration (TOML).
    pub config: String,
    /// Total energy at time 0 (relative energy errors continue from it).
    pub initial_energy: f64,
    /// Snapshots written so far: `(time, file)`.
    pub snapshots: Vec<(f64, String)>,
}

/// What a meshless checkpoint records besides the ids and the state arrays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeshlessHeader {
    /// The mote version that wrote it.
    pub mote_version: String,
    /// Always `meshless` (a gravity header has no such field).
    pub physics: String,
    /// Steps taken.
    pub step: u64,
    /// Simulated time, as the run loop counts it (the output schedule's clock).
    pub time: f64,
    /// The simulation's own clock (summed step sizes; time-dependent boundary conditions read
    /// it), restored as it was so that a resumed run repeats the uninterrupted one bit for bit.
    pub simulation_time: f64,
    /// Precision of the state arrays.
    pub precision: Precision,
    /// The resolved configuration (TOML).
    pub config: String,
    /// Snapshots written so far: `(time, file)`.
    pub snapshots: Vec<(f64, String)>,
    /// Particles in the cloud, boundary layers included.
    pub particles: usize,
    /// Conserved variables (state arrays).
    pub variables: usize,
    /// MOOD's statistics summed over the run so far.
    pub mood: MoodStats,
    /// Positivity floor events over the run so far (`None` where the backend does not count
    /// them).
    pub floor_events: Option<u64>,
    /// The run's first stable time step, which a collapsing step is measured against
    /// (`run.min_dt_ratio`); absent in checkpoints of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_dt: Option<f64>,
    /// What every conserved variable lost through the boundary faces so far (the time
    /// integral of `Simulation::boundary_flux`), for a run with boundary particles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outflow: Option<Vec<f64>>,
}

/// A checkpoint's header, of either family.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyHeader {
    /// A gravity run's.
    Gravity(Header),
    /// A meshless run's.
    Meshless(MeshlessHeader),
}

/// Writes `json` and `arrays` to `path` in the checkpoint layout, atomically. Each array is
/// this rank's rows of `stream` (`(bytes, bytes per row)`): rank 0 writes the file, the rows
/// arriving rank after rank ([`RootStream::stream`]), so that it is the one process's, byte for
/// byte; a failure is rank 0's. Collective.
fn write_framed(
    path: &Path,
    json: &[u8],
    arrays: &[(&[u8], usize)],
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    let mut out = Partial::create(path, stream.is_root());
    let mut crc = crc32fast::Hasher::new();
    let mut put = |bytes: &[u8]| {
        crc.update(bytes);
        out.put(bytes);
    };
    put(MAGIC);
    put(&VERSION.to_le_bytes());
    put(&(json.len() as u64).to_le_bytes());
    put(json);
    let n = stream.total();
    for &(bytes, width) in arrays {
        put(&((n * width) as u64).to_le_bytes());
        stream.stream(bytes, width, |_, piece| put(piece));
    }
    let crc = crc.finalize();
    out.put(&crc.to_le_bytes());
    out.finish()
}

/// Writes `header` and the particles to `path`, atomically. `p` is this rank's rows of
/// `stream` ([`RootStream::one`] on one process): rank 0 writes the one-process file; a failure
/// is rank 0's. Collective.
pub fn write<R: Real>(
    path: &Path,
    header: &Header,
    p: &ParticleData<R>,
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    let json = serde_json::to_vec(header).expect("serialisable header");
    let r = std::mem::size_of::<R>();
    let mut arrays: Vec<(&[u8], usize)> = Component::ALL
        .iter()
        .map(|&c| (bytemuck::cast_slice(p.component(c)), r))
        .collect();
    arrays.push((bytemuck::cast_slice(p.ids()), 8));
    write_framed(path, &json, &arrays, stream)
}

/// Writes a meshless checkpoint: `header`, the particle `ids` and one `state` array per
/// conserved variable, atomically. The ids and states are this rank's rows of `stream` (a cloud
/// split between ranks; [`RootStream::one`] on one process): rank 0 writes the one-process
/// file; a failure is rank 0's. Collective.
pub fn write_meshless<R: Real>(
    path: &Path,
    header: &MeshlessHeader,
    ids: &[u64],
    state: &[&[R]],
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    let json = serde_json::to_vec(header).expect("serialisable header");
    let r = std::mem::size_of::<R>();
    let mut arrays: Vec<(&[u8], usize)> = vec![(bytemuck::cast_slice(ids), 8)];
    arrays.extend(state.iter().map(|s| (bytemuck::cast_slice::<R, u8>(s), r)));
    write_framed(path, &json, &arrays, stream)
}

/// Reads the header of a gravity checkpoint `path`, verifying the whole file.
pub fn read_header(path: &Path) -> Result<(Header, Vec<u8>), FileError> {
    match read_any(path)? {
        (AnyHeader::Gravity(h), arrays) => Ok((h, arrays)),
        (AnyHeader::Meshless(_), _) => Err(FileError {
            path: path.to_path_buf(),
            message: "a meshless run's checkpoint, not a gravity run's".into(),
        }),
    }
}

/// Reads the header of a checkpoint of either family, verifying the whole file; the arrays
/// follow as raw bytes.
pub fn read_any(path: &Path) -> Result<(AnyHeader, Vec<u8>), FileError> {
    let bytes = std::fs::read(path).map_err(|e| FileError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    parse_any(path, &bytes)
}

/// [`read_any`] of a checkpoint's `bytes` already in memory (`path` names it in messages).
/// Any byte sequence gets an answer, never a panic: the layout, the checksum, the format
/// version and the header are checked before anything is trusted.
pub fn parse_any(path: &Path, bytes: &[u8]) -> Result<(AnyHeader, Vec<u8>), FileError> {
    let (header, arrays) = verify(path, &mut std::io::Cursor::new(bytes), true)?;
    Ok((
        header,
        bytes[arrays.start as usize..arrays.end as usize].to_vec(),
    ))
}

/// Checks a checkpoint read through `file`: the layout, the checksum (with `checksum`: the
/// whole file read a piece at a time), the format version and the header. Returns the header
/// and the byte range of the arrays. Any byte sequence gets an answer, never a panic.
fn verify<F: Read + Seek>(
    path: &Path,
    file: &mut F,
    checksum: bool,
) -> Result<(AnyHeader, std::ops::Range<u64>), FileError> {
    let bad = |m: String| FileError {
        path: path.to_path_buf(),
        message: m,
    };
    let io = |e: std::io::Error| bad(e.to_string());
    let size = file.seek(SeekFrom::End(0)).map_err(io)?;
    let mut head = [0u8; 20];
    if size < 24 || read_at(file, 0, &mut head).is_err() || &head[..8] != MAGIC {
        return Err(bad("not a mote checkpoint".into()));
    }
    let body = size - 4;
    if checksum {
        let mut crc = crc32fast::Hasher::new();
        let mut piece = vec![0u8; 1 << 20];
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        let mut at = 0;
        while at < body {
            let n = (body - at).min(piece.len() as u64) as usize;
            file.read_exact(&mut piece[..n]).map_err(io)?;
            crc.update(&piece[..n]);
            at += n as u64;
        }
        let mut tail = [0u8; 4];
        file.read_exact(&mut tail).map_err(io)?;
        if crc.finalize() != u32::from_le_bytes(tail) {
            return Err(bad("checksum mismatch: the checkpoint is corrupt".into()));
        }
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(bad(format!(
            "checkpoint format {version}; this mote reads {VERSION}"
        )));
    }
    let len = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
    let end = len
        .checked_add(20)
        .filter(|&e| e <= body)
        .ok_or_else(|| bad("truncated header".into()))?;
    let mut json = vec![0u8; (end - 20) as usize];
    read_at(file, 20, &mut json).map_err(io)?;
    let value: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| bad(format!("header: {e}")))?;
    let header = if value.get("physics").and_then(|p| p.as_str()) == Some("meshless") {
        AnyHeader::Meshless(serde_json::from_value(value).map_err(|e| bad(format!("header: {e}")))?)
    } else {
        AnyHeader::Gravity(serde_json::from_value(value).map_err(|e| bad(format!("header: {e}")))?)
    };
    Ok((header, end..body))
}

/// Reads `out.len()` bytes of `file` from byte `at`.
fn read_at<F: Read + Seek>(file: &mut F, at: u64, out: &mut [u8]) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(out)
}

/// A checkpoint opened for reading in rows: its header, checked with the file
/// ([`open`]), and where each array lies, so that a rank of a run split between ranks reads
/// only its own rows and no rank holds the whole file.
#[derive(Debug)]
pub struct Opened {
    path: std::path::PathBuf,
    header: AnyHeader,
    /// Each array's first byte and length, in order.
    arrays: Vec<(u64, u64)>,
}

/// Opens checkpoint `path`: checks its layout, format version, header and the framing of its
/// arrays and, with `checksum`, its checksum (the whole file read a piece at a time: nothing
/// larger than a piece is held). On several ranks one rank's check is enough (they read the
/// same file; the result is agreed). Reads no array.
pub fn open(path: &Path, checksum: bool) -> Result<Opened, FileError> {
    let bad = |m: &str| FileError {
        path: path.to_path_buf(),
        message: m.to_string(),
    };
    let mut file = std::fs::File::open(path).map_err(|e| FileError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let (header, range) = verify(path, &mut file, checksum)?;
    let mut arrays = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let mut len = [0u8; 8];
        if range.end - at < 8 || read_at(&mut file, at, &mut len).is_err() {
            return Err(bad("truncated arrays"));
        }
        let len = u64::from_le_bytes(len);
        let end = len
            .checked_add(at + 8)
            .filter(|&e| e <= range.end)
            .ok_or_else(|| bad("truncated arrays"))?;
        arrays.push((at + 8, len));
        at = end;
    }
    Ok(Opened {
        path: path.to_path_buf(),
        header,
        arrays,
    })
}

impl Opened {
    /// The checkpoint's header.
    pub fn header(&self) -> &AnyHeader {
        &self.header
    }

    /// The particle ids and state arrays (one per variable, in precision `R`) of the rows
    /// `rows` of a meshless checkpoint, with [`read_meshless_state`]'s checks of the whole
    /// arrays' lengths. Reads those rows only.
    pub fn meshless_rows<R: Real>(
        &self,
        rows: std::ops::Range<usize>,
    ) -> Result<(Vec<u64>, Vec<Vec<R>>), FileError> {
        let bad = |m: String| FileError {
            path: self.path.clone(),
            message: m,
        };
        let AnyHeader::Meshless(header) = &self.header else {
            return Err(bad(
                "a gravity run's checkpoint, not a meshless run's".into()
            ));
        };
        let lens: Vec<usize> = self.arrays.iter().map(|&(_, l)| l as usize).collect();
        check_meshless::<R>(&self.path, header, &lens)?;
        let mut read = self.reader(rows, header.particles)?;
        let ids: Vec<u64> = bytemuck::pod_collect_to_vec(&read(0, 8)?);
        let state = (1..self.arrays.len())
            .map(|k| {
                Ok(bytemuck::pod_collect_to_vec(&read(
                    k,
                    std::mem::size_of::<R>(),
                )?))
            })
            .collect::<Result<_, FileError>>()?;
        Ok((ids, state))
    }

    /// The particle count of a gravity checkpoint with arrays in precision `R`, its arrays
    /// checked as [`read_particles`] checks them.
    pub fn gravity_count<R: Real>(&self) -> Result<usize, FileError> {
        let AnyHeader::Gravity(header) = &self.header else {
            return Err(FileError {
                path: self.path.clone(),
                message: "a meshless run's checkpoint, not a gravity run's".into(),
            });
        };
        if header.precision != R::PRECISION {
            return Err(FileError {
                path: self.path.clone(),
                message: format!(
                    "the checkpoint holds {} arrays, not {}",
                    header.precision,
                    R::PRECISION
                ),
            });
        }
        let lens: Vec<usize> = self.arrays.iter().map(|&(_, l)| l as usize).collect();
        check_gravity::<R>(&self.path, &lens)
    }

    /// The particles `rows` (one-process order) of a gravity checkpoint with arrays in precision
    /// `R`, with [`Opened::gravity_count`]'s checks. Reads those rows only.
    pub fn gravity_rows<R: Real>(
        &self,
        rows: std::ops::Range<usize>,
    ) -> Result<ParticleData<R>, FileError> {
        let mut read = self.reader(rows, self.gravity_count::<R>()?)?;
        let size = std::mem::size_of::<R>();
        let comps: Vec<Vec<R>> = (0..COMPONENTS)
            .map(|k| Ok(bytemuck::pod_collect_to_vec(&read(k, size)?)))
            .collect::<Result<_, FileError>>()?;
        let ids: Vec<u64> = bytemuck::pod_collect_to_vec(&read(COMPONENTS, 8)?);
        check_ids(&self.path, &ids)?;
        let refs: [&[R]; COMPONENTS] = std::array::from_fn(|k| comps[k].as_slice());
        Ok(ParticleData::restore(refs, &ids))
    }

    /// What reads the rows `rows` of array `k` (elements of `width` bytes) of the file.
    /// Refused: rows beyond the file's `n` particles.
    fn reader(
        &self,
        rows: std::ops::Range<usize>,
        n: usize,
    ) -> Result<impl FnMut(usize, usize) -> Result<Vec<u8>, FileError> + '_, FileError> {
        let bad = |m: String| FileError {
            path: self.path.clone(),
            message: m,
        };
        if rows.start > rows.end || rows.end > n {
            return Err(bad(format!("rows {rows:?} of {n} particles")));
        }
        let mut file = std::fs::File::open(&self.path).map_err(|e| bad(e.to_string()))?;
        Ok(
            move |k: usize, width: usize| -> Result<Vec<u8>, FileError> {
                let mut out = vec![0u8; rows.len() * width];
                read_at(
                    &mut file,
                    self.arrays[k].0 + (rows.start * width) as u64,
                    &mut out,
                )
                .map_err(|e| bad(e.to_string()))?;
                Ok(out)
            },
        )
    }
}

/// Splits checkpoint `arrays` (from [`read_any`]) into their byte ranges, in order.
fn split_arrays<'a>(path: &Path, arrays: &'a [u8]) -> Result<Vec<&'a [u8]>, FileError> {
    let bad = |m: &str| FileError {
        path: path.to_path_buf(),
        message: m.to_string(),
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < arrays.len() {
        let len = u64::from_le_bytes(
            arrays
                .get(at..at + 8)
                .ok_or_else(|| bad("truncated arrays"))?
                .try_into()
                .expect("8 bytes"),
        );
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(at + 8))
            .filter(|&e| e <= arrays.len())
            .ok_or_else(|| bad("truncated arrays"))?;
        out.push(&arrays[at + 8..end]);
        at = end;
    }
    Ok(out)
}

/// The particle ids and the state arrays (one per variable, in precision `R`) of a meshless
/// checkpoint whose header is `header` and whose arrays are `arrays` (from [`read_any`]).
pub fn read_meshless_state<R: Real>(
    path: &Path,
    header: &MeshlessHeader,
    arrays: &[u8],
) -> Result<(Vec<u64>, Vec<Vec<R>>), FileError> {
    let parts = split_arrays(path, arrays)?;
    let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
    check_meshless::<R>(path, header, &lens)?;
    let ids: Vec<u64> = bytemuck::pod_collect_to_vec(parts[0]);
    let state = parts[1..]
        .iter()
        .map(|p| bytemuck::pod_collect_to_vec(p))
        .collect();
    Ok((ids, state))
}

/// Checks a meshless checkpoint's arrays (of byte lengths `lens`) against its `header`: the
/// precision `R`, the ids and one array per variable, each of the header's particle count.
fn check_meshless<R: Real>(
    path: &Path,
    header: &MeshlessHeader,
    lens: &[usize],
) -> Result<(), FileError> {
    let bad = |m: String| FileError {
        path: path.to_path_buf(),
        message: m,
    };
    if header.precision != R::PRECISION {
        return Err(bad(format!(
            "the checkpoint holds {} arrays, not {}",
            header.precision,
            R::PRECISION
        )));
    }
    if header.variables.checked_add(1) != Some(lens.len()) {
        return Err(bad(format!(
            "{} arrays; the header announces ids and {} variables",
            lens.len(),
            header.variables
        )));
    }
    let n = header.particles;
    let size = std::mem::size_of::<R>();
    if n.checked_mul(8) != Some(lens[0])
        || lens[1..].iter().any(|&l| n.checked_mul(size) != Some(l))
    {
        return Err(bad(format!(
            "array lengths do not match {n} particles in {}",
            header.precision
        )));
    }
    Ok(())
}

/// Reads the particles of a checkpoint whose arrays (`arrays`, from [`read_header`]) are in
/// precision `R`.
pub fn read_particles<R: Real>(path: &Path, arrays: &[u8]) -> Result<ParticleData<R>, FileError> {
    let parts = split_arrays(path, arrays)?;
    let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
    check_gravity::<R>(path, &lens)?;
    let comps: Vec<Vec<R>> = parts[..COMPONENTS]
        .iter()
        .map(|b| bytemuck::pod_collect_to_vec(b))
        .collect();
    let ids: Vec<u64> = bytemuck::pod_collect_to_vec(parts[COMPONENTS]);
    check_ids(path, &ids)?;
    let refs: [&[R]; COMPONENTS] = std::array::from_fn(|k| comps[k].as_slice());
    Ok(ParticleData::restore(refs, &ids))
}

/// Checks a gravity checkpoint's arrays (of byte lengths `lens`): the ten components in
/// precision `R` and the ids, all of one particle count, which it returns.
fn check_gravity<R: Real>(path: &Path, lens: &[usize]) -> Result<usize, FileError> {
    let bad = |m: &str| FileError {
        path: path.to_path_buf(),
        message: m.to_string(),
    };
    if lens.len() <= COMPONENTS {
        return Err(bad("truncated arrays"));
    }
    let size = std::mem::size_of::<R>();
    if lens[..COMPONENTS].iter().any(|l| !l.is_multiple_of(size)) {
        return Err(bad("array length does not match the precision"));
    }
    let n = lens[COMPONENTS] / 8;
    if !lens[COMPONENTS].is_multiple_of(8) || lens[..COMPONENTS].iter().any(|l| l / size != n) {
        return Err(bad("arrays of unequal length"));
    }
    Ok(n)
}

/// Refuses the largest id: new particles get ids above the largest, and it leaves none.
fn check_ids(path: &Path, ids: &[u64]) -> Result<(), FileError> {
    if ids.contains(&u64::MAX) {
        return Err(FileError {
            path: path.to_path_buf(),
            message: "a particle id of 2^64 - 1 (the largest id is reserved)".into(),
        });
    }
    Ok(())
}
