//! The WENO-type MLS reconstruction on the device: the CPU's WENO pass (`mote_cloud::scheme`,
//! [`Muscl::with_weno`](mote_cloud::scheme::Muscl::with_weno)) between the derivative pass and
//! the limiter, operation for operation.
//!
//! A particle's derivatives become a smoothness-weighted mix of its central fit's and of `2 D`
//! one-sided fits' ([`DeviceMls::one_sided`]), with weights `gamma_k / (eps + beta_k)^2`,
//! `beta_k = sum_a (h^|a| D_k,a)^2`, `eps = 1e-10 (1 + u_i^2)`, `gamma` the central weight for
//! the central fit and 1 for each one-sided one; one-sided fits that do not exist at a particle
//! are left out.
//!
//! One launch per fit, in the CPU's order, accumulating the weighted sum and the total weight
//! in a per-particle buffer (the mix): the central fit starts it, each one-sided fit adds its
//! derivatives (summed over the slots in eight lanes by slot position, as the CPU's batched
//! derivative pass does) and weight, and a last launch divides. One stencil per launch keeps every launch's bindings few (some drivers allow
//! few storage buffers per kernel) whatever the dimension. Each unit reads its neighbours' states
//! and writes only its own entries; slot loops run the maximum count with masks (the software
//! driver's loop limits, see [`crate::mls`]).

use cubecl::prelude::*;
use mote_cloud::CloudError;
use mote_core::{Budgeted, BudgetedBuffer, Scaling};

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::formula::weno::{weno_add, weno_weight};
use crate::gravity::GpuFloat;
use crate::launch::{ListArgs, Neighbours, launch, slot_base};
use crate::mls::DeviceMls;
use crate::muscl::lane_sums;
use crate::search::DeviceNeighbours;

/// Which step of the mix a launch does.
const START: u32 = 0;
const ADD: u32 = 1;
const FINISH: u32 = 2;

/// One step of the mix for every particle (see the module docs): `START` from the central
/// derivatives in `derivs`, `ADD` one one-sided fit's (`coef`, `valid`), `FINISH` back into
/// `derivs`. `consts` holds `h^|a|` for each term, then the central weight and the `1e-10` of
/// `eps`; `mix` holds per particle and variable the weighted sums and, last, the total weight.
#[cube(launch_unchecked)]
fn weno_kernel<F: Float>(
    u: &Array<F>,
    list: &Neighbours,
    coef: &Array<F>,
    valid: &Array<u32>,
    consts: &Array<F>,
    derivs: &mut Array<F>,
    mix: &mut Array<F>,
    #[comptime] vars: usize,
    #[comptime] terms: usize,
    #[comptime] step: u32,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let nu = list.n as usize;
        let width = terms + 1;
        if comptime![step == START] {
            let gamma = consts[terms];
            #[unroll]
            for v in 0..vars {
                let ui = u[v * nu + i];
                let record = i * vars * terms + v * terms;
                let w0 =
                    gamma * weno_weight::<F>(derivs, record, consts, ui, consts[terms + 1], terms);
                weno_add::<F>(mix, (i * vars + v) * width, derivs, record, w0, terms, true);
            }
        } else if comptime![step == ADD] {
            if valid[i] == 1 {
                let (first, stride) = slot_base(list, i);
                let slots_of = (first, stride, list.counts[i]);
                let mut d = Array::<F>::new(terms);
                let mut acc = Array::<F>::new(terms * crate::muscl::LANES);
                #[unroll]
                for v in 0..vars {
                    let ui = u[v * nu + i];
                    lane_sums::<F>(
                        u,
                        v * nu,
                        i,
                        list,
                        slots_of,
                        coef,
                        &mut acc,
                        &mut d,
                        0,
                        terms,
                    );
                    let w = weno_weight::<F>(&d, 0, consts, ui, consts[terms + 1], terms);
                    weno_add::<F>(mix, (i * vars + v) * width, &d, 0, w, terms, false);
                }
            }
        } else {
            #[unroll]
            for v in 0..vars {
                let base = (i * vars + v) * width;
                let total = mix[base + terms];
                #[unroll]
                for a in 0..terms {
                    derivs[i * vars * terms + v * terms + a] = mix[base + a] / total;
                }
            }
        }
    }
}

/// The WENO-type reconstruction of a [`DeviceMuscl`](crate::DeviceMuscl): the one-sided fits,
/// the constants and the per-particle mix.
pub(crate) struct DeviceWeno<F> {
    central_weight: f64,
    stencils: Vec<DeviceMls<F>>,
    consts: DeviceArray<F>,
    mix: DeviceArray<F>,
}

impl<F: GpuFloat> DeviceWeno<F> {
    /// `2 D` one-sided fits of the reconstruction `degree` with `weight` and the central fit's
    /// linear weight `central_weight` (checked as the CPU's `with_weno` does).
    pub(crate) fn new<const D: usize>(
        gpu: &Gpu,
        order: usize,
        weight: mote_cloud::Weight,
        central_weight: f64,
        variables: usize,
    ) -> Result<Self, GpuError> {
        if order < 2 {
            return Err(CloudError::invalid(
                "WENO reconstruction",
                format!("order {order}"),
                "order 2 or more (order 1 has no derivatives to weight)",
            )
            .into());
        }
        if !(central_weight.is_finite() && central_weight >= 1.0) {
            return Err(CloudError::invalid(
                "WENO central weight",
                central_weight,
                "a finite number >= 1",
            )
            .into());
        }
        let terms = mote_cloud::mls::Basis::<D>::size(order - 1);
        let stencils = (0..2 * D)
            .map(|k| DeviceMls::one_sided::<D>(gpu, order - 1, weight, k / 2, k % 2 == 1))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            central_weight,
            stencils,
            consts: gpu
                .upload("weno_constants", &vec![F::cast(0.0); terms + 2])
                .with_scaling(Scaling::Fixed),
            mix: gpu
                .output("weno_mix", 0)
                .with_scaling(Scaling::PerParticle(variables * (terms + 1))),
        })
    }

    /// The central fit's linear weight.
    pub(crate) fn central_weight(&self) -> f64 {
        self.central_weight
    }

    /// Fits the one-sided stencils for `cloud` and `list` and sets the constants: `h` is the
    /// central fit's spacing, `exponents` the reconstruction terms' (once per search).
    pub(crate) fn prepare<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &crate::search::DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        h: f64,
        exponents: &[[u8; D]],
        variables: usize,
    ) -> Result<(), GpuError> {
        for st in &mut self.stencils {
            st.compute::<D>(gpu, cloud, list)?;
        }
        // The CPU's `R::cast(h^|a|)`, then its `R::cast` of the weight and of 1e-10.
        let mut consts: Vec<F> = exponents
            .iter()
            .map(|e| F::cast(h.powi(e.iter().map(|&k| k as i32).sum())))
            .collect();
        consts.extend([F::cast(self.central_weight), F::cast(1e-10)]);
        self.consts = gpu
            .upload("weno_constants", &consts)
            .with_scaling(Scaling::Fixed);
        self.mix
            .resize(cloud.len() * variables * (exponents.len() + 1))?;
        Ok(())
    }

    /// Replaces the `terms` derivatives per variable in `derivs` by the mix, for the state `u`
    /// of `vars` variables.
    pub(crate) fn apply(
        &self,
        gpu: &Gpu,
        list: ListArgs<'_>,
        u: &DeviceArray<F>,
        derivs: &DeviceArray<F>,
        vars: usize,
        terms: usize,
    ) -> Result<(), GpuError> {
        let n = list.n();
        gpu.check(&self.consts, terms + 2)?;
        gpu.check(&self.mix, n * vars * (terms + 1))?;
        for st in &self.stencils {
            gpu.check(st.coefficients(), terms * list.slots())?;
            gpu.check(st.valid(), n)?;
        }
        if n == 0 || terms == 0 {
            return Ok(());
        }
        // START and FINISH read no fit: the first stencil's arrays stand in, never bound twice.
        let first = (self.stencils[0].coefficients(), self.stencils[0].valid());
        let steps = std::iter::once((first, START))
            .chain(
                self.stencils
                    .iter()
                    .map(|st| ((st.coefficients(), st.valid()), ADD)),
            )
            .chain(std::iter::once((first, FINISH)));
        for ((coef, valid), step) in steps {
            // Every unit reads its own slots and its neighbours' states and writes only its own
            // entries of `mix` ((i * vars + v) * (terms + 1) + ..) and `derivs` (i * vars *
            // terms + ..); the private arrays hold `terms` and `terms * LANES` numbers, the
            // compile-time bounds of their loops.
            launch!(
                gpu,
                n,
                weno_kernel::<F>(
                    u.arg(),
                    list.arg(),
                    coef.arg(),
                    valid.arg(),
                    self.consts.arg(),
                    derivs.arg(),
                    self.mix.arg(),
                    vars,
                    terms,
                    step
                )
            );
        }
        Ok(())
    }
}

impl<F: GpuFloat> Budgeted for DeviceWeno<F> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        let mut v: Vec<&dyn BudgetedBuffer> = self
            .stencils
            .iter()
            .flat_map(|s| Budgeted::buffers(s))
            .collect();
        v.extend([&self.consts as &dyn BudgetedBuffer, &self.mix]);
        v
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        let mut v: Vec<&mut dyn BudgetedBuffer> = self
            .stencils
            .iter_mut()
            .flat_map(|s| Budgeted::buffers_mut(s))
            .collect();
        v.extend([&mut self.consts as &mut dyn BudgetedBuffer, &mut self.mix]);
        v
    }
}
