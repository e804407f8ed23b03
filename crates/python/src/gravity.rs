//! `mote.Gravity`: an N-body simulation driven from Python.
//!
//! The simulation is the library's [`Simulation`], built by [`gravity_simulation`] from a
//! configuration assembled from keyword arguments (so the settings are validated as the TOML
//! keys are) and advanced on the same step grid as `mote run` ([`step_towards`]): a run driven from
//! Python is bitwise the run of the program.
//!
//! The particle arrays are handed to NumPy without copying: each view's base object is a
//! [`ViewOwner`] that holds the simulation alive and is counted; an operation that changes the
//! particle count (and may move the arrays) is refused while a view exists, so no view can
//! dangle.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mote_core::{Component, CpuBackend, ParticleData, Precision, Real};
use mote_gravity::Simulation;
use mote_io::config::{GravityConfig, InitialConditionsKind};
use mote_io::initial::Bodies;
use mote_io::runner::{first_non_finite, gravity_simulation, step_towards};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::errors::{self, SimulationError};
use crate::settings;
use crate::views::view;

/// The simulation in the precision it was built in.
enum Engine {
    F32(Simulation<f32>),
    F64(Simulation<f64>),
}

/// Calls `$body` with `$s` bound to the simulation, whatever its precision.
macro_rules! with_sim {
    ($engine:expr, $s:ident => $body:expr) => {
        match $engine {
            Engine::F32($s) => $body,
            Engine::F64($s) => $body,
        }
    };
}

/// How long the interpreter stays released between two checks for Ctrl-C: long enough that
/// re-taking it costs nothing measurable, short enough that a stop feels immediate.
pub(crate) const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// A self-gravitating N-body system in N-body units (G = 1).
///
/// Build one from arrays, ``Gravity(positions, velocities, masses)`` (positions and velocities
/// of shape (N, 3)), or from the built-in initial conditions: ``Gravity.plummer(n=4096,
/// seed=1)``, ``Gravity.kepler(...)``, ``Gravity.uniform_sphere(...)``,
/// ``Gravity.cold_collapse(...)``, ``Gravity.disc_galaxy(...)``,
/// ``Gravity.galaxy_collision(...)``. Every constructor takes the settings by keyword, with the
/// meaning, default and checks of the configuration key it sets: ``precision`` ("f64" or
/// "f32"), ``dt`` (run.dt, default 1/128), ``threads`` (0: all cores), ``memory_limit``,
/// ``solver`` ("direct" or "tree"), ``softening``, ``kernel``, ``theta``, ``multipole``,
/// ``leaf_size``, ``group_size``, ``integrator`` ("leapfrog", "yoshida4", "rk4"), ``backend``
/// and ``device``.
///
/// ``integrate(t)`` advances to time ``t`` on the same step grid as ``mote run`` (bitwise the
/// same run); Ctrl-C stops it at a step boundary with ``KeyboardInterrupt``.
///
/// The arrays ``x, y, z, vx, vy, vz, ax, ay, az, mass`` are NumPy views of the engine's memory
/// (no copy; a write is seen by the next step); ``ids`` is a read-only view. While a view
/// exists, ``add`` and ``remove`` are refused (they may move the arrays). ``copy_positions()``
/// and friends return (N, 3) copies.
#[pyclass(module = "mote", name = "Gravity")]
pub struct Gravity {
    /// The simulation. A mutex only to make the class shareable between threads (`Sync`); the
    /// methods reach it through `&mut self`, which pyo3's borrow flag already makes exclusive,
    /// so it is never contended.
    engine: Mutex<Engine>,
    config: GravityConfig,
    /// Total energy at construction (or at the last `add`/`remove`), for `energy_error`.
    initial_energy: f64,
    /// Views of the particle arrays that are alive.
    views: Arc<AtomicUsize>,
}

/// The component arrays by the names of their views.
pub(crate) const VIEWS: [(&str, Component); 10] = [
    ("x", Component::PositionX),
    ("y", Component::PositionY),
    ("z", Component::PositionZ),
    ("vx", Component::VelocityX),
    ("vy", Component::VelocityY),
    ("vz", Component::VelocityZ),
    ("ax", Component::AccelerationX),
    ("ay", Component::AccelerationY),
    ("az", Component::AccelerationZ),
    ("mass", Component::Mass),
];

/// The positions, velocities, masses and ids given as arrays, checked like a file's bodies.
fn bodies<'py>(
    positions: &Bound<'py, PyAny>,
    velocities: &Bound<'py, PyAny>,
    masses: &Bound<'py, PyAny>,
    ids: Option<&Bound<'py, PyAny>>,
    first_id: u64,
) -> PyResult<Bodies> {
    let py = positions.py();
    let np = py.import("numpy")?;
    let as_f64 = |a: &Bound<'py, PyAny>| np.call_method1("ascontiguousarray", (a, "float64"));
    let vectors = |name: &str, a: &Bound<'py, PyAny>| -> PyResult<[Vec<f64>; 3]> {
        let a = as_f64(a)?;
        let a: PyReadonlyArray2<f64> = a.extract().map_err(|_| {
            PyValueError::new_err(format!("{name}: expected an array of shape (N, 3)"))
        })?;
        let a = a.as_array();
        if a.ncols() != 3 {
            return Err(PyValueError::new_err(format!(
                "{name}: shape {:?}, expected (N, 3)",
                a.shape()
            )));
        }
        Ok(std::array::from_fn(|d| a.column(d).to_vec()))
    };
    let position = vectors("positions", positions)?;
    let velocity = vectors("velocities", velocities)?;
    let mass: PyReadonlyArray1<f64> = as_f64(masses)?
        .extract()
        .map_err(|_| PyValueError::new_err("masses: expected an array of shape (N,)"))?;
    let mass = mass.as_array().to_vec();
    let n = position[0].len();
    if velocity[0].len() != n || mass.len() != n {
        return Err(PyValueError::new_err(format!(
            "positions, velocities and masses have {n}, {} and {} rows: they must have one per \
             body",
            velocity[0].len(),
            mass.len()
        )));
    }
    let ids = match ids {
        None => (first_id..first_id + n as u64).collect(),
        Some(ids) => {
            let ids: PyReadonlyArray1<u64> = np
                .call_method1("ascontiguousarray", (ids, "uint64"))?
                .extract()
                .map_err(|_| PyValueError::new_err("ids: expected an array of shape (N,)"))?;
            let ids = ids.as_array().to_vec();
            if ids.len() != n {
                return Err(PyValueError::new_err(format!(
                    "ids: {} of them for {n} bodies",
                    ids.len()
                )));
            }
            ids
        }
    };
    let b = Bodies {
        position,
        velocity,
        mass,
        ids,
        time: 0.0,
    };
    mote_io::initial::check_bodies(&b, ["positions", "velocities", "masses", "ids"])
        .map_err(PyValueError::new_err)?;
    Ok(b)
}

impl Gravity {
    /// A simulation of `kind` (its keys in `initial`) with the keyword settings, or of
    /// `bodies` when given.
    fn build(
        py: Python<'_>,
        kind: &str,
        initial: &[(&str, Option<Bound<'_, PyAny>>)],
        kwargs: Option<&Bound<'_, PyDict>>,
        bodies: Option<Bodies>,
    ) -> PyResult<Self> {
        let mut overrides = vec![format!("initial_conditions.kind=\"{kind}\"")];
        for (key, value) in initial {
            if let Some(v) = value.as_ref().filter(|v| !v.is_none()) {
                overrides.push(format!(
                    "initial_conditions.{key}={}",
                    settings::toml_value(v, key)?
                ));
            }
        }
        // A built-in distribution takes its own keys by keyword too (the configuration's list
        // of what applies to the kind); bodies given as arrays take none.
        let initial_keys = match bodies {
            Some(_) => &[][..],
            None => {
                let kind: InitialConditionsKind = toml::Value::String(kind.to_string())
                    .try_into()
                    .map_err(|e| PyValueError::new_err(format!("{kind}: {e}")))?;
                mote_io::config::initial_condition_keys(kind)
            }
        };
        settings::gravity_overrides(kwargs, initial_keys, &mut overrides)?;
        let source = mote_io::Source {
            file: None,
            text: "physics = \"gravity\"\n",
        };
        let config = GravityConfig::parse(&source, &overrides).map_err(errors::config)?;
        let engine = py
            .detach(|| -> Result<Engine, mote_io::runner::RunError> {
                Ok(match config.run.precision {
                    Precision::F32 => Engine::F32(gravity_simulation(&config, bodies.as_ref())?),
                    Precision::F64 => Engine::F64(gravity_simulation(&config, bodies.as_ref())?),
                })
            })
            .map_err(errors::run)?;
        let mut g = Self {
            engine: Mutex::new(engine),
            config,
            initial_energy: 0.0,
            views: Arc::new(AtomicUsize::new(0)),
        };
        g.initial_energy = g.measure(py).total;
        Ok(g)
    }

    fn engine(&mut self) -> &mut Engine {
        // A panic inside a step would poison the mutex; the state is then still whole at the
        // last step boundary the panic left it at, which is all a poisoned lock guards.
        self.engine.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    fn backend(&self) -> CpuBackend {
        CpuBackend::threads(self.config.run.threads)
    }

    fn measure(&mut self, py: Python<'_>) -> mote_gravity::Diagnostics {
        let backend = self.backend();
        let engine = self.engine();
        py.detach(|| with_sim!(engine, s => s.diagnostics(backend)))
    }

    /// Refuses a change of the particle count while views exist.
    fn check_no_views(&self, what: &str) -> PyResult<()> {
        match crate::views::refused(what, &self.views) {
            None => Ok(()),
            Some(m) => Err(PyRuntimeError::new_err(m)),
        }
    }

    fn particles_len(&mut self) -> usize {
        with_sim!(self.engine(), s => s.particles.len())
    }

    /// (N, 3) copy of three components.
    fn copy3<'py>(
        &mut self,
        py: Python<'py>,
        first: Component,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        fn interleaved<R: Real>(p: &ParticleData<R>, first: Component) -> Vec<f64> {
            let i = first as usize;
            let [x, y, z] = [0, 1, 2].map(|d| p.component(Component::ALL[i + d]));
            (0..p.len())
                .flat_map(|k| [x[k].as_f64(), y[k].as_f64(), z[k].as_f64()])
                .collect()
        }
        let values = with_sim!(self.engine(), s => interleaved(&s.particles, first));
        let n = values.len() / 3;
        PyArray1::from_vec(py, values).reshape([n, 3])
    }
}

#[pymethods]
impl Gravity {
    /// Gravity(positions, velocities, masses, ids=None, **settings)
    ///
    /// A system of the bodies given as arrays: positions and velocities of shape (N, 3),
    /// masses of shape (N,), optionally unique integer ids (default 0..N). The values are
    /// checked (finite, masses > 0, ids unique) and copied into the engine's arrays; the
    /// accelerations are computed. Settings: see the class documentation.
    #[new]
    #[pyo3(signature = (positions, velocities, masses, ids=None, **settings))]
    fn new(
        py: Python<'_>,
        positions: &Bound<'_, PyAny>,
        velocities: &Bound<'_, PyAny>,
        masses: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let b = bodies(positions, velocities, masses, ids, 0)?;
        Self::build(py, "plummer", &[], settings, Some(b))
    }

    /// A Plummer sphere of ``n`` equal-mass bodies in N-body units (total mass 1, virial
    /// equilibrium), seeded and reproducible on every platform; the same bodies as
    /// ``[initial_conditions] kind = "plummer"``.
    #[classmethod]
    #[pyo3(signature = (n=None, seed=None, **settings))]
    fn plummer(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        n: Option<Bound<'_, PyAny>>,
        seed: Option<Bound<'_, PyAny>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            "plummer",
            &[("particles", n), ("seed", seed)],
            settings,
            None,
        )
    }

    /// A uniform sphere of ``n`` bodies of ``radius`` with virial ratio ``virial_ratio``.
    #[classmethod]
    #[pyo3(signature = (n=None, radius=None, virial_ratio=None, seed=None, **settings))]
    fn uniform_sphere(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        n: Option<Bound<'_, PyAny>>,
        radius: Option<Bound<'_, PyAny>>,
        virial_ratio: Option<Bound<'_, PyAny>>,
        seed: Option<Bound<'_, PyAny>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            "uniform_sphere",
            &[
                ("particles", n),
                ("radius", radius),
                ("virial_ratio", virial_ratio),
                ("seed", seed),
            ],
            settings,
            None,
        )
    }

    /// A uniform sphere of ``n`` bodies at rest (cold collapse).
    #[classmethod]
    #[pyo3(signature = (n=None, radius=None, seed=None, **settings))]
    fn cold_collapse(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        n: Option<Bound<'_, PyAny>>,
        radius: Option<Bound<'_, PyAny>>,
        seed: Option<Bound<'_, PyAny>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            "cold_collapse",
            &[("particles", n), ("radius", radius), ("seed", seed)],
            settings,
            None,
        )
    }

    /// Two bodies on a Kepler orbit of semi-major axis ``semi_major_axis`` and eccentricity
    /// ``eccentricity``, masses ``m1`` and ``m2``, starting at pericentre in the centre-of-mass
    /// frame. The period is ``2 pi sqrt(a^3 / (m1 + m2))``.
    #[classmethod]
    #[pyo3(signature = (semi_major_axis=None, eccentricity=None, m1=None, m2=None, **settings))]
    fn kepler(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        semi_major_axis: Option<Bound<'_, PyAny>>,
        eccentricity: Option<Bound<'_, PyAny>>,
        m1: Option<Bound<'_, PyAny>>,
        m2: Option<Bound<'_, PyAny>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            "kepler",
            &[
                ("semi_major_axis", semi_major_axis),
                ("eccentricity", eccentricity),
                ("m1", m1),
                ("m2", m2),
            ],
            settings,
            None,
        )
    }

    /// A disc galaxy (Plummer bulge and exponential disc) of ``n`` bodies. The galaxy's keys
    /// of ``[initial_conditions]`` (``bulge_mass``, ``disc_scale_length``, ...) are accepted
    /// by keyword.
    #[classmethod]
    #[pyo3(signature = (n=None, seed=None, **settings))]
    fn disc_galaxy(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        n: Option<Bound<'_, PyAny>>,
        seed: Option<Bound<'_, PyAny>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            "disc_galaxy",
            &[("particles", n), ("seed", seed)],
            settings,
            None,
        )
    }

    /// Two disc galaxies of ``n`` bodies each on a parabolic approach (``separation``,
    /// ``pericentre``, ``inclination_degrees`` and the galaxy keys by keyword).
    #[classmethod]
    #[pyo3(signature = (n=None, seed=None, **settings))]
    fn galaxy_collision(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        n: Option<Bound<'_, PyAny>>,
        seed: Option<Bound<'_, PyAny>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            "galaxy_collision",
            &[("particles", n), ("seed", seed)],
            settings,
            None,
        )
    }

    /// Advances to time ``t`` with steps of ``dt`` on the grid ``k * dt`` (the last step ends
    /// at ``t``), as ``mote run`` does: the same ``t`` from the same state gives the same bits.
    /// The interpreter is released while the steps run. Ctrl-C stops at the next step boundary
    /// with ``KeyboardInterrupt``, leaving a consistent state (``time`` and ``steps`` say
    /// where). Raises ``mote.SimulationError`` if a position or velocity became NaN or
    /// infinite (naming the particle and the step). Returns the number of steps taken.
    fn integrate(&mut self, py: Python<'_>, t: f64) -> PyResult<u64> {
        let dt = self.config.run.dt;
        let engine = self.engine();
        let (now, first) = with_sim!(&*engine, s => (s.time(), s.steps()));
        if !t.is_finite() || t < now {
            return Err(PyValueError::new_err(format!(
                "integrate({t}): the end must be finite and not before the current time {now}"
            )));
        }
        loop {
            // A batch of steps with the interpreter released, then a look for Ctrl-C.
            let done = py.detach(|| {
                let started = Instant::now();
                with_sim!(&mut *engine, s => {
                    step_towards(s, dt, t, || started.elapsed() > SIGNAL_CHECK)
                })
            });
            py.check_signals()?;
            if done {
                break;
            }
        }
        with_sim!(&*engine, s => {
            if let Some((index, what)) = first_non_finite(&s.particles) {
                return Err(SimulationError::new_err(format!(
                    "non-finite state at step {}, time {}: particle id {} (index {index}) has \
                     {what}",
                    s.steps(),
                    s.time(),
                    s.particles.ids()[index]
                )));
            }
            Ok(s.steps() - first)
        })
    }

    /// Takes ``n`` steps of ``dt`` (default 1) from the current time, off the ``dt`` grid
    /// only if the current time is. Returns the time reached.
    #[pyo3(signature = (n=1))]
    fn step(&mut self, py: Python<'_>, n: u64) -> PyResult<f64> {
        let dt = self.config.run.dt;
        let t = with_sim!(self.engine(), s => s.time()) + n as f64 * dt;
        self.integrate(py, t)?;
        Ok(self.time())
    }

    /// Simulated time.
    #[getter]
    fn time(&mut self) -> f64 {
        with_sim!(self.engine(), s => s.time())
    }

    /// Steps taken.
    #[getter]
    fn steps(&mut self) -> u64 {
        with_sim!(self.engine(), s => s.steps())
    }

    /// The step size ``dt``.
    #[getter]
    fn dt(&self) -> f64 {
        self.config.run.dt
    }

    /// "f32" or "f64".
    #[getter]
    fn precision(&self) -> &'static str {
        match self.config.run.precision {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// The force solver's description (kind, kernel, softening).
    #[getter]
    fn solver(&mut self) -> String {
        with_sim!(self.engine(), s => s.solver().name())
    }

    /// The integrator's name.
    #[getter]
    fn integrator(&mut self) -> &'static str {
        with_sim!(self.engine(), s => s.integrator().name())
    }

    /// The configuration this simulation was built from, as TOML (``mote run`` of it with
    /// ``run.end_time`` set runs the same simulation).
    fn config(&self) -> String {
        self.config.to_toml()
    }

    /// Number of bodies.
    fn __len__(&mut self) -> usize {
        self.particles_len()
    }

    fn __repr__(&mut self) -> String {
        format!(
            "<mote.Gravity: {} bodies, t = {}, {} steps, {}, {}, {}>",
            self.particles_len(),
            self.time(),
            self.steps(),
            self.precision(),
            self.integrator(),
            self.solver()
        )
    }

    /// Energies, momenta and virial ratio of the current state, as a dict: ``kinetic``,
    /// ``potential``, ``total``, ``energy_error`` (relative to the total at construction),
    /// ``momentum`` and ``angular_momentum`` (3-tuples), ``virial_ratio`` (2T/|W|), ``mass``,
    /// ``centre_of_mass``. Sums are compensated and independent of the thread count.
    fn diagnostics<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = self.measure(py);
        let out = PyDict::new(py);
        out.set_item("kinetic", d.kinetic)?;
        out.set_item("potential", d.potential)?;
        out.set_item("total", d.total)?;
        out.set_item("energy_error", d.relative_energy_error(self.initial_energy))?;
        out.set_item("momentum", d.momentum)?;
        out.set_item("angular_momentum", d.angular_momentum)?;
        out.set_item("virial_ratio", d.virial_ratio)?;
        out.set_item("mass", d.mass)?;
        out.set_item("centre_of_mass", d.centre_of_mass)?;
        Ok(out)
    }

    /// Relative error of the total energy against its value at construction (or at the last
    /// ``add``/``remove``).
    fn energy_error(&mut self, py: Python<'_>) -> f64 {
        let e0 = self.initial_energy;
        self.measure(py).relative_energy_error(e0)
    }

    /// Adds bodies (positions and velocities of shape (K, 3), masses of shape (K,)); returns
    /// their ids (new ids above every id so far). The accelerations are recomputed and the
    /// energy reference reset. Refused while views of the arrays exist.
    fn add<'py>(
        &mut self,
        py: Python<'py>,
        positions: &Bound<'py, PyAny>,
        velocities: &Bound<'py, PyAny>,
        masses: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        self.check_no_views("add")?;
        let b = bodies(positions, velocities, masses, None, 0)?;
        // One resize for all of them: every array grows together, or, on a CapacityError,
        // none does.
        fn append<R: Real>(
            s: &mut Simulation<R>,
            b: &Bodies,
        ) -> Result<Vec<u64>, mote_core::CapacityError> {
            let old = s.particles.len();
            s.particles.resize(old + b.len())?;
            let c = |v: f64| R::cast(v);
            let mut p = s.particles.view_mut();
            for i in 0..b.len() {
                p.position
                    .set(old + i, std::array::from_fn(|d| c(b.position[d][i])));
                p.velocity
                    .set(old + i, std::array::from_fn(|d| c(b.velocity[d][i])));
                p.mass[old + i] = c(b.mass[i]);
            }
            Ok(p.id[old..].to_vec())
        }
        let engine = self.engine();
        let ids = with_sim!(engine, s => {
            let ids = append(s, &b);
            py.detach(|| s.refresh_accelerations());
            ids
        })
        .map_err(|e| pyo3::exceptions::PyMemoryError::new_err(e.to_string()))?;
        self.initial_energy = self.measure(py).total;
        Ok(PyArray1::from_vec(py, ids))
    }

    /// Removes the bodies with the given ids (the others keep their order); the accelerations
    /// are recomputed and the energy reference reset. Refused while views of the arrays exist,
    /// or if an id is unknown (then nothing is removed), or if it would remove every body.
    fn remove(&mut self, py: Python<'_>, ids: Vec<u64>) -> PyResult<()> {
        self.check_no_views("remove")?;
        let engine = self.engine();
        let wanted: HashSet<u64> = ids.iter().copied().collect();
        let (present, n): (HashSet<u64>, usize) = with_sim!(&*engine, s => (
            s.particles.ids().iter().copied().filter(|id| wanted.contains(id)).collect(),
            s.particles.len(),
        ));
        if let Some(id) = ids.iter().find(|id| !present.contains(id)) {
            return Err(PyValueError::new_err(format!(
                "remove: no body has id {id}; nothing was removed"
            )));
        }
        if present.len() == n {
            return Err(PyValueError::new_err(
                "remove: that would remove every body; nothing was removed",
            ));
        }
        with_sim!(engine, s => {
            let all = s.particles.ids().to_vec();
            s.particles.retain(|i| !wanted.contains(&all[i]));
            py.detach(|| s.refresh_accelerations());
        });
        self.initial_energy = self.measure(py).total;
        Ok(())
    }

    /// A zero-copy view of one component array by name (``x``, ``y``, ``z``, ``vx``, ``vy``,
    /// ``vz``, ``ax``, ``ay``, ``az``, ``mass``): float64 or float32 as the simulation.
    fn view<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let Some((_, c)) = VIEWS.iter().find(|(n, _)| *n == name) else {
            return Err(PyValueError::new_err(format!(
                "no component `{name}`: expected one of {}",
                VIEWS.map(|(n, _)| n).join(", ")
            )));
        };
        let mut this = slf.borrow_mut();
        let views = this.views.clone();
        let engine = this.engine();
        // SAFETY: the slices are the engine's arrays, which do not move while a view exists
        // (`add` and `remove` refuse; steps reorder nothing).
        match engine {
            Engine::F32(s) => {
                let a = s.particles.component(*c);
                let (p, n) = (a.as_ptr(), a.len());
                drop(this);
                unsafe { view(slf, &views, p, n, true) }.map(Bound::into_any)
            }
            Engine::F64(s) => {
                let a = s.particles.component(*c);
                let (p, n) = (a.as_ptr(), a.len());
                drop(this);
                unsafe { view(slf, &views, p, n, true) }.map(Bound::into_any)
            }
        }
    }

    /// x coordinates (zero-copy view).
    #[getter]
    fn x<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "x")
    }
    /// y coordinates (zero-copy view).
    #[getter]
    fn y<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "y")
    }
    /// z coordinates (zero-copy view).
    #[getter]
    fn z<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "z")
    }
    /// x velocities (zero-copy view).
    #[getter]
    fn vx<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "vx")
    }
    /// y velocities (zero-copy view).
    #[getter]
    fn vy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "vy")
    }
    /// z velocities (zero-copy view).
    #[getter]
    fn vz<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "vz")
    }
    /// x accelerations (zero-copy view; they belong to the current positions).
    #[getter]
    fn ax<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "ax")
    }
    /// y accelerations (zero-copy view).
    #[getter]
    fn ay<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "ay")
    }
    /// z accelerations (zero-copy view).
    #[getter]
    fn az<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "az")
    }
    /// Masses (zero-copy view).
    #[getter]
    fn mass<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, "mass")
    }

    /// Stable ids (zero-copy, read-only view).
    #[getter]
    fn ids<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let mut this = slf.borrow_mut();
        let views = this.views.clone();
        let (p, n) = with_sim!(this.engine(), s => {
            let a = s.particles.ids();
            (a.as_ptr(), a.len())
        });
        drop(this);
        // SAFETY: the engine's id array, which does not move while a view exists.
        unsafe { view(slf, &views, p, n, false) }
    }

    /// The address of the engine's array ``name`` (a view of it starts there: compare with
    /// ``view.__array_interface__["data"][0]`` to see that nothing was copied).
    fn data_pointer(&mut self, name: &str) -> PyResult<usize> {
        let Some((_, c)) = VIEWS.iter().find(|(n, _)| *n == name) else {
            return Err(PyValueError::new_err(format!("no component `{name}`")));
        };
        Ok(with_sim!(self.engine(), s => s.particles.component(*c).as_ptr() as usize))
    }

    /// Number of NumPy views of the arrays alive now (``add``/``remove`` need 0).
    #[getter]
    fn live_views(&self) -> usize {
        self.views.load(Ordering::SeqCst)
    }

    /// A copy of the positions as a new (N, 3) float64 array.
    fn copy_positions<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.copy3(py, Component::PositionX)
    }

    /// A copy of the velocities as a new (N, 3) float64 array.
    fn copy_velocities<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.copy3(py, Component::VelocityX)
    }

    /// A copy of the accelerations as a new (N, 3) float64 array.
    fn copy_accelerations<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.copy3(py, Component::AccelerationX)
    }

    /// Recomputes the accelerations of the current positions: call it after writing positions
    /// or masses through the views, if the next step must start from forces that match them
    /// (the integrators kick with the stored accelerations first).
    fn refresh_accelerations(&mut self, py: Python<'_>) {
        let engine = self.engine();
        py.detach(|| with_sim!(engine, s => s.refresh_accelerations()));
    }
}
