//! The direct-summation kernels against exact values, the reference kernel and each other.

use mote_core::{CpuBackend, ParticleData, Real, SimdLevel};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::{DirectSolver, ForceSolver, Kernel, KernelChoice, Softening, SolverInfo};

/// Every kernel this CPU can run: the reference and each detected SIMD level.
fn kernels() -> Vec<Kernel> {
    let mut k = vec![Kernel::Reference];
    k.extend(SimdLevel::detect().into_iter().map(Kernel::Fast));
    k
}

fn solver(kernel: Kernel, eps: f64, backend: CpuBackend) -> DirectSolver {
    DirectSolver::new(
        Softening::new(eps).unwrap(),
        KernelChoice::Exactly(kernel),
        backend,
    )
    .unwrap()
}

fn accelerations<R: Real>(
    p: &ParticleData<R>,
    kernel: Kernel,
    eps: f64,
    backend: CpuBackend,
) -> [Vec<f64>; 3] {
    let mut q = p.clone();
    ForceSolver::<R>::update(&mut solver(kernel, eps, backend), &mut q);
    let a = q.accelerations();
    [a.x(), a.y(), a.z()].map(|c| c.iter().map(|v| v.as_f64()).collect())
}

/// `||a - b|| / ||b||` over all particles and components.
fn normwise_error(a: &[Vec<f64>; 3], b: &[Vec<f64>; 3]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for k in 0..3 {
        for (x, y) in a[k].iter().zip(&b[k]) {
            num += (x - y) * (x - y);
            den += y * y;
        }
    }
    (num / den).sqrt()
}

#[test]
fn two_body_acceleration_is_exact_to_the_last_bit() {
    // Separation 4 along z: 1/sqrt(16) = 1/4 and 1/4^3 = 1/64 are exact, so is every product.
    let mut p = ParticleData::<f64>::new();
    p.push([1.5, -0.25, 3.0], [0.0; 3], 3.0).unwrap();
    p.push([1.5, -0.25, -1.0], [0.0; 3], 0.75).unwrap();
    for kernel in kernels() {
        let a = accelerations(&p, kernel, 0.0, CpuBackend::Serial);
        assert_eq!(a[2], vec![-0.75 / 16.0, 3.0 / 16.0], "{kernel}");
        assert_eq!(a[0], vec![0.0, 0.0], "{kernel}");
        assert_eq!(a[1], vec![0.0, 0.0], "{kernel}");
    }
}

#[test]
fn momentum_is_conserved_to_round_off() {
    // Unequal masses so that the sum cancels only through Newton's third law.
    let mut p = plummer::<f64>(128, 11).unwrap();
    for (i, m) in p.view_mut().mass.iter_mut().enumerate() {
        *m = 0.5 + (i % 7) as f64 * 0.25;
    }
    for kernel in kernels() {
        let a = accelerations(&p, kernel, 0.0, CpuBackend::Serial);
        let m = p.masses();
        for (k, ak) in a.iter().enumerate() {
            let total: f64 = (0..128).map(|i| m[i] * ak[i]).sum();
            let scale: f64 = (0..128).map(|i| (m[i] * ak[i]).abs()).sum();
            assert!(
                total.abs() <= 1e-14 * scale,
                "{kernel}, axis {k}: {total:e} of {scale:e}"
            );
        }
    }
}

#[test]
fn fast_kernels_match_the_reference_on_a_plummer_sphere() {
    for eps in [0.0, 0.01] {
        let p64 = plummer::<f64>(2048, 3).unwrap();
        let p32 = plummer::<f32>(2048, 3).unwrap();
        let r64 = accelerations(&p64, Kernel::Reference, eps, CpuBackend::default());
        let r32 = accelerations(&p32, Kernel::Reference, eps, CpuBackend::default());
        for level in SimdLevel::detect() {
            let k = Kernel::Fast(level);
            let e64 = normwise_error(&accelerations(&p64, k, eps, CpuBackend::default()), &r64);
            let e32 = normwise_error(&accelerations(&p32, k, eps, CpuBackend::default()), &r32);
            println!("eps {eps}: {level}: f64 {e64:.2e}, f32 {e32:.2e}");
            assert!(e64 <= 1e-14, "{level} f64, eps {eps}: {e64:e}");
            assert!(e32 <= 1e-6, "{level} f32, eps {eps}: {e32:e}");
            // And the comparison can fail: f32 is not accurate to f64 standards.
            assert!(e32 > 1e-10);
        }
    }
}

#[test]
fn accelerations_are_bitwise_identical_on_1_and_2_threads() {
    let p = plummer::<f64>(1000, 5).unwrap();
    let q = plummer::<f32>(1000, 5).unwrap();
    for kernel in kernels() {
        let bits = |a: [Vec<f64>; 3]| a.map(|c| c.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        for eps in [0.0, 0.05] {
            let one = bits(accelerations(&p, kernel, eps, CpuBackend::threads(1)));
            assert_eq!(
                one,
                bits(accelerations(&p, kernel, eps, CpuBackend::threads(2))),
                "{kernel}"
            );
            assert_eq!(
                one,
                bits(accelerations(&p, kernel, eps, CpuBackend::Serial)),
                "{kernel}"
            );
            let one = bits(accelerations(&q, kernel, eps, CpuBackend::threads(1)));
            assert_eq!(
                one,
                bits(accelerations(&q, kernel, eps, CpuBackend::threads(2))),
                "{kernel}"
            );
        }
    }
}

#[test]
fn acceleration_is_the_negative_gradient_of_the_potential_energy() {
    // a_i = -(1/m_i) dW/dx_i, with W from the solver's potential and central differences.
    let mut p = plummer::<f64>(16, 9).unwrap();
    for kernel in kernels() {
        let mut s = solver(kernel, 0.1, CpuBackend::Serial);
        ForceSolver::<f64>::update(&mut s, &mut p);
        for i in [0, 7, 15] {
            let m = p.masses()[i];
            let a = p.accelerations().get(i);
            for (k, comp) in [
                mote_core::Component::PositionX,
                mote_core::Component::PositionY,
                mote_core::Component::PositionZ,
            ]
            .into_iter()
            .enumerate()
            {
                let x0 = p.component(comp)[i];
                let h = 1e-5;
                let mut w = [0.0; 2];
                for (slot, sign) in [(0, 1.0), (1, -1.0)] {
                    let mut q = p.clone();
                    q.component_mut(comp)[i] = x0 + sign * h;
                    w[slot] =
                        ForceSolver::<f64>::potential_energy(&mut s, q.positions(), q.masses());
                }
                let numeric = -(w[0] - w[1]) / (2.0 * h) / m;
                let rel = ((a[k] - numeric) / a[k]).abs();
                assert!(
                    rel < 1e-7,
                    "{kernel}: particle {i}, axis {k}: {} vs {numeric} ({rel:e})",
                    a[k]
                );
            }
        }
    }
}

#[test]
fn interactions_are_counted_per_evaluation() {
    let mut p = plummer::<f32>(100, 1).unwrap();
    let mut s = solver(Kernel::Fast(SimdLevel::best()), 0.0, CpuBackend::Serial);
    ForceSolver::<f32>::update(&mut s, &mut p);
    ForceSolver::<f32>::update(&mut s, &mut p);
    assert_eq!(s.interactions(), 2 * 100 * 99);
    assert_eq!(s.name(), format!("direct/{}", SimdLevel::best()));
}

#[test]
fn unavailable_kernels_are_refused_by_name() {
    assert!("avx1024".parse::<KernelChoice>().is_err());
    for level in SimdLevel::ALL {
        let r = KernelChoice::Exactly(Kernel::Fast(level)).resolve();
        assert_eq!(r.is_ok(), level.is_available());
        if let Err(e) = r {
            assert!(e.to_string().contains("not available on this CPU"), "{e}");
        }
    }
}
