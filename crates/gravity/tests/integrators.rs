//! Integrators on the Kepler problem: convergence orders, orbit closure, period, energy.

use mote_core::{CpuBackend, Real};
use mote_gravity::initial_conditions::{Kepler, kepler, plummer};
use mote_gravity::{DirectSolver, IntegratorKind, KernelChoice, Simulation, Softening};

const ORBIT: Kepler = Kepler {
    semi_major_axis: 1.0,
    eccentricity: 0.5,
    m1: 0.5,
    m2: 0.5,
};

fn simulation(kind: IntegratorKind) -> Simulation<f64> {
    let solver =
        DirectSolver::new(Softening::NONE, KernelChoice::Auto, CpuBackend::Serial).unwrap();
    Simulation::new(
        kepler(&ORBIT).unwrap(),
        Box::new(solver),
        kind.build(CpuBackend::Serial),
    )
}

/// Separation vector body 2 - body 1.
fn separation(s: &Simulation<f64>) -> [f64; 3] {
    let p = s.particles.positions();
    let (a, b) = (p.get(0), p.get(1));
    [b[0] - a[0], b[1] - a[1], b[2] - a[2]]
}

/// Distance between the state after one period in `steps` steps and the initial state.
fn closure_error(kind: IntegratorKind, steps: u64) -> f64 {
    let mut s = simulation(kind);
    let r0 = separation(&s);
    s.run(steps, ORBIT.period() / steps as f64);
    let r = separation(&s);
    ((r[0] - r0[0]).powi(2) + (r[1] - r0[1]).powi(2) + (r[2] - r0[2]).powi(2)).sqrt()
}

#[test]
fn convergence_orders_are_2_4_4() {
    for (kind, expected, coarse) in [
        (IntegratorKind::Leapfrog, 2.0, 2000),
        (IntegratorKind::Yoshida4, 4.0, 400),
        (IntegratorKind::Rk4, 4.0, 1600),
    ] {
        let e1 = closure_error(kind, coarse);
        let e2 = closure_error(kind, 2 * coarse);
        let order = (e1 / e2).log2();
        println!(
            "{}: errors {e1:.3e}, {e2:.3e}, order {order:.3}",
            kind.name()
        );
        assert!(
            (order - expected).abs() <= 0.1,
            "{}: order {order}",
            kind.name()
        );
    }
}

#[test]
fn one_verlet_period_at_20000_steps_closes() {
    let e = closure_error(IntegratorKind::Leapfrog, 20_000);
    assert!(e <= 2e-5 * ORBIT.semi_major_axis, "{e:e}");
}

#[test]
fn measured_period_matches_keplers_third_law() {
    // The separation starts on the +x axis at pericentre; the period ends when its angle
    // crosses 2 pi again, located by linear interpolation between steps.
    let steps = 20_000u64;
    let dt = ORBIT.period() / steps as f64;
    let mut s = simulation(IntegratorKind::Leapfrog);
    let angle = |r: [f64; 3]| r[1].atan2(r[0]).rem_euclid(2.0 * std::f64::consts::PI);
    let mut prev = angle(separation(&s));
    let mut period = None;
    for _ in 0..(steps + steps / 10) {
        s.step(dt);
        let a = angle(separation(&s));
        if a < prev && s.steps() > steps / 2 {
            // Wrapped through 2 pi between the last two steps.
            let frac =
                (2.0 * std::f64::consts::PI - prev) / (a + 2.0 * std::f64::consts::PI - prev);
            period = Some(s.time() - dt + frac * dt);
            break;
        }
        prev = a;
    }
    let period = period.expect("the orbit closed");
    let exact = 2.0 * std::f64::consts::PI * (1.0f64 / 1.0).sqrt();
    assert!(
        ((period - exact) / exact).abs() <= 1e-4,
        "{period} vs {exact}"
    );
}

#[test]
fn verlet_energy_error_is_bounded_without_drift() {
    let per_orbit = 200;
    let dt = ORBIT.period() / per_orbit as f64;
    let mut s = simulation(IntegratorKind::Leapfrog);
    let e0 = s.diagnostics(CpuBackend::Serial).total;
    assert!((e0 - ORBIT.energy()).abs() < 1e-15);
    let mut mean_per_orbit = Vec::new();
    let mut max_err: f64 = 0.0;
    for _ in 0..100 {
        let mut sum = 0.0;
        for _ in 0..per_orbit {
            s.step(dt);
            let err = s.diagnostics(CpuBackend::Serial).relative_energy_error(e0);
            sum += err;
            max_err = max_err.max(err);
        }
        mean_per_orbit.push(sum / per_orbit as f64);
    }
    let first: f64 = mean_per_orbit[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = mean_per_orbit[90..].iter().sum::<f64>() / 10.0;
    println!("max {max_err:.3e}, mean first 10 orbits {first:.4e}, last 10 {last:.4e}");
    assert!(max_err <= 3e-3, "{max_err:e}");
    assert!(
        ((last - first) / first).abs() <= 0.1,
        "{first:e} -> {last:e}"
    );
}

#[test]
fn rk4_energy_drifts_but_symplectic_integrators_do_not() {
    // A check that the energy test above can fail: RK4 is not symplectic and its error grows,
    // while Yoshida's stays bounded. Compare the largest error during orbit 1 and orbit 20
    // (the largest over an orbit does not depend on where in the orbit a step lands).
    let per_orbit = 100;
    let dt = ORBIT.period() / per_orbit as f64;
    let max_error_per_orbit = |kind| {
        let mut s = simulation(kind);
        let e0 = s.diagnostics(CpuBackend::Serial).total;
        let mut maxima = Vec::new();
        for _ in 0..20 {
            let mut m: f64 = 0.0;
            for _ in 0..per_orbit {
                s.step(dt);
                m = m.max(s.diagnostics(CpuBackend::Serial).relative_energy_error(e0));
            }
            maxima.push(m);
        }
        (maxima[0], maxima[19])
    };
    let (first, last) = max_error_per_orbit(IntegratorKind::Rk4);
    println!("rk4 {first:e} -> {last:e}");
    assert!(last > 10.0 * first, "RK4: {first:e} -> {last:e}");
    let (first, last) = max_error_per_orbit(IntegratorKind::Yoshida4);
    println!("yoshida4 {first:e} -> {last:e}");
    assert!(last < 1.1 * first, "Yoshida4: {first:e} -> {last:e}");
}

#[test]
fn trajectories_are_bitwise_identical_on_1_and_2_threads() {
    for kind in IntegratorKind::ALL {
        let run = |threads: usize| {
            let backend = CpuBackend::threads(threads);
            let solver =
                DirectSolver::new(Softening::new(0.01).unwrap(), KernelChoice::Auto, backend)
                    .unwrap();
            let mut s = Simulation::new(
                plummer::<f64>(700, 2).unwrap(),
                Box::new(solver),
                kind.build(backend),
            );
            s.run(5, 1e-3);
            let p = s.particles;
            let mut bits = Vec::new();
            for c in mote_core::Component::ALL {
                bits.extend(p.component(c).iter().map(|v| v.to_bits()));
            }
            bits
        };
        assert_eq!(run(1), run(2), "{}", kind.name());
    }
}

#[test]
fn precision_f32_follows_f64_on_a_short_run() {
    fn run<R: Real>() -> f64 {
        let solver =
            DirectSolver::new(Softening::NONE, KernelChoice::Auto, CpuBackend::Serial).unwrap();
        let mut s = Simulation::new(
            kepler::<R>(&ORBIT).unwrap(),
            Box::new(solver),
            IntegratorKind::Leapfrog.build(CpuBackend::Serial),
        );
        s.run(1000, ORBIT.period() / 1000.0);
        s.particles.positions().get(1)[0].as_f64()
    }
    let (a, b) = (run::<f32>(), run::<f64>());
    assert!((a - b).abs() < 1e-3, "{a} vs {b}");
}
