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
//!
//! Each one-sided fit's derivatives come from the batched derivative pass
//! ([`flux_pass::DerivativePass`], the central fit's, SIMD lanes and all) into one scratch
//! record per particle; a running weighted sum and total weight per particle and variable (the
//! mix) take them fit after fit, and a last pass divides. The device runs the same steps
//! (`mote_gpu::weno`).

use mote_core::{
    Budgeted, BudgetedBuffer, Buffer, Chunks, CpuBackend, Real, Scaling, SimdLevel, SplitOutputs,
};

use super::flux_pass;
use crate::error::CloudError;
use crate::formula::weno::{weno_add, weno_weight};
use crate::mls::{Basis, Mls};
use crate::search::{NeighbourList, SlotLayout};

/// The WENO-type reconstruction of a scheme: its one-sided fits and working arrays.
pub(super) struct Weno<R: Real, const D: usize> {
    pub stencils: Vec<Mls<R, D>>,
    pub central_weight: f64,
    /// `h^|a|` per reconstruction term (set by [`Weno::prepare`]).
    scale: Vec<R>,
    /// One fit's derivatives, records of `m * mr` per particle.
    scratch: Buffer<R>,
    /// Per particle and variable: the weighted sums of the derivatives, then the total weight
    /// (records of `m * (mr + 1)`).
    mix: Buffer<R>,
}

impl<R: Real, const D: usize> Weno<R, D> {
    /// `stencils` and the central fit's linear weight, for `m` variables of `mr` terms.
    pub fn new(stencils: Vec<Mls<R, D>>, central_weight: f64, m: usize, mr: usize) -> Self {
        Self {
            stencils,
            central_weight,
            scale: Vec::new(),
            scratch: Buffer::new("weno_scratch", Scaling::PerParticle((m * mr).max(1))),
            mix: Buffer::new("weno_mix", Scaling::PerParticle((m * (mr + 1)).max(1))),
        }
    }

    /// Fits the one-sided stencils and sizes the working arrays for `n` particles of `m`
    /// variables; `h` is the central fit's spacing, `basis` the reconstruction basis (`mr`
    /// terms used).
    #[allow(clippy::too_many_arguments)]
    pub fn prepare<L: SlotLayout>(
        &mut self,
        cloud: &crate::Cloud<R, D>,
        list: &NeighbourList<L>,
        backend: CpuBackend,
        h: f64,
        basis: &Basis<D>,
        m: usize,
        mr: usize,
    ) -> Result<(), CloudError> {
        for st in &mut self.stencils {
            st.compute(cloud, list, backend)?;
        }
        self.scale = basis.exponents()[..mr]
            .iter()
            .map(|e| R::cast(h.powi(e.iter().map(|&k| k as i32).sum())))
            .collect();
        let n = cloud.len();
        self.scratch.resize(n * m * mr, R::zero())?;
        self.mix.resize(n * m * (mr + 1), R::zero())?;
        Ok(())
    }

    /// Replaces each particle's derivatives (records of `m * mr`, `m = u.len()`) by the mix.
    pub fn apply<L: SlotLayout>(
        &mut self,
        u: &[&[R]],
        list: &NeighbourList<L>,
        derivs: &mut [R],
        backend: CpuBackend,
        simd: SimdLevel,
    ) {
        let m = u.len();
        let mr = self.scale.len();
        if mr == 0 {
            return;
        }
        let width = mr + 1;
        let scale = &self.scale[..];
        let gamma = R::cast(self.central_weight);
        let tiny = R::cast(1e-10);
        // `1 / (eps + beta)^2` for derivatives `d` of a particle whose value is `ui`.
        let mix_in = |mix: &mut [R], source: &[R], valid: Option<&[u8]>, gamma: R, start: bool| {
            backend.for_each_block(Chunks::new(mix, m * width), 256, |first, mut out| {
                for k in 0..SplitOutputs::len(&out) {
                    let i = first + k;
                    if valid.is_some_and(|v| v[i] == 0) {
                        continue;
                    }
                    let record = out.chunk_mut(k);
                    for v in 0..m {
                        let at = (i * m + v) * mr;
                        let w = gamma * weno_weight(source, at, scale, u[v][i], tiny, mr);
                        weno_add(record, v * width, source, at, w, mr, start);
                    }
                }
            });
        };
        mix_in(self.mix.as_mut_slice(), derivs, None, gamma, true);
        let idx = list.indices();
        for st in &self.stencils {
            let coeffs: Vec<&[R]> = (0..mr).map(|a| st.coefficients(a)).collect();
            flux_pass::DerivativePass {
                u,
                idx,
                coeffs: &coeffs,
            }
            .run(list, self.scratch.as_mut_slice(), backend, simd);
            let one = R::one();
            mix_in(
                self.mix.as_mut_slice(),
                self.scratch.as_slice(),
                Some(st.valid()),
                one,
                false,
            );
        }
        // Finish: the normalised mix replaces the derivatives.
        let mix = self.mix.as_slice();
        backend.for_each_block(Chunks::new(derivs, m * mr), 256, |first, mut out| {
            for k in 0..SplitOutputs::len(&out) {
                let i = first + k;
                let record = out.chunk_mut(k);
                for v in 0..m {
                    let sums = &mix[(i * m + v) * width..(i * m + v + 1) * width];
                    for a in 0..mr {
                        record[v * mr + a] = sums[a] / sums[mr];
                    }
                }
            }
        });
    }

    /// The budgeted buffers: the fits' and the working arrays.
    pub fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        let mut v: Vec<&dyn BudgetedBuffer> =
            self.stencils.iter().flat_map(|s| s.buffers()).collect();
        v.push(&self.scratch);
        v.push(&self.mix);
        v
    }

    /// The budgeted buffers, mutably.
    pub fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        let mut v: Vec<&mut dyn BudgetedBuffer> = self
            .stencils
            .iter_mut()
            .flat_map(|s| s.buffers_mut())
            .collect();
        v.push(&mut self.scratch);
        v.push(&mut self.mix);
        v
    }
}
