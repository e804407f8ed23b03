//! Spherical systems: Plummer sphere, uniform sphere, cold collapse.

use mote_core::{ParticleData, Real};

use super::{Rows, from_f64, remove_mean};
use crate::error::GravityError;
use mote_core::rng::Rng;
use mote_core::sum::ExactSum;

/// Scale radius of the Plummer sphere in N-body units (M = G = 1, E = -1/4): `3 pi / 16`.
pub fn plummer_scale() -> f64 {
    3.0 * std::f64::consts::PI / 16.0
}

/// Half-mass radius of the Plummer sphere of scale `a`: `a / sqrt(2^(2/3) - 1)`.
pub fn plummer_half_mass_radius(a: f64) -> f64 {
    a / (2f64.powf(2.0 / 3.0) - 1.0).sqrt()
}

fn check_count(n: usize, min: usize) -> Result<(), GravityError> {
    if n < min {
        return Err(GravityError::invalid("particle count", n, "at least 2"));
    }
    Ok(())
}

/// A Plummer sphere of `n` equal masses in N-body units (total mass 1, scale `3 pi / 16`, total
/// energy -1/4), isotropic, in its centre-of-mass frame.
///
/// Radii invert the cumulative mass `M(r) = r^3 / (r^2 + a^2)^(3/2)`; speeds follow the
/// distribution function by von Neumann rejection of `q^2 (1 - q^2)^(7/2)` in units of the local
/// escape speed (Aarseth, Henon & Wielen 1974).
pub fn plummer<R: Real>(n: usize, seed: u64) -> Result<ParticleData<R>, GravityError> {
    plummer_rows(n, seed, Rows::all(n))
}

/// The bodies `rows` of [`plummer`]`(n, seed)`, bit for bit (collective over `rows.comm`).
pub fn plummer_rows<R: Real>(
    n: usize,
    seed: u64,
    rows: Rows<'_>,
) -> Result<ParticleData<R>, GravityError> {
    check_count(n, 2)?;
    rows.check(n)?;
    let a = plummer_scale();
    let mut rng = Rng::new(seed);
    let keep = rows.range();
    let m = vec![1.0 / n as f64; keep.len()];
    let mut pos = Vec::with_capacity(keep.len());
    let mut vel = Vec::with_capacity(keep.len());
    // The bodies before the rows are drawn too: their draws lead the stream to the rows'.
    for i in 0..keep.end {
        let x = rng.uniform_open();
        let r = a / libm::sqrt(libm::pow(x, -2.0 / 3.0) - 1.0);
        let dir = rng.unit_vector();
        let q = loop {
            let q = rng.uniform();
            let g = q * q * libm::pow(1.0 - q * q, 3.5);
            // max of q^2 (1 - q^2)^3.5 is about 0.0920; 0.1 bounds it.
            if 0.1 * rng.uniform() < g {
                break q;
            }
        };
        let v_esc = libm::sqrt(2.0 / libm::sqrt(r * r + a * a));
        let vdir = rng.unit_vector();
        if i >= keep.start {
            pos.push(dir.map(|d| r * d));
            vel.push(vdir.map(|d| q * v_esc * d));
        }
    }
    remove_mean(&mut pos, &m, rows.comm);
    remove_mean(&mut vel, &m, rows.comm);
    Ok(from_f64(&pos, &vel, &m, keep.start))
}

/// `n` equal masses (total mass 1) uniformly inside a sphere of `radius`, with isotropic
/// Gaussian velocities scaled so that the virial ratio `2T/|W|` equals `virial_ratio` (using the
/// continuum potential energy of a uniform sphere, `W = -3/5 M^2 / R`). In the
/// centre-of-mass frame.
pub fn uniform_sphere<R: Real>(
    n: usize,
    radius: f64,
    virial_ratio: f64,
    seed: u64,
) -> Result<ParticleData<R>, GravityError> {
    uniform_sphere_rows(n, radius, virial_ratio, seed, Rows::all(n))
}

/// The bodies `rows` of [`uniform_sphere`]`(n, radius, virial_ratio, seed)`, bit for bit
/// (collective over `rows.comm`).
pub fn uniform_sphere_rows<R: Real>(
    n: usize,
    radius: f64,
    virial_ratio: f64,
    seed: u64,
    rows: Rows<'_>,
) -> Result<ParticleData<R>, GravityError> {
    check_count(n, 2)?;
    rows.check(n)?;
    if !(radius.is_finite() && radius > 0.0) {
        return Err(GravityError::invalid(
            "radius",
            radius,
            "a finite length > 0",
        ));
    }
    if !(virial_ratio.is_finite() && virial_ratio >= 0.0) {
        return Err(GravityError::invalid(
            "virial ratio",
            virial_ratio,
            "finite and >= 0",
        ));
    }
    let mut rng = Rng::new(seed);
    let keep = rows.range();
    let m = vec![1.0 / n as f64; keep.len()];
    let mut pos = Vec::with_capacity(keep.len());
    // Every position is drawn (the velocities' draws follow them all); the rows' are kept.
    let mut drawn = 0;
    while drawn < n {
        let p = [
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
        ];
        if p[0] * p[0] + p[1] * p[1] + p[2] * p[2] <= 1.0 {
            if keep.contains(&drawn) {
                pos.push(p.map(|c| c * radius));
            }
            drawn += 1;
        }
    }
    let mut vel: Vec<[f64; 3]> = Vec::with_capacity(keep.len());
    for i in 0..keep.end {
        let v = [rng.normal(), rng.normal(), rng.normal()];
        if i >= keep.start {
            vel.push(v);
        }
    }
    remove_mean(&mut pos, &m, rows.comm);
    remove_mean(&mut vel, &m, rows.comm);
    // T = Q |W| / 2 with |W| = 3/5 / R; scale the sample to exactly that kinetic energy (summed
    // exactly over the ranks).
    let target_t = virial_ratio * 0.6 / radius / 2.0;
    let mut t = [ExactSum::new()];
    for (v, m) in vel.iter().zip(&m) {
        t[0].add(0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]));
    }
    ExactSum::reduce(&mut t, rows.comm);
    let t = t[0].value();
    let s = if t > 0.0 { (target_t / t).sqrt() } else { 0.0 };
    vel.iter_mut().for_each(|v| *v = v.map(|c| c * s));
    Ok(from_f64(&pos, &vel, &m, keep.start))
}

/// Cold uniform collapse: a uniform sphere at rest, which collapses in the free-fall time
/// `pi/2 sqrt(R^3 / 2M)`.
pub fn cold_collapse<R: Real>(
    n: usize,
    radius: f64,
    seed: u64,
) -> Result<ParticleData<R>, GravityError> {
    uniform_sphere(n, radius, 0.0, seed)
}
