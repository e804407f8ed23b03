//! Criterion benchmark of one direct-summation force evaluation per kernel and precision.
//!
//! `cargo bench -p mote-gravity --bench direct` (N = 4096 on all cores). The command-line
//! benchmark `mote bench gravity` measures the sizes the performance targets name.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mote_core::{CpuBackend, Real, SimdLevel};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::{DirectSolver, ForceSolver, Kernel, KernelChoice, Softening};

fn bench_precision<R: Real>(c: &mut Criterion, n: usize) {
    let mut group = c.benchmark_group(format!("direct_{}", R::PRECISION));
    group.throughput(Throughput::Elements((n * (n - 1)) as u64));
    group.sample_size(10);
    let mut p = plummer::<R>(n, 1).expect("valid Plummer parameters");
    let mut kernels: Vec<Kernel> = SimdLevel::detect().into_iter().map(Kernel::Fast).collect();
    kernels.push(Kernel::Reference);
    for kernel in kernels {
        let mut solver = DirectSolver::new(
            Softening::NONE,
            KernelChoice::Exactly(kernel),
            CpuBackend::default(),
        )
        .expect("detected kernels are available");
        group.bench_function(BenchmarkId::new(kernel.name(), n), |b| {
            b.iter(|| ForceSolver::<R>::update(&mut solver, &mut p))
        });
    }
    group.finish();
}

fn direct(c: &mut Criterion) {
    bench_precision::<f64>(c, 4096);
    bench_precision::<f32>(c, 4096);
}

criterion_group!(benches, direct);
criterion_main!(benches);
