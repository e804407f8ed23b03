//! `mote bench cloud --backend gpu`: the same time step as the CPU benchmark, with the search,
//! the MLS fits, the passes and the Runge-Kutta stages on a device.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::Instant;

use mote_cloud::equations::{Burgers, Equation, Euler, LinearAdvection};
use mote_cloud::mls::default_radius_factor;
use mote_cloud::mood::MoodSettings;
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, Weight};
use mote_core::{Precision, PrecisionJob, Real};
use mote_gpu::{DeviceEquation, DeviceLayout, DeviceMuscl, DeviceSimulation, Gpu, GpuFloat};
use serde::Serialize;

use crate::cloud::{CloudArgs, CloudReport, PassReport, median};

/// What `--backend gpu` adds to the cloud report.
#[derive(Debug, Serialize)]
pub(crate) struct CloudGpuReport {
    pub device: String,
    pub workgroup: u32,
    /// Host-to-device seconds for the positions, tags, orders and state (once).
    pub upload_seconds: f64,
    /// Device-to-host seconds for the final state (once).
    pub download_seconds: f64,
    /// The CPU backend's median step on this machine, same configuration and all threads.
    pub cpu_seconds_median: f64,
    /// CPU over GPU step time.
    pub speedup_over_cpu: f64,
}

/// Refuses the options the device passes do not have yet, naming them.
fn check_supported(args: &CloudArgs) -> Result<(), Box<dyn Error>> {
    let unsupported = |what: String| -> Result<(), Box<dyn Error>> {
        Err(format!("not supported on the GPU backend: {what}").into())
    };
    match args.equation.as_str() {
        "advection" if args.variables == 1 => {}
        "euler" | "burgers" => {}
        "advection" => return unsupported(format!("{} advected variables", args.variables)),
        other => return unsupported(format!("--equation {other}")),
    }
    Ok(())
}

/// Runs the device benchmark and the CPU one for the speed-up.
pub(crate) fn measure(args: &CloudArgs, threads: usize) -> Result<CloudReport, Box<dyn Error>> {
    check_supported(args)?;
    if !(1..=3).contains(&args.dim) {
        return Err("--dim must be 1, 2 or 3".into());
    }
    if args.layout != "row" && args.layout != "slot" {
        return Err(format!("--layout `{}`: expected row or slot", args.layout).into());
    }
    crate::cloud::compiled(args)?;
    Tableau::by_name(&args.stepper)?;
    let mut gpu = Gpu::open(args.device)?;
    gpu.set_workgroup(args.workgroup)?;
    gpu.check_precision(args.precision)?;
    let mut report = args
        .precision
        .dispatch(GpuCloudBench { args, gpu: &gpu })??;
    let cpu = crate::cloud::measure(
        &CloudArgs {
            backend: crate::gravity::BackendKind::Cpu,
            ..args.clone()
        },
        threads,
    )?;
    if let Some(g) = &mut report.gpu {
        g.cpu_seconds_median = cpu.seconds_median;
        g.speedup_over_cpu = cpu.seconds_median / report.seconds_median;
    }
    report.threads = cpu.threads;
    Ok(report)
}

struct GpuCloudBench<'a> {
    args: &'a CloudArgs,
    gpu: &'a Gpu,
}

impl PrecisionJob for GpuCloudBench<'_> {
    type Output = Result<Result<CloudReport, Box<dyn Error>>, Box<dyn Error>>;

    fn run<R: Real>(self) -> Self::Output {
        // The device kernels exist for f32 and f64, the precisions `Real` has.
        Ok(match R::PRECISION {
            Precision::F32 => by_dim::<f32>(self.args, self.gpu),
            Precision::F64 => by_dim::<f64>(self.args, self.gpu),
        })
    }
}

fn by_dim<R: GpuFloat>(args: &CloudArgs, gpu: &Gpu) -> Result<CloudReport, Box<dyn Error>> {
    crate::cloud::compiled(args)?;
    match args.dim {
        2 => bench::<R, 2>(args, gpu),
        #[cfg(feature = "exhaustive")]
        1 => bench::<R, 1>(args, gpu),
        #[cfg(feature = "exhaustive")]
        _ => bench::<R, 3>(args, gpu),
        #[cfg(not(feature = "exhaustive"))]
        _ => unreachable!("refused by `compiled`"),
    }
}

/// The initial state of a benchmark, conservative variables at a position.
type Init<const D: usize> = Box<dyn Fn([f64; D]) -> Vec<f64>>;

fn bench<R: GpuFloat, const D: usize>(
    args: &CloudArgs,
    gpu: &Gpu,
) -> Result<CloudReport, Box<dyn Error>> {
    let (spacing, opts) = crate::cloud::lattice::<D>(args);
    let tau = std::f64::consts::TAU;
    let wave = move |x: [f64; D]| (0..D).map(|d| (tau * x[d]).sin()).product::<f64>();
    let (device_eq, variables, init): (DeviceEquation, usize, Init<D>) =
        match args.equation.as_str() {
            "advection" => {
                let velocity: [f64; D] = std::array::from_fn(|d| 1.0 - 0.25 * d as f64);
                let eq = LinearAdvection::scalar(velocity, 1);
                (
                    DeviceEquation::advection(&eq)?,
                    1,
                    Box::new(move |x| vec![wave(x)]),
                )
            }
            "burgers" => (
                // The CPU benchmark's Burgers state.
                DeviceEquation::burgers(&Burgers::<D>),
                1,
                Box::new(move |x| vec![1.0 + 0.2 * wave(x)]),
            ),
            _ => {
                let eq = Euler::<D>::new(1.4)?;
                let velocity: [f64; D] = std::array::from_fn(|d| 0.5 - 0.2 * d as f64);
                let de = DeviceEquation::euler(&eq);
                let m = <Euler<D> as Equation<R, D>>::variables(&eq);
                (
                    de,
                    m,
                    Box::new(move |x| eq.conservative(1.0 + 0.2 * wave(x), velocity, 1.0)),
                )
            }
        };
    let mut cloud = Cloud::<R, D>::lattice(Domain::unit_periodic(), opts, variables)?;
    cloud.reorder_morton();
    for o in cloud.orders_mut() {
        *o = args.order as u8;
    }
    let n = cloud.len();
    for i in 0..n {
        for (v, value) in init(cloud.position_of(i)).into_iter().enumerate() {
            cloud.state_var_mut(v)[i] = R::cast(value);
        }
    }
    let layout = if args.layout == "row" {
        DeviceLayout::RowMajor
    } else {
        DeviceLayout::SlotMajor
    };
    let radius = args
        .radius
        .unwrap_or_else(|| default_radius_factor::<D>(args.order))
        * spacing;
    let limiter = mote_cloud::scheme::Limiter::by_name(&args.limiter, &args.limiter_mode)?;
    let mut scheme = DeviceMuscl::<R>::new::<D>(gpu, device_eq, args.order, Weight::default())?
        .with_limiter::<D>(limiter)?
        .with_flux(mote_cloud::flux::FluxKind::by_name(&args.flux)?)?;
    if args.weno {
        scheme = scheme.with_weno::<D>(gpu, mote_cloud::scheme::WENO_CENTRAL_WEIGHT)?;
    }
    let tableau = Tableau::by_name(&args.stepper)?;
    let stages = tableau.stages();
    let mood = MoodSettings::by_name(&args.mood, &args.mood_strategy)?;
    let mut sim = DeviceSimulation::new(gpu, &cloud, radius, scheme, tableau.clone(), layout)?
        .with_mood(gpu, mood)?;
    if args.moving {
        // The CPU benchmark's motion on the unit box (the device never reorders).
        let motion =
            mote_cloud::motion::builtin::<D>(&args.motion, args.motion_speed, [0.0; D], [1.0; D])?;
        sim = sim.with_motion(gpu, motion)?;
    }
    let setup = sim.setup_seconds();
    // The CPU benchmark's step: the geometric CFL condition at 0.4, reduced on the device.
    let dt = sim.stable_dt(gpu, 0.4)?;
    sim.set_timing(true);
    sim.step(gpu, dt)?; // warm-up (compiles the kernels)
    sim.scheme_mut().take_seconds();
    sim.take_seconds();
    sim.take_mood_stats();
    let mut times = Vec::with_capacity(args.repeats);
    for _ in 0..args.repeats {
        let t = Instant::now();
        sim.step(gpu, dt)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let clock = Instant::now();
    sim.state(gpu)?;
    let download_seconds = clock.elapsed().as_secs_f64();
    let pass = sim.scheme_mut().take_seconds();
    let rest = sim.take_seconds();
    let mood_stats = sim.take_mood_stats();
    let list = sim.list();

    // The CPU benchmark's traffic model, per step.
    let reps = args.repeats as f64;
    let nf = n as f64;
    let slots = list.total() as f64;
    let (m, mr, r) = (
        variables as f64,
        sim.scheme().reconstruction_terms() as f64,
        std::mem::size_of::<R>() as f64,
    );
    let s = stages as f64;
    let dd = D as f64;
    let [deriv_bytes, deriv_flops, flux_bytes, flux_flops] =
        crate::cloud::stage_traffic(s, nf, slots, m, mr, r, dd);
    // Each stage candidate is a copy of the state (read and write) plus one in-place update
    // (two reads, one write) per non-zero coefficient; the final update is in place too, or
    // (with MOOD) the last candidate.
    let combos = tableau.a.iter().flatten().filter(|&&a| a != 0.0).count()
        + tableau.b.iter().filter(|&&b| b != 0.0).count();
    let copies = if mood.criterion == mote_cloud::mood::Criterion::None {
        s - 1.0
    } else {
        s
    };
    let rk_bytes = (combos as f64 * 3.0 + copies * 2.0) * nf * m * r;
    let mut passes = BTreeMap::new();
    let mut add = |name, seconds: f64, bytes: f64, flops: f64| {
        passes.insert(name, PassReport::per_step(seconds, reps, bytes, flops));
    };
    if args.order > 1 {
        add("derivatives", pass.derivatives, deriv_bytes, deriv_flops);
    }
    if pass.limiter > 0.0 {
        let [bytes, flops] = crate::cloud::limiter_traffic(s, nf, slots, m, mr, r, dd);
        add("limiter", pass.limiter, bytes, flops);
    }
    add("fluxes", pass.fluxes, flux_bytes, flux_flops);
    // Stage combinations (copy, then one in-place update per non-zero coefficient) and
    // boundary conditions.
    add("rk", rest.stages, rk_bytes, combos as f64 * nf * m * 2.0);
    if rest.motion > 0.0 {
        // Per stage: the positions and the state down, the velocities up (host velocities),
        // plus the search and the fits (not modelled).
        add("motion", rest.motion, s * nf * r * (2.0 * dd + m), 0.0);
    }
    if rest.mood > 0.0 {
        // Per check: the candidate, and the input of each slot's neighbour.
        let checks = mood_stats.stages as f64 + mood_stats.iterations as f64;
        add(
            "mood",
            rest.mood,
            checks * (nf * 2.0 * m * r + slots * (4.0 + m * r)),
            0.0,
        );
    }
    let seconds_median = median(&mut times);
    Ok(CloudReport {
        family: "cloud",
        backend: "gpu",
        particles: n,
        dim: D,
        order: args.order,
        precision: R::PRECISION,
        threads: 0,
        layout: args.layout.clone(),
        simd: "device".into(),
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
        reorders: 0,
        mood_reductions_per_step: mood_stats.reductions as f64 / reps,
        floor_events: 0,
        neighbours_mean: list.total() as f64 / nf,
        search_seconds: setup.search,
        mls_seconds: setup.mls,
        seconds_median,
        seconds_min: times[0],
        seconds_max: times[times.len() - 1],
        passes,
        gpu: Some(CloudGpuReport {
            device: gpu.to_string(),
            workgroup: gpu.workgroup(),
            upload_seconds: setup.upload,
            download_seconds,
            cpu_seconds_median: 0.0,
            speedup_over_cpu: 0.0,
        }),
    })
}
