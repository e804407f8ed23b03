//! Snapshots ParaView reads: VTK XML unstructured grids (`.vtu`) of particles as vertex cells,
//! with raw appended binary data, and a `.pvd` collection that lists them with their times.
//!
//! mote writes these itself: the `vtkio` crate has no `.pvd` support and cannot read the raw
//! appended form ParaView writes. The tests read the files back with a separate parser.

use std::fmt::Write as _;
use std::path::Path;

use crate::files::{FileError, write_atomic};

/// One per-particle array of a snapshot.
pub enum Field<'a> {
    /// Scalars in `f64`.
    F64(&'a str, &'a [f64]),
    /// Three-component vectors in `f64`, interleaved `x0 y0 z0 x1 ...`.
    Vec3F64(&'a str, &'a [f64]),
    /// Unsigned 64-bit integers (particle ids).
    U64(&'a str, &'a [u64]),
}

impl Field<'_> {
    fn describe(&self) -> (&str, &'static str, usize, &[u8]) {
        match self {
            Field::F64(n, v) => (n, "Float64", 1, bytemuck::cast_slice(v)),
            Field::Vec3F64(n, v) => (n, "Float64", 3, bytemuck::cast_slice(v)),
            Field::U64(n, v) => (n, "UInt64", 1, bytemuck::cast_slice(v)),
        }
    }
}

/// Writes `path` atomically: `points` (interleaved xyz) as vertex cells carrying `fields`. The
/// arrays follow the XML in one raw appended block, each preceded by its byte count (UInt64),
/// little-endian as the header declares.
pub fn write_vtu(path: &Path, points: &[f64], fields: &[Field<'_>]) -> Result<(), FileError> {
    assert!(points.len().is_multiple_of(3), "points are interleaved xyz");
    let n = points.len() / 3;
    let connectivity: Vec<u64> = (0..n as u64).collect();
    let offsets: Vec<u64> = (1..=n as u64).collect();
    let types: Vec<u8> = vec![1; n]; // VTK_VERTEX
    let mut blocks: Vec<&[u8]> = Vec::new();
    let mut offset = 0usize;
    let mut element = |name: &str, ty: &str, comps: usize, bytes: &[u8]| -> String {
        let e = format!(
            "<DataArray type=\"{ty}\" Name=\"{name}\" NumberOfComponents=\"{comps}\" format=\"appended\" offset=\"{offset}\"/>"
        );
        offset += 8 + bytes.len();
        e
    };
    let mut point_data = String::new();
    for f in fields {
        let (name, ty, comps, bytes) = f.describe();
        let _ = writeln!(point_data, "      {}", element(name, ty, comps, bytes));
        blocks.push(bytes);
    }
    let pts = element("Points", "Float64", 3, bytemuck::cast_slice(points));
    let con = element(
        "connectivity",
        "UInt64",
        1,
        bytemuck::cast_slice(&connectivity),
    );
    let off = element("offsets", "UInt64", 1, bytemuck::cast_slice(&offsets));
    let typ = element("types", "UInt8", 1, &types);
    blocks.push(bytemuck::cast_slice(points));
    blocks.push(bytemuck::cast_slice(&connectivity));
    blocks.push(bytemuck::cast_slice(&offsets));
    blocks.push(&types);
    let header = format!(
        "<?xml version=\"1.0\"?>\n\
         <VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
         <UnstructuredGrid>\n\
         <Piece NumberOfPoints=\"{n}\" NumberOfCells=\"{n}\">\n\
         <PointData>\n{point_data}</PointData>\n\
         <Points>\n      {pts}\n</Points>\n\
         <Cells>\n      {con}\n      {off}\n      {typ}\n</Cells>\n\
         </Piece>\n</UnstructuredGrid>\n<AppendedData encoding=\"raw\">\n_"
    );
    let mut bytes = header.into_bytes();
    for b in blocks {
        bytes.extend_from_slice(&(b.len() as u64).to_le_bytes());
        bytes.extend_from_slice(b);
    }
    bytes.extend_from_slice(b"\n</AppendedData>\n</VTKFile>\n");
    write_atomic(path, &bytes)
}

/// Writes the `.pvd` collection listing `(time, file)` pairs, atomically.
pub fn write_pvd(path: &Path, entries: &[(f64, String)]) -> Result<(), FileError> {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"1.0\" byte_order=\"LittleEndian\">\n<Collection>\n",
    );
    for (t, f) in entries {
        let _ = writeln!(s, "  <DataSet timestep=\"{t:?}\" part=\"0\" file=\"{f}\"/>");
    }
    s.push_str("</Collection>\n</VTKFile>\n");
    write_atomic(path, s.as_bytes())
}

/// Reads the arrays of a `.vtu` written in the raw appended form (as mote writes it): each by
/// name (`Points` included) with its VTK type name, component count and raw little-endian bytes.
/// A separate parser from the writer: the tests use it to check what the writer produced.
pub fn read_vtu(bytes: &[u8]) -> Result<std::collections::BTreeMap<String, Array>, String> {
    let marker = bytes
        .windows(2)
        .position(|w| w == b"\n_")
        .ok_or("no raw appended data (expected `<AppendedData encoding=\"raw\">` and `_`)")?
        + 2;
    let xml = std::str::from_utf8(&bytes[..marker]).map_err(|_| "the XML header is not UTF-8")?;
    if !xml.contains("header_type=\"UInt64\"") {
        return Err("only UInt64 block headers are supported".into());
    }
    let mut out = std::collections::BTreeMap::new();
    for tag in xml.split("<DataArray ").skip(1) {
        let attr = |key: &str| -> Result<String, String> {
            let k = format!("{key}=\"");
            let s = tag
                .find(&k)
                .ok_or_else(|| format!("DataArray without {key}"))?
                + k.len();
            let e = tag[s..].find('"').ok_or("unterminated attribute")?;
            Ok(tag[s..s + e].to_string())
        };
        let offset: usize = attr("offset")?.parse().map_err(|_| "bad offset")?;
        let at = marker + offset;
        let len_bytes = bytes.get(at..at + 8).ok_or("truncated appended data")?;
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes")) as usize;
        let data = bytes
            .get(at + 8..at + 8 + len)
            .ok_or("truncated appended data")?
            .to_vec();
        let components = attr("NumberOfComponents")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(1);
        out.insert(
            attr("Name")?,
            Array {
                vtk_type: attr("type")?,
                components,
                bytes: data,
            },
        );
    }
    Ok(out)
}

/// One array read back from a `.vtu`.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// The VTK type name (`Float64`, `UInt64`, `UInt8`, ...).
    pub vtk_type: String,
    /// Components per point.
    pub components: usize,
    /// Raw little-endian bytes.
    pub bytes: Vec<u8>,
}

impl Array {
    /// The values as `f64` (for `Float64`, `Float32`, `UInt64` and `UInt8` arrays).
    pub fn to_f64(&self) -> Vec<f64> {
        match self.vtk_type.as_str() {
            "Float64" => bytemuck::pod_collect_to_vec::<u8, f64>(&self.bytes),
            "Float32" => bytemuck::pod_collect_to_vec::<u8, f32>(&self.bytes)
                .into_iter()
                .map(f64::from)
                .collect(),
            "UInt64" => bytemuck::pod_collect_to_vec::<u8, u64>(&self.bytes)
                .into_iter()
                .map(|v| v as f64)
                .collect(),
            _ => self.bytes.iter().map(|&b| b as f64).collect(),
        }
    }
}

/// Writes the next snapshot of a run into `dir`: `snapshots/snap_NNNNN.vtu` (`NNNNN` the number
/// of snapshots in `list` so far) with `points` and `fields`, then appends it to `list` at
/// `time` and rewrites `snapshots.pvd` with the whole list.
pub fn write_snapshot(
    dir: &Path,
    time: f64,
    list: &mut Vec<(f64, String)>,
    points: &[f64],
    fields: &[Field<'_>],
) -> Result<(), FileError> {
    let snap_dir = dir.join("snapshots");
    std::fs::create_dir_all(&snap_dir).map_err(|e| FileError {
        path: snap_dir.clone(),
        message: e.to_string(),
    })?;
    let name = format!("snapshots/snap_{:05}.vtu", list.len());
    write_vtu(&dir.join(&name), points, fields)?;
    list.push((time, name));
    write_pvd(&dir.join("snapshots.pvd"), list)
}
