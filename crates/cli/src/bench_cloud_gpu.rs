//! `mote bench cloud --backend gpu`: the same time step as the CPU benchmark, with the search,
//! the MLS fits, the passes and the Runge-Kutta stages on a device.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::Instant;

use mote_cloud::equations::{Equation, Euler, LinearAdvection};
use mote_cloud::mls::default_radius_factor;
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, Weight};
use mote_core::{Precision, PrecisionJob, Real};
use mote_gpu::{
    DeviceArray, DeviceCloud, DeviceEquation, DeviceLayout, DeviceMuscl, DeviceNeighbours, Gpu,
    GpuFloat, GpuNeighbourSearch,
};
use serde::Serialize;

use crate::bench_cloud::{CloudArgs, CloudReport, PassReport, median};

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
        "euler" => {}
        "advection" => return unsupported(format!("{} advected variables", args.variables)),
        other => return unsupported(format!("--equation {other}")),
    }
    if args.flux != "rusanov" {
        return unsupported(format!("--flux {}", args.flux));
    }
    if args.mood != "none" {
        return unsupported(format!("--mood {}", args.mood));
    }
    if args.weno {
        return unsupported("--weno".into());
    }
    if args.moving {
        return unsupported("--moving".into());
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
    Tableau::by_name(&args.stepper)?;
    let mut gpu = Gpu::open(args.device)?;
    gpu.set_workgroup(args.workgroup)?;
    gpu.check_precision(args.precision)?;
    let mut report = args
        .precision
        .dispatch(GpuCloudBench { args, gpu: &gpu })??;
    let cpu = crate::bench_cloud::measure(
        &CloudArgs {
            backend: crate::bench::BackendKind::Cpu,
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
    match args.dim {
        1 => bench::<R, 1>(args, gpu),
        2 => bench::<R, 2>(args, gpu),
        _ => bench::<R, 3>(args, gpu),
    }
}

/// `u + dt sum_l c_l k_l` over the non-zero `c_l`, by repeated axpy between the two work
/// buffers (a launch never reads and writes one buffer); the work buffer holding the result, or
/// `None` when there is no term (the combination is `u` itself).
fn combine<R: GpuFloat>(
    gpu: &Gpu,
    u: &DeviceArray<R>,
    work: &[DeviceArray<R>; 2],
    slopes: &[DeviceArray<R>],
    coefficients: &[f64],
    dt: f64,
) -> Result<Option<usize>, mote_gpu::GpuError> {
    let mut current: Option<usize> = None;
    for (k, &c) in slopes.iter().zip(coefficients) {
        if c == 0.0 {
            continue;
        }
        let target = current.map_or(0, |c| 1 - c);
        let src = current.map_or(u, |c| &work[c]);
        gpu.axpy(src, k, R::cast(dt * c), &work[target])?;
        current = Some(target);
    }
    Ok(current)
}

/// The initial state of a benchmark, conservative variables at a position.
type Init<const D: usize> = Box<dyn Fn([f64; D]) -> Vec<f64>>;

fn bench<R: GpuFloat, const D: usize>(
    args: &CloudArgs,
    gpu: &Gpu,
) -> Result<CloudReport, Box<dyn Error>> {
    let (spacing, opts) = crate::bench_cloud::lattice::<D>(args);
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
    let mut state = vec![R::cast(0.0); n * variables];
    for i in 0..n {
        for (v, value) in init(cloud.position_of(i)).into_iter().enumerate() {
            state[v * n + i] = R::cast(value);
        }
    }
    let layout = if args.layout == "row" {
        DeviceLayout::RowMajor
    } else {
        DeviceLayout::SlotMajor
    };

    let clock = Instant::now();
    let dc = DeviceCloud::upload(gpu, &cloud)?;
    let orders: Vec<u32> = cloud.orders().iter().map(|&o| o as u32).collect();
    let orders = gpu.upload("order", &orders);
    let mut u = gpu.upload("state", &state);
    gpu.sync()?;
    let upload_seconds = clock.elapsed().as_secs_f64();

    let radius = args
        .radius
        .unwrap_or_else(|| default_radius_factor::<D>(args.order))
        * spacing;
    let clock = Instant::now();
    let mut search = GpuNeighbourSearch::new(gpu, radius)?;
    let mut list = DeviceNeighbours::new(gpu, layout);
    search.build(gpu, &dc, &mut list)?;
    let search_seconds = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let limiter = mote_cloud::scheme::Limiter::by_name(&args.limiter, &args.limiter_mode)?;
    let mut scheme = DeviceMuscl::<R>::new::<D>(gpu, device_eq, args.order, Weight::default())?
        .with_limiter::<D>(limiter)?;
    scheme.prepare(gpu, &dc, &list)?;
    gpu.sync()?;
    let mls_seconds = clock.elapsed().as_secs_f64();

    let tableau = Tableau::by_name(&args.stepper)?;
    let stages = tableau.stages();
    let len = n * variables;
    let slopes: Vec<DeviceArray<R>> = (0..stages).map(|_| gpu.output("slope", len)).collect();
    let mut work = [
        gpu.output::<R>("stage_a", len),
        gpu.output::<R>("stage_b", len),
    ];
    // The CPU benchmark's step: the geometric CFL condition at 0.4, reduced on the device.
    let dt = scheme.stable_dt(gpu, &dc, &list, &u, 0.4)?;
    let mut rk_seconds = 0.0;
    scheme.set_timing(true);
    let step = |u: &mut DeviceArray<R>,
                work: &mut [DeviceArray<R>; 2],
                scheme: &mut DeviceMuscl<R>,
                rk_seconds: &mut f64|
     -> Result<(), Box<dyn Error>> {
        for s in 0..stages {
            let clock = Instant::now();
            let current = combine(gpu, u, work, &slopes, &tableau.a[s][..s], dt)?;
            gpu.sync()?;
            *rk_seconds += clock.elapsed().as_secs_f64();
            let stage_state = current.map_or(&*u, |c| &work[c]);
            scheme.rhs(gpu, &dc, &list, &orders, stage_state, &slopes[s])?;
        }
        let clock = Instant::now();
        if let Some(c) = combine(gpu, u, work, &slopes, &tableau.b, dt)? {
            std::mem::swap(u, &mut work[c]);
        }
        gpu.sync()?;
        *rk_seconds += clock.elapsed().as_secs_f64();
        Ok(())
    };
    step(&mut u, &mut work, &mut scheme, &mut rk_seconds)?; // warm-up (compiles the kernels)
    scheme.take_seconds();
    rk_seconds = 0.0;
    let mut times = Vec::with_capacity(args.repeats);
    for _ in 0..args.repeats {
        let t = Instant::now();
        step(&mut u, &mut work, &mut scheme, &mut rk_seconds)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let clock = Instant::now();
    let last = gpu.download(&u)?;
    let download_seconds = clock.elapsed().as_secs_f64();
    if let Some(bad) = last.iter().position(|x| !x.as_f64().is_finite()) {
        return Err(format!("the device state is not finite at entry {bad}").into());
    }
    let pass = scheme.take_seconds();

    // The CPU benchmark's traffic model, per step.
    let reps = args.repeats as f64;
    let nf = n as f64;
    let slots = list.total() as f64;
    let (m, mr, r) = (
        variables as f64,
        scheme.reconstruction_terms() as f64,
        std::mem::size_of::<R>() as f64,
    );
    let s = stages as f64;
    let dd = D as f64;
    let [deriv_bytes, deriv_flops, flux_bytes, flux_flops] =
        crate::bench_cloud::stage_traffic(s, nf, slots, m, mr, r, dd);
    let combos = tableau.a.iter().flatten().filter(|&&a| a != 0.0).count()
        + tableau.b.iter().filter(|&&b| b != 0.0).count();
    let rk_bytes = combos as f64 * nf * m * r * 3.0;
    let mut passes = BTreeMap::new();
    let mut add = |name, seconds: f64, bytes: f64, flops: f64| {
        let per = seconds / reps;
        passes.insert(
            name,
            PassReport {
                seconds: per,
                gb_per_s: bytes / per / 1e9,
                gflop_per_s: flops / per / 1e9,
            },
        );
    };
    if args.order > 1 {
        add("derivatives", pass.derivatives, deriv_bytes, deriv_flops);
    }
    if pass.limiter > 0.0 {
        let [bytes, flops] = crate::bench_cloud::limiter_traffic(s, nf, slots, m, mr, r, dd);
        add("limiter", pass.limiter, bytes, flops);
    }
    add("fluxes", pass.fluxes, flux_bytes, flux_flops);
    add("rk", rk_seconds, rk_bytes, rk_bytes / (3.0 * r) * 2.0);
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
        stages,
        variables,
        equation: args.equation.clone(),
        flux: args.flux.clone(),
        limiter: args.limiter.clone(),
        limiter_mode: args.limiter_mode.clone(),
        weno: false,
        mood: args.mood.clone(),
        mood_strategy: args.mood_strategy.clone(),
        motion: "none".into(),
        fixed_seconds_median: None,
        reorders: 0,
        mood_reductions_per_step: 0.0,
        floor_events: 0,
        neighbours_mean: list.total() as f64 / nf,
        search_seconds,
        mls_seconds,
        seconds_median,
        seconds_min: times[0],
        seconds_max: times[times.len() - 1],
        passes,
        gpu: Some(CloudGpuReport {
            device: gpu.to_string(),
            workgroup: gpu.workgroup(),
            upload_seconds,
            download_seconds,
            cpu_seconds_median: 0.0,
            speedup_over_cpu: 0.0,
        }),
    })
}
