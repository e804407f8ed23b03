//! Conserved quantities and structure measures of an N-body state, accumulated in `f64`.

use crate::solver::ForceSolver;
use mote_core::comm::Comm;
use mote_core::sum::ExactSum;
use mote_core::{CpuBackend, ParticleData, Real};

/// Energies, momenta and the virial ratio of a state.
///
/// Plain `f64`s (`Pod`): ranks that own their particles share rank 0's measurement as bytes.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Diagnostics {
    /// Kinetic energy `T = 1/2 sum m v^2`.
    pub kinetic: f64,
    /// Potential energy `W` from the solver (same softening as the forces).
    pub potential: f64,
    /// Total energy `T + W`.
    pub total: f64,
    /// Total linear momentum.
    pub momentum: [f64; 3],
    /// Total angular momentum about the origin.
    pub angular_momentum: [f64; 3],
    /// Virial ratio `2T / |W|` (1 in equilibrium).
    pub virial_ratio: f64,
    /// Total mass.
    pub mass: f64,
    /// Centre of mass.
    pub centre_of_mass: [f64; 3],
}

/// Particles per block of the threaded sums.
const BLOCK: usize = 1024;

/// Exact sums of the per-particle quantities (`mote_core::sum`): the same bits whatever the
/// order of the particles, the number of threads or the ranks they are spread over.
#[derive(Clone, Default)]
struct Sums([ExactSum; 11]);

/// One particle's terms: kinetic energy, momentum, angular momentum about the origin, mass and
/// mass-weighted position.
#[inline]
fn terms(mi: f64, pos: [f64; 3], v: [f64; 3]) -> [f64; 11] {
    [
        0.5 * mi * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]),
        mi * v[0],
        mi * v[1],
        mi * v[2],
        mi * (pos[1] * v[2] - pos[2] * v[1]),
        mi * (pos[2] * v[0] - pos[0] * v[2]),
        mi * (pos[0] * v[1] - pos[1] * v[0]),
        mi,
        mi * pos[0],
        mi * pos[1],
        mi * pos[2],
    ]
}

impl Sums {
    fn add(&mut self, terms: [f64; 11]) {
        for (acc, v) in self.0.iter_mut().zip(terms) {
            acc.add(v);
        }
    }

    /// `b`'s sums added to `a`'s (exactly).
    fn combine(mut a: Sums, b: Sums) -> Sums {
        for (x, y) in a.0.iter_mut().zip(&b.0) {
            x.merge(y);
        }
        a
    }

    fn diagnostics(self, potential: f64) -> Diagnostics {
        let v: Vec<f64> = self.0.iter().map(|c| c.value()).collect();
        let mass = v[7];
        let com = if mass > 0.0 {
            [v[8] / mass, v[9] / mass, v[10] / mass]
        } else {
            [0.0; 3]
        };
        Diagnostics {
            kinetic: v[0],
            potential,
            total: v[0] + potential,
            momentum: [v[1], v[2], v[3]],
            angular_momentum: [v[4], v[5], v[6]],
            virial_ratio: if potential != 0.0 {
                2.0 * v[0] / potential.abs()
            } else {
                f64::INFINITY
            },
            mass,
            centre_of_mass: com,
        }
    }
}

impl Diagnostics {
    /// Measures `p`; the potential energy comes from `solver`, the other sums run on `backend`.
    pub fn measure<R: Real>(
        p: &ParticleData<R>,
        solver: &mut dyn ForceSolver<R>,
        backend: CpuBackend,
    ) -> Self {
        let potential = solver.potential(p);
        Self::with_potential(p, potential, backend)
    }

    /// Measures `p` with a potential energy computed elsewhere (on several ranks that own
    /// their particles: by every rank together, while `p` is the state gathered on rank 0).
    pub fn with_potential<R: Real>(
        p: &ParticleData<R>,
        potential: f64,
        backend: CpuBackend,
    ) -> Self {
        let s = backend
            .map_reduce(p.len(), BLOCK, |r| Self::sums(p, r), Sums::combine)
            .unwrap_or_default();
        s.diagnostics(potential)
    }

    /// The sums over particles `r` of `p`.
    fn sums<R: Real>(p: &ParticleData<R>, r: std::ops::Range<usize>) -> Sums {
        let (x, y, z) = p.positions().components();
        let (vx, vy, vz) = p.velocities().components();
        let m = p.masses();
        let mut s = Sums::default();
        for i in r {
            s.add(terms(
                m[i].as_f64(),
                [x[i].as_f64(), y[i].as_f64(), z[i].as_f64()],
                [vx[i].as_f64(), vy[i].as_f64(), vz[i].as_f64()],
            ));
        }
        s
    }

    /// Measures the particles of ranks that own them (`p`, this rank's) with a potential
    /// energy computed elsewhere: each rank sums its own particles and the exact sums are
    /// reduced over the ranks, so the numbers are one process's bit for bit while no rank
    /// holds or receives more than its share. Collective.
    pub fn owned<R: Real>(comm: &dyn Comm, p: &ParticleData<R>, potential: f64) -> Self {
        let mut s = Self::sums(p, 0..p.len());
        ExactSum::reduce(&mut s.0, comm);
        s.diagnostics(potential)
    }

    /// `|E - E0| / |E0|`, the relative energy error against an initial energy `e0`.
    pub fn relative_energy_error(&self, e0: f64) -> f64 {
        ((self.total - e0) / e0).abs()
    }
}

/// The radius around the centre of mass that holds `fraction` of the mass (a Lagrangian radius;
/// 0.5 gives the half-mass radius). Set-up and diagnostics only: sorts a copy of the radii.
pub fn lagrangian_radius<R: Real>(p: &ParticleData<R>, fraction: f64) -> f64 {
    assert!(
        (0.0..=1.0).contains(&fraction),
        "mass fraction {fraction} outside [0, 1]"
    );
    let m = p.masses();
    let total: f64 = m.iter().map(|m| m.as_f64()).sum();
    let (x, y, z) = p.positions().components();
    let mut c = [0.0; 3];
    for i in 0..p.len() {
        let mi = m[i].as_f64() / total;
        c[0] += mi * x[i].as_f64();
        c[1] += mi * y[i].as_f64();
        c[2] += mi * z[i].as_f64();
    }
    let mut r: Vec<(f64, f64)> = (0..p.len())
        .map(|i| {
            let d = [
                x[i].as_f64() - c[0],
                y[i].as_f64() - c[1],
                z[i].as_f64() - c[2],
            ];
            (
                (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt(),
                m[i].as_f64(),
            )
        })
        .collect();
    r.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut acc = 0.0;
    for (ri, mi) in r {
        acc += mi;
        if acc >= fraction * total {
            return ri;
        }
    }
    0.0
}
