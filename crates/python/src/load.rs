//! `mote.load`: the arrays of a snapshot or a checkpoint, read by the library's own readers.

use std::path::PathBuf;

use mote_core::{Precision, Real};
use mote_io::checkpoint::{self, AnyHeader};
use mote_io::files::FileError;
use mote_io::snapshot::Values;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A file that cannot be read: `FileNotFoundError` where it is missing, else `ValueError`
/// (not a snapshot, corrupt, an HDF5 file in a build without HDF5) with the reader's message.
fn unreadable(e: FileError) -> PyErr {
    if !e.path.exists() {
        pyo3::exceptions::PyFileNotFoundError::new_err(e.to_string())
    } else {
        PyValueError::new_err(e.to_string())
    }
}

/// Values as a NumPy array of their stored type, reshaped to `shape`.
fn array<'py>(py: Python<'py>, v: Values, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let a = match v {
        Values::F32(v) => PyArray1::from_vec(py, v).into_any(),
        Values::F64(v) => PyArray1::from_vec(py, v).into_any(),
        Values::U64(v) => PyArray1::from_vec(py, v).into_any(),
        Values::U32(v) => PyArray1::from_vec(py, v).into_any(),
    };
    if shape.len() > 1 {
        a.call_method1("reshape", (shape.to_vec(),))
    } else {
        Ok(a)
    }
}

/// The particle arrays of a gravity checkpoint, named as the `Gravity` views are (its list).
fn gravity_arrays<'py, R: Real + numpy::Element>(
    py: Python<'py>,
    path: &std::path::Path,
    arrays: &[u8],
    out: &Bound<'py, PyDict>,
) -> PyResult<()> {
    let p = checkpoint::read_particles::<R>(path, arrays).map_err(unreadable)?;
    for (name, c) in crate::gravity::VIEWS {
        out.set_item(name, PyArray1::from_slice(py, p.component(c)))?;
    }
    out.set_item("ids", PyArray1::from_slice(py, p.ids()))?;
    Ok(())
}

/// The state arrays of a meshless checkpoint: ids and the conserved variables `u0`, `u1`, ...
fn meshless_arrays<'py, R: Real + numpy::Element>(
    py: Python<'py>,
    path: &std::path::Path,
    header: &checkpoint::MeshlessHeader,
    arrays: &[u8],
    out: &Bound<'py, PyDict>,
) -> PyResult<()> {
    let (ids, state) =
        checkpoint::read_meshless_state::<R>(path, header, arrays).map_err(unreadable)?;
    out.set_item("ids", PyArray1::from_vec(py, ids))?;
    for (k, u) in state.into_iter().enumerate() {
        out.set_item(format!("u{k}"), PyArray1::from_vec(py, u))?;
    }
    Ok(())
}

/// What [`load_file`] returns: the kind of file, its time, its arrays, its configuration.
type Loaded<'py> = (String, Option<f64>, Bound<'py, PyDict>, Option<String>);

/// Reads `path` and returns `(kind, time, arrays, config)`: kind "hdf5", "vtu" or
/// "checkpoint"; time where the file records one (`None` for a `.vtu`); arrays by name
/// (an HDF5 dataset keeps its name, type and shape); the run's configuration where the file
/// carries it.
#[pyfunction]
pub fn load_file<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Loaded<'py>> {
    let out = PyDict::new(py);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "hdf5" | "h5" => {
            let c = py
                .detach(|| mote_io::snapshot::read_hdf5(&path))
                .map_err(unreadable)?;
            for (name, (shape, values)) in c.datasets {
                out.set_item(name, array(py, values, &shape)?)?;
            }
            Ok(("hdf5".into(), Some(c.time), out, c.config))
        }
        "vtu" => {
            let bytes = std::fs::read(&path).map_err(|e| {
                unreadable(FileError {
                    path: path.clone(),
                    message: e.to_string(),
                })
            })?;
            let arrays = mote_io::vtk::read_vtu(&bytes)
                .map_err(|m| PyValueError::new_err(format!("{}: {m}", path.display())))?;
            for (name, a) in arrays {
                let values = a.to_f64();
                let n = values.len();
                let values = PyArray1::from_vec(py, values);
                let value = if a.components > 1 {
                    values.reshape([n / a.components, a.components])?.into_any()
                } else {
                    values.into_any()
                };
                out.set_item(name, value)?;
            }
            Ok(("vtu".into(), None, out, None))
        }
        _ => {
            let (header, arrays) = checkpoint::read_any(&path).map_err(|e| {
                if ext == "mote" || !path.exists() {
                    unreadable(e)
                } else {
                    PyValueError::new_err(format!(
                        "{}: not a snapshot (.hdf5, .h5, .vtu) or a checkpoint (.mote): {}",
                        path.display(),
                        e.message
                    ))
                }
            })?;
            let (time, config) = match &header {
                AnyHeader::Gravity(h) => {
                    match h.precision {
                        Precision::F32 => gravity_arrays::<f32>(py, &path, &arrays, &out)?,
                        Precision::F64 => gravity_arrays::<f64>(py, &path, &arrays, &out)?,
                    }
                    (h.time, h.config.clone())
                }
                AnyHeader::Meshless(h) => {
                    match h.precision {
                        Precision::F32 => meshless_arrays::<f32>(py, &path, h, &arrays, &out)?,
                        Precision::F64 => meshless_arrays::<f64>(py, &path, h, &arrays, &out)?,
                    }
                    (h.time, h.config.clone())
                }
            };
            Ok(("checkpoint".into(), Some(time), out, Some(config)))
        }
    }
}
