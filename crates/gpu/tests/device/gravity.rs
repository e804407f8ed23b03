//! Direct gravity on the device against the CPU reference kernel, and the residency checks.

use mote_core::{CpuBackend, ParticleData, Precision, Real};
use mote_gpu::{GpuDirectSolver, GpuError};

use crate::gpu;
use mote_gravity::initial_conditions::plummer;
use mote_gravity::{DirectSolver, ForceSolver, Kernel, KernelChoice, Softening};

/// Accelerations by `solver` for a Plummer sphere of `n`.
fn accelerations<R: Real>(solver: &mut dyn ForceSolver<R>, n: usize) -> Vec<[f64; 3]> {
    let mut p: ParticleData<R> = plummer::<R>(n, 7).unwrap();
    solver.update(&mut p);
    let a = p.accelerations();
    (0..n).map(|i| a.get(i).map(|c| c.as_f64())).collect()
}

/// `|| a - b || / || b ||` over all components.
fn normwise(a: &[[f64; 3]], b: &[[f64; 3]]) -> f64 {
    let (mut d, mut s) = (0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        for c in 0..3 {
            d += (x[c] - y[c]).powi(2);
            s += y[c].powi(2);
        }
    }
    (d / s).sqrt()
}

fn compare<R: Real>(eps: f64, n: usize) -> (f64, f64) {
    let Some(g) = gpu() else {
        return (0.0, 0.0);
    };
    let softening = Softening::new(eps).unwrap();
    let mut device = GpuDirectSolver::new(g, softening, R::PRECISION).unwrap();
    let mut reference = DirectSolver::new(
        softening,
        KernelChoice::Exactly(Kernel::Reference),
        CpuBackend::Serial,
    )
    .unwrap();
    let a = accelerations::<R>(&mut device, n);
    let b = accelerations::<R>(&mut reference, n);
    assert!(a.iter().flatten().all(|x| x.is_finite()), "finite");
    let p: ParticleData<R> = plummer::<R>(n, 7).unwrap();
    let w_device = ForceSolver::<R>::potential_energy(&mut device, p.positions(), p.masses());
    let w_cpu = ForceSolver::<R>::potential_energy(&mut reference, p.positions(), p.masses());
    (normwise(&a, &b), ((w_device - w_cpu) / w_cpu).abs())
}

#[test]
fn gpu_gravity_matches_the_cpu_reference_in_f32_and_f64() {
    // 1000 is not a multiple of the workgroup: the last tile is padded.
    for eps in [0.0, 0.01] {
        let (a, w) = compare::<f64>(eps, 1000);
        eprintln!("f64 eps {eps}: accelerations {a:.2e}, potential {w:.2e}");
        assert!(
            a <= 1e-13 && w <= 1e-13,
            "f64 eps {eps}: accelerations {a:e}, potential {w:e}"
        );
        let (a, w) = compare::<f32>(eps, 1000);
        eprintln!("f32 eps {eps}: accelerations {a:.2e}, potential {w:.2e}");
        assert!(
            a <= 1e-6 && w <= 1e-6,
            "f32 eps {eps}: accelerations {a:e}, potential {w:e}"
        );
    }
}

#[test]
fn arrays_of_another_device_or_length_are_refused() {
    let (Some(a), Some(b)) = (gpu(), gpu()) else {
        return;
    };
    let mut solver = GpuDirectSolver::new(a, Softening::new(0.0).unwrap(), Precision::F32).unwrap();
    let here = |name: &'static str| solver.gpu().upload(name, &[1.0f32, 2.0, 3.0]);
    let (x, y, z, m) = (here("x"), here("y"), here("z"), here("m"));
    let (ax, ay) = (solver.gpu().output("ax", 3), solver.gpu().output("ay", 3));
    let elsewhere: mote_gpu::DeviceArray<f32> = b.output("az", 3);
    let err = solver
        .accelerations_on_device(&x, &y, &z, &m, &ax, &ay, &elsewhere)
        .unwrap_err();
    assert!(matches!(err, GpuError::WrongDevice { .. }), "{err}");
    assert!(err.to_string().contains("`az` lives on device"), "{err}");
    let short = solver.gpu().output::<f32>("az", 2);
    let err = solver
        .accelerations_on_device(&x, &y, &z, &m, &ax, &ay, &short)
        .unwrap_err();
    assert!(matches!(err, GpuError::Length { .. }), "{err}");
    // The right arrays run, and the result comes back.
    let az = solver.gpu().output::<f32>("az", 3);
    solver
        .accelerations_on_device(&x, &y, &z, &m, &ax, &ay, &az)
        .unwrap();
    let out = solver.gpu().download(&ax).unwrap();
    assert!(out.iter().all(|v| v.is_finite()) && out[0] > 0.0, "{out:?}");
}

#[test]
fn a_missing_cuda_driver_or_adapter_is_a_clear_error() {
    // On a machine without the CUDA driver this must be an error, not a panic.
    if let Err(e) = mote_gpu::Gpu::open("cuda:0".parse().unwrap()) {
        assert!(e.to_string().contains("cuda:0"), "{e}");
    }
    let err = mote_gpu::Gpu::open("wgpu:99".parse().unwrap()).unwrap_err();
    assert!(err.to_string().contains("wgpu:99"), "{err}");
}
