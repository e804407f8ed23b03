//! Exact sums of `f64` values: the totals a run reports (conserved quantities, error norms) do
//! not depend on the order of their terms, so they are the same bits on any number of threads
//! or ranks and equal to one process's.
//!
//! [`ExactSum`] keeps the sum as a fixed-point integer wide enough for every finite `f64`
//! (Kulisch's long accumulator: 2^-1074 to beyond 2^1024, in 32-bit limbs held in `i64`s so that
//! carries wait). Adding a term is exact; partial sums combine exactly ([`ExactSum::merge`],
//! [`ExactSum::reduce`] over ranks); the result is rounded once, to nearest. A compensated
//! (Neumaier) sum is nearly as accurate but depends on the order of its terms: a sum split
//! between ranks would differ from one process's in the last bits.

use crate::comm::Comm;

/// Limbs of 32 bits: limb `k` weighs `2^(32 k - 1074)`. 67 limbs reach 2^1070, room for the
/// largest finite value (below 2^1024) times 2^46 terms.
const LIMBS: usize = 67;

/// Terms added between carry propagations: each term changes a limb by less than 2^32, so a
/// limb's `i64` holds 2^30 of them with room to spare.
const CARRY_EVERY: u32 = 1 << 30;

/// An exact, order-independent sum of `f64` terms (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactSum {
    limbs: [i64; LIMBS],
    /// Terms since the last carry propagation.
    pending: u32,
    /// Terms that were `+inf`, `-inf` and NaN: counted, so that the outcome (inf, -inf or NaN)
    /// does not depend on their order either.
    specials: [u64; 3],
}

impl Default for ExactSum {
    fn default() -> Self {
        Self {
            limbs: [0; LIMBS],
            pending: 0,
            specials: [0; 3],
        }
    }
}

impl ExactSum {
    /// An empty sum (zero).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `x`, exactly.
    pub fn add(&mut self, x: f64) {
        if !x.is_finite() {
            let k = if x.is_nan() {
                2
            } else if x > 0.0 {
                0
            } else {
                1
            };
            self.specials[k] += 1;
            return;
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as usize;
        let fraction = bits & ((1 << 52) - 1);
        // x = mantissa * 2^(offset - 1074): subnormals have exponent 0 and no hidden bit.
        let (mantissa, offset) = if exponent == 0 {
            (fraction, 0)
        } else {
            (fraction | (1 << 52), exponent - 1)
        };
        if mantissa == 0 {
            return;
        }
        let wide = u128::from(mantissa) << (offset % 32);
        let k = offset / 32;
        let parts = [
            (wide & 0xffff_ffff) as i64,
            ((wide >> 32) & 0xffff_ffff) as i64,
            (wide >> 64) as i64,
        ];
        if x < 0.0 {
            for (limb, p) in self.limbs[k..k + 3].iter_mut().zip(parts) {
                *limb -= p;
            }
        } else {
            for (limb, p) in self.limbs[k..k + 3].iter_mut().zip(parts) {
                *limb += p;
            }
        }
        self.pending += 1;
        if self.pending == CARRY_EVERY {
            self.carry();
        }
    }

    /// Propagates carries: every limb but the top one into `0..2^32`, the top one signed. The
    /// integer then has one representation, whatever the terms' order.
    fn carry(&mut self) {
        for k in 0..LIMBS - 1 {
            let c = self.limbs[k] >> 32;
            self.limbs[k] -= c << 32;
            self.limbs[k + 1] += c;
        }
        self.pending = 0;
    }

    /// Adds another partial sum (exactly).
    pub fn merge(&mut self, other: &ExactSum) {
        let mut other = other.clone();
        other.carry();
        self.carry();
        for (a, b) in self.limbs.iter_mut().zip(other.limbs) {
            *a += b;
        }
        for (a, b) in self.specials.iter_mut().zip(other.specials) {
            *a += b;
        }
        self.pending = 1;
    }

    /// Merges the partial sums of every rank of `comm` into each (the same sums, in order, on
    /// every rank): afterwards every rank holds the sums of all ranks' terms. Collective.
    pub fn reduce(sums: &mut [ExactSum], comm: &dyn Comm) {
        if comm.size() == 1 {
            return;
        }
        const WORDS: usize = LIMBS + 3;
        // After the carries every limb is below 2^32 and the top one, signed, below 2^16 in
        // magnitude (2^30 terms of at most 2^1024): biased by 2^40 it is positive too, and the
        // sums over fewer than 2^23 ranks stay below 2^64.
        const BIAS: i64 = 1 << 40;
        let mut words = Vec::with_capacity(sums.len() * WORDS);
        for s in sums.iter_mut() {
            s.carry();
            words.extend(s.limbs[..LIMBS - 1].iter().map(|&l| l as u64));
            words.push((s.limbs[LIMBS - 1] + BIAS) as u64);
            words.extend(s.specials);
        }
        comm.sum_u64(&mut words);
        let bias = BIAS * comm.size() as i64;
        for (s, w) in sums.iter_mut().zip(words.chunks_exact(WORDS)) {
            for (l, &x) in s.limbs.iter_mut().zip(w) {
                *l = x as i64;
            }
            s.limbs[LIMBS - 1] -= bias;
            s.specials.copy_from_slice(&w[LIMBS..]);
            s.pending = 1;
        }
    }

    /// The sum, rounded to the nearest `f64` (ties to even; a result in the subnormal range may
    /// be rounded twice). `+inf`/`-inf` where infinite terms of one sign were added, NaN where a
    /// term was NaN or infinities of both signs were added.
    pub fn value(&self) -> f64 {
        let [plus, minus, nan] = self.specials;
        if nan > 0 || (plus > 0 && minus > 0) {
            return f64::NAN;
        }
        if plus > 0 {
            return f64::INFINITY;
        }
        if minus > 0 {
            return f64::NEG_INFINITY;
        }
        let mut s = self.clone();
        s.carry();
        let negative = s.limbs[LIMBS - 1] < 0;
        if negative {
            for l in &mut s.limbs {
                *l = -*l;
            }
            s.carry();
        }
        let Some(top) = s.limbs.iter().rposition(|&l| l != 0) else {
            return 0.0;
        };
        // The top three limbs (at least 65 significant bits), with the lower limbs folded into
        // the lowest bit so that the one rounding of the conversion sees them.
        let low = top.saturating_sub(2);
        let mut m: u128 = 0;
        for k in (low..=top).rev() {
            m = (m << 32) | s.limbs[k] as u128;
        }
        if s.limbs[..low].iter().any(|&l| l != 0) {
            m |= 1;
        }
        let magnitude = scale(m as f64, 32 * low as i32 - 1074);
        if negative { -magnitude } else { magnitude }
    }
}

/// `x * 2^e`, in steps that stay within the normal exponents.
fn scale(mut x: f64, mut e: i32) -> f64 {
    let power = |e: i32| f64::from_bits(((e + 1023) as u64) << 52);
    while e > 1000 {
        x *= power(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= power(-1000);
        e += 1000;
    }
    x * power(e)
}

impl FromIterator<f64> for ExactSum {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Self {
        let mut s = ExactSum::new();
        for x in iter {
            s.add(x);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn cancellation_is_exact() {
        let s: ExactSum = [1e100, 1.0, -1e100].into_iter().collect();
        assert_eq!(s.value(), 1.0);
        let s: ExactSum = [1e308, 1e308, -1e308, -1e308, 5e-324].into_iter().collect();
        assert_eq!(s.value(), 5e-324);
        assert_eq!(ExactSum::new().value(), 0.0);
        let s: ExactSum = [0.1, 0.2, 0.3].into_iter().collect();
        // The exact sum of the three doubles, rounded once: 0.6000000000000000055...
        assert_eq!(s.value(), 0.6);
        let s: ExactSum = [-2.5, -0.25].into_iter().collect();
        assert_eq!(s.value(), -2.75);
    }

    /// Terms `k * 2^-30` with integer `k`: the exact sum is an integer sum, rounded once.
    #[test]
    fn rounds_once_to_nearest() {
        let mut rng = Rng::new(7);
        for trial in 0..200 {
            let terms: Vec<i64> = (0..1 + trial % 50)
                .map(|_| {
                    let bits = 56 - trial % 20;
                    (rng.uniform() * (2.0f64).powi(bits)) as i64 - (1i64 << (bits - 1))
                })
                .collect();
            let exact: i128 = terms.iter().map(|&k| i128::from(k)).sum();
            let s: ExactSum = terms
                .iter()
                .map(|&k| k as f64 * (2.0f64).powi(-30))
                .collect();
            // i128 -> f64 rounds to nearest, ties to even; the scaling is exact.
            assert_eq!(
                s.value(),
                exact as f64 * (2.0f64).powi(-30),
                "trial {trial}"
            );
        }
    }

    #[test]
    fn order_and_grouping_do_not_matter() {
        let mut rng = Rng::new(11);
        let terms: Vec<f64> = (0..5000)
            .map(|_| {
                let e = (rng.uniform() * 80.0) as i32 - 40;
                (rng.uniform() - 0.5) * (2.0f64).powi(e)
            })
            .collect();
        let forward: ExactSum = terms.iter().copied().collect();
        let backward: ExactSum = terms.iter().rev().copied().collect();
        assert_eq!(forward.value().to_bits(), backward.value().to_bits());
        let mut merged = ExactSum::new();
        for chunk in terms.chunks(777) {
            merged.merge(&chunk.iter().copied().collect());
        }
        assert_eq!(merged.value().to_bits(), forward.value().to_bits());
        // A plain sum of these terms loses bits the exact one keeps.
        let plain: f64 = terms.iter().sum();
        let scale: f64 = terms.iter().map(|t| t.abs()).sum();
        assert!((plain - forward.value()).abs() < 1e-12 * scale);
    }

    #[test]
    fn infinities_and_nan() {
        let inf: ExactSum = [1.0, f64::INFINITY, -3.0].into_iter().collect();
        assert_eq!(inf.value(), f64::INFINITY);
        let minus: ExactSum = [f64::NEG_INFINITY, 1e300].into_iter().collect();
        assert_eq!(minus.value(), f64::NEG_INFINITY);
        let both: ExactSum = [f64::INFINITY, f64::NEG_INFINITY].into_iter().collect();
        assert!(both.value().is_nan());
        let nan: ExactSum = [1.0, f64::NAN].into_iter().collect();
        assert!(nan.value().is_nan());
    }

    #[test]
    fn reduced_over_ranks_equals_one_process() {
        let terms: Vec<f64> = (0..1000).map(|i| (i as f64 * 0.37).sin() * 1e3).collect();
        let one: ExactSum = terms.iter().copied().collect();
        for size in 1..=4 {
            let ranks = crate::comm::thread_ranks(size);
            let sums = crate::comm::on_thread_ranks(&ranks, |comm| {
                let ranges = crate::comm::even_ranges(terms.len(), comm.size());
                let mut mine = [terms[ranges[comm.rank()].clone()].iter().copied().collect()];
                ExactSum::reduce(&mut mine, comm.as_ref());
                mine[0].value()
            });
            for s in sums {
                assert_eq!(s.to_bits(), one.value().to_bits(), "{size} ranks");
            }
        }
    }
}
