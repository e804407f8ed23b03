//! `mote.Meshless`: a meshless conservation law on a point cloud, stepped from Python.
//!
//! The simulation is the library's [`MeshlessSession`]: built from a configuration (keyword
//! arguments become its keys, so names, defaults and checks are the TOML file's) by the code
//! that builds `mote run`'s, and stepped by the run's own step function, so a simulation driven
//! from Python is bitwise the program's. The conserved variables are zero-copy, writable NumPy
//! views; positions, volumes, ids and tags read-only ones.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use mote_core::Precision;
use mote_io::meshless::{MeshlessConfig, MeshlessSession, RealSlice, RealSliceMut};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::errors::{self, SimulationError};
use crate::settings;
use crate::views::{refused, view};

/// A hyperbolic conservation law (advection, Burgers, Euler) on a point cloud, in 1 to 3
/// dimensions, solved by the meshless MUSCL scheme with MOOD and Runge-Kutta steppers.
///
/// ``Meshless(problem, set=None, **settings)`` builds a built-in problem ("sod",
/// "advection_wave", "burgers_top_hat", "isentropic_vortex", "riemann", "quadrant",
/// "double_mach", "gresho_vortex", "kelvin_helmholtz", "noh", "sedov", "custom", "file"); the
/// settings are the configuration's keys by their names (``resolution``, ``dim``, ``gamma``,
/// ``order``, ``flux``, ``limiter``, ``mood``, ``stepper``, ``cfl``, ``precision``, ...; tables
/// such as ``left``, ``initial`` or ``motion`` as dicts), with the meaning, defaults and checks
/// ``mote show`` documents; ``set={"section.key": value}`` reaches any key.
/// ``Meshless.from_config(path)`` builds what a TOML file describes.
///
/// ``step()`` takes one stable step (CFL ``cfl``), ``run_to(t)`` steps to ``t`` as ``mote run``
/// does (the same steps, bitwise the same state). ``state(name)`` is a zero-copy view of a
/// conserved variable (writes are what the next step starts from); ``x``, ``y``, ``z``,
/// ``volume``, ``ids`` and ``tags`` read-only views; ``set_primitive(...)`` sets the state from
/// primitive variables through the equation; ``fields()``, ``exact()``, ``errors()``,
/// ``orders()`` and ``mood()`` compute what a snapshot and the diagnostics hold.
#[pyclass(module = "mote", name = "Meshless")]
pub struct Meshless {
    /// The session; a mutex only to make the class `Sync` (methods take `&mut self`, which
    /// pyo3's borrow flag makes exclusive, and reach it without locking).
    session: Mutex<Box<dyn MeshlessSession>>,
    views: Arc<AtomicUsize>,
}

/// A view of values of the run's precision (float32 or float64).
///
/// # Safety
/// As [`view`]: the slice belongs to `slf`'s session and does not move while a view exists.
unsafe fn real_view<'py>(
    slf: &Bound<'py, Meshless>,
    views: &Arc<AtomicUsize>,
    values: RealSlice<'_>,
    writeable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller's contract.
    unsafe {
        match values {
            RealSlice::F32(s) => {
                view(slf, views, s.as_ptr(), s.len(), writeable).map(Bound::into_any)
            }
            RealSlice::F64(s) => {
                view(slf, views, s.as_ptr(), s.len(), writeable).map(Bound::into_any)
            }
        }
    }
}

/// A copy of `values` as a float64 array.
fn to_f64(values: RealSlice<'_>) -> Vec<f64> {
    match values {
        RealSlice::F32(s) => s.iter().map(|&x| f64::from(x)).collect(),
        RealSlice::F64(s) => s.to_vec(),
    }
}

fn simulation_error(e: mote_io::meshless::SessionError) -> PyErr {
    SimulationError::new_err(e.to_string())
}

impl Meshless {
    fn session(&mut self) -> &mut Box<dyn MeshlessSession> {
        self.session.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    fn build(py: Python<'_>, config: MeshlessConfig) -> PyResult<Self> {
        let session = py
            .detach(|| mote_io::meshless::meshless_session(&config))
            .map_err(errors::run)?;
        Ok(Self {
            session: Mutex::new(session),
            views: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn parse(source: &mote_io::Source<'_>, overrides: &[String]) -> PyResult<MeshlessConfig> {
        MeshlessConfig::parse(source, overrides).map_err(errors::config)
    }

    fn variable(&mut self, name: &str) -> PyResult<usize> {
        let vars = self.session().variables();
        vars.iter().position(|v| v == name).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "no conserved variable `{name}`: this equation has {}",
                vars.join(", ")
            ))
        })
    }

    /// Steps to `end` (at most `end`; `None`: one step), the interpreter released in batches
    /// between which Ctrl-C is looked for.
    fn advance(&mut self, py: Python<'_>, end: Option<f64>) -> PyResult<u64> {
        if self.session().adapting()
            && let Some(m) = refused("a step of an adapting cloud", &self.views)
        {
            return Err(PyRuntimeError::new_err(m));
        }
        let session = self.session();
        let first = session.steps();
        loop {
            let result = py.detach(|| {
                let started = Instant::now();
                loop {
                    let now = session.time();
                    if end.is_some_and(|e| now >= e) {
                        return Ok(true);
                    }
                    session.step(end.unwrap_or(f64::INFINITY))?;
                    if end.is_none() {
                        return Ok(true);
                    }
                    if started.elapsed() > crate::gravity::SIGNAL_CHECK {
                        return Ok(false);
                    }
                }
            });
            let done = result.map_err(simulation_error)?;
            py.check_signals()?;
            if done {
                return Ok(session.steps() - first);
            }
        }
    }
}

#[pymethods]
impl Meshless {
    /// Meshless(problem, set=None, **settings)
    ///
    /// The built-in problem ``problem`` with the settings by keyword (see the class
    /// documentation) and ``set`` for any other configuration key.
    #[new]
    #[pyo3(signature = (problem, set=None, **settings))]
    fn new(
        py: Python<'_>,
        problem: &str,
        set: Option<&Bound<'_, PyDict>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut overrides = vec![format!(
            "problem.kind={}",
            toml::Value::String(problem.to_string())
        )];
        settings::table_overrides(settings, settings::MESHLESS_SETTINGS, &mut overrides)?;
        settings::set_overrides(set, &mut overrides)?;
        let source = mote_io::Source {
            file: None,
            text: "physics = \"meshless\"\n",
        };
        let config = Self::parse(&source, &overrides)?;
        Self::build(py, config)
    }

    /// The simulation a configuration file describes (``physics = "meshless"``), with
    /// ``set={"section.key": value}`` on top, as ``mote run FILE --set ...`` builds it.
    #[classmethod]
    #[pyo3(signature = (path, set=None))]
    fn from_config(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        path: std::path::PathBuf,
        set: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            pyo3::exceptions::PyFileNotFoundError::new_err(format!("{}: {e}", path.display()))
        })?;
        let mut overrides = Vec::new();
        settings::set_overrides(set, &mut overrides)?;
        let source = mote_io::Source {
            file: Some(&path),
            text: &text,
        };
        let config = Self::parse(&source, &overrides)?;
        Self::build(py, config)
    }

    /// One stable step (its size from ``cfl`` and the current state); returns the time
    /// reached. Raises ``mote.SimulationError`` if the state stops being finite (naming the
    /// particle) or the stable step collapses.
    fn step(&mut self, py: Python<'_>) -> PyResult<f64> {
        self.advance(py, None)?;
        Ok(self.session().time())
    }

    /// Steps to time ``t`` (default: the configuration's ``end_time``), as ``mote run`` does:
    /// stable steps, the last one shortened to end at ``t``. Releases the interpreter; Ctrl-C
    /// stops at a step boundary (``KeyboardInterrupt``). Returns the number of steps taken.
    #[pyo3(signature = (t=None))]
    fn run_to(&mut self, py: Python<'_>, t: Option<f64>) -> PyResult<u64> {
        let t = t.unwrap_or_else(|| self.end_time());
        let now = self.session().time();
        if !t.is_finite() || t < now {
            return Err(PyValueError::new_err(format!(
                "run_to({t}): the end must be finite and not before the current time {now}"
            )));
        }
        self.advance(py, Some(t))
    }

    /// Simulated time.
    #[getter]
    fn time(&mut self) -> f64 {
        self.session().time()
    }

    /// Steps taken.
    #[getter]
    fn steps(&mut self) -> u64 {
        self.session().steps()
    }

    /// The configuration's end time (``run_to()`` goes there).
    #[getter]
    fn end_time(&mut self) -> f64 {
        self.session().config().run.end_time.unwrap_or(0.0)
    }

    /// The problem's name.
    #[getter]
    fn problem(&mut self) -> &'static str {
        self.session().problem()
    }

    /// The equation's name.
    #[getter]
    fn equation(&mut self) -> &'static str {
        self.session().equation()
    }

    /// The cloud's dimension.
    #[getter]
    fn dim(&mut self) -> usize {
        self.session().dimension()
    }

    /// "f32" or "f64".
    #[getter]
    fn precision(&mut self) -> &'static str {
        match self.session().precision() {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// The conserved variables' names (``state(name)`` takes them).
    #[getter]
    fn variables(&mut self) -> Vec<String> {
        self.session().variables().to_vec()
    }

    /// The primitive variables' names (``set_primitive`` takes them; empty where they are
    /// the conserved ones).
    #[getter]
    fn primitive_variables(&mut self) -> Vec<String> {
        self.session().primitive_variables().to_vec()
    }

    /// Mean number of neighbours per particle.
    #[getter]
    fn neighbours_mean(&mut self) -> f64 {
        self.session().neighbours_mean()
    }

    /// The resolved configuration, as TOML (``mote run`` of it runs the same simulation).
    fn config(&mut self) -> String {
        self.session().config().to_toml()
    }

    /// Number of particles (boundary layers included; ``tags == 0`` selects the interior).
    fn __len__(&mut self) -> usize {
        self.session().len()
    }

    fn __repr__(&mut self) -> String {
        format!(
            "<mote.Meshless: {} ({}, {}-D, {}), {} particles, t = {}, {} steps>",
            self.problem(),
            self.equation(),
            self.dim(),
            self.precision(),
            self.__len__(),
            self.time(),
            self.steps()
        )
    }

    /// The conserved variable ``name`` as a zero-copy NumPy view (float32 or float64 as the
    /// run): a write changes the state the next step starts from.
    fn state<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let mut this = slf.borrow_mut();
        let v = this.variable(name)?;
        let views = this.views.clone();
        let session = this.session();
        // The pointer comes from the writable slice: NumPy writes through it.
        let (ptr, len, f32) = match session.state_mut(v) {
            Ok(RealSliceMut::F32(s)) => (s.as_mut_ptr().cast::<u8>(), s.len(), true),
            Ok(RealSliceMut::F64(s)) => (s.as_mut_ptr().cast::<u8>(), s.len(), false),
            Err(e) => return Err(PyRuntimeError::new_err(e.reason)),
        };
        drop(this);
        // SAFETY: the session's state array, which does not move while a view exists (steps
        // of an adapting cloud refuse; nothing else resizes it).
        unsafe {
            if f32 {
                view(slf, &views, ptr.cast::<f32>().cast_const(), len, true).map(Bound::into_any)
            } else {
                view(slf, &views, ptr.cast::<f64>().cast_const(), len, true).map(Bound::into_any)
            }
        }
    }

    /// Positions along axis ``axis`` (0, 1, 2 up to the dimension) as a read-only view.
    fn position<'py>(slf: &Bound<'py, Self>, axis: usize) -> PyResult<Bound<'py, PyAny>> {
        let mut this = slf.borrow_mut();
        let views = this.views.clone();
        let positions = this.session().positions();
        let Some(&p) = positions.get(axis) else {
            return Err(PyValueError::new_err(format!(
                "axis {axis}: the cloud is {}-D",
                positions.len()
            )));
        };
        // SAFETY: the session's position array (see `state`); the borrow ends here, the view
        // owner keeps the session alive.
        let out = unsafe { real_view(slf, &views, p, false) };
        drop(this);
        out
    }

    /// x coordinates (read-only view).
    #[getter]
    fn x<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::position(slf, 0)
    }
    /// y coordinates (read-only view; 2-D and 3-D clouds).
    #[getter]
    fn y<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::position(slf, 1)
    }
    /// z coordinates (read-only view; 3-D clouds).
    #[getter]
    fn z<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::position(slf, 2)
    }

    /// Particle volumes (read-only view).
    #[getter]
    fn volume<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let mut this = slf.borrow_mut();
        let views = this.views.clone();
        let v = this.session().volumes();
        // SAFETY: as `position`.
        let out = unsafe { real_view(slf, &views, v, false) };
        drop(this);
        out
    }

    /// Stable ids (read-only view).
    #[getter]
    fn ids<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let mut this = slf.borrow_mut();
        let views = this.views.clone();
        let ids = this.session().ids();
        // SAFETY: as `position`.
        let out = unsafe { view(slf, &views, ids.as_ptr(), ids.len(), false) };
        drop(this);
        out
    }

    /// Boundary tags (read-only view): 0 for interior particles, the face's tag for boundary
    /// layers.
    #[getter]
    fn tags<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let mut this = slf.borrow_mut();
        let views = this.views.clone();
        let tags = this.session().tags();
        // SAFETY: as `position`.
        let out = unsafe { view(slf, &views, tags.as_ptr(), tags.len(), false) };
        drop(this);
        out
    }

    /// Number of NumPy views of the arrays alive now.
    #[getter]
    fn live_views(&self) -> usize {
        self.views.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A copy of the positions as a new (N, dim) float64 array.
    fn copy_positions<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let columns: Vec<Vec<f64>> = self.session().positions().into_iter().map(to_f64).collect();
        let (n, dim) = (columns.first().map_or(0, Vec::len), columns.len());
        let values: Vec<f64> = (0..n)
            .flat_map(|i| columns.iter().map(move |c| c[i]))
            .collect();
        PyArray1::from_vec(py, values).reshape([n, dim])
    }

    /// Every field a snapshot holds, computed now as new float64 arrays: the conserved
    /// variables and, where they differ, the primitive ones (density, velocity_x, ...,
    /// pressure for Euler).
    fn fields<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let session = self.session();
        for (v, name) in session.variables().iter().enumerate() {
            out.set_item(name, PyArray1::from_vec(py, to_f64(session.state(v))))?;
        }
        let names = session.primitive_variables().to_vec();
        for (name, values) in names.iter().zip(session.primitive()) {
            if !out.contains(name)? {
                out.set_item(name, PyArray1::from_vec(py, values))?;
            }
        }
        Ok(out)
    }

    /// The exact solution at every particle at time ``t`` (default: now) as new arrays
    /// ``exact_NAME`` (primitive variables where the equation has them), or ``None`` where the
    /// problem has no exact solution.
    #[pyo3(signature = (t=None))]
    fn exact<'py>(
        &mut self,
        py: Python<'py>,
        t: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let session = self.session();
        let t = t.unwrap_or_else(|| session.time());
        let Some((names, columns)) = session.exact(t) else {
            return Ok(None);
        };
        let out = PyDict::new(py);
        for (name, values) in names.iter().zip(columns) {
            out.set_item(name, PyArray1::from_vec(py, values))?;
        }
        Ok(Some(out))
    }

    /// Errors of each conserved variable against the exact solution now, as the diagnostics
    /// report them (volume-weighted: ``l1``, ``l2``, ``relative_l2``, ``max``), or ``None``.
    fn errors<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(errors) = self.session().errors() else {
            return Ok(None);
        };
        let out = PyDict::new(py);
        for (name, e) in errors {
            let d = PyDict::new(py);
            d.set_item("l1", e.l1)?;
            d.set_item("l2", e.l2)?;
            d.set_item("relative_l2", e.relative_l2)?;
            d.set_item("max", e.max)?;
            out.set_item(name, d)?;
        }
        Ok(Some(out))
    }

    /// Every particle's current reconstruction order (MOOD lowers it where the unlimited
    /// update fails its criterion), as a new uint8 array.
    fn orders<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let orders = self.session().orders().map_err(simulation_error)?;
        Ok(PyArray1::from_vec(py, orders))
    }

    /// MOOD's counts summed over the steps so far: ``stages``, ``iterations``, ``reductions``
    /// (order reductions summed over particles), ``failures``, ``inadmissible``,
    /// ``capped_stages``, ``unresolved``; and ``floor_events`` (positivity floors applied).
    fn mood<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let session = self.session();
        let m = session.mood();
        let out = PyDict::new(py);
        out.set_item("stages", m.stages)?;
        out.set_item("iterations", m.iterations)?;
        out.set_item("reductions", m.reductions)?;
        out.set_item("failures", m.failures)?;
        out.set_item("inadmissible", m.inadmissible)?;
        out.set_item("capped_stages", m.capped_stages)?;
        out.set_item("unresolved", m.unresolved)?;
        out.set_item("floor_events", session.floor_events())?;
        Ok(out)
    }

    /// Sets the state of every particle from primitive variables, converted by the equation
    /// (Euler: ``density``, ``velocity`` of shape (N, dim) or ``velocity_x``, ...,
    /// ``pressure``; a scalar equation: its variable, e.g. ``u``). Arrays of shape (N,) over
    /// the particles (``x``, ``y``, ``z`` give their positions). The values are checked:
    /// finite, and a state the equation accepts.
    #[pyo3(signature = (**arrays))]
    fn set_primitive(&mut self, arrays: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let session = self.session();
        let n = session.len();
        let dim = session.dimension();
        let names: Vec<String> = if session.primitive_variables().is_empty() {
            session.variables().to_vec()
        } else {
            session.primitive_variables().to_vec()
        };
        let mut columns: Vec<Option<Vec<f64>>> = vec![None; names.len()];
        let py = match arrays {
            Some(a) => a.py(),
            None => return Err(PyValueError::new_err(format!("give {}", names.join(", ")))),
        };
        let np = py.import("numpy")?;
        for (k, v) in arrays.into_iter().flat_map(|d| d.iter()) {
            let key: String = k.extract()?;
            let v = np.call_method1("ascontiguousarray", (v, "float64"))?;
            if key == "velocity" && names.iter().any(|n| n == "velocity_x") {
                let a: PyReadonlyArray2<f64> = v.extract().map_err(|_| {
                    PyValueError::new_err(format!("velocity: expected shape ({n}, {dim})"))
                })?;
                let a = a.as_array();
                if a.shape() != [n, dim] {
                    return Err(PyValueError::new_err(format!(
                        "velocity: shape {:?}, expected ({n}, {dim})",
                        a.shape()
                    )));
                }
                for d in 0..dim {
                    let name = format!("velocity_{}", ["x", "y", "z"][d]);
                    let k = names
                        .iter()
                        .position(|m| *m == name)
                        .expect("Euler's names");
                    columns[k] = Some(a.column(d).to_vec());
                }
                continue;
            }
            let Some(k) = names.iter().position(|m| *m == key) else {
                return Err(PyValueError::new_err(format!(
                    "set_primitive: no variable `{key}`; this equation's are {}",
                    names.join(", ")
                )));
            };
            let a: PyReadonlyArray1<f64> = v.extract().map_err(|_| {
                PyValueError::new_err(format!("{key}: expected an array of shape ({n},)"))
            })?;
            let a = a.as_array();
            if a.len() != n {
                return Err(PyValueError::new_err(format!(
                    "{key}: {} values for {n} particles",
                    a.len()
                )));
            }
            if let Some(i) = a.iter().position(|x| !x.is_finite()) {
                return Err(PyValueError::new_err(format!(
                    "{key}: index {i} is {}: every value must be finite",
                    a[i]
                )));
            }
            // A gas needs a positive density and pressure (the equation's floors would
            // otherwise change the state silently).
            if (key == "density" || key == "pressure")
                && let Some(i) = a.iter().position(|&x| x <= 0.0)
            {
                return Err(PyValueError::new_err(format!(
                    "{key}: index {i} is {}: it must be > 0",
                    a[i]
                )));
            }
            columns[k] = Some(a.to_vec());
        }
        let missing: Vec<&str> = names
            .iter()
            .zip(&columns)
            .filter(|(_, c)| c.is_none())
            .map(|(n, _)| n.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(PyValueError::new_err(format!(
                "set_primitive: missing {}",
                missing.join(", ")
            )));
        }
        let columns: Vec<Vec<f64>> = columns.into_iter().flatten().collect();
        let slices: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
        session
            .set_primitive(&slices)
            .map_err(|e| PyValueError::new_err(e.reason))
    }
}
