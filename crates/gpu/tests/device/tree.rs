//! Tree gravity on the device against the CPU tree (the same lists: round-off apart) and the
//! compensated reference (the tree's own error), and its degenerate inputs.

use mote_core::{CpuBackend, ParticleData, Real};
use mote_gpu::GpuTreeSolver;
use mote_gravity::accuracy::ForceErrors;
use mote_gravity::initial_conditions::plummer;
use mote_gravity::tree::{Multipole, TreeSettings, TreeSolver};
use mote_gravity::{ForceSolver, KernelChoice, Softening, SolverInfo};

use crate::gpu;

fn settings(multipole: Multipole) -> TreeSettings {
    TreeSettings::new(0.5, multipole, 8, 32).unwrap()
}

fn accelerations<R: Real>(solver: &mut dyn ForceSolver<R>, p: &ParticleData<R>) -> ParticleData<R> {
    let mut q = p.clone();
    solver.update(&mut q);
    q
}

/// `|| a - b || / || b ||` over all components.
fn normwise<R: Real>(a: &ParticleData<R>, b: &ParticleData<R>) -> f64 {
    let (mut d, mut s) = (0.0, 0.0);
    for i in 0..a.len() {
        let (x, y) = (a.accelerations().get(i), b.accelerations().get(i));
        for c in 0..3 {
            d += (x[c].as_f64() - y[c].as_f64()).powi(2);
            s += y[c].as_f64().powi(2);
        }
    }
    (d / s).sqrt()
}

fn compare<R: Real>(multipole: Multipole, eps: f64, tolerance: f64) {
    let Some(g) = gpu() else {
        return;
    };
    let softening = Softening::new(eps).unwrap();
    let p = plummer::<R>(3000, 5).unwrap();
    let mut device = GpuTreeSolver::<R>::new(g, softening, settings(multipole)).unwrap();
    let mut cpu = TreeSolver::<R>::new(
        softening,
        settings(multipole),
        KernelChoice::Auto,
        CpuBackend::Serial,
    )
    .unwrap();
    let a = accelerations::<R>(&mut device, &p);
    let b = accelerations::<R>(&mut cpu, &p);
    let diff = normwise(&a, &b);
    let errors = ForceErrors::measure(
        a.positions(),
        a.masses(),
        eps * eps,
        a.accelerations(),
        1000,
        CpuBackend::default(),
    );
    let w_device = ForceSolver::<R>::potential_energy(&mut device, p.positions(), p.masses());
    let w_cpu = ForceSolver::<R>::potential_energy(&mut cpu, p.positions(), p.masses());
    let w = ((w_device - w_cpu) / w_cpu).abs();
    eprintln!(
        "{} {multipole} eps {eps}: device vs CPU tree {diff:.2e}, potential {w:.2e}; vs reference {errors:?}",
        R::PRECISION
    );
    assert!(
        diff <= tolerance && w <= tolerance,
        "{multipole} eps {eps}: {diff:e}, {w:e}"
    );
    assert!(errors.rms <= 2e-3 && errors.p99 <= 1e-2, "{errors:?}");
    assert_eq!(device.interactions(), cpu.interactions(), "the same lists");
}

#[test]
fn the_device_tree_follows_the_cpu_tree_to_round_off() {
    for multipole in [Multipole::Monopole, Multipole::Quadrupole] {
        for eps in [0.0, 0.01] {
            compare::<f64>(multipole, eps, 1e-13);
            compare::<f32>(multipole, eps, 1e-5);
        }
    }
}

#[test]
fn degenerate_inputs_on_the_device() {
    let Some(g) = gpu() else {
        return;
    };
    let mut s =
        GpuTreeSolver::<f64>::new(g, Softening::NONE, settings(Multipole::Quadrupole)).unwrap();
    // N = 1 and N = 2: exact.
    let mut one = ParticleData::<f64>::new();
    one.push([1.0, 2.0, 3.0], [0.0; 3], 1.0).unwrap();
    s.update(&mut one);
    assert_eq!(one.accelerations().get(0), [0.0; 3]);
    let mut two = ParticleData::<f64>::new();
    two.push([0.0; 3], [0.0; 3], 1.0).unwrap();
    two.push([2.0, 0.0, 0.0], [0.0; 3], 1.0).unwrap();
    s.update(&mut two);
    assert_eq!(two.accelerations().x(), &[0.25, -0.25]);
    // Every particle at one point: no force.
    let mut same = ParticleData::<f64>::new();
    for _ in 0..50 {
        same.push([0.5; 3], [0.0; 3], 0.02).unwrap();
    }
    s.update(&mut same);
    assert!(same.accelerations().x().iter().all(|&a| a == 0.0));
    // A NaN position: NaN accelerations, as on the CPU.
    let mut bad = plummer::<f64>(100, 1).unwrap();
    bad.view_mut().position.set(3, [f64::NAN, 0.0, 0.0]);
    s.update(&mut bad);
    assert!(bad.accelerations().x().iter().all(|a| a.is_nan()));
}
