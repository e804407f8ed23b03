//! Two-dimensional shock problems, coarse: a quadrant Riemann problem (Lax-Liu configuration 3)
//! and the double Mach reflection (Woodward-Colella). They must run to completion with finite,
//! positive density and pressure everywhere; how often the positivity floors acted and what MOOD
//! did is printed. Both clouds come from `mote_cloud::problems`; the double Mach reflection's
//! bottom and top faces are conditions of its own (a wall for x > 1/6 and post-shock gas before
//! it; the top follows the shock).

use mote_cloud::boundary::Boundaries;
use mote_cloud::equations::Euler;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::mood::{Criterion, HaloStrategy, MoodSettings};
use mote_cloud::problems::{self, Problem, ProblemOptions};
use mote_cloud::scheme::{Formulation, Limiter, LimiterKind, LimiterMode, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, MeshlessSimulation, RowMajor, Weight};
use mote_core::CpuBackend;

const GAMMA: f64 = 1.4;

/// Density and pressure of the interior: (min density, min pressure, max density), and
/// whether every value is finite.
fn extremes(sim: &MeshlessSimulation<f64, 2, Euler<2>, RowMajor>) -> (f64, f64, f64, bool) {
    let eq = sim.scheme.equation();
    let (mut rho_min, mut p_min, mut rho_max, mut finite) = (f64::MAX, f64::MAX, 0.0f64, true);
    for i in 0..sim.cloud.len() {
        if sim.cloud.tags()[i] != 0 {
            continue;
        }
        let u: Vec<f64> = (0..4).map(|v| sim.cloud.state(v)[i]).collect();
        finite &= u.iter().all(|x| x.is_finite());
        let kinetic = 0.5 * (u[1] * u[1] + u[2] * u[2]) / u[0];
        let p = (eq.gamma() - 1.0) * (u[3] - kinetic);
        rho_min = rho_min.min(u[0]);
        rho_max = rho_max.max(u[0]);
        p_min = p_min.min(p);
    }
    (rho_min, p_min, rho_max, finite)
}

/// MUSCL2 with a Barth-Jespersen limiter, MOOD (u1, EPD1) and Rusanov, SSP-RK3, the time step recomputed every step.
fn run(
    mut cloud: Cloud<f64, 2>,
    spacing: f64,
    boundaries: Boundaries<f64, 2>,
    end: f64,
    cfl: f64,
) -> MeshlessSimulation<f64, 2, Euler<2>, RowMajor> {
    for o in cloud.orders_mut() {
        *o = 2;
    }
    let eq = Euler::<2>::new(GAMMA).unwrap();
    let scheme = Muscl::new(eq, 2, Formulation::MlsDivergence, Weight::default())
        .unwrap()
        .with_limiter(Limiter::new(LimiterKind::BarthJespersen, LimiterMode::Soft))
        .unwrap();
    let mut sim = MeshlessSimulation::<f64, 2, _, RowMajor>::new(
        cloud,
        default_radius_factor::<2>(2) * spacing,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::threads(2),
    )
    .unwrap()
    .with_boundaries(boundaries)
    .unwrap()
    .with_mood(MoodSettings::new(Criterion::U1, HaloStrategy::Epd1))
    .unwrap();
    while sim.time() < end {
        let dt = sim.stable_dt(cfl).min(end - sim.time());
        sim.step(dt).unwrap();
    }
    sim
}

#[test]
fn quadrant_riemann_problem_runs_with_positive_density_and_pressure() {
    let spacing = 1.0 / 48.0;
    let options = ProblemOptions {
        resolution: 48,
        jitter: 0.2,
        seed: 8,
        boundary_layers: 2,
        ranks: None,
    };
    let Problem {
        cloud,
        boundaries: bc,
        ..
    } = problems::quadrant::<f64>(&options, GAMMA).unwrap();
    let initial = cloud.state(0).to_vec();
    let mut sim = run(cloud, spacing, bc, 0.3, 0.3);
    let (rho_min, p_min, rho_max, finite) = extremes(&sim);
    let floors = sim.scheme.equation().floor_events();
    let mood = sim.take_mood_stats();
    eprintln!(
        "quadrant (config 3), 48^2, t = 0.3, {} steps: density [{rho_min:.4}, {rho_max:.4}], min pressure {p_min:.4}, floors {floors}, MOOD {mood:?}",
        sim.steps()
    );
    assert!(finite && rho_min > 0.0 && p_min > 0.0);
    assert_eq!(floors, 0, "positivity floors acted");
    // The four shocks sweep a large part of the box: the mean density change is substantial.
    let change = initial
        .iter()
        .zip(sim.cloud.state(0))
        .map(|(a, b)| (a - b).abs())
        .sum::<f64>()
        / initial.len() as f64;
    eprintln!("  mean |density change| {change:.3}");
    assert!(change > 0.05, "the solution hardly moved: {change}");
}

#[test]
fn double_mach_reflection_runs_with_positive_density_and_pressure() {
    let spacing = 1.0 / 24.0;
    let options = ProblemOptions {
        resolution: 24,
        jitter: 0.0,
        seed: 1,
        boundary_layers: 2,
        ranks: None,
    };
    let Problem {
        cloud,
        boundaries: bc,
        ..
    } = problems::double_mach::<f64>(&options, GAMMA).unwrap();
    let mut sim = run(cloud, spacing, bc, 0.2, 0.3);
    let (rho_min, p_min, rho_max, finite) = extremes(&sim);
    let floors = sim.scheme.equation().floor_events();
    let mood = sim.take_mood_stats();
    eprintln!(
        "double Mach reflection, dx = 1/24, t = 0.2, {} steps: density [{rho_min:.3}, {rho_max:.3}], min pressure {p_min:.3}, floors {floors}, MOOD {mood:?}",
        sim.steps()
    );
    assert!(finite && rho_min > 0.0 && p_min > 0.0);
    assert_eq!(floors, 0, "positivity floors acted");
    // The reflection compresses the gas beyond the incident shock's density of 8.
    assert!(rho_max > 8.0, "no reflection: max density {rho_max}");
}
