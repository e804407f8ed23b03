//! Places mote's hot kernels on the roofline of `mote bench roofline`, and measures their
//! thread scaling.
//!
//! Each kernel's work is counted (flops by convention or by its operation count; bytes from the
//! sizes of the buffers it reads and writes, each once per pass), its time measured; its
//! arithmetic intensity (flops per byte) then says which ceiling binds it: the memory roof
//! `intensity x bandwidth` or the arithmetic peak of its precision and SIMD level, whichever is
//! lower. The fraction reported is achieved / that attainable figure.

use std::error::Error;
use std::time::Instant;

use mote_cloud::mls::default_radius_factor;
use mote_core::{CpuBackend, Precision, PrecisionJob, Real, SimdLevel};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::{DirectSolver, ForceSolver, Kernel, KernelChoice, Softening};
use serde::Serialize;

use crate::cloud::{CloudArgs, measure, median};

/// One kernel on the roofline.
#[derive(Debug, Clone, Serialize)]
pub struct KernelPoint {
    /// What ran (`gravity avx512`, `cloud fluxes`, ...).
    pub kernel: String,
    /// Precision.
    pub precision: Precision,
    /// SIMD level of the arithmetic ceiling it is compared with.
    pub simd: SimdLevel,
    /// Threads.
    pub threads: usize,
    /// Problem size (particles).
    pub particles: usize,
    /// Median seconds per call (per step for the meshless passes).
    pub seconds: f64,
    /// Counted flops per second (gravity: 20 per interaction).
    pub gflop_per_s: f64,
    /// Gravity: the same with the kernel's own operation count (FMA = 2).
    pub gflop_per_s_real: Option<f64>,
    /// Counted bytes per second.
    pub gb_per_s: f64,
    /// Flops per byte.
    pub intensity: f64,
    /// `memory` or `arithmetic`: the ceiling that binds at this intensity.
    pub bound: &'static str,
    /// The attainable GFLOP/s at this intensity.
    pub attainable_gflop_per_s: f64,
    /// Achieved / attainable.
    pub fraction: f64,
}

/// One entry of the thread-scaling table.
#[derive(Debug, Clone, Serialize)]
pub struct ScalingPoint {
    /// `gravity` or `cloud step`.
    pub kernel: String,
    /// Threads.
    pub threads: usize,
    /// Median seconds.
    pub seconds: f64,
    /// `t(1) / t(p)`.
    pub speedup: f64,
    /// `speedup / p`.
    pub efficiency: f64,
}

/// The ceilings a kernel is placed against (all threads).
#[derive(Debug, Clone, Copy)]
pub struct Ceilings {
    /// The highest measured all-thread bandwidth, GB/s.
    pub bandwidth: f64,
    /// FMA peak in f64 at the widest SIMD level, GFLOP/s.
    pub fma_f64: f64,
    /// FMA peak in f32 at the widest SIMD level, GFLOP/s.
    pub fma_f32: f64,
    /// The widest SIMD level (where the FMA peaks were measured).
    pub widest: SimdLevel,
}

impl Ceilings {
    /// The arithmetic peak at `level` in `precision`: the measured widest-level peak scaled by
    /// vector width (scalar code: one lane).
    pub fn peak(&self, precision: Precision, level: SimdLevel) -> f64 {
        let peak = match precision {
            Precision::F32 => self.fma_f32,
            Precision::F64 => self.fma_f64,
        };
        peak * lanes(level) / lanes(self.widest)
    }

    fn place(&self, mut p: KernelPoint) -> KernelPoint {
        let peak = self.peak(p.precision, p.simd);
        let roof = p.intensity * self.bandwidth;
        p.bound = if roof < peak { "memory" } else { "arithmetic" };
        p.attainable_gflop_per_s = roof.min(peak);
        p.fraction = p.gflop_per_s / p.attainable_gflop_per_s;
        p
    }
}

fn lanes(level: SimdLevel) -> f64 {
    match level {
        SimdLevel::Scalar => 1.0,
        SimdLevel::Avx2 => 4.0,
        SimdLevel::Avx512 => 8.0,
    }
}

/// Flops per interaction of a gravity kernel as it executes (FMA = 2; one per `rsqrt` or
/// `sqrt`, one per divide): 3 subtractions, 3 FMA for `r^2 + eps^2`, the inverse square root,
/// 4 per Newton step, 3 products for `m / r^3`, 3 FMA into the sums.
fn gravity_real_flops(kernel: Kernel, precision: Precision) -> f64 {
    let newton = match (kernel, precision) {
        (Kernel::Fast(SimdLevel::Avx512), Precision::F64) => 2.0,
        (Kernel::Fast(SimdLevel::Avx512 | SimdLevel::Avx2), Precision::F32) => 1.0,
        _ => 0.0,
    };
    let rsqrt = if newton > 0.0 { 1.0 } else { 2.0 };
    3.0 + 6.0 + rsqrt + 4.0 * newton + 3.0 + 6.0
}

struct GravityTiming {
    kernel: Kernel,
    n: usize,
    threads: usize,
    repeats: usize,
}

impl PrecisionJob for GravityTiming {
    type Output = Result<f64, Box<dyn Error>>;
    fn run<R: Real>(self) -> Self::Output {
        let mut solver = DirectSolver::new(
            Softening::new(0.0)?,
            KernelChoice::Exactly(self.kernel),
            CpuBackend::threads(self.threads),
        )?;
        let mut p = plummer::<R>(self.n, 1)?;
        ForceSolver::<R>::update(&mut solver, &mut p);
        Ok(median(
            &mut (0..self.repeats)
                .map(|_| {
                    let t = Instant::now();
                    ForceSolver::<R>::update(&mut solver, &mut p);
                    t.elapsed().as_secs_f64()
                })
                .collect::<Vec<f64>>(),
        ))
    }
}

/// Seconds per force evaluation.
fn time_gravity(
    kernel: Kernel,
    precision: Precision,
    n: usize,
    threads: usize,
    repeats: usize,
) -> Result<f64, Box<dyn Error>> {
    precision.dispatch(GravityTiming {
        kernel,
        n,
        threads,
        repeats,
    })
}

/// Sizes of the placement runs.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Gravity particles.
    pub gravity: usize,
    /// Meshless particles.
    pub cloud: usize,
    /// Timed repetitions.
    pub repeats: usize,
}

/// Places every gravity kernel (each SIMD level and the reference, f32 and f64), the neighbour
/// search and the meshless passes (f64 and f32), all on `threads` threads.
pub fn place(
    ceilings: &Ceilings,
    sizes: Sizes,
    threads: usize,
) -> Result<Vec<KernelPoint>, Box<dyn Error>> {
    let mut points = Vec::new();
    let nthreads = CpuBackend::threads(threads).thread_count();
    let n = sizes.gravity;
    let kernels = std::iter::once(Kernel::Reference)
        .chain(SimdLevel::detect().into_iter().map(Kernel::Fast))
        .collect::<Vec<_>>();
    for precision in [Precision::F64, Precision::F32] {
        for &kernel in &kernels {
            // The reference kernel computes in f64 whatever the storage precision.
            if kernel == Kernel::Reference && precision == Precision::F32 {
                continue;
            }
            let seconds = time_gravity(kernel, precision, n, threads, sizes.repeats)?;
            let interactions = n as f64 * (n as f64 - 1.0);
            let bytes = 7.0 * n as f64 * precision.bytes() as f64;
            let simd = match kernel {
                Kernel::Reference => SimdLevel::Scalar,
                Kernel::Fast(level) => level,
            };
            points.push(ceilings.place(KernelPoint {
                kernel: format!("gravity {}", kernel.name()),
                precision,
                simd,
                threads: nthreads,
                particles: n,
                seconds,
                gflop_per_s: 20.0 * interactions / seconds / 1e9,
                gflop_per_s_real: Some(
                    gravity_real_flops(kernel, precision) * interactions / seconds / 1e9,
                ),
                gb_per_s: bytes / seconds / 1e9,
                intensity: 20.0 * interactions / bytes,
                bound: "",
                attainable_gflop_per_s: 0.0,
                fraction: 0.0,
            }));
        }
    }
    for precision in [Precision::F64, Precision::F32] {
        let args = CloudArgs::standard(sizes.cloud, precision, sizes.repeats);
        let report = measure(&args, threads)?;
        // The level the passes ran at (decision 0016), whose arithmetic roof applies.
        let simd: SimdLevel = report.simd.parse()?;
        let r = precision.bytes() as f64;
        let np = report.particles as f64;
        let slots = report.neighbours_mean * np;
        // The search reads the positions, writes and reads bin indices, counts and the sorted
        // order (4 bytes each), and writes the neighbour indices; each candidate pair costs a
        // separation and a squared distance (3 D flops) over the 3^D surrounding bins.
        let d = report.dim as f64;
        let search_bytes = np * (d * r + 16.0) + 4.0 * slots;
        let spacing_ratio = default_radius_factor::<2>(report.order);
        let search_flops = np * 3f64.powf(d) * spacing_ratio.powf(d) * 3.0 * d;
        let mut add = |kernel: &str, seconds: f64, gflops: f64, gbs: f64| {
            points.push(ceilings.place(KernelPoint {
                kernel: kernel.to_string(),
                precision,
                simd,
                threads: nthreads,
                particles: report.particles,
                seconds,
                gflop_per_s: gflops,
                gflop_per_s_real: None,
                gb_per_s: gbs,
                intensity: gflops / gbs,
                bound: "",
                attainable_gflop_per_s: 0.0,
                fraction: 0.0,
            }));
        };
        add(
            "cloud search",
            report.search_seconds,
            search_flops / report.search_seconds / 1e9,
            search_bytes / report.search_seconds / 1e9,
        );
        for (name, pass) in &report.passes {
            if *name == "derivatives" || *name == "fluxes" {
                add(
                    &format!("cloud {name}"),
                    pass.seconds,
                    pass.gflop_per_s,
                    pass.gb_per_s,
                );
            }
        }
    }
    Ok(points)
}

/// Thread scaling from 1 to `max_threads`: the best gravity kernel in f64 and one f64 meshless
/// step.
pub fn scaling(sizes: Sizes, max_threads: usize) -> Result<Vec<ScalingPoint>, Box<dyn Error>> {
    let mut out = Vec::new();
    let mut push = |kernel: &str, times: Vec<f64>| {
        for (k, &t) in times.iter().enumerate() {
            let p = k + 1;
            out.push(ScalingPoint {
                kernel: kernel.to_string(),
                threads: p,
                seconds: t,
                speedup: times[0] / t,
                efficiency: times[0] / t / p as f64,
            });
        }
    };
    let best = Kernel::Fast(SimdLevel::best());
    let times = (1..=max_threads)
        .map(|p| time_gravity(best, Precision::F64, sizes.gravity, p, sizes.repeats))
        .collect::<Result<Vec<_>, _>>()?;
    push(&format!("gravity {} f64", best.name()), times);
    let args = CloudArgs::standard(sizes.cloud, Precision::F64, sizes.repeats);
    let times = (1..=max_threads)
        .map(|p| measure(&args, p).map(|r| r.seconds_median))
        .collect::<Result<Vec<_>, _>>()?;
    push("cloud step f64", times);
    Ok(out)
}
