//! `mote bench gravity`: direct-summation or tree forces on the CPU, direct summation on a
//! device.

use std::error::Error;
use std::time::Instant;

use clap::Args;
use mote_core::Budgeted;
use mote_core::{CpuBackend, DeviceSpec, Precision, PrecisionJob, Real};
use mote_gpu::{Gpu, GpuDirectSolver, GpuTreeSolver};
use mote_gravity::accuracy::ForceErrors;
use mote_gravity::initial_conditions::plummer;
use mote_gravity::tree::{Multipole, TreeSettings, TreeSolver};
use mote_gravity::{DirectSolver, ForceSolver, KernelChoice, Softening, SolverInfo};
use serde::Serialize;

/// Options of `mote bench gravity`.
#[derive(Debug, Args)]
pub struct GravityArgs {
    /// Number of particles (a Plummer sphere).
    #[arg(long, default_value_t = 16_384)]
    particles: usize,
    /// Floating-point precision.
    #[arg(long, default_value = "f64")]
    precision: Precision,
    /// Kernel: auto, reference, scalar, avx2 or avx512.
    #[arg(long, default_value = "auto")]
    kernel: KernelChoice,
    /// Plummer softening length.
    #[arg(long, default_value_t = 0.0)]
    softening: f64,
    /// Timed force evaluations (after one warm-up evaluation).
    #[arg(long, default_value_t = 7)]
    repeats: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Where the forces are computed: cpu or gpu.
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    /// The device for `--backend gpu`: wgpu or cuda, with an optional `:INDEX`.
    #[arg(long, default_value = "wgpu:0")]
    device: DeviceSpec,
    /// Units per workgroup of the GPU kernel.
    #[arg(long, default_value_t = 256)]
    workgroup: u32,
    /// Force solver: direct summation or the Barnes-Hut tree.
    #[arg(long, default_value = "direct")]
    solver: SolverKind,
    /// The tree's opening angle.
    #[arg(long, default_value_t = TreeSettings::THETA)]
    theta: f64,
    /// The tree's moments: monopole or quadrupole.
    #[arg(long, default_value = "monopole")]
    multipole: Multipole,
    /// Most particles in a tree leaf.
    #[arg(long, default_value_t = TreeSettings::LEAF_SIZE)]
    leaf_size: usize,
    /// Most targets sharing one tree walk.
    #[arg(long, default_value_t = TreeSettings::GROUP_SIZE)]
    group_size: usize,
    /// Particles whose tree forces are compared with the compensated reference (0: none).
    #[arg(long, default_value_t = 1024)]
    error_samples: usize,
}

/// `--solver`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SolverKind {
    /// Direct summation, O(N^2).
    Direct,
    /// The Barnes-Hut tree, O(N log N).
    Tree,
}

/// What `--solver tree` adds to the report.
#[derive(Debug, Serialize)]
pub struct TreeReport {
    theta: f64,
    multipole: Multipole,
    leaf_size: usize,
    group_size: usize,
    /// Median over the timed evaluations of the build's seconds.
    build_seconds: f64,
    /// Median of the walk's (lists and their evaluation) seconds.
    walk_seconds: f64,
    /// Interactions per particle, particles and nodes.
    interactions_per_particle: f64,
    nodes: usize,
    groups: usize,
    /// The tree's arrays per particle, as priced in the memory budget.
    tree_bytes_per_particle: u64,
    /// Relative force errors against the compensated reference on `error_samples` particles.
    error_samples: usize,
    error_rms: f64,
    error_p50: f64,
    error_p99: f64,
    error_max: f64,
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// The CPU kernels (threads from `--threads`).
    Cpu,
    /// A device through the GPU crate.
    Gpu,
}

/// What `--backend gpu` adds to the report.
#[derive(Debug, Serialize)]
pub struct GpuReport {
    device: String,
    workgroup: u32,
    /// Host-to-device seconds per evaluation (median run's share).
    upload_seconds: f64,
    /// Kernel seconds per evaluation.
    kernel_seconds: f64,
    /// Device-to-host seconds per evaluation.
    download_seconds: f64,
    /// The best CPU kernel on all threads of this machine, same N and precision.
    cpu_interactions_per_second: f64,
    /// GPU over CPU, whole evaluations (transfers included).
    speedup_over_cpu: f64,
}

/// The result of a benchmark, printed as text or JSON.
#[derive(Debug, Serialize)]
pub struct BenchResult {
    family: &'static str,
    backend: String,
    kernel: String,
    particles: usize,
    precision: Precision,
    threads: usize,
    repeats: usize,
    seconds_median: f64,
    seconds_min: f64,
    seconds_max: f64,
    interactions_per_second: f64,
    /// Particles per second per force evaluation: N over the median seconds.
    particles_per_second: f64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    gpu: Option<GpuReport>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    tree: Option<TreeReport>,
}

/// Runs `mote bench gravity` on `threads` threads (0: all cores) and prints the result.
pub fn run(args: &GravityArgs, threads: usize) -> Result<(), Box<dyn Error>> {
    if args.particles < 2 {
        return Err("--particles must be at least 2".into());
    }
    if args.repeats == 0 {
        return Err("--repeats must be at least 1".into());
    }
    // Eleven arrays per particle (positions, velocities, accelerations, masses, ids).
    let size = if args.precision == mote_core::Precision::F32 {
        4
    } else {
        8
    };
    crate::check_fits(
        &format!("{} particles", args.particles),
        args.particles as u128 * (10 * size + 8),
    )?;
    let softening = Softening::new(args.softening)?;
    let cpu = DirectSolver::new(softening, args.kernel, CpuBackend::threads(threads))?;
    let result = match (args.backend, args.solver) {
        (BackendKind::Gpu, SolverKind::Tree) => {
            let settings =
                TreeSettings::new(args.theta, args.multipole, args.leaf_size, args.group_size)?;
            let mut gpu = Gpu::open(args.device)?;
            gpu.set_workgroup(args.workgroup)?;
            args.precision.dispatch(GravityBench {
                args,
                solver: BenchSolver::GpuTree(settings, softening, Box::new(gpu)),
                repeats: args.repeats,
            })?
        }
        (BackendKind::Cpu, SolverKind::Tree) => {
            let settings =
                TreeSettings::new(args.theta, args.multipole, args.leaf_size, args.group_size)?;
            args.precision.dispatch(GravityBench {
                args,
                solver: BenchSolver::Tree(settings, softening, CpuBackend::threads(threads)),
                repeats: args.repeats,
            })?
        }
        (BackendKind::Cpu, SolverKind::Direct) => args.precision.dispatch(GravityBench {
            args,
            solver: BenchSolver::Cpu(cpu),
            repeats: args.repeats,
        })?,
        (BackendKind::Gpu, SolverKind::Direct) => {
            let mut gpu = Gpu::open(args.device)?;
            gpu.set_workgroup(args.workgroup)?;
            let solver = GpuDirectSolver::new(gpu, softening, args.precision)?;
            let mut result = args.precision.dispatch(GravityBench {
                args,
                solver: BenchSolver::Gpu(Box::new(solver)),
                repeats: args.repeats,
            })?;
            // The CPU on the same machine, for the speed-up (fewer repeats: it is the
            // slower side).
            let reference = args.precision.dispatch(GravityBench {
                args,
                solver: BenchSolver::Cpu(cpu),
                repeats: args.repeats.min(3),
            })?;
            if let Some(g) = result.gpu.as_mut() {
                g.cpu_interactions_per_second = reference.interactions_per_second;
                g.speedup_over_cpu =
                    result.interactions_per_second / reference.interactions_per_second;
            }
            result
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!(
            "gravity {} N={} {} threads={}: {:.4e} s per evaluation (min {:.4e}, max {:.4e}, {} repeats), {:.3e} interactions/s",
            result.kernel,
            result.particles,
            result.precision,
            result.threads,
            result.seconds_median,
            result.seconds_min,
            result.seconds_max,
            result.repeats,
            result.interactions_per_second
        );
        if let Some(t) = &result.tree {
            println!(
                "  tree theta={} {} leaf={} group={}: build {:.3e} s, walk {:.3e} s, {:.0} interactions per particle, {} nodes, {} bytes per particle; errors rms {:.2e} p50 {:.2e} p99 {:.2e} max {:.2e} ({} samples)",
                t.theta,
                t.multipole,
                t.leaf_size,
                t.group_size,
                t.build_seconds,
                t.walk_seconds,
                t.interactions_per_particle,
                t.nodes,
                t.tree_bytes_per_particle,
                t.error_rms,
                t.error_p50,
                t.error_p99,
                t.error_max,
                t.error_samples
            );
        }
        if let Some(g) = &result.gpu {
            println!(
                "  device {} (workgroup {}): upload {:.3e} s, kernel {:.3e} s, download {:.3e} s per evaluation; CPU {:.3e} interactions/s, speed-up {:.2}",
                g.device,
                g.workgroup,
                g.upload_seconds,
                g.kernel_seconds,
                g.download_seconds,
                g.cpu_interactions_per_second,
                g.speedup_over_cpu
            );
        }
    }
    Ok(())
}

/// The solver a gravity benchmark times.
enum BenchSolver {
    Cpu(DirectSolver),
    Gpu(Box<GpuDirectSolver>),
    /// The tree's solver is typed by the precision: made in [`GravityBench::run`].
    Tree(TreeSettings, Softening, CpuBackend),
    /// The same on a device.
    GpuTree(TreeSettings, Softening, Box<Gpu>),
}

struct GravityBench<'a> {
    args: &'a GravityArgs,
    solver: BenchSolver,
    repeats: usize,
}

impl PrecisionJob for GravityBench<'_> {
    type Output = Result<BenchResult, Box<dyn Error>>;

    fn run<R: Real>(mut self) -> Self::Output {
        let n = self.args.particles;
        let mut p = plummer::<R>(n, 1)?;
        if let BenchSolver::Tree(settings, softening, backend) = self.solver {
            let solver = TreeSolver::<R>::new(softening, settings, self.args.kernel, backend)?;
            return Ok(tree_bench(self.args, solver, p, self.repeats));
        }
        if let BenchSolver::GpuTree(settings, softening, gpu) = self.solver {
            let solver = GpuTreeSolver::<R>::new(*gpu, softening, settings)?;
            return Ok(gpu_tree_bench(self.args, solver, p, self.repeats));
        }
        let solver: &mut dyn ForceSolver<R> = match &mut self.solver {
            BenchSolver::Cpu(s) => s,
            BenchSolver::Gpu(s) => s.as_mut(),
            BenchSolver::Tree(..) | BenchSolver::GpuTree(..) => unreachable!("timed above"),
        };
        // Warm-up: page in the arrays, start the thread pool or compile the kernel, settle the
        // clocks.
        solver.update(&mut p);
        if let BenchSolver::Gpu(s) = &mut self.solver {
            s.take_seconds();
        }
        let solver: &mut dyn ForceSolver<R> = match &mut self.solver {
            BenchSolver::Cpu(s) => s,
            BenchSolver::Gpu(s) => s.as_mut(),
            BenchSolver::Tree(..) | BenchSolver::GpuTree(..) => unreachable!("timed above"),
        };
        let mut times: Vec<f64> = (0..self.repeats)
            .map(|_| {
                let t = Instant::now();
                solver.update(&mut p);
                t.elapsed().as_secs_f64()
            })
            .collect();
        let median = crate::cloud::median(&mut times);
        let reps = times.len() as f64;
        let (backend, kernel, threads, gpu) = match &mut self.solver {
            BenchSolver::Cpu(s) => (
                "cpu",
                s.kernel().name().to_string(),
                s.backend().thread_count(),
                None,
            ),
            BenchSolver::Gpu(s) => {
                let t = s.take_seconds();
                (
                    "gpu",
                    "tiled".to_string(),
                    0,
                    Some(GpuReport {
                        device: s.gpu().to_string(),
                        workgroup: s.gpu().workgroup(),
                        upload_seconds: t.upload / reps,
                        kernel_seconds: t.kernel / reps,
                        download_seconds: t.download / reps,
                        cpu_interactions_per_second: 0.0,
                        speedup_over_cpu: 0.0,
                    }),
                )
            }
            BenchSolver::Tree(..) | BenchSolver::GpuTree(..) => unreachable!("timed above"),
        };
        Ok(BenchResult {
            family: "gravity",
            backend: backend.to_string(),
            kernel,
            particles: n,
            precision: R::PRECISION,
            threads,
            repeats: times.len(),
            seconds_median: median,
            seconds_min: times[0],
            seconds_max: times[times.len() - 1],
            interactions_per_second: (n as f64) * (n as f64 - 1.0) / median,
            particles_per_second: n as f64 / median,
            gpu,
            tree: None,
        })
    }
}

/// What both tree benchmarks measured, for [`tree_result`].
struct TreeTimes {
    /// Seconds per evaluation, sorted by [`crate::cloud::median`].
    times: Vec<f64>,
    median: f64,
    build: f64,
    walk: f64,
    /// Interactions of one evaluation.
    interactions: u64,
}

/// The report of a tree benchmark on `backend`, with the force errors of `p`'s accelerations.
#[allow(clippy::too_many_arguments)]
fn tree_result<R: Real>(
    args: &GravityArgs,
    name: String,
    backend: &str,
    threads: usize,
    p: &mote_core::ParticleData<R>,
    t: TreeTimes,
    tree: &mote_gravity::tree::Tree<R>,
    softening: Softening,
    gpu: Option<GpuReport>,
) -> BenchResult {
    let n = p.len();
    let errors = ForceErrors::measure(
        p.positions(),
        p.masses(),
        softening.epsilon2::<f64>(),
        p.accelerations(),
        args.error_samples,
        CpuBackend::default(),
    );
    BenchResult {
        family: "gravity",
        backend: backend.to_string(),
        kernel: name,
        particles: n,
        precision: R::PRECISION,
        threads,
        repeats: t.times.len(),
        seconds_median: t.median,
        seconds_min: t.times[0],
        seconds_max: t.times[t.times.len() - 1],
        interactions_per_second: t.interactions as f64 / t.median,
        particles_per_second: n as f64 / t.median,
        gpu,
        tree: Some(TreeReport {
            theta: args.theta,
            multipole: args.multipole,
            leaf_size: args.leaf_size,
            group_size: args.group_size,
            build_seconds: t.build,
            walk_seconds: t.walk,
            interactions_per_particle: t.interactions as f64 / n as f64,
            nodes: tree.node_count(),
            groups: tree.group_count(),
            tree_bytes_per_particle: mote_core::MemoryModel::of(&[tree as &dyn Budgeted])
                .per_particle,
            error_samples: errors.samples,
            error_rms: errors.rms,
            error_p50: errors.p50,
            error_p99: errors.p99,
            error_max: errors.max,
        }),
    }
}

/// Times `repeats` tree evaluations after a warm-up, then measures the last one's errors.
fn tree_bench<R: Real>(
    args: &GravityArgs,
    mut solver: TreeSolver<R>,
    mut p: mote_core::ParticleData<R>,
    repeats: usize,
) -> BenchResult {
    solver.update(&mut p);
    let runs: Vec<(f64, mote_gravity::tree::TreeStats)> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            solver.update(&mut p);
            (t.elapsed().as_secs_f64(), solver.stats())
        })
        .collect();
    let mut times: Vec<f64> = runs.iter().map(|r| r.0).collect();
    let mut build: Vec<f64> = runs.iter().map(|r| r.1.build_seconds).collect();
    let mut walk: Vec<f64> = runs.iter().map(|r| r.1.walk_seconds).collect();
    let t = TreeTimes {
        median: crate::cloud::median(&mut times),
        times,
        build: crate::cloud::median(&mut build),
        walk: crate::cloud::median(&mut walk),
        interactions: solver.stats().interactions,
    };
    let threads = solver.backend().thread_count();
    tree_result(
        args,
        solver.name(),
        "cpu",
        threads,
        &p,
        t,
        solver.tree(),
        solver.softening(),
        None,
    )
}

/// Times `repeats` device-tree evaluations after a warm-up (the host's tree build and the
/// uploads are `build_seconds`, the walk and sum kernels `walk_seconds`), then measures the last
/// one's errors.
fn gpu_tree_bench<R: Real>(
    args: &GravityArgs,
    mut solver: GpuTreeSolver<R>,
    mut p: mote_core::ParticleData<R>,
    repeats: usize,
) -> BenchResult {
    solver.update(&mut p);
    solver.take_seconds();
    let before = solver.interactions();
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            solver.update(&mut p);
            t.elapsed().as_secs_f64()
        })
        .collect();
    let reps = times.len() as f64;
    let seconds = solver.take_seconds();
    let t = TreeTimes {
        median: crate::cloud::median(&mut times),
        times,
        build: seconds.upload / reps,
        walk: seconds.kernel / reps,
        interactions: (solver.interactions() - before) / repeats as u64,
    };
    let gpu = GpuReport {
        device: solver.gpu().to_string(),
        workgroup: solver.gpu().workgroup(),
        upload_seconds: seconds.upload / reps,
        kernel_seconds: seconds.kernel / reps,
        download_seconds: seconds.download / reps,
        cpu_interactions_per_second: 0.0,
        speedup_over_cpu: 0.0,
    };
    tree_result(
        args,
        solver.name(),
        "gpu",
        0,
        &p,
        t,
        solver.tree(),
        solver.softening(),
        Some(gpu),
    )
}
