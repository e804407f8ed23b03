//! Checkpoints: the whole state of a gravity run in one self-checking file.
//!
//! Layout (little-endian): the magic `MOTECKPT`, a format version (u32), the length of a JSON
//! header (u64) and the header (step, time, precision, the resolved configuration, the initial
//! energy, the snapshots written so far), then the ten component arrays and the ids, each as a
//! byte count (u64) and raw bytes, and last a CRC-32 of everything before it. Written to a
//! temporary file and renamed, so a killed run leaves either the previous checkpoint or the new
//! one, never a torn file; a corrupt file is refused on reading.

use std::path::Path;

use mote_core::{COMPONENTS, Component, ParticleData, Precision, Real};
use serde::{Deserialize, Serialize};

use crate::files::{FileError, write_atomic};

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

/// Writes `header` and the particles to `path`, atomically.
pub fn write<R: Real>(path: &Path, header: &Header, p: &ParticleData<R>) -> Result<(), FileError> {
    let json = serde_json::to_vec(header).expect("serialisable header");
    let mut bytes = Vec::with_capacity(64 + json.len() + p.len() * (COMPONENTS * 8 + 8 + 16));
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&(json.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&json);
    let mut array = |b: &[u8]| {
        bytes.extend_from_slice(&(b.len() as u64).to_le_bytes());
        bytes.extend_from_slice(b);
    };
    for c in Component::ALL {
        array(bytemuck::cast_slice(p.component(c)));
    }
    array(bytemuck::cast_slice(p.ids()));
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    write_atomic(path, &bytes)
}

/// Reads the header of `path`, verifying the whole file.
pub fn read_header(path: &Path) -> Result<(Header, Vec<u8>), FileError> {
    let bad = |m: String| FileError {
        path: path.to_path_buf(),
        message: m,
    };
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    if bytes.len() < 24 || &bytes[..8] != MAGIC {
        return Err(bad("not a mote checkpoint".into()));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(tail.try_into().expect("4 bytes")) {
        return Err(bad("checksum mismatch: the checkpoint is corrupt".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(bad(format!(
            "checkpoint format {version}; this mote reads {VERSION}"
        )));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes")) as usize;
    let header: Header = serde_json::from_slice(
        bytes
            .get(20..20 + len)
            .ok_or_else(|| bad("truncated header".into()))?,
    )
    .map_err(|e| bad(format!("header: {e}")))?;
    Ok((header, bytes[20 + len..bytes.len() - 4].to_vec()))
}

/// Reads the particles of a checkpoint whose arrays (`arrays`, from [`read_header`]) are in
/// precision `R`.
pub fn read_particles<R: Real>(path: &Path, arrays: &[u8]) -> Result<ParticleData<R>, FileError> {
    let bad = |m: &str| FileError {
        path: path.to_path_buf(),
        message: m.to_string(),
    };
    let mut at = 0usize;
    let mut next = || -> Result<&[u8], FileError> {
        let len = u64::from_le_bytes(
            arrays
                .get(at..at + 8)
                .ok_or_else(|| bad("truncated arrays"))?
                .try_into()
                .expect("8 bytes"),
        ) as usize;
        let b = arrays
            .get(at + 8..at + 8 + len)
            .ok_or_else(|| bad("truncated arrays"))?;
        at += 8 + len;
        Ok(b)
    };
    let mut comps: Vec<Vec<R>> = Vec::with_capacity(COMPONENTS);
    for _ in 0..COMPONENTS {
        let b = next()?;
        if b.len() % std::mem::size_of::<R>() != 0 {
            return Err(bad("array length does not match the precision"));
        }
        comps.push(bytemuck::pod_collect_to_vec(b));
    }
    let ids: Vec<u64> = bytemuck::pod_collect_to_vec(next()?);
    if comps.iter().any(|c| c.len() != ids.len()) {
        return Err(bad("arrays of unequal length"));
    }
    let refs: [&[R]; COMPONENTS] = std::array::from_fn(|k| comps[k].as_slice());
    Ok(ParticleData::restore(refs, &ids))
}
