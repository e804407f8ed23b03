//! A WENO-type MLS reconstruction: the derivatives a particle reconstructs with are a
//! smoothness-weighted mix of its central MLS fit and of one-sided fits, one per side of each
//! axis (`2 D` upwind-masked stencils).
//!
//! Stencil `k` gives derivatives `D_k` of the reconstruction degree and a smoothness indicator
//! `beta_k = sum_a (h^|a| D_k,a)^2` (the squared changes its terms predict over one spacing).
//! The weights are `omega_k ~ gamma_k / (eps + beta_k)^2`, normalised, with `gamma = central_weight`
//! for the central fit and 1 for each one-sided fit: in smooth regions the central fit dominates
//! (its accuracy is kept up to the small one-sided share), at a discontinuity the stencils that
//! do not cross it take over. One-sided fits that do not exist at a particle (too few neighbours
//! on that side) are left out. Each particle rewrites only its own derivative record (pull form).

use mote_core::{Chunks, CpuBackend, Real, SplitOutputs};

use crate::mls::Mls;
use crate::search::{NeighbourList, SlotLayout};

/// The largest number of derivative terms (degree 4 in 3-D).
const MAX_TERMS: usize = 34;

/// The WENO pass: everything it reads.
pub(super) struct WenoPass<'a, R: Real, const D: usize> {
    pub u: &'a [&'a [R]],
    pub idx: &'a [u32],
    pub stencils: &'a [Mls<R, D>],
    /// `h^|a|` per derivative term.
    pub scale: &'a [R],
    pub central_weight: f64,
}

impl<R: Real, const D: usize> WenoPass<'_, R, D> {
    /// Replaces each particle's derivatives (records of `m * mr`) by the weighted mix.
    pub fn run<L: SlotLayout>(
        &self,
        list: &NeighbourList<L>,
        derivs: &mut [R],
        backend: CpuBackend,
    ) {
        let m = self.u.len();
        let mr = self.scale.len();
        assert!(mr <= MAX_TERMS, "WENO: too many terms");
        if mr == 0 {
            return;
        }
        let coeffs: Vec<Vec<&[R]>> = self
            .stencils
            .iter()
            .map(|s| (0..mr).map(|a| s.coefficients(a)).collect())
            .collect();
        let gamma_c = R::cast(self.central_weight);
        backend.for_each_block(Chunks::new(derivs, m * mr), 256, |first, mut out| {
            for k in 0..SplitOutputs::len(&out) {
                let i = first + k;
                let record = out.chunk_mut(k);
                for v in 0..m {
                    let uv = self.u[v];
                    let ui = uv[i];
                    let eps = R::cast(1e-10) * (R::one() + ui * ui);
                    let central = &mut record[v * mr..(v + 1) * mr];
                    let weight = |d: &[R]| {
                        let mut beta = R::zero();
                        for a in 0..mr {
                            let x = self.scale[a] * d[a];
                            beta += x * x;
                        }
                        let q = eps + beta;
                        R::one() / (q * q)
                    };
                    let w0 = gamma_c * weight(central);
                    let mut mix = [R::zero(); MAX_TERMS];
                    for a in 0..mr {
                        mix[a] = w0 * central[a];
                    }
                    let mut total = w0;
                    for (st, c) in self.stencils.iter().zip(&coeffs) {
                        if st.valid()[i] == 0 {
                            continue;
                        }
                        let mut d = [R::zero(); MAX_TERMS];
                        for s in list.slots(i) {
                            let diff = uv[self.idx[s] as usize] - ui;
                            for a in 0..mr {
                                d[a] += c[a][s] * diff;
                            }
                        }
                        let w = weight(&d[..mr]);
                        for a in 0..mr {
                            mix[a] += w * d[a];
                        }
                        total += w;
                    }
                    for a in 0..mr {
                        central[a] = mix[a] / total;
                    }
                }
            }
        });
    }
}
