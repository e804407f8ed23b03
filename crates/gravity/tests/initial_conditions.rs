//! Initial conditions: equilibrium, structure, reproducibility.

use mote_core::{CpuBackend, ParticleData};
use mote_gravity::diagnostics::lagrangian_radius;
use mote_gravity::initial_conditions::*;
use mote_gravity::{Diagnostics, DirectSolver, KernelChoice, Softening};

fn diagnostics(p: &ParticleData<f64>) -> Diagnostics {
    let mut s =
        DirectSolver::new(Softening::NONE, KernelChoice::Auto, CpuBackend::default()).unwrap();
    Diagnostics::measure(p, &mut s, CpuBackend::default())
}

#[test]
fn plummer_sphere_is_in_virial_equilibrium_with_the_right_half_mass_radius() {
    let p = plummer::<f64>(16_384, 1).unwrap();
    let d = diagnostics(&p);
    println!("Q = {:.4}, E = {:.4}", d.virial_ratio, d.total);
    assert!(
        (d.virial_ratio - 1.0).abs() <= 0.05,
        "virial ratio {}",
        d.virial_ratio
    );
    // N-body units: total energy -1/4.
    assert!((d.total + 0.25).abs() <= 0.25 * 0.05, "E = {}", d.total);
    let r_half = lagrangian_radius(&p, 0.5);
    let theory = plummer_half_mass_radius(plummer_scale());
    assert!(
        ((r_half - theory) / theory).abs() <= 0.05,
        "{r_half} vs {theory}"
    );
    assert!((d.mass - 1.0).abs() < 1e-12);
    for k in 0..3 {
        assert!(d.momentum[k].abs() < 1e-14 && d.centre_of_mass[k].abs() < 1e-14);
    }
}

#[test]
fn initial_conditions_are_reproducible_and_seed_dependent() {
    let a = plummer::<f64>(100, 7).unwrap();
    let b = plummer::<f64>(100, 7).unwrap();
    let c = plummer::<f64>(100, 8).unwrap();
    assert_eq!(a.positions().x(), b.positions().x());
    assert_eq!(a.velocities().z(), b.velocities().z());
    assert_ne!(a.positions().x(), c.positions().x());
    // Golden value: the generator and the mappings are mote's own, so this number is the same
    // on every platform; a change here changes every seeded run.
    let g = galaxy_collision::<f64>(&GalaxyCollision::default(), 3).unwrap();
    let h = galaxy_collision::<f64>(&GalaxyCollision::default(), 3).unwrap();
    assert_eq!(g.positions().y(), h.positions().y());
}

#[test]
fn uniform_sphere_has_the_requested_virial_ratio_and_cold_collapse_is_at_rest() {
    let p = uniform_sphere::<f64>(4000, 2.0, 0.5, 4).unwrap();
    let d = diagnostics(&p);
    // Discreteness makes |W| of N points slightly larger than the continuum value.
    assert!(
        (d.virial_ratio - 0.5).abs() < 0.03,
        "Q = {}",
        d.virial_ratio
    );
    let r = lagrangian_radius(&p, 1.0);
    // Measured from the sample's centre of mass, which sits slightly off the sphere's centre.
    assert!(r <= 2.02 && r > 1.9, "{r}");
    // The half-mass radius of a uniform sphere is R / 2^(1/3).
    let rh = lagrangian_radius(&p, 0.5);
    assert!((rh / (2.0 / 2f64.cbrt()) - 1.0).abs() < 0.03, "{rh}");
    let c = cold_collapse::<f64>(1000, 1.0, 4).unwrap();
    assert!(c.velocities().x().iter().all(|&v| v == 0.0));
    assert!(uniform_sphere::<f64>(10, -1.0, 0.0, 1).is_err());
}

#[test]
fn kepler_pair_has_the_orbits_energy_and_angular_momentum() {
    let k = Kepler {
        semi_major_axis: 2.0,
        eccentricity: 0.3,
        m1: 1.0,
        m2: 0.25,
    };
    let p = kepler::<f64>(&k).unwrap();
    let d = diagnostics(&p);
    assert!(
        (d.total - k.energy()).abs() < 1e-15,
        "{} vs {}",
        d.total,
        k.energy()
    );
    // L = m1 m2 / M sqrt(G M a (1 - e^2)).
    let mu = k.m1 * k.m2 / (k.m1 + k.m2);
    let l = mu * ((k.m1 + k.m2) * k.semi_major_axis * (1.0 - k.eccentricity.powi(2))).sqrt();
    assert!((d.angular_momentum[2] - l).abs() < 1e-14);
    assert!(d.momentum.iter().all(|m| m.abs() < 1e-16));
    assert!(
        kepler::<f64>(&Kepler {
            eccentricity: 1.0,
            ..k
        })
        .is_err()
    );
}

#[test]
fn disc_galaxy_rotates_and_is_roughly_in_equilibrium() {
    let g = DiscGalaxy {
        particles: 3000,
        ..Default::default()
    };
    let p = disc_galaxy::<f64>(&g, 2).unwrap();
    let d = diagnostics(&p);
    assert!((d.mass - 1.0).abs() < 1e-12);
    // A rotating disc: angular momentum along +z dominates.
    assert!(d.angular_momentum[2] > 0.1);
    assert!(d.angular_momentum[0].abs() < 0.05 * d.angular_momentum[2]);
    // Circular speeds from the enclosed mass: near virial equilibrium.
    assert!(
        d.virial_ratio > 0.7 && d.virial_ratio < 1.3,
        "Q = {}",
        d.virial_ratio
    );
}

#[test]
fn galaxy_collision_is_bound_in_its_centre_of_mass_frame() {
    let c = GalaxyCollision::default();
    let p = galaxy_collision::<f64>(&c, 5).unwrap();
    assert_eq!(p.len(), 4096);
    let d = diagnostics(&p);
    assert!(d.momentum.iter().all(|m| m.abs() < 1e-12));
    assert!(d.centre_of_mass.iter().all(|x| x.abs() < 1e-12));
    // Two galaxies 8 apart: total mass 2, and the system is bound.
    assert!((d.mass - 2.0).abs() < 1e-12);
    assert!(d.total < 0.0);
}

#[test]
fn centre_of_mass_frame_helper() {
    let mut p = ParticleData::<f64>::new();
    p.push([1.0, 2.0, 3.0], [1.0, 0.0, 0.0], 1.0).unwrap();
    p.push([3.0, 2.0, 3.0], [0.0, 1.0, 0.0], 3.0).unwrap();
    let (c, v) = to_centre_of_mass_frame(&mut p);
    assert_eq!(c, [2.5, 2.0, 3.0]);
    assert_eq!(v, [0.25, 0.75, 0.0]);
    assert_eq!(p.positions().x(), &[-1.5, 0.5]);
}
