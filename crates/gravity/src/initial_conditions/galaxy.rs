//! Disc galaxies (bulge + exponential disc) and a collision of two of them.

use mote_core::{ParticleData, Real};

use super::{Rows, from_f64, remove_mean};
use crate::error::GravityError;
use mote_core::rng::Rng;

/// A disc galaxy: a Plummer bulge and a thin exponential disc in rotation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiscGalaxy {
    /// Total number of particles (bulge and disc), shared in proportion to the masses.
    pub particles: usize,
    /// Bulge mass.
    pub bulge_mass: f64,
    /// Plummer scale radius of the bulge.
    pub bulge_scale: f64,
    /// Disc mass.
    pub disc_mass: f64,
    /// Exponential scale length of the disc.
    pub disc_scale_length: f64,
    /// Gaussian scale height of the disc.
    pub disc_scale_height: f64,
    /// Velocity dispersion of the disc, as a fraction of the local circular speed.
    pub disc_dispersion: f64,
}

impl Default for DiscGalaxy {
    fn default() -> Self {
        Self {
            particles: 4096,
            bulge_mass: 0.2,
            bulge_scale: 0.2,
            disc_mass: 0.8,
            disc_scale_length: 1.0,
            disc_scale_height: 0.05,
            disc_dispersion: 0.05,
        }
    }
}

impl DiscGalaxy {
    fn validate(&self) -> Result<(), GravityError> {
        if self.particles < 2 {
            return Err(GravityError::invalid(
                "particle count",
                self.particles,
                "at least 2",
            ));
        }
        for (name, v) in [
            ("bulge mass", self.bulge_mass),
            ("disc mass", self.disc_mass),
            ("disc scale height", self.disc_scale_height),
            ("disc dispersion", self.disc_dispersion),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(GravityError::invalid(name, v, "finite and >= 0"));
            }
        }
        for (name, v) in [
            ("bulge scale", self.bulge_scale),
            ("disc scale length", self.disc_scale_length),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(GravityError::invalid(name, v, "finite and > 0"));
            }
        }
        if self.bulge_mass + self.disc_mass <= 0.0 {
            return Err(GravityError::invalid(
                "total mass",
                self.bulge_mass + self.disc_mass,
                "> 0",
            ));
        }
        Ok(())
    }

    /// Mass inside spherical radius `r` (the disc approximated as spherically distributed,
    /// which sets its circular speeds).
    fn enclosed_mass(&self, r: f64) -> f64 {
        let b = self.bulge_scale;
        let bulge = self.bulge_mass * r * r * r / libm::pow(r * r + b * b, 1.5);
        let x = r / self.disc_scale_length;
        let disc = self.disc_mass * (1.0 - (1.0 + x) * libm::exp(-x));
        bulge + disc
    }

    /// Positions, velocities and masses of the bodies `rows` in the galaxy's own frame (disc in
    /// the x-y plane, rotating counter-clockwise seen from +z). Collective over `rows.comm`.
    fn sample(&self, rng: &mut Rng, rows: Rows<'_>) -> (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>) {
        let total = self.bulge_mass + self.disc_mass;
        let n = self.particles;
        let n_bulge = ((self.bulge_mass / total) * n as f64).round() as usize;
        let n_disc = n - n_bulge;
        let keep = rows.range();
        let (mut pos, mut vel, mut mass) = (
            Vec::with_capacity(keep.len()),
            Vec::with_capacity(keep.len()),
            Vec::with_capacity(keep.len()),
        );
        let b = self.bulge_scale;
        // The bodies before the rows are drawn too (their draws lead to the rows'); the walk
        // stops after the rows.
        for i in 0..n_bulge.min(keep.end) {
            // Plummer bulge: radius from the cumulative mass, isotropic speeds from its
            // distribution function in units of the bulge's own escape speed.
            let r = b / libm::sqrt(libm::pow(rng.uniform_open(), -2.0 / 3.0) - 1.0);
            let x = rng.unit_vector().map(|d| r * d);
            let q = loop {
                let q = rng.uniform();
                if 0.1 * rng.uniform() < q * q * libm::pow(1.0 - q * q, 3.5) {
                    break q;
                }
            };
            let v_esc = libm::sqrt(2.0 * self.bulge_mass / libm::sqrt(r * r + b * b));
            let v = rng.unit_vector().map(|d| q * v_esc * d);
            if i >= keep.start {
                pos.push(x);
                vel.push(v);
                mass.push(self.bulge_mass / n_bulge as f64);
            }
        }
        for i in n_bulge..(n_bulge + n_disc).min(keep.end) {
            // R ~ R exp(-R/Rd): the sum of two exponential deviates.
            let rd = self.disc_scale_length;
            let r = -rd * libm::log(rng.uniform_open() * rng.uniform_open());
            let phi = 2.0 * std::f64::consts::PI * rng.uniform();
            let (s, c) = (libm::sin(phi), libm::cos(phi));
            let z = self.disc_scale_height * rng.normal();
            // Circular speed from the radial pull of the enclosed mass at spherical radius rs:
            // v^2 / R = M(<rs) / rs^2 * R / rs.
            let rs = libm::sqrt(r * r + z * z);
            let vc = libm::sqrt(self.enclosed_mass(rs) * r * r / (rs * rs * rs));
            let sigma = self.disc_dispersion * vc;
            let (vr, vt, vz) = (
                sigma * rng.normal(),
                vc + sigma * rng.normal(),
                sigma * rng.normal(),
            );
            if i >= keep.start {
                pos.push([r * c, r * s, z]);
                vel.push([vr * c - vt * s, vr * s + vt * c, vz]);
                mass.push(self.disc_mass / n_disc as f64);
            }
        }
        remove_mean(&mut pos, &mass, rows.comm);
        remove_mean(&mut vel, &mass, rows.comm);
        (pos, vel, mass)
    }
}

/// One disc galaxy in its centre-of-mass frame.
pub fn disc_galaxy<R: Real>(g: &DiscGalaxy, seed: u64) -> Result<ParticleData<R>, GravityError> {
    disc_galaxy_rows(g, seed, Rows::all(g.particles))
}

/// The bodies `rows` of [`disc_galaxy`]`(g, seed)`, bit for bit (collective over `rows.comm`).
pub fn disc_galaxy_rows<R: Real>(
    g: &DiscGalaxy,
    seed: u64,
    rows: Rows<'_>,
) -> Result<ParticleData<R>, GravityError> {
    g.validate()?;
    rows.check(g.particles)?;
    let (pos, vel, mass) = g.sample(&mut Rng::new(seed), rows);
    Ok(from_f64(&pos, &vel, &mass, rows.start))
}

/// Two disc galaxies on a parabolic approach.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GalaxyCollision {
    /// The first galaxy.
    pub first: DiscGalaxy,
    /// The second galaxy.
    pub second: DiscGalaxy,
    /// Initial distance between the centres.
    pub separation: f64,
    /// Impact parameter: the distance of closest approach of the point-mass parabola.
    pub pericentre: f64,
    /// Inclination of the second disc about the x axis, in radians.
    pub inclination: f64,
}

impl Default for GalaxyCollision {
    fn default() -> Self {
        Self {
            first: DiscGalaxy {
                particles: 2048,
                ..Default::default()
            },
            second: DiscGalaxy {
                particles: 2048,
                ..Default::default()
            },
            separation: 8.0,
            pericentre: 1.0,
            inclination: std::f64::consts::FRAC_PI_4,
        }
    }
}

/// Two galaxies placed on the point-mass parabolic orbit with the given pericentre, at the given
/// separation, approaching; the whole system in its centre-of-mass frame. The first galaxy
/// uses `seed`, the second `seed + 1`.
pub fn galaxy_collision<R: Real>(
    c: &GalaxyCollision,
    seed: u64,
) -> Result<ParticleData<R>, GravityError> {
    galaxy_collision_rows(c, seed, Rows::all(c.first.particles + c.second.particles))
}

/// The bodies `rows` of [`galaxy_collision`]`(c, seed)` (the first galaxy's bodies, then the
/// second's), bit for bit (collective over `rows.comm`).
pub fn galaxy_collision_rows<R: Real>(
    c: &GalaxyCollision,
    seed: u64,
    rows: Rows<'_>,
) -> Result<ParticleData<R>, GravityError> {
    c.first.validate()?;
    c.second.validate()?;
    if !(c.pericentre > 0.0 && c.separation > c.pericentre && c.separation.is_finite()) {
        return Err(GravityError::invalid(
            "separation",
            c.separation,
            "finite and larger than the pericentre (> 0)",
        ));
    }
    let m1 = c.first.bulge_mass + c.first.disc_mass;
    let m2 = c.second.bulge_mass + c.second.disc_mass;
    let mu = m1 + m2;
    // Parabola r = 2 q / (1 + cos f): position and velocity of body 2 relative to body 1.
    let (q, r) = (c.pericentre, c.separation);
    let cos_f = 2.0 * q / r - 1.0;
    let f = -libm::acos(cos_f); // approaching: before pericentre
    let (sf, cf) = (libm::sin(f), libm::cos(f));
    let rel_pos = [r * cf, r * sf, 0.0];
    let h = libm::sqrt(2.0 * mu * q); // specific angular momentum
    let rel_vel = [-mu / h * sf, mu / h * (1.0 + cf), 0.0];
    let n1 = c.first.particles;
    rows.check(n1 + c.second.particles)?;
    let (mut p1, mut v1, mut w1) = c.first.sample(&mut Rng::new(seed), rows.within(0, n1));
    let (mut p2, mut v2, w2) = c.second.sample(
        &mut Rng::new(seed.wrapping_add(1)),
        rows.within(n1, c.second.particles),
    );
    let (si, ci) = (libm::sin(c.inclination), libm::cos(c.inclination));
    let tilt = |v: [f64; 3]| [v[0], ci * v[1] - si * v[2], si * v[1] + ci * v[2]];
    for (p, v) in p2.iter_mut().zip(v2.iter_mut()) {
        let (tp, tv) = (tilt(*p), tilt(*v));
        *p = [tp[0] + rel_pos[0], tp[1] + rel_pos[1], tp[2]];
        *v = [tv[0] + rel_vel[0], tv[1] + rel_vel[1], tv[2]];
    }
    p1.append(&mut p2);
    v1.append(&mut v2);
    w1.extend(w2);
    remove_mean(&mut p1, &w1, rows.comm);
    remove_mean(&mut v1, &w1, rows.comm);
    Ok(from_f64(&p1, &v1, &w1, rows.start))
}
