//! `mote bench cloud`: one time step of linear advection on a periodic cloud, split by pass.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::Instant;

use clap::Args;
#[cfg(feature = "exhaustive")]
use mote_cloud::SlotMajor;
use mote_cloud::equations::{Burgers, Equation, Euler, LinearAdvection};
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::mood::MoodSettings;
use mote_cloud::scheme::{Formulation, Limiter, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, SlotLayout, Weight};
use mote_core::{CpuBackend, Precision, PrecisionJob, Real};
use serde::Serialize;

/// Options of `mote bench cloud`.
#[derive(Clone, Debug, Args)]
pub struct CloudArgs {
    /// Number of particles (rounded to a full lattice: n^dim).
    #[arg(long, default_value_t = 250_000)]
    pub(crate) particles: usize,
    /// Dimension: 1, 2 or 3.
    #[arg(long, default_value_t = 2)]
    pub(crate) dim: usize,
    /// MUSCL order (1-5).
    #[arg(long, default_value_t = 3)]
    pub(crate) order: usize,
    /// Floating-point precision.
    #[arg(long, default_value = "f64")]
    pub(crate) precision: Precision,
    /// Slot layout: row or slot.
    #[arg(long, default_value = "row")]
    pub(crate) layout: String,
    /// Jitter of the lattice, as a fraction of the spacing.
    #[arg(long, default_value_t = 0.25)]
    pub(crate) jitter: f64,
    /// Search radius in spacings (default: enough neighbours for the order's MLS fit).
    #[arg(long)]
    pub(crate) radius: Option<f64>,
    /// Number of advected variables.
    #[arg(long, default_value_t = 1)]
    pub(crate) variables: usize,
    /// advection, burgers or euler (gamma 1.4, a smooth density wave on a uniform flow).
    #[arg(long, default_value = "advection")]
    pub(crate) equation: String,
    /// Time stepper: euler, rk2, rk3 or rk4.
    #[arg(long, default_value = "rk3")]
    pub(crate) stepper: String,
    /// Numerical flux: rusanov, upwind (scalar equations), hllc (euler) or central.
    #[arg(long, default_value = "rusanov")]
    pub(crate) flux: String,
    /// Slope limiter: none, bj, vk, minmod or superbee (the last two in 1-D).
    #[arg(long, default_value = "none")]
    pub(crate) limiter: String,
    /// Limiter mode: soft (gradient only) or hard (every derivative).
    #[arg(long, default_value = "soft")]
    pub(crate) limiter_mode: String,
    /// WENO-type MLS reconstruction (central fit mixed with one-sided fits).
    #[arg(long)]
    pub(crate) weno: bool,
    /// MOOD criterion: none, u1, u2 or always.
    #[arg(long, default_value = "none")]
    pub(crate) mood: String,
    /// MOOD halo strategy: epd0, epd1, epd2 or strict.
    #[arg(long, default_value = "epd1")]
    pub(crate) mood_strategy: String,
    /// Move the cloud (neighbour search and MLS moments at every stage, ALE fluxes); the
    /// report then also gives the fixed cloud's step time for comparison.
    #[arg(long)]
    pub(crate) moving: bool,
    /// The motion of --moving: rotation (counter-rotating periodic cells) or shear.
    #[arg(long, default_value = "rotation")]
    pub(crate) motion: String,
    /// Peak particle speed of --moving.
    #[arg(long, default_value_t = 0.2)]
    pub(crate) motion_speed: f64,
    /// Timed steps (after one warm-up step).
    #[arg(long, default_value_t = 5)]
    pub(crate) repeats: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Where the step runs: cpu, or gpu (search, MLS, passes and Runge-Kutta stages on the
    /// device; advection or euler, any flux, limiter and MOOD). The GPU report adds
    /// transfer times and the speed-up over the CPU backend on this machine.
    #[arg(long, default_value = "cpu")]
    pub(crate) backend: crate::gravity::BackendKind,
    /// The device for `--backend gpu`: wgpu or cuda, with an optional `:INDEX`.
    #[arg(long, default_value = "wgpu:0")]
    pub(crate) device: mote_core::DeviceSpec,
    /// Units per workgroup of the GPU kernels.
    #[arg(long, default_value_t = 256)]
    pub(crate) workgroup: u32,
    /// SIMD level of the CPU passes: auto (AVX2 where available: faster than AVX-512 for
    /// these gather-bound passes, which are compiled for scalar and AVX2 only), scalar or avx2.
    /// Every level gives the same bits.
    #[arg(long, default_value = "auto")]
    pub(crate) simd: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct PassReport {
    pub seconds: f64,
    pub gb_per_s: f64,
    pub gflop_per_s: f64,
}

impl PassReport {
    /// A pass that took `seconds` over `reps` steps, moving `bytes` and doing `flops` per step.
    pub(crate) fn per_step(seconds: f64, reps: f64, bytes: f64, flops: f64) -> Self {
        let per = seconds / reps;
        Self {
            seconds: per,
            gb_per_s: bytes / per / 1e9,
            gflop_per_s: flops / per / 1e9,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct CloudReport {
    pub family: &'static str,
    pub backend: &'static str,
    pub particles: usize,
    pub dim: usize,
    pub order: usize,
    pub precision: Precision,
    pub threads: usize,
    pub layout: String,
    /// The CPU passes' SIMD level ("device" for a GPU run).
    pub simd: String,
    pub stages: usize,
    pub equation: String,
    pub variables: usize,
    pub flux: String,
    pub limiter: String,
    pub limiter_mode: String,
    pub weno: bool,
    pub mood: String,
    pub mood_strategy: String,
    /// The motion of a moving cloud ("none" for a fixed one).
    pub motion: String,
    /// A moving run's median step time on the same cloud kept fixed.
    pub fixed_seconds_median: Option<f64>,
    /// Morton reorderings of a moving cloud during the timed steps.
    pub reorders: u64,
    /// MOOD order reductions per timed step.
    pub mood_reductions_per_step: f64,
    /// Positivity floor events (Euler) during the timed steps.
    pub floor_events: u64,
    pub neighbours_mean: f64,
    pub search_seconds: f64,
    pub mls_seconds: f64,
    pub seconds_median: f64,
    pub seconds_min: f64,
    pub seconds_max: f64,
    pub passes: BTreeMap<&'static str, PassReport>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::cloud_gpu::CloudGpuReport>,
}

/// Runs the benchmark.
pub fn run(args: &CloudArgs, threads: usize) -> Result<(), Box<dyn Error>> {
    // A lower bound: the positions, and the neighbour indices and MLS coefficients of about
    // ten slots per particle (4 bytes each at least).
    crate::check_fits(
        &format!("{} particles", args.particles),
        args.particles as u128 * (args.dim as u128 * 4 + 10 * 8),
    )?;
    if args.backend == crate::gravity::BackendKind::Gpu {
        let report = crate::cloud_gpu::measure(args, threads)?;
        return print(args, &report);
    }
    let mut report = measure(args, threads)?;
    if args.moving {
        let fixed = CloudArgs {
            moving: false,
            ..args.clone()
        };
        report.fixed_seconds_median = Some(measure(&fixed, threads)?.seconds_median);
    }
    print(args, &report)
}

/// Prints a report as text or JSON.
fn print(args: &CloudArgs, report: &CloudReport) -> Result<(), Box<dyn Error>> {
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "cloud [{}, {}] {} ({} flux, limiter {} {}, MOOD {} {}) {}-D order {} {} {}-major N={} threads={} ({} stages, {:.1} neighbours): {:.4e} s per step (min {:.4e}, max {:.4e}); search {:.3e} s, MLS {:.3e} s once",
            report.backend,
            report.simd,
            report.equation,
            report.flux,
            report.limiter,
            report.limiter_mode,
            report.mood,
            report.mood_strategy,
            report.dim,
            report.order,
            report.precision,
            report.layout,
            report.particles,
            report.threads,
            report.stages,
            report.neighbours_mean,
            report.seconds_median,
            report.seconds_min,
            report.seconds_max,
            report.search_seconds,
            report.mls_seconds
        );
        if let Some(fixed) = report.fixed_seconds_median {
            println!(
                "  moving ({}, {} reorderings): {:.2} x the fixed cloud's step ({:.4e} s)",
                report.motion,
                report.reorders,
                report.seconds_median / fixed,
                fixed
            );
        }
        if let Some(g) = &report.gpu {
            println!(
                "  {} (workgroup {}): upload {:.3e} s, download {:.3e} s; CPU backend {:.4e} s per step: {:.2} x",
                g.device,
                g.workgroup,
                g.upload_seconds,
                g.download_seconds,
                g.cpu_seconds_median,
                g.speedup_over_cpu
            );
        }
        for (name, p) in &report.passes {
            println!(
                "  {name:<12} {:.4e} s per step  {:7.2} GB/s  {:7.2} GFLOP/s",
                p.seconds, p.gb_per_s, p.gflop_per_s
            );
        }
    }
    Ok(())
}

impl CloudArgs {
    /// The configuration (2-D, order 3, scalar, SSP-RK3, jitter 0.25, row-major) at
    /// `particles` and `precision`, `repeats` timed steps.
    pub(crate) fn standard(particles: usize, precision: Precision, repeats: usize) -> Self {
        Self {
            particles,
            dim: 2,
            order: 3,
            precision,
            layout: "row".into(),
            jitter: 0.25,
            radius: None,
            variables: 1,
            equation: "advection".into(),
            stepper: "rk3".into(),
            flux: "rusanov".into(),
            limiter: "none".into(),
            limiter_mode: "soft".into(),
            weno: false,
            mood: "none".into(),
            mood_strategy: "epd1".into(),
            moving: false,
            motion: "rotation".into(),
            motion_speed: 0.2,
            repeats,
            json: false,
            backend: crate::gravity::BackendKind::Cpu,
            device: mote_core::DeviceSpec {
                api: mote_core::DeviceApi::Wgpu,
                index: 0,
            },
            workgroup: 256,
            simd: "auto".into(),
        }
    }
}

/// The SIMD level `--simd` asks for: `None` for auto (the scheme's default); an error for an
/// unknown name or a level this CPU lacks.
fn simd_level(name: &str) -> Result<Option<mote_core::SimdLevel>, Box<dyn Error>> {
    if name == "auto" {
        return Ok(None);
    }
    let level: mote_core::SimdLevel = name
        .parse()
        .map_err(|e| format!("--simd `{name}`: {e} (or auto)"))?;
    if !mote_core::SimdLevel::gather_levels().contains(&level) {
        return Err(format!(
            "--simd {name}: the meshless passes run at {} on this CPU (not avx512: slower for \
             these gather-bound passes, and not compiled for them)",
            mote_core::SimdLevel::gather_levels()
                .iter()
                .map(|l| l.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into());
    }
    Ok(Some(level))
}

/// Builds the cloud and times `args.repeats` steps on `threads` threads (0: all cores).
pub(crate) fn measure(args: &CloudArgs, threads: usize) -> Result<CloudReport, Box<dyn Error>> {
    if !(1..=3).contains(&args.dim) {
        return Err("--dim must be 1, 2 or 3".into());
    }
    if args.repeats == 0 || args.particles < 8 {
        return Err("--repeats must be at least 1 and --particles at least 8".into());
    }
    if args.layout != "row" && args.layout != "slot" {
        return Err(format!("--layout `{}`: expected row or slot", args.layout).into());
    }
    compiled(args)?;
    Tableau::by_name(&args.stepper)?;
    FluxKind::by_name(&args.flux)?;
    Limiter::by_name(&args.limiter, &args.limiter_mode)?;
    MoodSettings::by_name(&args.mood, &args.mood_strategy)?;
    simd_level(&args.simd)?;
    mote_cloud::motion::builtin::<2>(&args.motion, args.motion_speed, [0.0; 2], [1.0; 2])?;
    args.precision.dispatch(CloudBench {
        args,
        backend: CpuBackend::threads(threads),
    })
}

struct CloudBench<'a> {
    args: &'a CloudArgs,
    backend: CpuBackend,
}

impl PrecisionJob for CloudBench<'_> {
    type Output = Result<CloudReport, Box<dyn Error>>;

    fn run<R: Real>(self) -> Self::Output {
        compiled(self.args)?;
        match (self.args.dim, self.args.layout.as_str()) {
            (2, "row") => bench::<R, 2, RowMajor>(self.args, self.backend),
            #[cfg(feature = "exhaustive")]
            (2, _) => bench::<R, 2, SlotMajor>(self.args, self.backend),
            #[cfg(feature = "exhaustive")]
            (1, "row") => bench::<R, 1, RowMajor>(self.args, self.backend),
            #[cfg(feature = "exhaustive")]
            (1, _) => bench::<R, 1, SlotMajor>(self.args, self.backend),
            #[cfg(feature = "exhaustive")]
            (3, "row") => bench::<R, 3, RowMajor>(self.args, self.backend),
            #[cfg(feature = "exhaustive")]
            _ => bench::<R, 3, SlotMajor>(self.args, self.backend),
            #[cfg(not(feature = "exhaustive"))]
            _ => unreachable!("refused by `compiled`"),
        }
    }
}

/// Whether this build has the meshless benchmark for `args.dim` and `args.layout`: every
/// meshless pass is instantiated per precision, dimension, slot layout and equation, and the
/// 36 combinations took most of a clean release build (decision 0014), so the default build
/// benchmarks 2-D clouds in the row-major layout (every equation, both precisions) and the
/// `exhaustive` feature (`cargo build --release -p mote --features exhaustive-bench`) adds 1-D
/// and 3-D clouds and the CPU's slot-major layout (an experiment, decision 0008; the device
/// benchmark has both layouts in every build).
pub(crate) fn compiled(args: &CloudArgs) -> Result<(), Box<dyn Error>> {
    if cfg!(feature = "exhaustive") || (args.dim == 2 && args.layout == "row") {
        return Ok(());
    }
    let what = if args.dim == 2 {
        "--layout slot: this program benchmarks the CPU's row-major layout; the slot-major one \
         needs"
            .to_string()
    } else {
        format!(
            "--dim {}: this program benchmarks 2-D clouds; 1-D and 3-D need",
            args.dim
        )
    };
    Err(format!(
        "{what} a build with `--features exhaustive-bench` (cargo build --release -p mote \
         --features exhaustive-bench)"
    )
    .into())
}

/// The median of `v` (sorted in place; the mean of the middle two for an even count).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Bytes and flops per step of the derivative and the flux pass (`[derivative bytes, derivative
/// flops, flux bytes, flux flops]`) for `stages` stages, `n` particles, `slots` neighbour slots,
/// `m` variables, `mr` reconstruction terms, `r`-byte reals in `d` dimensions: each array read
/// or written once per pass, indices 4 bytes. The CPU and the GPU benchmark use the same model.
pub(crate) fn stage_traffic(
    stages: f64,
    n: f64,
    slots: f64,
    m: f64,
    mr: f64,
    r: f64,
    d: f64,
) -> [f64; 4] {
    let s = stages;
    let deriv_bytes = s * (slots * (4.0 + mr * r + m * r) + n * (m * r + m * mr * r));
    let deriv_flops = s * slots * m * (1.0 + 2.0 * mr);
    let flux_bytes = s
        * (slots * (4.0 + d * r + d * r + m * r + m * mr * r + 1.0)
            + n * (d * r + m * r + m * mr * r + 1.0 + m * r));
    // Per pair: separation (3D), basis (~2 mr), reconstruction (4 m mr), two fluxes and speeds
    // (~4 D + 2 m), Rusanov (5 m), consistency (2 D m).
    let flux_flops =
        s * slots * (3.0 * d + 2.0 * mr + 4.0 * m * mr + 4.0 * d + 2.0 * m + 5.0 * m + 2.0 * d * m);
    [deriv_bytes, deriv_flops, flux_bytes, flux_flops]
}

/// Bytes and flops of the limiter pass per step: per slot the neighbour's index, state per
/// variable and offset, per particle its derivative record read and written.
pub(crate) fn limiter_traffic(
    stages: f64,
    n: f64,
    slots: f64,
    m: f64,
    mr: f64,
    r: f64,
    d: f64,
) -> [f64; 2] {
    let bytes = stages * (slots * (4.0 + m * r + d * r) + n * 2.0 * m * mr * r);
    let flops = stages * slots * m * (3.0 * d + 2.0 * mr + 4.0);
    [bytes, flops]
}

/// The benchmark's periodic lattice: its spacing and options (`--particles` rounded to a full
/// lattice, `--jitter`, seed 1).
pub(crate) fn lattice<const D: usize>(args: &CloudArgs) -> (f64, LatticeOptions) {
    let per_axis = (args.particles as f64)
        .powf(1.0 / D as f64)
        .round()
        .max(2.0) as usize;
    let spacing = 1.0 / per_axis as f64;
    let opts = LatticeOptions {
        spacing,
        jitter: args.jitter,
        seed: 1,
        boundary_layers: 0,
    };
    (spacing, opts)
}

fn bench<R: Real, const D: usize, L: SlotLayout>(
    args: &CloudArgs,
    backend: CpuBackend,
) -> Result<CloudReport, Box<dyn Error>> {
    let (spacing, opts) = lattice::<D>(args);
    let tau = std::f64::consts::TAU;
    let wave = move |x: [f64; D]| (0..D).map(|d| (tau * x[d]).sin()).product::<f64>();
    match args.equation.as_str() {
        "advection" => {
            let velocity: [f64; D] = std::array::from_fn(|d| 1.0 - 0.25 * d as f64);
            let eq = LinearAdvection::scalar(velocity, args.variables);
            bench_equation::<R, D, L, _>(args, backend, spacing, opts, eq, |x| {
                (0..args.variables).map(|v| wave(x) + v as f64).collect()
            })
        }
        "burgers" => {
            bench_equation::<R, D, L, _>(args, backend, spacing, opts, Burgers::<D>, |x| {
                vec![1.0 + 0.2 * wave(x)]
            })
        }
        "euler" => {
            let eq = Euler::<D>::new(1.4)?;
            let velocity: [f64; D] = std::array::from_fn(|d| 0.5 - 0.2 * d as f64);
            let gas = eq.clone();
            bench_equation::<R, D, L, _>(args, backend, spacing, opts, eq, move |x| {
                gas.conservative(1.0 + 0.2 * wave(x), velocity, 1.0)
            })
        }
        other => Err(format!("--equation `{other}`: expected advection, burgers or euler").into()),
    }
}

/// The benchmark of one equation: a periodic cloud with state `init(x)` (conservative
/// variables), the scheme, and the timed steps.
fn bench_equation<R: Real, const D: usize, L: SlotLayout, E: Equation<R, D>>(
    args: &CloudArgs,
    backend: CpuBackend,
    spacing: f64,
    opts: LatticeOptions,
    equation: E,
    init: impl Fn([f64; D]) -> Vec<f64>,
) -> Result<CloudReport, Box<dyn Error>> {
    let variables = equation.variables();
    let mut cloud = Cloud::<R, D>::lattice(Domain::unit_periodic(), opts, variables)?;
    cloud.reorder_morton();
    for o in cloud.orders_mut() {
        *o = args.order as u8;
    }
    for i in 0..cloud.len() {
        let u = init(cloud.position_of(i));
        for (v, value) in u.into_iter().enumerate() {
            cloud.state_var_mut(v)[i] = R::cast(value);
        }
    }
    let scheme = Muscl::new(
        equation,
        args.order,
        Formulation::MlsDivergence,
        Weight::default(),
    )?
    .with_flux(FluxKind::by_name(&args.flux)?)?
    .with_limiter(Limiter::by_name(&args.limiter, &args.limiter_mode)?)?;
    let mut scheme = if args.weno {
        scheme.with_weno(mote_cloud::scheme::WENO_CENTRAL_WEIGHT)?
    } else {
        scheme
    };
    if let Some(level) = simd_level(&args.simd)? {
        scheme.set_simd_level(level)?;
    }
    let simd = scheme.simd_level().name().to_string();
    let radius = args
        .radius
        .unwrap_or_else(|| default_radius_factor::<D>(args.order))
        * spacing;
    let clock = Instant::now();
    let mut probe = mote_cloud::NeighbourSearch::new(radius)?;
    let mut probe_list = mote_cloud::NeighbourList::<L>::default();
    probe.build(&cloud, backend, &mut probe_list)?;
    let search_seconds = clock.elapsed().as_secs_f64();
    drop(probe_list);
    let clock = Instant::now();
    let mut sim = MeshlessSimulation::<R, D, _, L>::new(
        cloud,
        radius,
        scheme,
        Tableau::by_name(&args.stepper)?,
        backend,
    )?
    .with_mood(MoodSettings::by_name(&args.mood, &args.mood_strategy)?)?;
    let mls_seconds = (clock.elapsed().as_secs_f64() - search_seconds).max(0.0);
    if args.moving {
        let motion =
            mote_cloud::motion::builtin::<D>(&args.motion, args.motion_speed, [0.0; D], [1.0; D])?;
        sim = sim.with_motion(motion, 1.0)?;
    }
    let dt = sim.stable_dt(0.4);
    sim.step(dt)?; // warm-up
    sim.scheme.take_seconds();
    sim.take_stepper_seconds();
    sim.take_motion_seconds();
    let reorders_before = sim.reorders();
    sim.take_mood_stats();
    let floors_before = sim.scheme.equation().floor_events();
    let mut times = Vec::with_capacity(args.repeats);
    for _ in 0..args.repeats {
        let t = Instant::now();
        sim.step(dt)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let pass = sim.scheme.take_seconds();
    let mood = sim.take_mood_stats();
    let floor_events = sim.scheme.equation().floor_events() - floors_before;
    let rk = sim.take_stepper_seconds();
    let geometry = sim.take_motion_seconds();
    let reps = args.repeats as f64;
    let n = sim.cloud.len() as f64;
    let slots = sim.list.total() as f64;
    let stages = Tableau::by_name(&args.stepper)?.stages();
    let (m, mr, r) = (
        variables as f64,
        sim.scheme.reconstruction_terms() as f64,
        std::mem::size_of::<R>() as f64,
    );
    let s = stages as f64;
    let dd = D as f64;
    // Bytes each pass moves per step (each array read or written once per pass; index 4 bytes).
    let [deriv_bytes, deriv_flops, flux_bytes, flux_flops] =
        stage_traffic(s, n, slots, m, mr, r, dd);
    let stage_bytes = (s - 1.0).max(0.0) * n * m * r * 3.0;
    let update_bytes = n * m * r * (2.0 + s);
    let mut passes = BTreeMap::new();
    let mut add = |name, seconds: f64, bytes: f64, flops: f64| {
        passes.insert(name, PassReport::per_step(seconds, reps, bytes, flops));
    };
    // First order reconstructs nothing: there is no derivative pass to report (a rate from its
    // empty timing would be meaningless), as on the device.
    if mr > 0.0 {
        add("derivatives", pass.derivatives, deriv_bytes, deriv_flops);
    }
    add("fluxes", pass.fluxes, flux_bytes, flux_flops);
    if pass.limiter > 0.0 {
        let [bytes, flops] = limiter_traffic(s, n, slots, m, mr, r, dd);
        add("limiter", pass.limiter, bytes, flops);
    }
    add(
        "rk_stages",
        rk[0],
        stage_bytes,
        stage_bytes / (3.0 * r) * 2.0,
    );
    add("rk_update", rk[1], update_bytes, n * m * 2.0 * s);
    if args.moving {
        // Per stage: the search reads positions and writes the slots; the moments read the
        // offsets of every slot and write one coefficient per basis term and slot.
        let basis = sim.scheme.mls().basis().len() as f64;
        add(
            "search",
            geometry.search,
            s * (n * dd * r + slots * 4.0),
            0.0,
        );
        add(
            "moments",
            geometry.moments,
            s * (slots * (4.0 + dd * r) + slots * basis * r),
            s * slots * basis * basis * 2.0,
        );
        add("motion", geometry.motion, s * n * dd * r * (3.0 + dd), 0.0);
    }
    let seconds_median = median(&mut times);
    Ok(CloudReport {
        family: "cloud",
        backend: "cpu",
        particles: sim.cloud.len(),
        dim: D,
        order: args.order,
        precision: R::PRECISION,
        threads: backend.thread_count(),
        layout: L::NAME.to_string(),
        simd,
        stages,
        variables,
        equation: args.equation.clone(),
        flux: args.flux.clone(),
        limiter: args.limiter.clone(),
        limiter_mode: args.limiter_mode.clone(),
        weno: args.weno,
        mood: args.mood.clone(),
        mood_strategy: args.mood_strategy.clone(),
        motion: if args.moving {
            args.motion.clone()
        } else {
            "none".into()
        },
        fixed_seconds_median: None,
        reorders: sim.reorders() - reorders_before,
        mood_reductions_per_step: mood.reductions as f64 / reps,
        floor_events,
        neighbours_mean: sim.list.mean(),
        search_seconds,
        mls_seconds,
        seconds_median,
        seconds_min: times[0],
        seconds_max: times[times.len() - 1],
        passes,
        gpu: None,
    })
}
