//! The reference kernel: the yardstick every faster kernel is tested against. Never optimise it.
//!
//! Whatever the run's precision, it computes in `f64`, skips `j == i` explicitly, and sums the
//! contributions with Neumaier's compensated summation, so its error is a few ulp of `f64`
//! independent of `N`.

use mote_core::{CpuBackend, Real, Vec3Span, Vec3SpanMut};

use crate::softening::{force_factor, inverse_distance};

/// Neumaier's compensated sum (improved Kahan-Babuska).
#[derive(Clone, Copy, Debug, Default)]
pub struct CompensatedSum {
    sum: f64,
    compensation: f64,
}

impl CompensatedSum {
    /// Adds `x`.
    #[inline]
    pub fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.compensation += (self.sum - t) + x;
        } else {
            self.compensation += (x - t) + self.sum;
        }
        self.sum = t;
    }

    /// The compensated total.
    #[inline]
    pub fn value(&self) -> f64 {
        self.sum + self.compensation
    }
}

/// The acceleration of target `i` in `f64`.
pub fn acceleration_of(
    i: usize,
    pos: Vec3Span<'_, impl Real>,
    mass: &[impl Real],
    eps2: f64,
) -> [f64; 3] {
    let (x, y, z) = pos.components();
    let (xi, yi, zi) = (x[i].as_f64(), y[i].as_f64(), z[i].as_f64());
    let mut s = [CompensatedSum::default(); 3];
    for j in 0..x.len() {
        if j == i {
            continue;
        }
        let dx = x[j].as_f64() - xi;
        let dy = y[j].as_f64() - yi;
        let dz = z[j].as_f64() - zi;
        let r2 = dx * dx + dy * dy + dz * dz;
        let f = mass[j].as_f64() * force_factor(inverse_distance(r2, eps2));
        s[0].add(f * dx);
        s[1].add(f * dy);
        s[2].add(f * dz);
    }
    [s[0].value(), s[1].value(), s[2].value()]
}

/// Accelerations of every particle by the reference kernel, rounded once to `R` at the end.
pub fn accelerations<R: Real>(
    backend: CpuBackend,
    pos: Vec3Span<'_, R>,
    mass: &[R],
    eps2: f64,
    acc: Vec3SpanMut<'_, R>,
) {
    accelerations_of_range(backend, pos, mass, eps2, 0, acc);
}

/// Accelerations of the targets `first..first + acc.len()` by the reference kernel (all
/// particles are sources), into `acc`.
pub fn accelerations_of_range<R: Real>(
    backend: CpuBackend,
    pos: Vec3Span<'_, R>,
    mass: &[R],
    eps2: f64,
    first: usize,
    acc: Vec3SpanMut<'_, R>,
) {
    backend.for_each_particle(acc, |i| {
        acceleration_of(first + i, pos, mass, eps2).map(R::cast)
    });
}

/// Particles per block of the potential energy's reduction.
const ENERGY_BLOCK: usize = 64;

/// `W = -1/2 sum_i m_i sum_(j != i) m_j / sqrt(r_ij^2 + eps^2)` in `f64`, compensated, with
/// a reduction order that does not depend on the thread count.
pub fn potential_energy<R: Real>(
    backend: CpuBackend,
    pos: Vec3Span<'_, R>,
    mass: &[R],
    eps2: f64,
) -> f64 {
    potential_energy_on(&mote_core::comm::SingleProcess, backend, pos, mass, eps2)
}

/// [`potential_energy`] on the ranks of `comm`: each rank sums its share of the fixed blocks
/// of 64 particles, the block sums are gathered and combined in block order, as on one rank;
/// the result is bitwise identical on any rank count (and every rank gets it).
pub fn potential_energy_on<R: Real>(
    comm: &dyn mote_core::comm::Comm,
    backend: CpuBackend,
    pos: Vec3Span<'_, R>,
    mass: &[R],
    eps2: f64,
) -> f64 {
    let (x, y, z) = pos.components();
    let n = x.len();
    let block = |b: usize| {
        let mut w = CompensatedSum::default();
        for i in b * ENERGY_BLOCK..((b + 1) * ENERGY_BLOCK).min(n) {
            let (xi, yi, zi) = (x[i].as_f64(), y[i].as_f64(), z[i].as_f64());
            let mut phi = CompensatedSum::default();
            for j in 0..n {
                if j == i {
                    continue;
                }
                let dx = x[j].as_f64() - xi;
                let dy = y[j].as_f64() - yi;
                let dz = z[j].as_f64() - zi;
                phi.add(mass[j].as_f64() * inverse_distance(dx * dx + dy * dy + dz * dz, eps2));
            }
            w.add(-0.5 * mass[i].as_f64() * phi.value());
        }
        [w.sum, w.compensation]
    };
    let blocks = n.div_ceil(ENERGY_BLOCK);
    let ranges = mote_core::comm::even_ranges(blocks, comm.size());
    let mine = ranges[comm.rank()].clone();
    let mut partials = vec![[0.0f64; 2]; blocks];
    backend.for_each_block(&mut partials[mine.clone()], 1, |b, out: &mut [[f64; 2]]| {
        out[0] = block(mine.start + b);
    });
    let mut scratch = Vec::new();
    mote_core::comm::gather_parts(comm, &mut partials, &ranges, &mut scratch);
    // Left to right in block order: the first block's sum, then each next block's sum and
    // compensation added to it.
    let mut parts = partials.iter();
    let Some(&[sum, compensation]) = parts.next() else {
        return 0.0;
    };
    let mut w = CompensatedSum { sum, compensation };
    for &[s, c] in parts {
        w.add(s);
        w.add(c);
    }
    w.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compensated_sum_recovers_what_naive_summation_loses() {
        let mut s = CompensatedSum::default();
        let mut naive = 0.0;
        for x in [1.0, 1e100, 1.0, -1e100] {
            s.add(x);
            naive += x;
        }
        assert_eq!(s.value(), 2.0);
        assert_eq!(naive, 0.0);
    }
}
