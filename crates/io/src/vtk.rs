//! Snapshots ParaView reads: VTK XML unstructured grids (`.vtu`) of particles as vertex cells,
//! with raw appended binary data, and a `.pvd` collection that lists them with their times.
//!
//! mote writes these itself: the `vtkio` crate has no `.pvd` support and cannot read the raw
//! appended form ParaView writes. The tests read the files back with a separate parser.

use std::fmt::Write as _;
use std::path::Path;

use mote_core::comm::{self, RootStream};

use crate::files::{FileError, Partial, write_atomic};

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

/// Writes `path` atomically: `points` (interleaved xyz) as vertex cells carrying `fields`, and
/// the simulation `time` as the `TimeValue` field data ParaView and VTK read. The arrays follow
/// the XML in one raw appended block, each preceded by its byte count (UInt64), little-endian as
/// the header declares. Every field must hold one value (or vector) per point: a field of
/// another length is refused, nothing written, so no snapshot ever declares more values than it
/// holds.
pub fn write_vtu(
    path: &Path,
    time: Option<f64>,
    points: &[f64],
    fields: &[Field<'_>],
) -> Result<(), FileError> {
    if !points.len().is_multiple_of(3) {
        return Err(FileError {
            path: path.to_path_buf(),
            message: format!("{} point coordinates are not xyz triples", points.len()),
        });
    }
    write_vtu_ranks(
        path,
        time,
        points,
        fields,
        &RootStream::one(points.len() / 3),
    )
}

/// [`write_vtu`] of points split between ranks: each rank passes its rows (`stream`: rank `r`'s
/// follow those of the ranks below it in the file) and rank 0 writes the one file, receiving
/// each array's pieces in turn ([`RootStream::stream`]): the file is the one process's, byte
/// for byte, and no rank holds more than its rows and one group of pieces. A refusal (a field
/// of the wrong length on any rank) is every rank's; a failure to write is rank 0's (the other
/// ranks return `Ok`). Collective.
pub fn write_vtu_ranks(
    path: &Path,
    time: Option<f64>,
    points: &[f64],
    fields: &[Field<'_>],
    stream: &RootStream<'_>,
) -> Result<(), FileError> {
    let refuse = |message: String| FileError {
        path: path.to_path_buf(),
        message,
    };
    let mine = stream.mine();
    let mut problem = (points.len() != 3 * mine).then(|| {
        format!(
            "{} point coordinates for {mine} points; not written",
            points.len()
        )
    });
    for f in fields {
        let (name, _, comps, bytes) = f.describe();
        let values = bytes.len() / 8;
        if problem.is_none() && values != mine * comps {
            problem = Some(format!(
                "array `{name}` holds {values} values for {mine} points of {comps} component(s); \
                 not written"
            ));
        }
    }
    comm::agree(stream.comm(), problem.as_deref().map(|m| (1, m)))
        .map_err(|e| refuse(e.to_string()))?;
    let n = stream.total();
    let field_data = time.map_or(String::new(), |t| {
        format!(
            "<FieldData>\n      <DataArray type=\"Float64\" Name=\"TimeValue\" NumberOfTuples=\"1\" format=\"ascii\">{t:?}</DataArray>\n</FieldData>\n"
        )
    });
    // Every array in document order: the point data, the points, the cells (name, type,
    // components, bytes per value).
    let mut arrays: Vec<(&str, &str, usize, usize)> = fields
        .iter()
        .map(|f| {
            let (name, ty, comps, _) = f.describe();
            (name, ty, comps, 8)
        })
        .collect();
    arrays.push(("Points", "Float64", 3, 8));
    arrays.push(("connectivity", "UInt64", 1, 8));
    arrays.push(("offsets", "UInt64", 1, 8));
    arrays.push(("types", "UInt8", 1, 1));
    // The appended blocks go in the reverse of the document order. VTK reads each array at its
    // offset whatever the order; meshio re-bases the offsets one block at a time and looks each
    // raw offset up among the elements in document order, so with blocks in document order an
    // element it had already re-based could take a later array's raw offset and be read twice
    // (a 2-body snapshot read its points from the connectivity). In reverse order the element
    // it looks for always comes first.
    let size_of = |k: usize| n * arrays[k].2 * arrays[k].3;
    let mut offset_of = vec![0usize; arrays.len()];
    let mut offset = 0usize;
    for k in (0..arrays.len()).rev() {
        offset_of[k] = offset;
        offset += 8 + size_of(k);
    }
    let element = |k: usize| {
        let (name, ty, comps, _) = arrays[k];
        format!(
            "<DataArray type=\"{ty}\" Name=\"{name}\" NumberOfComponents=\"{comps}\" format=\"appended\" offset=\"{}\"/>",
            offset_of[k]
        )
    };
    let f = fields.len();
    let mut point_data = String::new();
    for k in 0..f {
        let _ = writeln!(point_data, "      {}", element(k));
    }
    let (pts, con, off, typ) = (element(f), element(f + 1), element(f + 2), element(f + 3));
    let header = format!(
        "<?xml version=\"1.0\"?>\n\
         <VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
         <UnstructuredGrid>\n{field_data}\
         <Piece NumberOfPoints=\"{n}\" NumberOfCells=\"{n}\">\n\
         <PointData>\n{point_data}</PointData>\n\
         <Points>\n      {pts}\n</Points>\n\
         <Cells>\n      {con}\n      {off}\n      {typ}\n</Cells>\n\
         </Piece>\n</UnstructuredGrid>\n<AppendedData encoding=\"raw\">\n_"
    );
    let mut out = Partial::create(path, stream.is_root());
    out.put(header.as_bytes());
    // The cells, generated on rank 0 in runs (vertex k: connectivity k, offset k + 1, type 1).
    const RUN: usize = 1 << 16;
    out.put(&(n as u64).to_le_bytes());
    for start in (0..n).step_by(RUN) {
        out.put(&vec![1u8; RUN.min(n - start)]); // VTK_VERTEX
    }
    for shift in [1u64, 0] {
        out.put(&((8 * n) as u64).to_le_bytes());
        for start in (0..n).step_by(RUN) {
            let run: Vec<u64> = (start as u64..(start + RUN).min(n) as u64)
                .map(|k| k + shift)
                .collect();
            out.put(bytemuck::cast_slice(&run));
        }
    }
    let mut column = |bytes: &[u8], width: usize| {
        out.put(&((width * n) as u64).to_le_bytes());
        stream.stream(bytes, width, |_, piece| out.put(piece));
    };
    column(bytemuck::cast_slice(points), 24);
    for field in fields.iter().rev() {
        let (_, _, comps, bytes) = field.describe();
        column(bytes, 8 * comps);
    }
    out.put(b"\n</AppendedData>\n</VTKFile>\n");
    out.finish()
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

/// Bytes per value of a VTK type name, or `None` for a type this reader does not know.
fn type_size(vtk_type: &str) -> Option<usize> {
    match vtk_type {
        "Float64" | "UInt64" | "Int64" => Some(8),
        "Float32" | "UInt32" | "Int32" => Some(4),
        "UInt16" | "Int16" => Some(2),
        "UInt8" | "Int8" => Some(1),
        _ => None,
    }
}

/// Reads the arrays of a `.vtu` written in the raw appended form (as mote writes it): each by
/// name (`Points` and the `TimeValue` field data included) with its VTK type name, component
/// count and raw little-endian bytes. A separate parser from the writer: the tests use it to
/// check what the writer produced. It is strict: every point array must hold
/// `NumberOfPoints` tuples, `offsets` and `types` `NumberOfCells` values, and a file that
/// declares otherwise (or is truncated) is reported as malformed.
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
    let piece_attr = |key: &str| -> Result<usize, String> {
        let k = format!("{key}=\"");
        let s = xml.find(&k).ok_or_else(|| format!("no {key} in <Piece>"))? + k.len();
        let e = xml[s..].find('"').ok_or("unterminated attribute")?;
        xml[s..s + e]
            .parse()
            .map_err(|_| format!("{key} `{}` is not a count", &xml[s..s + e]))
    };
    let points = piece_attr("NumberOfPoints")?;
    let cells = piece_attr("NumberOfCells")?;
    let mut out = std::collections::BTreeMap::new();
    for tag in xml.split("<DataArray ").skip(1) {
        let attr = |key: &str| -> Result<String, String> {
            let k = format!(" {key}=\"");
            let s = format!(" {tag}")
                .find(&k)
                .ok_or_else(|| format!("DataArray without {key}"))?
                + k.len()
                - 1;
            let e = tag[s..].find('"').ok_or("unterminated attribute")?;
            Ok(tag[s..s + e].to_string())
        };
        let name = attr("Name")?;
        let vtk_type = attr("type")?;
        let size = type_size(&vtk_type)
            .ok_or_else(|| format!("array `{name}`: unknown type `{vtk_type}`"))?;
        let components: usize = match attr("NumberOfComponents") {
            Ok(c) => c
                .parse()
                .ok()
                .filter(|&c| c > 0)
                .ok_or_else(|| format!("array `{name}`: NumberOfComponents `{c}`"))?,
            Err(_) => 1,
        };
        if attr("format").as_deref() == Ok("ascii") {
            // Field data (TimeValue): numbers between the tags.
            let text = tag
                .split_once('>')
                .and_then(|(_, rest)| rest.split_once("</DataArray>"))
                .map(|(t, _)| t)
                .ok_or_else(|| format!("array `{name}`: unterminated ascii data"))?;
            let values: Vec<f64> = text
                .split_whitespace()
                .map(|v| v.parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("array `{name}`: not numbers"))?;
            out.insert(
                name,
                Array {
                    vtk_type: "Float64".into(),
                    components,
                    bytes: bytemuck::cast_slice(&values).to_vec(),
                },
            );
            continue;
        }
        let offset: usize = attr("offset")?
            .parse()
            .map_err(|_| format!("array `{name}`: bad offset"))?;
        let at = marker
            .checked_add(offset)
            .ok_or_else(|| format!("array `{name}`: bad offset"))?;
        let truncated = || format!("array `{name}`: truncated appended data");
        let len_bytes = bytes.get(at..at.saturating_add(8)).ok_or_else(truncated)?;
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        let len = usize::try_from(len).map_err(|_| truncated())?;
        let data = bytes
            .get(at + 8..(at + 8).checked_add(len).ok_or_else(truncated)?)
            .ok_or_else(truncated)?
            .to_vec();
        let expected = match name.as_str() {
            "connectivity" => None,
            "offsets" | "types" => Some(cells),
            _ => Some(points.saturating_mul(components)),
        };
        let values = data.len() / size;
        if data.len() % size != 0 || expected.is_some_and(|e| e != values) {
            return Err(format!(
                "array `{name}` holds {values} {vtk_type} values ({} bytes); the file declares {} \
                 ({points} points, {cells} cells, {components} component(s))",
                data.len(),
                expected.map_or("whole values".to_string(), |e| e.to_string())
            ));
        }
        out.insert(
            name,
            Array {
                vtk_type,
                components,
                bytes: data,
            },
        );
    }
    if !out.contains_key("Points") {
        return Err("no Points array".into());
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
            "Int64" => bytemuck::pod_collect_to_vec::<u8, i64>(&self.bytes)
                .into_iter()
                .map(|v| v as f64)
                .collect(),
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

/// The entries of a snapshot list (a checkpoint's) whose files exist in `dir`: a checkpoint
/// copied or resumed elsewhere does not list snapshots that are not there.
pub fn existing_snapshots(dir: &Path, list: &[(f64, String)]) -> Vec<(f64, String)> {
    list.iter()
        .filter(|(_, f)| dir.join(f).is_file())
        .cloned()
        .collect()
}
