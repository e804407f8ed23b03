//! Zero-copy NumPy views of the engine's arrays.
//!
//! A view's base object is a [`ViewOwner`]: it holds the simulation object alive (so the
//! memory outlives every array that reads it) and counts itself in the simulation's view
//! counter while it exists. A simulation refuses every operation that may move its arrays (a
//! change of the particle count) while the counter is not zero, so a view never dangles.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use numpy::ndarray::ArrayView1;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;

/// The base object of every NumPy view: keeps the simulation alive and counts the view.
#[pyclass(module = "mote", name = "_ViewOwner", frozen)]
pub struct ViewOwner {
    _owner: Py<PyAny>,
    views: Arc<AtomicUsize>,
}

impl Drop for ViewOwner {
    fn drop(&mut self) {
        self.views.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A NumPy array of the `len` elements at `ptr`, whose base object is a new view owner of
/// `owner` counted in `views`.
///
/// # Safety
/// `ptr` must point at `len` initialised elements owned by `owner` that neither move nor are
/// freed while `views` is not zero.
pub unsafe fn view<'py, O, T: numpy::Element>(
    owner: &Bound<'py, O>,
    views: &Arc<AtomicUsize>,
    ptr: *const T,
    len: usize,
    writeable: bool,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    let py = owner.py();
    views.fetch_add(1, Ordering::SeqCst);
    let base = Bound::new(
        py,
        ViewOwner {
            _owner: owner.clone().into_any().unbind(),
            views: views.clone(),
        },
    )?;
    // SAFETY: the caller's contract; the base object keeps the memory's owner alive.
    let array = unsafe { ArrayView1::from_shape_ptr(len, ptr) };
    let out = unsafe { PyArray1::borrow_from_array(&array, base.into_any()) };
    if !writeable {
        out.readwrite().make_nonwriteable();
    }
    Ok(out)
}

/// The message of an operation refused while views exist.
pub fn refused(what: &str, views: &AtomicUsize) -> Option<String> {
    match views.load(Ordering::SeqCst) {
        0 => None,
        n => Some(format!(
            "{what}: {n} NumPy view(s) of the particle arrays are alive, and {what} may move \
             the arrays; delete them (`del`) or take copies (`np.array(view)`) first"
        )),
    }
}
