//! The configuration of a meshless run (`physics = "meshless"`): the problem, the scheme, the
//! run's length and resources, the output. Defaults are stated once, in the `Default`
//! implementations; what depends on the problem (its resolution, end time, dimension, gamma) is
//! filled by [`MeshlessConfig::with_defaults`], so `mote show` prints every resolved value.

use mote_cloud::flux::FluxKind;
use mote_cloud::mood::MoodSettings;
use mote_cloud::scheme::{Formulation, Limiter, MAX_ORDER};
use mote_cloud::time::{ImexTableau, Tableau};
use mote_core::Precision;
use serde::{Deserialize, Serialize};

use super::expression::Value;
use crate::config::{
    ConfigError, Physics, Source, deserialize_and_validate, expect_physics, num, read_table,
    validate_output, validate_resources,
};

/// A meshless run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshlessConfig {
    /// Always `meshless`.
    pub physics: Physics,
    /// Run length, CFL number, precision, threads, memory, backend.
    #[serde(default)]
    pub run: MeshlessRunSection,
    /// The problem: initial state, domain, boundaries, exact solution.
    #[serde(default)]
    pub problem: ProblemSection,
    /// The spatial scheme and the time stepper.
    #[serde(default)]
    pub scheme: SchemeSection,
    /// How the particles move (default: they stay where they are).
    #[serde(default)]
    pub motion: MotionSection,
    /// Particle insertion, merging and removal on a moving cloud (default: off).
    #[serde(default)]
    pub adaptivity: AdaptivitySection,
    /// Solve the problem's conservation law through its kinetic (Jin-Xin) relaxation system
    /// with an IMEX stepper (absent: solve it directly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxation: Option<RelaxationSection>,
    /// What is written, and how often.
    #[serde(default)]
    pub output: MeshlessOutputSection,
}

/// The motions `[motion] kind` names.
pub const MOTIONS: [&str; 4] = ["none", "rotation", "shear", "flow"];

/// `[motion]`: a moving cloud. The particles move with a velocity field, and each stage of
/// the Runge-Kutta step searches neighbours and fits the MLS moments at the new positions and
/// exchanges ALE fluxes, so the state follows the particles (see `mote_cloud::motion`).
/// Needs a periodic problem (no boundary particles), the explicit stepper, the
/// `mls_divergence` formulation, no MOOD and the cpu backend. A moving run writes no
/// checkpoint (positions are not in the checkpoint format yet): it cannot be resumed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MotionSection {
    /// `none` (default), `rotation` (counter-rotating periodic cells, divergence-free),
    /// `shear` (`w_x = speed sin(2 pi y)`), both prescribed; or `flow`: the particles move
    /// with `fraction` times the flow velocity of the state (the fluid velocity of Euler, the
    /// advection velocity, `u` for Burgers).
    pub kind: String,
    /// Peak speed of `rotation` and `shear` (default 0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// The fraction of the flow velocity of `flow` (default 1: Lagrangian; 0: at rest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// The cloud is reordered along the Morton curve after the particles have moved this many
    /// nominal spacings in total (`inf`: never).
    pub reorder_distance: f64,
}

impl Default for MotionSection {
    fn default() -> Self {
        Self {
            kind: "none".to_string(),
            speed: None,
            fraction: None,
            reorder_distance: 1.0,
        }
    }
}

impl MotionSection {
    /// Whether the particles move.
    pub fn moves(&self) -> bool {
        self.kind != "none"
    }
}

/// `[adaptivity]`: on a moving cloud, particles inserted into holes, close pairs merged and
/// particles that left a non-periodic domain removed, every `every` steps, conserving every
/// variable's total (see `mote_cloud::adapt`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdaptivitySection {
    /// Adapt every this many steps (0: never, the default).
    pub every: u64,
    /// A point of the nominal lattice farther than this fraction of the spacing from every
    /// particle is a hole and gets a particle.
    pub hole_fraction: f64,
    /// Pairs closer than this fraction of the spacing merge.
    pub merge_fraction: f64,
}

impl Default for AdaptivitySection {
    fn default() -> Self {
        let d = mote_cloud::adapt::Adaptivity::default();
        Self {
            every: 0,
            hole_fraction: d.hole_fraction,
            merge_fraction: d.merge_fraction,
        }
    }
}

/// `[relaxation]`: the conservation law `du/dt + div F(u) = 0` solved through its kinetic
/// relaxation system of `2 D M` kinetic variables, each advected with a velocity `+-speed`
/// along an axis and relaxed towards the Maxwellian of `u` at the rate `1 / epsilon` (see
/// `mote_cloud::source::relaxation`): the MUSCL scheme transports them explicitly and the IMEX
/// pair `scheme.stepper` (`imex-euler`, `ars222`, `ssp2-332`, `ars233`, `ssp3-433`) relaxes
/// them implicitly. As `epsilon -> 0` the macroscopic `u = sum f` solves the original law with
/// the dissipation of the kinetic speed. Diagnostics, snapshots and errors show `u`.
/// Periodic problems in 1-D and 2-D, f64, the cpu backend, no MOOD, a fixed cloud. Writes no
/// checkpoint (the kinetic state is not in the checkpoint format yet).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RelaxationSection {
    /// The kinetic speed `lambda`: at least `D` times the largest wave speed along an axis
    /// (the subcharacteristic condition, checked on the initial state). Default: 1.1 times
    /// that bound on the initial state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// The relaxation time `epsilon` (default 1e-6: the stiff limit, the conservation law).
    pub epsilon: f64,
}

impl Default for RelaxationSection {
    fn default() -> Self {
        Self {
            speed: None,
            epsilon: 1e-6,
        }
    }
}

/// `[run]` of a meshless run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeshlessRunSection {
    /// Simulated time at which the run ends (default: the problem's standard end time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<f64>,
    /// CFL number: every step is this fraction of the stable step at the current state (the
    /// step before an output time is shortened to land on it).
    pub cfl: f64,
    /// `f32` or `f64`.
    pub precision: Precision,
    /// CPU threads (0: one per core).
    pub threads: usize,
    /// Memory limit for the run's buffers (`"4 GiB"`, `"500MB"`): on the CPU backend the host's
    /// (default: the process's limit), on the GPU backend the device's (default: the device's
    /// memory where the runtime reports it, as CUDA does; wgpu does not, so a wgpu run without
    /// a limit is not reserved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    /// Where the run steps: `cpu` (default) or `gpu` (every problem but `noh`, whose exact
    /// inflow at the faces is host code: refused before anything is written).
    pub backend: String,
    /// The device for `backend = "gpu"`: `wgpu` or `cuda`, with an optional `:INDEX`.
    pub device: String,
    /// The run stops, keeping its last good state, when the stable time step falls below this
    /// fraction of the first step's: a collapsing step is a blow-up in the making (or a run
    /// that would take forever), not something to wait out.
    pub min_dt_ratio: f64,
}

impl Default for MeshlessRunSection {
    fn default() -> Self {
        Self {
            end_time: None,
            cfl: 0.4,
            precision: Precision::F64,
            threads: 0,
            memory_limit: None,
            backend: "cpu".to_string(),
            device: "wgpu:0".to_string(),
            min_dt_ratio: 1e-6,
        }
    }
}

/// The standard problems (see `mote_cloud::problems`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// Scalar linear advection of a sine wave on the periodic unit box (1, 2 or 3-D).
    AdvectionWave,
    /// 1-D Burgers top-hat on the periodic unit interval.
    BurgersTopHat,
    /// The 1-D Sod shock tube (Euler), outflow ends.
    #[default]
    Sod,
    /// The 2-D isentropic vortex (Euler), periodic.
    IsentropicVortex,
    /// The 2-D quadrant Riemann problem (Euler, configuration 3), outflow faces.
    Quadrant,
    /// Woodward and Colella's double Mach reflection (2-D Euler, Mach 10 shock on a wall).
    DoubleMach,
    /// The Gresho-Chan vortex (2-D Euler, periodic): a steady rotating flow, exact.
    GreshoVortex,
    /// The Kelvin-Helmholtz instability (2-D Euler, periodic): a shear layer rolling up.
    KelvinHelmholtz,
    /// Noh's implosion (2-D Euler, exact inflow at the faces, CPU only): a strong shock.
    Noh,
    /// The Sedov-Taylor blast (2-D Euler, periodic): a point explosion, exact by the
    /// self-similar solution.
    Sedov,
    /// A Riemann problem on the unit box with outflow faces: two constant states (`left`,
    /// `right`) meeting at a plane (`diaphragm`, `normal`), for the Euler equations (1-D,
    /// 2-D, 3-D in f64) or a scalar equation (1-D); exact by the Riemann solver.
    Riemann,
    /// A user's initial state on the unit box (periodic, or with outflow or slip-wall faces:
    /// `periodic`, `faces`): values given
    /// as numbers or expressions of `x`, `y`, `z` in `[problem.initial]`, for the Euler
    /// equations (1-D, 2-D), Burgers (1-D) or advection (1-3-D; exact: the profile carried
    /// along on a periodic box).
    Custom,
    /// A state read from a file (`path`): `/PartType0` of an HDF5 file in the snapshot layout
    /// (a mote snapshot, or one a user wrote), on the unit box of a custom problem (`periodic`,
    /// `faces`, `equation`, `dim`, `gamma`); the run starts at t = 0.
    File,
}

impl ProblemKind {
    /// The name as the configuration spells it.
    pub fn name(self) -> &'static str {
        match self {
            ProblemKind::AdvectionWave => "advection_wave",
            ProblemKind::BurgersTopHat => "burgers_top_hat",
            ProblemKind::Sod => "sod",
            ProblemKind::IsentropicVortex => "isentropic_vortex",
            ProblemKind::Quadrant => "quadrant",
            ProblemKind::DoubleMach => "double_mach",
            ProblemKind::Riemann => "riemann",
            ProblemKind::GreshoVortex => "gresho_vortex",
            ProblemKind::KelvinHelmholtz => "kelvin_helmholtz",
            ProblemKind::Noh => "noh",
            ProblemKind::Sedov => "sedov",
            ProblemKind::Custom => "custom",
            ProblemKind::File => "file",
        }
    }

    /// Whether the problem always solves the Euler equations (a Riemann problem does when its
    /// `equation` is `euler`: see [`ProblemSection::is_gas`]).
    fn is_gas(self) -> bool {
        matches!(
            self,
            ProblemKind::Sod
                | ProblemKind::IsentropicVortex
                | ProblemKind::Quadrant
                | ProblemKind::DoubleMach
                | ProblemKind::GreshoVortex
                | ProblemKind::KelvinHelmholtz
                | ProblemKind::Noh
                | ProblemKind::Sedov
        )
    }

    /// The ratio of specific heats the standard test uses.
    fn default_gamma(self) -> f64 {
        match self {
            ProblemKind::KelvinHelmholtz | ProblemKind::Noh => 5.0 / 3.0,
            _ => 1.4,
        }
    }

    /// Whether `[problem] dim` applies.
    fn takes_dimension(self) -> bool {
        matches!(
            self,
            ProblemKind::AdvectionWave
                | ProblemKind::Riemann
                | ProblemKind::Custom
                | ProblemKind::File
        )
    }

    /// Whether the problem has boundary particles (outflow or wall layers); the others are
    /// periodic.
    pub fn has_boundaries(self) -> bool {
        matches!(
            self,
            ProblemKind::Sod
                | ProblemKind::Quadrant
                | ProblemKind::DoubleMach
                | ProblemKind::Riemann
                | ProblemKind::Noh
        )
    }

    /// The problem's dimension (`dim` for the advection wave).
    pub fn dimension(self, dim: Option<usize>) -> usize {
        match self {
            ProblemKind::AdvectionWave => dim.unwrap_or(2),
            ProblemKind::Riemann | ProblemKind::Custom | ProblemKind::File => dim.unwrap_or(1),
            ProblemKind::BurgersTopHat | ProblemKind::Sod => 1,
            ProblemKind::IsentropicVortex
            | ProblemKind::Quadrant
            | ProblemKind::DoubleMach
            | ProblemKind::GreshoVortex
            | ProblemKind::KelvinHelmholtz
            | ProblemKind::Noh
            | ProblemKind::Sedov => 2,
        }
    }

    /// The standard resolution: particles per unit length (per side for the vortex).
    fn default_resolution(self, dim: usize) -> usize {
        match self {
            ProblemKind::AdvectionWave => [200, 64, 24][dim - 1],
            ProblemKind::Riemann | ProblemKind::Custom | ProblemKind::File => {
                [1000, 200, 40][dim - 1]
            }
            ProblemKind::BurgersTopHat => 400,
            ProblemKind::Sod => 1000,
            ProblemKind::IsentropicVortex => 64,
            ProblemKind::Quadrant => 100,
            ProblemKind::DoubleMach => 60,
            ProblemKind::GreshoVortex => 64,
            ProblemKind::KelvinHelmholtz => 100,
            ProblemKind::Noh => 50,
            ProblemKind::Sedov => 100,
        }
    }

    /// The time the standard test runs to.
    pub fn default_end_time(self) -> f64 {
        match self {
            ProblemKind::AdvectionWave | ProblemKind::IsentropicVortex => 1.0,
            ProblemKind::BurgersTopHat => 0.15,
            ProblemKind::Sod
            | ProblemKind::DoubleMach
            | ProblemKind::Riemann
            | ProblemKind::Custom
            | ProblemKind::File => 0.2,
            ProblemKind::Quadrant => 0.3,
            ProblemKind::GreshoVortex => 3.0,
            ProblemKind::KelvinHelmholtz => 2.0,
            ProblemKind::Noh => 0.6,
            ProblemKind::Sedov => 0.1,
        }
    }
}

/// `[problem]`: one flat table; `dim` applies to the advection wave only and `gamma` to the gas
/// problems only (a key that does not apply is an error, as in gravity's initial conditions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProblemSection {
    /// Which problem.
    pub kind: ProblemKind,
    /// Particles per unit length (per side for the isentropic vortex, whose box is 10 wide);
    /// default: the problem's standard resolution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<usize>,
    /// Lattice jitter, a fraction of the spacing in `[0, 1)`.
    pub jitter: f64,
    /// Seed of the jitter.
    pub seed: u64,
    /// Dimension of the advection wave (1, 2 or 3; default 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dim: Option<usize>,
    /// Ratio of specific heats of the gas problems (default 1.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    /// The equation of a Riemann problem: `euler` (default; 1-D, 2-D, or 3-D in f64), `burgers` or
    /// `advection` (unit speed; both 1-D).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equation: Option<String>,
    /// The state behind the diaphragm of a Riemann problem (`density`, `velocity`, `pressure`
    /// for Euler; `u` for a scalar equation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left: Option<StateSection>,
    /// The state ahead of the diaphragm of a Riemann problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub right: Option<StateSection>,
    /// Where a Riemann problem's states meet: the position along the normal line through the
    /// box's centre, measured as on the x axis (default 0.5; along x, the plane
    /// `x = diaphragm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diaphragm: Option<f64>,
    /// The normal of a Riemann problem's diaphragm, pointing from `left` to `right` (default
    /// along x; any non-zero length).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normal: Option<Vec<f64>>,
    /// Whether a custom problem's unit box is periodic (default) or has faces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periodic: Option<bool>,
    /// The faces of a custom problem that is not periodic: `outflow` (default) or `slip_wall`
    /// (Euler: the normal velocity reflected, no mass through the wall).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faces: Option<String>,
    /// A custom problem's initial state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial: Option<Box<InitialSection>>,
    /// The HDF5 file of a `file` problem (relative to the working directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `[problem.initial]`: a custom problem's initial state, each value a number or an expression
/// of `x`, `y`, `z` (see [`super::expression`]): `density`, `velocity` (one value per
/// dimension; a single value in 1-D) and `pressure` for the Euler equations; `u` for Burgers
/// and advection, whose `velocity` is then the advection velocity (numbers; default `(1, 0.5,
/// 0.25)`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitialSection {
    /// Density (Euler), > 0 everywhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub density: Option<Value>,
    /// Velocity (Euler: default at rest), or the advection velocity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Values>,
    /// Pressure (Euler), > 0 everywhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressure: Option<Value>,
    /// The variable of Burgers and advection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub u: Option<Value>,
}

/// One value or one per dimension.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Values {
    /// A single value (1-D).
    One(Value),
    /// One value per dimension.
    Many(Vec<Value>),
}

impl Values {
    /// The values as a list.
    pub fn to_vec(&self) -> Vec<Value> {
        match self {
            Values::One(v) => vec![v.clone()],
            Values::Many(v) => v.clone(),
        }
    }
}

/// A constant state of a Riemann problem: `density`, `velocity` (one component per dimension;
/// a number in 1-D) and `pressure` for the Euler equations, `u` for a scalar equation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// Density (Euler), > 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub density: Option<f64>,
    /// Velocity (Euler; default at rest).
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        deserialize_with = "crate::config::number_or_array"
    )]
    pub velocity: Option<Vec<f64>>,
    /// Pressure (Euler), > 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressure: Option<f64>,
    /// The value of a scalar equation's variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub u: Option<f64>,
}

/// The equations a Riemann problem can be posed for.
pub const RIEMANN_EQUATIONS: [&str; 3] = ["euler", "burgers", "advection"];

impl ProblemSection {
    /// Whether the problem solves the Euler equations (and so takes `gamma`).
    pub fn is_gas(&self) -> bool {
        self.kind.is_gas()
            || (matches!(
                self.kind,
                ProblemKind::Riemann | ProblemKind::Custom | ProblemKind::File
            ) && self.equation.as_deref().unwrap_or("euler") == "euler")
    }

    /// Whether the problem has boundary particles (a custom problem unless periodic).
    pub fn has_boundaries(&self) -> bool {
        match self.kind {
            ProblemKind::Custom | ProblemKind::File => !self.periodic.unwrap_or(true),
            kind => kind.has_boundaries(),
        }
    }

    /// Checks a custom problem's keys (or that a problem of another kind sets none of them).
    fn validate_custom(&self, dim: usize) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((key.to_string(), msg));
        let file = self.kind == ProblemKind::File;
        if self.path.is_some() && !file {
            return bad(
                "problem.path",
                format!(
                    "does not apply to kind `{}`: only a file problem takes it",
                    self.kind.name()
                ),
            );
        }
        if self.kind != ProblemKind::Custom && !file {
            for (key, set) in [
                ("periodic", self.periodic.is_some()),
                ("faces", self.faces.is_some()),
                ("initial", self.initial.is_some()),
            ] {
                if set {
                    return bad(
                        &format!("problem.{key}"),
                        format!(
                            "does not apply to kind `{}`: only a custom or file problem takes it",
                            self.kind.name()
                        ),
                    );
                }
            }
            return Ok(());
        }
        for key in ["left", "right", "diaphragm", "normal"] {
            let set = match key {
                "left" => self.left.is_some(),
                "right" => self.right.is_some(),
                "diaphragm" => self.diaphragm.is_some(),
                _ => self.normal.is_some(),
            };
            if set {
                return bad(
                    &format!("problem.{key}"),
                    format!(
                        "does not apply to kind `{}`: give the state in {}",
                        self.kind.name(),
                        if file {
                            "the file"
                        } else {
                            "[problem.initial]"
                        }
                    ),
                );
            }
        }
        let equation = self.equation.as_deref().unwrap_or("euler");
        if !RIEMANN_EQUATIONS.contains(&equation) {
            return bad(
                "problem.equation",
                format!("`{equation}`: expected euler, burgers or advection"),
            );
        }
        let gas = equation == "euler";
        if let Some(faces) = &self.faces {
            if self.periodic.unwrap_or(true) {
                return bad(
                    "problem.faces",
                    "a periodic box has no faces: set periodic = false".into(),
                );
            }
            match faces.as_str() {
                "outflow" => {}
                "slip_wall" if gas => {}
                "slip_wall" => {
                    return bad(
                        "problem.faces",
                        format!("slip walls reflect a gas's velocity: not for {equation}"),
                    );
                }
                other => {
                    return bad(
                        "problem.faces",
                        format!("`{other}`: expected outflow or slip_wall"),
                    );
                }
            }
        }
        let dims = match equation {
            "euler" => 2,
            "burgers" => 1,
            _ => 3,
        };
        if dim > dims {
            return bad(
                "problem.dim",
                format!(
                    "{dim}: a custom {equation} problem runs in 1{} dimensions",
                    if dims > 1 {
                        format!(" to {dims}")
                    } else {
                        String::new()
                    }
                ),
            );
        }
        if file {
            match self.path.as_deref() {
                None => {
                    return bad(
                        "problem.path",
                        "required for kind `file`: an HDF5 file with /PartType0".into(),
                    );
                }
                Some(p) if !std::path::Path::new(p).is_file() => {
                    return bad(
                        "problem.path",
                        format!(
                            "`{p}` is not a file (paths are relative to the working directory)"
                        ),
                    );
                }
                Some(_) => {}
            }
            // The state is the file's; only the advection velocity may be given.
            if let Some(initial) = &self.initial {
                let only_velocity = initial.density.is_none()
                    && initial.pressure.is_none()
                    && initial.u.is_none()
                    && equation == "advection";
                if !only_velocity {
                    return bad(
                        "problem.initial",
                        "a file problem's state is the file's: [problem.initial] takes only the \
                         advection velocity"
                            .into(),
                    );
                }
                let v = initial
                    .velocity
                    .as_ref()
                    .map(Values::to_vec)
                    .unwrap_or_default();
                if v.len() != dim
                    || v.iter()
                        .any(|c| !matches!(c, Value::Number(x) if x.is_finite()))
                {
                    return bad(
                        "problem.initial.velocity",
                        format!("the advection velocity: {dim} finite numbers"),
                    );
                }
            }
            return Ok(());
        }
        let Some(initial) = &self.initial else {
            let example = if gas {
                "density = \"1 + 0.2 * sin(2 * PI * x)\", pressure = 1.0"
            } else {
                "u = \"sin(2 * PI * x)\""
            };
            return bad(
                "problem.initial",
                format!("required for a custom problem, e.g. [problem.initial] {example}"),
            );
        };
        let key = |k: &str| format!("problem.initial.{k}");
        let parse = |k: &str, v: &Value| {
            super::expression::Parsed::parse(v, dim).map_err(|msg| (key(k), msg))
        };
        let velocity = initial.velocity.as_ref().map(Values::to_vec);
        if let Some(v) = &velocity
            && v.len() != dim
        {
            return bad(
                &key("velocity"),
                format!("{} components: expected {dim} (one per dimension)", v.len()),
            );
        }
        if gas {
            if initial.u.is_some() {
                return bad(
                    &key("u"),
                    "a gas state has density, velocity and pressure".into(),
                );
            }
            for (name, value) in [
                ("density", &initial.density),
                ("pressure", &initial.pressure),
            ] {
                let Some(v) = value else {
                    return bad(&key(name), "required for a gas state".into());
                };
                parse(name, v)?;
            }
            for v in velocity.iter().flatten() {
                parse("velocity", v)?;
            }
        } else {
            for (name, set) in [
                ("density", initial.density.is_some()),
                ("pressure", initial.pressure.is_some()),
            ] {
                if set {
                    return bad(&key(name), format!("a {equation} state has only `u`"));
                }
            }
            let Some(u) = &initial.u else {
                return bad(&key("u"), "required for a scalar state".into());
            };
            parse("u", u)?;
            if let Some(v) = &velocity {
                if equation == "burgers" {
                    return bad(
                        &key("velocity"),
                        "Burgers carries `u` itself: no velocity to give".into(),
                    );
                }
                if v.iter()
                    .any(|c| !matches!(c, Value::Number(x) if x.is_finite()))
                {
                    return bad(
                        &key("velocity"),
                        "the advection velocity is a constant: finite numbers".into(),
                    );
                }
            }
        }
        Ok(())
    }

    /// Checks a Riemann problem's keys (or that a problem of another kind sets none of them).
    fn validate_riemann(&self, dim: usize) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((key.to_string(), msg));
        if self.kind != ProblemKind::Riemann {
            let set = [
                (
                    "equation",
                    self.equation.is_some()
                        && !matches!(self.kind, ProblemKind::Custom | ProblemKind::File),
                ),
                ("left", self.left.is_some()),
                ("right", self.right.is_some()),
                ("diaphragm", self.diaphragm.is_some()),
                ("normal", self.normal.is_some()),
            ];
            if let Some((key, _)) = set.iter().find(|(_, set)| *set) {
                return bad(
                    &format!("problem.{key}"),
                    format!(
                        "does not apply to kind `{}`: only a riemann problem takes it{}",
                        self.kind.name(),
                        if *key == "equation" {
                            " (and a custom one)"
                        } else {
                            ""
                        }
                    ),
                );
            }
            return Ok(());
        }
        let equation = self.equation.as_deref().unwrap_or("euler");
        if !RIEMANN_EQUATIONS.contains(&equation) {
            return bad(
                "problem.equation",
                format!("`{equation}`: expected euler, burgers or advection"),
            );
        }
        let gas = equation == "euler";
        if !gas && dim != 1 {
            return bad(
                "problem.dim",
                format!("{dim}: a {equation} Riemann problem is 1-D"),
            );
        }
        if let Some(x) = self.diaphragm
            && !(x.is_finite() && (0.0..=1.0).contains(&x))
        {
            return bad(
                "problem.diaphragm",
                format!("{} is not allowed: a position in [0, 1]", num(x)),
            );
        }
        if let Some(n) = &self.normal {
            let length = n.iter().map(|c| c * c).sum::<f64>().sqrt();
            if n.len() != dim {
                return bad(
                    "problem.normal",
                    format!("{} components: expected {dim} (one per dimension)", n.len()),
                );
            }
            if !(length.is_finite() && length > 0.0) {
                return bad(
                    "problem.normal",
                    format!("{n:?}: expected a finite, non-zero vector"),
                );
            }
            if !gas && n[0] <= 0.0 {
                return bad(
                    "problem.normal",
                    "a scalar Riemann problem runs along +x: leave `normal` out".into(),
                );
            }
        }
        let mut states = Vec::new();
        for (side, state) in [("left", &self.left), ("right", &self.right)] {
            let key = |k: &str| format!("problem.{side}.{k}");
            let Some(s) = state else {
                let example = if gas {
                    "{ density = 1.0, velocity = 0.0, pressure = 1.0 }"
                } else {
                    "{ u = 1.0 }"
                };
                return bad(
                    &format!("problem.{side}"),
                    format!("required for a riemann problem, e.g. {side} = {example}"),
                );
            };
            if gas {
                if s.u.is_some() {
                    return bad(
                        &key("u"),
                        "a gas state has density, velocity and pressure".into(),
                    );
                }
                let (Some(rho), Some(p)) = (s.density, s.pressure) else {
                    let missing = if s.density.is_none() {
                        "density"
                    } else {
                        "pressure"
                    };
                    return bad(&key(missing), "required for a gas state".into());
                };
                for (name, value) in [("density", rho), ("pressure", p)] {
                    if !(value.is_finite() && value > 0.0) {
                        return bad(
                            &key(name),
                            format!("{} is not allowed: a finite value > 0", num(value)),
                        );
                    }
                }
                let v = s.velocity.clone().unwrap_or_else(|| vec![0.0; dim]);
                if v.len() != dim {
                    return bad(
                        &key("velocity"),
                        format!("{} components: expected {dim} (one per dimension)", v.len()),
                    );
                }
                if let Some(c) = v.iter().find(|c| !c.is_finite()) {
                    return bad(&key("velocity"), format!("{}: not finite", num(*c)));
                }
                states.push((rho, v, p));
            } else {
                for (name, set) in [
                    ("density", s.density.is_some()),
                    ("velocity", s.velocity.is_some()),
                    ("pressure", s.pressure.is_some()),
                ] {
                    if set {
                        return bad(&key(name), format!("a {equation} state has only `u`"));
                    }
                }
                match s.u {
                    None => return bad(&key("u"), "required for a scalar state".into()),
                    Some(u) if !u.is_finite() => {
                        return bad(&key("u"), format!("{}: not finite", num(u)));
                    }
                    Some(_) => {}
                }
            }
        }
        if gas {
            // The exact solver refuses data that generate a vacuum: so does the configuration.
            let n = self
                .normal
                .clone()
                .unwrap_or_else(|| (0..dim).map(|d| if d == 0 { 1.0 } else { 0.0 }).collect());
            let length = n.iter().map(|c| c * c).sum::<f64>().sqrt();
            let one_d = |(rho, v, p): &(f64, Vec<f64>, f64)| mote_cloud::exact::GasState {
                rho: *rho,
                u: v.iter().zip(&n).map(|(a, b)| a * b).sum::<f64>() / length,
                p: *p,
            };
            let gamma = self.gamma.unwrap_or(1.4);
            if gamma > 1.0
                && mote_cloud::exact::EulerRiemann::solve(
                    one_d(&states[0]),
                    one_d(&states[1]),
                    gamma,
                )
                .is_err()
            {
                return bad(
                    "problem.right",
                    "the two states generate a vacuum (the velocities part faster than the \
                     sound speeds allow): the Euler equations have no solution to run"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

impl Default for ProblemSection {
    fn default() -> Self {
        Self {
            kind: ProblemKind::default(),
            resolution: None,
            jitter: 0.2,
            seed: 1,
            dim: None,
            gamma: None,
            equation: None,
            left: None,
            right: None,
            diaphragm: None,
            normal: None,
            periodic: None,
            faces: None,
            initial: None,
            path: None,
        }
    }
}

/// `[scheme]`: MUSCL reconstruction from MLS derivatives, a numerical flux, optional limiter,
/// WENO-type reconstruction and MOOD, and an explicit Runge-Kutta stepper.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchemeSection {
    /// Reconstruction order, 1 to 5 (MLS degree = order, interface order = the lower of the
    /// two particles').
    pub order: usize,
    /// Numerical flux: `rusanov`, `upwind` (scalar equations), `hllc` (Euler) or `central`.
    pub flux: String,
    /// `mls_divergence` (the MLS divergence of pairwise fluxes) or `conservative`
    /// (antisymmetric face weights: conservative to round-off).
    pub formulation: Formulation,
    /// Time stepper: `euler`, `rk2`, `rk3` (SSP) or `rk4`; with `[relaxation]` an IMEX pair:
    /// `imex-euler`, `ars222`, `ssp2-332`, `ars233` or `ssp3-433`.
    pub stepper: String,
    /// Slope limiter: `none`, `bj` (Barth-Jespersen), `vk` (Venkatakrishnan), `minmod` or
    /// `superbee` (the last two in 1-D).
    pub limiter: String,
    /// `soft` (the limiter scales first derivatives) or `hard` (every derivative).
    pub limiter_mode: String,
    /// WENO-type MLS reconstruction (orders >= 2; central weight
    /// [`WENO_CENTRAL_WEIGHT`](mote_cloud::scheme::WENO_CENTRAL_WEIGHT)), on either backend.
    pub weno: bool,
    /// MOOD criterion: `none`, `u1`, `u2` or `always`.
    pub mood: String,
    /// MOOD halo strategy: `epd0`, `epd1`, `epd2` or `strict`.
    pub mood_strategy: String,
    /// Neighbour search radius in particle spacings (default: enough neighbours for the MLS
    /// fit of the order, at least that of order 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub radius: Option<f64>,
}

impl Default for SchemeSection {
    fn default() -> Self {
        Self {
            order: 2,
            flux: "rusanov".to_string(),
            formulation: Formulation::MlsDivergence,
            stepper: "rk3".to_string(),
            limiter: "none".to_string(),
            limiter_mode: "soft".to_string(),
            weno: false,
            mood: "u1".to_string(),
            mood_strategy: "epd1".to_string(),
            radius: None,
        }
    }
}

/// `[output]` of a meshless run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeshlessOutputSection {
    /// A diagnostics row every this many steps (and at every snapshot and the end).
    pub diagnostics_every: u64,
    /// Snapshots (`snapshots/snap_NNNNN.vtu` + `snapshots.pvd`, or `.hdf5` + `snapshots.json`) at this many evenly spaced
    /// times after the initial one (0: only the initial state), each written at the first step
    /// boundary at or after its time (no step is shortened for output; the snapshot records the
    /// time it was taken).
    pub snapshots: u64,
    /// Simulated time between checkpoints (`checkpoint.mote`, for `mote resume`), written at
    /// the first step boundary at or after each multiple; one is always written at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval: Option<f64>,
    /// Wall-clock time between safety checkpoints (`"10m"`, `"30s"`, `"2h"`, or `"off"`), so
    /// that a killed run loses at most this much work. Checkpoints never change the physics.
    pub checkpoint_wall_interval: String,
    /// Snapshot files: `"vtk"` (ParaView, the default), `"hdf5"` (Gadget/SWIFT layout, for
    /// h5py and yt; needs the `hdf5` build feature) or `"both"`.
    pub format: crate::snapshot::SnapshotFormat,
    /// Deflate level of HDF5 snapshots' datasets (chunked), 0 (none, the default) to 9.
    pub compression: u8,
}

impl Default for MeshlessOutputSection {
    fn default() -> Self {
        Self {
            diagnostics_every: 1,
            snapshots: 10,
            checkpoint_interval: None,
            checkpoint_wall_interval: crate::schedule::DEFAULT_WALL_INTERVAL.to_string(),
            format: crate::snapshot::SnapshotFormat::Vtk,
            compression: 0,
        }
    }
}

impl MeshlessConfig {
    /// Parses and validates a meshless configuration, applying `overrides` (`section.key=value`)
    /// on top of the file, and fills the problem-dependent defaults.
    pub fn parse(source: &Source<'_>, overrides: &[String]) -> Result<Self, ConfigError> {
        let (table, overridden) = read_table(source, overrides)?;
        expect_physics(source, &table, Physics::Meshless)?;
        let config: MeshlessConfig =
            deserialize_and_validate(source, table, &overridden, MeshlessConfig::validate)?;
        Ok(config.with_defaults())
    }

    /// The configuration with the problem-dependent defaults filled in.
    pub fn with_defaults(mut self) -> Self {
        let kind = self.problem.kind;
        if kind.takes_dimension() {
            self.problem.dim.get_or_insert(kind.dimension(None));
        }
        if self.problem.is_gas() {
            self.problem.gamma.get_or_insert(kind.default_gamma());
        }
        let dim = kind.dimension(self.problem.dim);
        if matches!(kind, ProblemKind::Custom | ProblemKind::File) {
            let p = &mut self.problem;
            p.equation.get_or_insert_with(|| "euler".to_string());
            p.periodic.get_or_insert(true);
        }
        if kind == ProblemKind::Riemann {
            let p = &mut self.problem;
            let gas = p.is_gas();
            p.equation.get_or_insert_with(|| "euler".to_string());
            p.diaphragm.get_or_insert(0.5);
            p.normal
                .get_or_insert_with(|| (0..dim).map(|d| if d == 0 { 1.0 } else { 0.0 }).collect());
            for state in [&mut p.left, &mut p.right].into_iter().flatten() {
                if gas {
                    state.velocity.get_or_insert_with(|| vec![0.0; dim]);
                }
            }
        }
        self.problem
            .resolution
            .get_or_insert(kind.default_resolution(dim));
        self.run.end_time.get_or_insert(kind.default_end_time());
        self
    }

    /// Whether the problem has an exact solution to measure errors against.
    pub fn has_exact_solution(&self) -> bool {
        let p = &self.problem;
        match p.kind {
            ProblemKind::Quadrant
            | ProblemKind::DoubleMach
            | ProblemKind::KelvinHelmholtz
            | ProblemKind::File => false,
            // A user's advected profile on a periodic box is carried along; nothing else of a
            // custom problem is known exactly.
            ProblemKind::Custom => {
                p.equation.as_deref() == Some("advection") && p.periodic.unwrap_or(true)
            }
            _ => true,
        }
    }

    /// The problem's dimension.
    pub fn dimension(&self) -> usize {
        self.problem.kind.dimension(self.problem.dim)
    }

    /// Checks ranges and consistency; returns the offending key path and what is allowed.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((key.to_string(), msg));
        let r = &self.run;
        if let Some(t) = r.end_time
            && !(t.is_finite() && t > 0.0)
        {
            return bad(
                "run.end_time",
                format!("{} is not allowed: a finite time > 0", num(t)),
            );
        }
        if !(r.cfl.is_finite() && r.cfl > 0.0 && r.cfl <= 1.0) {
            return bad(
                "run.cfl",
                format!("{} is not allowed: a CFL number in (0, 1]", r.cfl),
            );
        }
        validate_resources(r.memory_limit.as_deref(), &r.backend, &r.device)?;
        let p = &self.problem;
        if p.dim.is_some() && !p.kind.takes_dimension() {
            return bad(
                "problem.dim",
                format!(
                    "does not apply to kind `{}` (its dimension is fixed: {}); only \
                     advection_wave and riemann take a dimension",
                    p.kind.name(),
                    p.kind.dimension(None)
                ),
            );
        }
        if let Some(d) = p.dim
            && !(1..=3).contains(&d)
        {
            return bad("problem.dim", format!("{d}: expected 1, 2 or 3"));
        }
        if p.gamma.is_some() && !p.is_gas() {
            return bad(
                "problem.gamma",
                format!(
                    "does not apply to kind `{}` (not a gas); the gas problems are sod, \
                     isentropic_vortex, quadrant, double_mach, gresho_vortex, \
                     kelvin_helmholtz, noh, sedov and riemann with equation = \"euler\"",
                    p.kind.name()
                ),
            );
        }
        if let Some(g) = p.gamma
            && !(g.is_finite() && g > 1.0)
        {
            return bad(
                "problem.gamma",
                format!("{g} is not allowed: a ratio of specific heats > 1"),
            );
        }
        if let Some(n) = p.resolution
            && !(4..=1_000_000).contains(&n)
        {
            return bad(
                "problem.resolution",
                format!("{n} is not allowed: between 4 and 1000000 particles per unit length"),
            );
        }
        if !(0.0..1.0).contains(&p.jitter) {
            return bad(
                "problem.jitter",
                format!(
                    "{} is not allowed: a fraction of the spacing in [0, 1)",
                    p.jitter
                ),
            );
        }
        p.validate_riemann(self.dimension())?;
        p.validate_custom(self.dimension())?;
        if p.is_gas() && self.dimension() == 3 && r.precision != Precision::F64 {
            return bad(
                "run.precision",
                "3-D Euler runs in f64 (the f32 engine is not built into this program: build \
                 time)"
                    .into(),
            );
        }
        let s = &self.scheme;
        if !(1..=MAX_ORDER).contains(&s.order) {
            return bad(
                "scheme.order",
                format!("{}: expected 1 to {MAX_ORDER}", s.order),
            );
        }
        let by_name = |key: &str, r: Result<(), mote_cloud::CloudError>| {
            r.map_err(|e| (key.to_string(), e.to_string()))
        };
        by_name("scheme.flux", FluxKind::by_name(&s.flux).map(drop))?;
        if self.relaxation.is_none() {
            if ImexTableau::by_name(&s.stepper).is_ok() {
                return bad(
                    "scheme.stepper",
                    format!(
                        "`{}` is an IMEX pair, which steps a source term: add [relaxation], or \
                         name an explicit stepper (euler, rk2, rk3 or rk4)",
                        s.stepper
                    ),
                );
            }
            by_name("scheme.stepper", Tableau::by_name(&s.stepper).map(drop))?;
        }
        self.validate_motion()?;
        self.validate_relaxation()?;
        by_name(
            "scheme.limiter",
            Limiter::by_name(&s.limiter, &s.limiter_mode).map(drop),
        )?;
        by_name(
            "scheme.mood",
            MoodSettings::by_name(&s.mood, &s.mood_strategy).map(drop),
        )?;
        if let Some(radius) = s.radius
            && !(radius.is_finite() && (1.0..=20.0).contains(&radius))
        {
            return bad(
                "scheme.radius",
                format!(
                    "{} is not allowed: between 1 and 20 particle spacings (the nearest \
                     neighbours lie one spacing away)",
                    num(radius)
                ),
            );
        }
        if !(r.min_dt_ratio.is_finite() && r.min_dt_ratio > 0.0 && r.min_dt_ratio < 1.0) {
            return bad(
                "run.min_dt_ratio",
                format!(
                    "{} is not allowed: a fraction of the first step in (0, 1)",
                    num(r.min_dt_ratio)
                ),
            );
        }
        // A conservative-form run with boundary particles does not keep a uniform gas
        // uniform next to a boundary layer (issue #25): refused until that is fixed.
        if s.formulation == Formulation::Conservative && p.has_boundaries() {
            return bad(
                "scheme.formulation",
                format!(
                    "\"conservative\" is not supported with boundary particles (problem `{}`): \
                     it does not keep a uniform state uniform next to a boundary layer; use \
                     \"mls_divergence\"",
                    p.kind.name()
                ),
            );
        }
        validate_output(
            self.output.checkpoint_interval,
            &self.output.checkpoint_wall_interval,
            r.end_time.unwrap_or(p.kind.default_end_time()),
        )?;
        crate::snapshot::validate_format(self.output.format, self.output.compression)?;
        if self.output.snapshots > 100_000 {
            return bad(
                "output.snapshots",
                format!("{} is too many: at most 100000", self.output.snapshots),
            );
        }
        if self.output.diagnostics_every == 0 {
            return bad(
                "output.diagnostics_every",
                "0 is not allowed: at least 1 step".into(),
            );
        }
        // What only the equation can judge (HLLC needs Euler, upwind a scalar equation,
        // minmod one dimension, WENO order >= 2): the scheme is built here once, without a
        // cloud, so that the mistake is reported as this file's, not as a failed run.
        super::check_scheme(self).map_err(|(key, e)| (key.to_string(), e.to_string()))
    }

    /// Whether the run can be resumed from a checkpoint: not a moving cloud (positions are not
    /// in the checkpoint) nor a relaxation run (nor its kinetic state); those write none.
    pub fn resumable(&self) -> bool {
        !self.motion.moves() && self.relaxation.is_none()
    }

    /// Checks `[motion]` and `[adaptivity]`.
    fn validate_motion(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((key.to_string(), msg));
        let m = &self.motion;
        if !MOTIONS.contains(&m.kind.as_str()) {
            return bad(
                "motion.kind",
                format!("`{}`: expected none, rotation, shear or flow", m.kind),
            );
        }
        let prescribed = m.kind == "rotation" || m.kind == "shear";
        if m.speed.is_some() && !prescribed {
            return bad(
                "motion.speed",
                format!(
                    "does not apply to kind `{}`: only rotation and shear take a peak speed",
                    m.kind
                ),
            );
        }
        if m.fraction.is_some() && m.kind != "flow" {
            return bad(
                "motion.fraction",
                format!(
                    "does not apply to kind `{}`: only flow takes a fraction of the flow velocity",
                    m.kind
                ),
            );
        }
        if let Some(v) = m.speed
            && !v.is_finite()
        {
            return bad("motion.speed", format!("{}: not finite", num(v)));
        }
        if let Some(v) = m.fraction
            && !v.is_finite()
        {
            return bad("motion.fraction", format!("{}: not finite", num(v)));
        }
        if m.reorder_distance.is_nan() || m.reorder_distance <= 0.0 {
            return bad(
                "motion.reorder_distance",
                format!(
                    "{} is not allowed: a positive number of spacings (inf: never)",
                    num(m.reorder_distance)
                ),
            );
        }
        let a = &self.adaptivity;
        if a.every > 0 && !m.moves() {
            return bad(
                "adaptivity.every",
                "adaptivity acts on a moving cloud: set [motion] kind (or every = 0)".into(),
            );
        }
        let adapt = mote_cloud::adapt::Adaptivity {
            hole_fraction: a.hole_fraction,
            merge_fraction: a.merge_fraction,
        };
        if adapt.validate().is_err() {
            return bad(
                "adaptivity.merge_fraction",
                format!(
                    "hole_fraction {} and merge_fraction {}: expected 0 < merge_fraction < \
                     hole_fraction <= 1 (fractions of the spacing)",
                    num(a.hole_fraction),
                    num(a.merge_fraction)
                ),
            );
        }
        if !m.moves() {
            return Ok(());
        }
        let why = |what: &str| format!("a moving cloud needs {what}");
        if self.problem.has_boundaries() {
            return bad(
                "motion.kind",
                why(&format!(
                    "a periodic problem: `{}` has boundary particles (boundary conditions on \
                     moving clouds are not built)",
                    self.problem.kind.name()
                )),
            );
        }
        let s = &self.scheme;
        if s.mood != "none" {
            return bad(
                "scheme.mood",
                why("mood = \"none\" (MOOD on moving clouds is not built)"),
            );
        }
        if s.formulation != Formulation::MlsDivergence {
            return bad(
                "scheme.formulation",
                why("\"mls_divergence\" (the conservative form needs evolving volumes)"),
            );
        }
        if self.relaxation.is_some() {
            return bad(
                "motion.kind",
                why("an explicit stepper: it cannot be combined with [relaxation]"),
            );
        }
        if self.run.backend != "cpu" {
            return bad(
                "run.backend",
                why(
                    "the cpu backend from a configuration (the device engine's moving clouds \
                     are not routed through the runner yet)",
                ),
            );
        }
        if self.output.checkpoint_interval.is_some() {
            return bad(
                "output.checkpoint_interval",
                "a moving run writes no checkpoint (positions are not in the checkpoint \
                 format yet): leave it out"
                    .into(),
            );
        }
        Ok(())
    }

    /// Checks `[relaxation]` (and that an IMEX stepper has it).
    fn validate_relaxation(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((key.to_string(), msg));
        let Some(r) = &self.relaxation else {
            return Ok(());
        };
        let why = |what: &str| format!("a relaxation run needs {what}");
        if let Some(v) = r.speed
            && !(v.is_finite() && v > 0.0)
        {
            return bad(
                "relaxation.speed",
                format!("{} is not allowed: a positive, finite speed", num(v)),
            );
        }
        if !(r.epsilon.is_finite() && r.epsilon > 0.0) {
            return bad(
                "relaxation.epsilon",
                format!("{} is not allowed: a positive, finite time", num(r.epsilon)),
            );
        }
        let s = &self.scheme;
        if ImexTableau::by_name(&s.stepper).is_err() {
            return bad(
                "scheme.stepper",
                format!(
                    "`{}`: {} (imex-euler, ars222, ssp2-332, ars233 or ssp3-433) to relax the \
                     kinetic variables implicitly",
                    s.stepper,
                    why("an IMEX pair")
                ),
            );
        }
        let kind = self.problem.kind;
        if !matches!(
            kind,
            ProblemKind::AdvectionWave
                | ProblemKind::BurgersTopHat
                | ProblemKind::IsentropicVortex
                | ProblemKind::GreshoVortex
                | ProblemKind::KelvinHelmholtz
                | ProblemKind::Sedov
        ) {
            return bad(
                "problem.kind",
                why(&format!(
                    "one of advection_wave, burgers_top_hat, isentropic_vortex, gresho_vortex, \
                     kelvin_helmholtz and sedov (`{}` is not built with it)",
                    kind.name()
                )),
            );
        }
        if self.problem.has_boundaries() {
            return bad(
                "problem.kind",
                why(&format!(
                    "a periodic problem: `{}` has boundary particles (boundary conditions of \
                     the kinetic variables are not built)",
                    kind.name()
                )),
            );
        }
        if self.dimension() == 3 {
            return bad(
                "problem.dim",
                why("1 or 2 dimensions (3-D is not built into this program)"),
            );
        }
        if s.mood != "none" {
            return bad(
                "scheme.mood",
                why("mood = \"none\" (an IMEX stage is not revised)"),
            );
        }
        if self.run.precision != Precision::F64 {
            return bad(
                "run.precision",
                why("f64 (the relaxation engine is built in f64 only)"),
            );
        }
        if self.run.backend != "cpu" {
            return bad("run.backend", why("the cpu backend"));
        }
        if self.output.checkpoint_interval.is_some() {
            return bad(
                "output.checkpoint_interval",
                "a relaxation run writes no checkpoint (its kinetic state is not in the \
                 checkpoint format yet): leave it out"
                    .into(),
            );
        }
        Ok(())
    }

    /// The resolved configuration as TOML, every default included.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a valid configuration serialises")
    }
}
