//! The configuration of a run: a TOML schema per physics family, parsed with serde, validated,
//! with errors that name the file, the line and the key path.
//!
//! Defaults are stated once, in the `Default` implementations here; `mote show` prints every
//! resolved setting, defaults included.

use std::path::{Path, PathBuf};

use mote_core::Precision;
use mote_gravity::tree::{Multipole, TreeSettings};
use mote_gravity::{IntegratorKind, KernelChoice, Softening, SolverKind};
use serde::{Deserialize, Serialize};

/// A configuration error: where it is and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", location(file, *line), key_part(key))]
pub struct ConfigError {
    /// The file, if the configuration came from one.
    pub file: Option<PathBuf>,
    /// The 1-based line, where known.
    pub line: Option<usize>,
    /// The key path (`section.key`), where known.
    pub key: Option<String>,
    /// What is wrong and what is allowed.
    pub message: String,
}

fn location(file: &Option<PathBuf>, line: Option<usize>) -> String {
    match (file, line) {
        (Some(f), Some(l)) => format!("{}:{l}", f.display()),
        (Some(f), None) => f.display().to_string(),
        (None, Some(l)) => format!("line {l}"),
        (None, None) => "configuration".to_string(),
    }
}

fn key_part(key: &Option<String>) -> String {
    key.as_ref().map(|k| format!(": `{k}`")).unwrap_or_default()
}

/// The physics family a configuration describes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Physics {
    /// Self-gravitating N-body systems.
    #[default]
    Gravity,
    /// Meshless conservation laws on point clouds.
    Meshless,
}

/// A gravity run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GravityConfig {
    /// Always `gravity`.
    pub physics: Physics,
    /// Run length, time step, precision, threads, memory.
    #[serde(default)]
    pub run: RunSection,
    /// The initial particle distribution.
    #[serde(default)]
    pub initial_conditions: InitialConditions,
    /// The force solver.
    #[serde(default)]
    pub solver: SolverSection,
    /// The time integrator.
    #[serde(default)]
    pub integrator: IntegratorSection,
    /// What is written, and how often.
    #[serde(default)]
    pub output: OutputSection,
    /// Physical units (default: N-body units, G = 1); see [`crate::units`].
    #[serde(default, skip_serializing_if = "crate::units::UnitsSection::is_unset")]
    pub units: crate::units::UnitsSection,
}

/// `[run]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSection {
    /// Simulated time at which the run ends (in the time unit: N-body units, or length /
    /// velocity of `[units]`).
    pub end_time: f64,
    /// Time step; the last step is shortened to land exactly on `end_time`.
    pub dt: f64,
    /// `f32` or `f64`.
    pub precision: Precision,
    /// CPU threads (0: one per core).
    pub threads: usize,
    /// Memory limit for the run's buffers (`"4 GiB"`, `"500MB"`); none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    /// Where the forces are computed: `cpu` (default) or `gpu`.
    pub backend: String,
    /// The device for `backend = "gpu"`: `wgpu` or `cuda`, with an optional `:INDEX`.
    pub device: String,
    /// On several MPI ranks: the largest rank's measured work over the mean above which the
    /// particles are cut into new ranges of the Morton curve after a step (decision 0028); at
    /// least 1 (default 1.01: each rank walks its own particles' groups, so the cut is the
    /// walk's balance, and a new cut costs far less than a step). Results do not depend on it,
    /// only the balance of the work.
    pub rebalance: f64,
}

impl Default for RunSection {
    fn default() -> Self {
        Self {
            end_time: 2.0,
            dt: 1.0 / 128.0,
            precision: Precision::F64,
            threads: 0,
            memory_limit: None,
            backend: "cpu".to_string(),
            device: "wgpu:0".to_string(),
            rebalance: 1.01,
        }
    }
}

/// The kinds of initial conditions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialConditionsKind {
    /// Plummer sphere in N-body units.
    #[default]
    Plummer,
    /// Uniform sphere with a virial ratio.
    UniformSphere,
    /// Uniform sphere at rest.
    ColdCollapse,
    /// Two bodies from orbital elements.
    Kepler,
    /// One disc galaxy (bulge + exponential disc).
    DiscGalaxy,
    /// Two disc galaxies on a parabolic approach.
    GalaxyCollision,
    /// Bodies from a file (`path`): HDF5 in the snapshot layout or a text table
    /// ([`crate::initial`]).
    File,
}

/// `[initial_conditions]`: one flat table; which keys apply depends on `kind`, and a key that
/// does not apply to the chosen kind is an error (so a typo in `kind` cannot silently drop
/// settings).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InitialConditions {
    /// Which distribution.
    pub kind: InitialConditionsKind,
    /// Number of particles (per galaxy for `galaxy_collision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub particles: Option<usize>,
    /// Random seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Sphere radius (`uniform_sphere`, `cold_collapse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub radius: Option<f64>,
    /// Virial ratio 2T/|W| (`uniform_sphere`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virial_ratio: Option<f64>,
    /// Semi-major axis (`kepler`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semi_major_axis: Option<f64>,
    /// Eccentricity (`kepler`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eccentricity: Option<f64>,
    /// Mass of body 1 (`kepler`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub m1: Option<f64>,
    /// Mass of body 2 (`kepler`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub m2: Option<f64>,
    /// Bulge mass (galaxies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulge_mass: Option<f64>,
    /// Bulge Plummer scale (galaxies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulge_scale: Option<f64>,
    /// Disc mass (galaxies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disc_mass: Option<f64>,
    /// Disc scale length (galaxies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disc_scale_length: Option<f64>,
    /// Disc scale height (galaxies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disc_scale_height: Option<f64>,
    /// Disc velocity dispersion as a fraction of the circular speed (galaxies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disc_dispersion: Option<f64>,
    /// Initial distance of the galaxy centres (`galaxy_collision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub separation: Option<f64>,
    /// Pericentre of the point-mass orbit (`galaxy_collision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pericentre: Option<f64>,
    /// Inclination of the second disc in degrees (`galaxy_collision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclination_degrees: Option<f64>,
    /// The file of a `file` kind (relative to the working directory): `.hdf5`/`.h5` in the
    /// snapshot layout, or a `.csv`/`.txt` table with the columns `x y z vx vy vz m [id]`. The
    /// run starts at the file's time (`/Header/Time`; 0 for a table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl Default for InitialConditions {
    /// A Plummer sphere; the kind's own defaults are filled in by
    /// [`InitialConditions::with_defaults`].
    fn default() -> Self {
        Self {
            kind: InitialConditionsKind::Plummer,
            particles: None,
            seed: None,
            radius: None,
            virial_ratio: None,
            semi_major_axis: None,
            eccentricity: None,
            m1: None,
            m2: None,
            bulge_mass: None,
            bulge_scale: None,
            disc_mass: None,
            disc_scale_length: None,
            disc_scale_height: None,
            disc_dispersion: None,
            separation: None,
            pericentre: None,
            inclination_degrees: None,
            path: None,
        }
    }
}

impl InitialConditions {
    /// Fills every key of this kind that was left out with its default. The galaxies' defaults
    /// are those of `mote_gravity`'s parameter types, so they are stated once.
    pub fn with_defaults(mut self) -> Self {
        use InitialConditionsKind::*;
        let fill = |v: &mut Option<f64>, d: f64| {
            v.get_or_insert(d);
        };
        if self.kind != Kepler && self.kind != File {
            self.seed.get_or_insert(1);
        }
        match self.kind {
            Plummer | UniformSphere | ColdCollapse => {
                self.particles.get_or_insert(4096);
                if self.kind != Plummer {
                    fill(&mut self.radius, 1.0);
                }
                if self.kind == UniformSphere {
                    fill(&mut self.virial_ratio, 0.5);
                }
            }
            Kepler => {
                fill(&mut self.semi_major_axis, 1.0);
                fill(&mut self.eccentricity, 0.5);
                fill(&mut self.m1, 0.5);
                fill(&mut self.m2, 0.5);
            }
            DiscGalaxy | GalaxyCollision => {
                let c = mote_gravity::initial_conditions::GalaxyCollision::default();
                let g = if self.kind == DiscGalaxy {
                    mote_gravity::initial_conditions::DiscGalaxy::default()
                } else {
                    c.first
                };
                self.particles.get_or_insert(g.particles);
                fill(&mut self.bulge_mass, g.bulge_mass);
                fill(&mut self.bulge_scale, g.bulge_scale);
                fill(&mut self.disc_mass, g.disc_mass);
                fill(&mut self.disc_scale_length, g.disc_scale_length);
                fill(&mut self.disc_scale_height, g.disc_scale_height);
                fill(&mut self.disc_dispersion, g.disc_dispersion);
                if self.kind == GalaxyCollision {
                    fill(&mut self.separation, c.separation);
                    fill(&mut self.pericentre, c.pericentre);
                    fill(&mut self.inclination_degrees, c.inclination.to_degrees());
                }
            }
            File => {}
        }
        self
    }
}

/// `[solver]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SolverSection {
    /// `direct` (O(N^2), exact to rounding) or `tree` (Barnes-Hut, O(N log N)).
    pub kind: SolverKind,
    /// Plummer softening length (0: point masses).
    pub softening: f64,
    /// SIMD kernel of the sums: `auto`, `reference` (direct only), `scalar`, `avx2`, `avx512`.
    pub kernel: String,
    /// Tree: opening angle in (0, 1] (default 0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub theta: Option<f64>,
    /// Tree: `monopole` (default) or `quadrupole` moments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multipole: Option<Multipole>,
    /// Tree: most particles per leaf (default 16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_size: Option<usize>,
    /// Tree: most targets sharing one walk (default 128).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_size: Option<usize>,
}

impl Default for SolverSection {
    fn default() -> Self {
        Self {
            kind: SolverKind::Direct,
            softening: 0.0,
            kernel: "auto".to_string(),
            theta: None,
            multipole: None,
            leaf_size: None,
            group_size: None,
        }
    }
}

impl SolverSection {
    /// The tree's settings, defaults filled in (meaningful for `kind = "tree"`).
    pub fn tree_settings(&self) -> Result<TreeSettings, mote_gravity::GravityError> {
        TreeSettings::new(
            self.theta.unwrap_or(TreeSettings::THETA),
            self.multipole.unwrap_or_default(),
            self.leaf_size.unwrap_or(TreeSettings::LEAF_SIZE),
            self.group_size.unwrap_or(TreeSettings::GROUP_SIZE),
        )
    }

    /// The tree keys set, for the error that they need `kind = "tree"`.
    fn tree_keys_set(&self) -> Option<&'static str> {
        [
            ("solver.theta", self.theta.is_some()),
            ("solver.multipole", self.multipole.is_some()),
            ("solver.leaf_size", self.leaf_size.is_some()),
            ("solver.group_size", self.group_size.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set)
        .map(|(k, _)| k)
    }

    /// Every tree key spelled out for a tree run, so the resolved configuration records them.
    fn with_defaults(mut self) -> Self {
        if self.kind == SolverKind::Tree {
            let t = self.tree_settings().unwrap_or_default();
            self.theta = Some(self.theta.unwrap_or(t.theta));
            self.multipole = Some(self.multipole.unwrap_or(t.multipole));
            self.leaf_size = Some(self.leaf_size.unwrap_or(t.leaf_size));
            self.group_size = Some(self.group_size.unwrap_or(t.group_size));
        }
        self
    }
}

/// `[integrator]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IntegratorSection {
    /// `leapfrog`, `yoshida4` or `rk4`.
    pub kind: IntegratorKind,
}

/// `[output]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputSection {
    /// A diagnostics row every this many steps (and at the end).
    pub diagnostics_every: u64,
    /// Snapshots (`snapshots/snap_NNNNN.vtu` + `snapshots.pvd`, or `.hdf5` + `snapshots.json`) at this many evenly spaced
    /// times after the initial one (0: only the initial state), each written at the first step
    /// boundary at or after its time (no step is shortened for output; the snapshot records the
    /// time it was taken).
    pub snapshots: u64,
    /// Simulated time between checkpoints (`checkpoint.mote`), written at the first step
    /// boundary at or after each multiple; one is always written at the end. Unset by
    /// default: `checkpoint_wall_interval` keeps a recent checkpoint anyway.
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

impl Default for OutputSection {
    fn default() -> Self {
        Self {
            diagnostics_every: 16,
            snapshots: 10,
            checkpoint_interval: None,
            checkpoint_wall_interval: crate::schedule::DEFAULT_WALL_INTERVAL.to_string(),
            format: crate::snapshot::SnapshotFormat::Vtk,
            compression: 0,
        }
    }
}

/// The keys of `[initial_conditions]` each kind accepts (besides `kind`); a key that does not
/// apply to the chosen kind is refused. Front ends route keyword arguments with it.
pub fn initial_condition_keys(kind: InitialConditionsKind) -> &'static [&'static str] {
    use InitialConditionsKind::*;
    const GALAXY: &[&str] = &[
        "particles",
        "seed",
        "bulge_mass",
        "bulge_scale",
        "disc_mass",
        "disc_scale_length",
        "disc_scale_height",
        "disc_dispersion",
    ];
    match kind {
        Plummer => &["particles", "seed"],
        UniformSphere => &["particles", "seed", "radius", "virial_ratio"],
        ColdCollapse => &["particles", "seed", "radius"],
        Kepler => &["semi_major_axis", "eccentricity", "m1", "m2"],
        File => &["path"],
        DiscGalaxy => GALAXY,
        GalaxyCollision => &[
            "particles",
            "seed",
            "bulge_mass",
            "bulge_scale",
            "disc_mass",
            "disc_scale_length",
            "disc_scale_height",
            "disc_dispersion",
            "separation",
            "pericentre",
            "inclination_degrees",
        ],
    }
}

/// The text of the configuration file at `path` and its name (the file's stem, which names the
/// default run directory), or, without a path, the built-in default: the minimal gravity file,
/// named "default". What every front end (the program, the Python module) reads.
pub fn read_config_text(path: Option<&Path>) -> std::io::Result<(String, String)> {
    match path {
        None => Ok(("physics = \"gravity\"\n".to_string(), "default".to_string())),
        Some(p) => {
            let text = std::fs::read_to_string(p)?;
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| "run".to_string());
            Ok((text, stem))
        }
    }
}

/// A configuration file's text and where it came from, for error messages.
pub struct Source<'a> {
    /// The file, if any.
    pub file: Option<&'a Path>,
    /// Its text.
    pub text: &'a str,
}

impl GravityConfig {
    /// Parses and validates a configuration, applying `overrides` (`section.key=value`, the value
    /// in TOML syntax, or a bare word taken as a string) on top of the file.
    pub fn parse(source: &Source<'_>, overrides: &[String]) -> Result<Self, ConfigError> {
        let (table, overridden) = read_table(source, overrides)?;
        expect_physics(source, &table, Physics::Gravity)?;
        let mut config: GravityConfig =
            deserialize_and_validate(source, table, &overridden, GravityConfig::validate)?;
        config.initial_conditions = config.initial_conditions.with_defaults();
        config.solver = config.solver.with_defaults();
        Ok(config)
    }

    /// The run's unit system (validated with the configuration).
    pub fn units(&self) -> crate::units::Units {
        self.units
            .resolve()
            .expect("validated with the configuration")
    }

    /// Checks ranges and consistency; returns the offending key path and what is allowed.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((key.to_string(), msg));
        self.units.validate()?;
        let r = &self.run;
        if !(r.end_time.is_finite() && r.end_time > 0.0) {
            return bad(
                "run.end_time",
                format!("{} is not allowed: a finite time > 0", num(r.end_time)),
            );
        }
        if !(r.dt.is_finite() && r.dt > 0.0) {
            return bad(
                "run.dt",
                format!("{} is not allowed: a finite step > 0", num(r.dt)),
            );
        }
        if r.end_time / r.dt > 1e9 {
            return bad(
                "run.dt",
                format!(
                    "{} gives more than 1e9 steps to end_time {}",
                    num(r.dt),
                    num(r.end_time)
                ),
            );
        }
        validate_resources(r.memory_limit.as_deref(), &r.backend, &r.device)?;
        if !(r.rebalance.is_finite() && r.rebalance >= 1.0) {
            return bad(
                "run.rebalance",
                format!(
                    "{} is not allowed: the largest rank's work over the mean, a finite ratio >= 1",
                    num(r.rebalance)
                ),
            );
        }
        if let Err(e) = Softening::new(self.solver.softening) {
            return bad("solver.softening", e.to_string());
        }
        if let Err(e) = self.solver.kernel.parse::<KernelChoice>() {
            return bad("solver.kernel", e.to_string());
        }
        match self.solver.kind {
            SolverKind::Direct => {
                if let Some(key) = self.solver.tree_keys_set() {
                    return bad(
                        key,
                        "is a tree setting: it needs solver.kind = \"tree\" (the solver here is \"direct\")"
                            .to_string(),
                    );
                }
            }
            SolverKind::Tree => {
                if let Err(e) = self.solver.tree_settings() {
                    let key = match &e {
                        mote_gravity::GravityError::InvalidParameter { name, .. } => {
                            format!("solver.{name}")
                        }
                        _ => "solver".to_string(),
                    };
                    return bad(&key, e.to_string());
                }
                if self.solver.kernel.trim() == "reference" {
                    return bad(
                        "solver.kernel",
                        "\"reference\" is direct summation's yardstick; the tree evaluates its lists with a fast kernel (auto, scalar, avx2, avx512)".to_string(),
                    );
                }
            }
        }
        validate_output(
            self.output.checkpoint_interval,
            &self.output.checkpoint_wall_interval,
            r.end_time,
        )?;
        crate::snapshot::validate_format(self.output.format, self.output.compression)?;
        if r.dt > r.end_time {
            tracing::warn!(
                "run.dt = {} is larger than run.end_time = {}: the run is one shortened step",
                num(r.dt),
                num(r.end_time)
            );
        }
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
        // Keys that do not apply to the chosen kind are contradictions, not silent no-ops.
        let ic = toml::Value::try_from(&self.initial_conditions).expect("serialisable");
        let allowed = initial_condition_keys(self.initial_conditions.kind);
        if let toml::Value::Table(t) = ic {
            for key in t.keys().filter(|k| *k != "kind") {
                if !allowed.contains(&key.as_str()) {
                    return bad(
                        &format!("initial_conditions.{key}"),
                        format!(
                            "does not apply to kind `{}`; its keys are: {}",
                            toml::Value::try_from(self.initial_conditions.kind)
                                .map(|v| v.as_str().unwrap_or_default().to_string())
                                .unwrap_or_default(),
                            allowed.join(", ")
                        ),
                    );
                }
            }
        }
        if let Some(0 | 1) = self.initial_conditions.particles {
            return bad(
                "initial_conditions.particles",
                "at least 2 particles".into(),
            );
        }
        if self.initial_conditions.kind == InitialConditionsKind::File {
            // The file's contents are checked when the run reads it, before anything is
            // written (crate::initial).
            return match self.initial_conditions.path.as_deref() {
                None => bad(
                    "initial_conditions.path",
                    "required for kind `file`: the HDF5 file or text table of the bodies".into(),
                ),
                Some(p) if !std::path::Path::new(p).is_file() => bad(
                    "initial_conditions.path",
                    format!("`{p}` is not a file (paths are relative to the working directory)"),
                ),
                Some(_) => Ok(()),
            };
        }
        // The initial conditions' own checks, on a two-particle probe (so that a value they
        // refuse is a configuration error with its key and line, not a failure at run time).
        let ic = self.initial_conditions.clone().with_defaults();
        let probe = InitialConditions {
            particles: ic.particles.map(|_| 2),
            ..ic.clone()
        };
        if let Err(e) = crate::runner::initial_particles::<f64>(&probe) {
            return Err(ic_error(&ic, e));
        }
        Ok(())
    }

    /// The resolved configuration as TOML, every default included.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a valid configuration serialises")
    }
}

/// The key and message of an initial-conditions parameter the gravity crate refused.
fn ic_error(ic: &InitialConditions, e: mote_gravity::GravityError) -> (String, String) {
    let mote_gravity::GravityError::InvalidParameter {
        name,
        value,
        allowed,
    } = &e
    else {
        return ("initial_conditions.kind".into(), e.to_string());
    };
    let key = match *name {
        "mass" => {
            if ic.m1.is_some_and(|m| m.is_finite() && m > 0.0) {
                "m2".to_string()
            } else {
                "m1".to_string()
            }
        }
        "total mass" => "bulge_mass".to_string(),
        "particle count" => "particles".to_string(),
        other => other.replace([' ', '-'], "_"),
    };
    (
        format!("initial_conditions.{key}"),
        // The value as the gravity crate printed it: re-read so that 1e290 is not 291 digits.
        format!(
            "{} is not allowed: {allowed}",
            value.parse::<f64>().map_or_else(|_| value.clone(), num)
        ),
    )
}

/// `v` for a message: plain where that is short (`0.25`, `-1`, `4096`), else in scientific
/// notation (`1e-300`, `2.5e290`), never the 300 digits `Display` writes for 1e290.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() || (1e-4..1e15).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Checks the `[output]` keys both families share: the checkpoint intervals in simulated time
/// (at most a million checkpoints to `end`) and on the wall clock.
pub(crate) fn validate_output(
    interval: Option<f64>,
    wall: &str,
    end: f64,
) -> Result<(), (String, String)> {
    if let Some(c) = interval {
        if !(c.is_finite() && c > 0.0) {
            return Err((
                "output.checkpoint_interval".into(),
                format!("{} is not allowed: a finite time > 0", num(c)),
            ));
        }
        if end / c > 1e6 {
            return Err((
                "output.checkpoint_interval".into(),
                format!(
                    "{} gives more than a million checkpoints to the end time {}",
                    num(c),
                    num(end)
                ),
            ));
        }
    }
    crate::schedule::parse_wall_interval(wall)
        .map_err(|e| ("output.checkpoint_wall_interval".to_string(), e))?;
    Ok(())
}

/// Checks the `[run]` keys both families share: the memory limit, the backend and the device.
pub(crate) fn validate_resources(
    memory_limit: Option<&str>,
    backend: &str,
    device: &str,
) -> Result<(), (String, String)> {
    if let Some(m) = memory_limit {
        parse_memory_limit(m).map_err(|e| ("run.memory_limit".to_string(), e))?;
    }
    if backend != "cpu" && backend != "gpu" {
        return Err((
            "run.backend".to_string(),
            format!("`{backend}`: expected cpu or gpu"),
        ));
    }
    if let Err(e) = device.parse::<mote_core::DeviceSpec>() {
        return Err(("run.device".to_string(), e.to_string()));
    }
    Ok(())
}

/// A configuration of either family, as its `physics` key says.
#[derive(Clone, Debug, PartialEq)]
pub enum Config {
    /// `physics = "gravity"`.
    Gravity(GravityConfig),
    /// `physics = "meshless"`.
    Meshless(crate::meshless::MeshlessConfig),
}

impl Config {
    /// Parses and validates a configuration of the family its `physics` key names, applying
    /// `overrides` (`section.key=value`) on top of the file.
    pub fn parse(source: &Source<'_>, overrides: &[String]) -> Result<Self, ConfigError> {
        let (table, _) = read_table(source, overrides)?;
        match physics_of(source, &table)? {
            Physics::Gravity => GravityConfig::parse(source, overrides).map(Config::Gravity),
            Physics::Meshless => {
                crate::meshless::MeshlessConfig::parse(source, overrides).map(Config::Meshless)
            }
        }
    }

    /// The resolved configuration as TOML, every default included.
    pub fn to_toml(&self) -> String {
        match self {
            Config::Gravity(c) => c.to_toml(),
            Config::Meshless(c) => c.to_toml(),
        }
    }
}

/// The text of `source` as a table with `overrides` applied, and the key paths overridden.
pub(crate) fn read_table(
    source: &Source<'_>,
    overrides: &[String],
) -> Result<(toml::Table, Vec<String>), ConfigError> {
    let mut table: toml::Table = source.text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map(|s| line_of_offset(source.text, s.start));
        source.error(line, None, e.message().to_string())
    })?;
    let mut overridden = Vec::new();
    for o in overrides {
        let key = apply_override(&mut table, o).map_err(|m| source.error(None, None, m))?;
        overridden.push(key);
    }
    Ok((table, overridden))
}

/// The family `table` declares with its `physics` key.
fn physics_of(source: &Source<'_>, table: &toml::Table) -> Result<Physics, ConfigError> {
    let key = "physics".to_string();
    match table.get("physics") {
        None => Err(source.error(
            None,
            Some(key),
            "missing: set `physics = \"gravity\"` or `physics = \"meshless\"`".into(),
        )),
        Some(toml::Value::String(s)) if s == "gravity" => Ok(Physics::Gravity),
        Some(toml::Value::String(s)) if s == "meshless" => Ok(Physics::Meshless),
        Some(v) => Err(source.error(
            find_key_line(source.text, &key),
            Some(key),
            format!("`{v}` is not available: expected \"gravity\" or \"meshless\""),
        )),
    }
}

/// Fails unless `table` declares the family `expected` (a command that works on one family
/// only, such as `mote convergence` on gravity, says so).
pub(crate) fn expect_physics(
    source: &Source<'_>,
    table: &toml::Table,
    expected: Physics,
) -> Result<(), ConfigError> {
    let found = physics_of(source, table)?;
    if found != expected {
        let key = "physics".to_string();
        let name = |p: Physics| match p {
            Physics::Gravity => "gravity",
            Physics::Meshless => "meshless",
        };
        return Err(source.error(
            find_key_line(source.text, &key),
            Some(key),
            format!(
                "a {} configuration where a {} one is needed (this command works on {} runs only)",
                name(found),
                name(expected),
                name(expected)
            ),
        ));
    }
    Ok(())
}

/// Deserializes `table` into `T` and checks it with `validate`, blaming the file's line for a
/// key the file sets and `--set` for one an override set.
pub(crate) fn deserialize_and_validate<T: serde::de::DeserializeOwned>(
    source: &Source<'_>,
    table: toml::Table,
    overridden: &[String],
    validate: impl Fn(&T) -> Result<(), (String, String)>,
) -> Result<T, ConfigError> {
    let line_for = |key: &str| {
        if overridden.iter().any(|k| k == key) {
            None
        } else {
            find_key_line(source.text, key)
        }
    };
    let config: T = serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let key = e.path().to_string();
        let line = line_for(&key);
        let key = (key != ".").then_some(key);
        source.error(line, key, e.into_inner().message().to_string())
    })?;
    validate(&config).map_err(|(key, message)| {
        let message = if overridden.contains(&key) {
            format!("{message} (set with --set)")
        } else {
            message
        };
        source.error(line_for(&key), Some(key), message)
    })?;
    Ok(config)
}

impl Source<'_> {
    /// A [`ConfigError`] in this source.
    fn error(&self, line: Option<usize>, key: Option<String>, message: String) -> ConfigError {
        ConfigError {
            file: self.file.map(Path::to_path_buf),
            line,
            key,
            message,
        }
    }
}

/// Deserialises a vector given as an array of numbers, or as one number (a 1-D vector).
pub(crate) fn number_or_array<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<f64>>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Vec<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number or an array of numbers")
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Vec<f64>, E> {
            Ok(vec![v])
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Vec<f64>, E> {
            Ok(vec![v as f64])
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Vec<f64>, E> {
            Ok(vec![v as f64])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f64>, A::Error> {
            let mut v = Vec::new();
            while let Some(x) = seq.next_element::<f64>()? {
                v.push(x);
            }
            Ok(v)
        }
    }
    deserializer.deserialize_any(Visitor).map(Some)
}

/// Parses a memory size such as `4 GiB`, `500MB` or `1e9`.
pub fn parse_memory_limit(text: &str) -> Result<u64, String> {
    let bytes = parse_size::parse_size(text.trim()).map_err(|e| {
        format!("`{text}` is not a memory size ({e}): write e.g. \"4 GiB\", \"500MB\" or \"1e9\"")
    })?;
    if bytes == 0 {
        return Err("a memory limit of 0 bytes holds nothing".to_string());
    }
    Ok(bytes)
}

/// Sets `section.key=value` in `table`; returns the key path.
fn apply_override(table: &mut toml::Table, text: &str) -> Result<String, String> {
    let (path, value) = text
        .split_once('=')
        .ok_or_else(|| format!("--set `{text}`: expected section.key=value"))?;
    let path = path.trim();
    let value = value.trim();
    // The value in TOML syntax (numbers, booleans, quoted strings); a bare word is a string.
    let parsed: toml::Value = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    let mut keys: Vec<&str> = path.split('.').collect();
    let last = keys
        .pop()
        .filter(|k| !k.is_empty())
        .ok_or_else(|| format!("--set `{text}`: empty key"))?;
    let mut t = table;
    for k in keys {
        t = t
            .entry(k.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()))
            .as_table_mut()
            .ok_or_else(|| format!("--set `{text}`: `{k}` is not a section"))?;
    }
    t.insert(last.to_string(), parsed);
    Ok(path.to_string())
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line that sets `path` (`section.key` or a top-level `key`) in a plain TOML file, or the
/// section's header when the key itself is absent; for a key inside an inline table
/// (`section.table.key`), the line that sets the table.
fn find_key_line(text: &str, path: &str) -> Option<usize> {
    find_key_line_exactly(text, path).or_else(|| {
        let (parent, _) = path.rsplit_once('.')?;
        parent
            .contains('.')
            .then(|| find_key_line(text, parent))
            .flatten()
    })
}

fn find_key_line_exactly(text: &str, path: &str) -> Option<usize> {
    let (section, key) = match path.rsplit_once('.') {
        Some((s, k)) => (s, k),
        None => ("", path),
    };
    let mut current = String::new();
    let mut header = None;
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            current = l.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            if current == section {
                header = Some(n + 1);
            }
            continue;
        }
        if current == section
            && let Some((k, _)) = l.split_once('=')
            && k.trim().trim_matches('"') == key
        {
            return Some(n + 1);
        }
    }
    header
}
