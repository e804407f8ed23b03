//! The kinetic relaxation source on the device: the implicit part of an IMEX step
//! ([`crate::DeviceSimulation::with_relaxation`]), the CPU's
//! [`KineticRelaxation`] operation for operation.
//!
//! Each unit takes one particle: the macroscopic state `u_v = sum_k f_(k M + v)`, the
//! Maxwellian `M_(d,+-)(u) = u / (2 D) +- F_d(u) / (2 lambda)` from the macroscopic equation's
//! flux along each axis (the flux functions of the MUSCL passes), and either the implicit
//! stage's exact solution `f <- (f + (h / epsilon) M) / (1 + h / epsilon)` in place or the
//! source `(M - f) / epsilon`. The constants (`1 / (2 D)`, `1 / (2 lambda)`, `h / epsilon`,
//! `1 / (1 + h / epsilon)`, `1 / epsilon`) are formed on the host in the run's precision as the
//! CPU forms them, so no device division differs from the CPU's. A solve whose result is not
//! finite records the smallest such particle index, as the CPU reports it.

// Kernels: negated comparisons are the NaN tests (a kernel has no `partial_cmp`).
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use cubecl::prelude::*;
use mote_cloud::equations::Equation;
use mote_cloud::source::KineticRelaxation;

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::equation::{DeviceEquation, DeviceFormulas};
use crate::error::GpuError;
use crate::formula::finite;
use crate::formula::relaxation::{maxwellian_pair, relaxation_source, relaxed};
use crate::gravity::GpuFloat;
use crate::launch::launch;

/// Solves the implicit stage (`solve`: `f` in place with `r = h / epsilon`, `inv = 1 / (1 +
/// r)`) or evaluates the source into `slope` (`r = 1 / epsilon`) for every particle; `m`
/// macroscopic variables of the equation formulas `Q` with parameters `params`.
#[cube(launch_unchecked)]
fn relaxation_kernel<F: Float + ScalarArgSettings, Q: DeviceFormulas>(
    f: &mut Array<F>,
    slope: &mut Array<F>,
    n: u32,
    params: &Array<F>,
    share: F,
    half_inv_speed: F,
    r: F,
    inv: F,
    failed: &mut Array<Atomic<u32>>,
    #[comptime] m: usize,
    #[comptime] dim: usize,
    #[comptime] solve: bool,
) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        let nu = n as usize;
        let mut u = Array::<F>::new(m);
        let mut flux = Array::<F>::new(m);
        let mut nrm = Array::<F>::new(3usize);
        // The macroscopic state, summed over the kinetic components in order.
        #[unroll]
        for v in 0..m {
            let mut s = F::new(0.0);
            #[unroll]
            for k in 0..2 * dim {
                s += f[(k * m + v) * nu + i];
            }
            u[v] = s;
        }
        #[unroll]
        for d in 0..dim {
            #[unroll]
            for e in 0..dim {
                nrm[e] = F::new(0.0);
            }
            nrm[d] = F::new(1.0);
            Q::flux::<F>(&u, &nrm, params, &mut flux, m, dim);
            #[unroll]
            for v in 0..m {
                let (plus, minus) = maxwellian_pair::<F>(u[v], flux[v], share, half_inv_speed);
                let a = (2 * d * m + v) * nu + i;
                let b = ((2 * d + 1) * m + v) * nu + i;
                if comptime![solve] {
                    let x = relaxed::<F>(f[a], plus, r, inv);
                    let y = relaxed::<F>(f[b], minus, r, inv);
                    f[a] = x;
                    f[b] = y;
                    if !(finite::<F>(x) && finite::<F>(y)) {
                        failed[0].fetch_min(i as u32);
                    }
                } else {
                    slope[a] = relaxation_source::<F>(f[a], plus, r);
                    slope[b] = relaxation_source::<F>(f[b], minus, r);
                }
            }
        }
    }
}

/// `out = (stage - out) * inv` element-wise: the source slope of a solved implicit stage from
/// its right-hand side (in `out`) and its solution, `(U - rhs) / h`.
#[cube(launch_unchecked)]
fn solved_slope_kernel<F: Float + ScalarArgSettings>(
    stage: &Array<F>,
    out: &mut Array<F>,
    inv: F,
    len: u32,
) {
    let i = ABSOLUTE_POS;
    if i < len as usize {
        out[i] = (stage[i] - out[i]) * inv;
    }
}

/// The kinetic relaxation source of a macroscopic equation on the device.
pub struct DeviceRelaxation<F: GpuFloat> {
    equation: DeviceEquation,
    dim: usize,
    speed: f64,
    epsilon: f64,
    params: DeviceArray<F>,
    /// Bound as the kernel's `slope` in a solve (a buffer may not be bound twice).
    unused: DeviceArray<F>,
}

impl<F: GpuFloat> DeviceRelaxation<F> {
    /// The device version of the CPU's `relax`, whose macroscopic equation is `equation` on
    /// the device (e.g. [`DeviceEquation::burgers`] of `relax.equation()`). An error when
    /// `equation` is itself a kinetic transport or its variable count is not the macroscopic
    /// one.
    pub fn new<const D: usize, E: Equation<F, D>>(
        gpu: &Gpu,
        relax: &KineticRelaxation<D, E>,
        equation: DeviceEquation,
    ) -> Result<Self, GpuError> {
        let m = relax.macroscopic_variables();
        if equation.is_kinetic() || equation.variables(D) != m {
            return Err(mote_cloud::CloudError::invalid(
                "relaxation's macroscopic equation",
                format!("{equation:?}"),
                format!("the device version of the relaxed equation ({m} variables)"),
            )
            .into());
        }
        let params = equation.params().map(F::cast);
        Ok(Self {
            equation,
            dim: D,
            speed: relax.transport().speed(),
            epsilon: relax.epsilon(),
            params: gpu
                .upload("relaxation_parameters", &params)
                .with_scaling(mote_core::Scaling::Fixed),
            unused: gpu
                .upload("relaxation_unused", &[F::cast(0.0)])
                .with_scaling(mote_core::Scaling::Fixed),
        })
    }

    /// Number of kinetic variables `2 D M`.
    pub fn variables(&self) -> usize {
        2 * self.dim * self.equation.variables(self.dim)
    }

    /// Solves `x - h S(x) = rhs` in place in `f` (the kinetic variables end to end) for every
    /// particle, recording in `failed` the smallest index whose solution is not finite.
    pub(crate) fn solve(
        &self,
        gpu: &Gpu,
        f: &DeviceArray<F>,
        n: usize,
        h: F,
        failed: &DeviceArray<u32>,
    ) -> Result<(), GpuError> {
        // As the CPU forms them: r = h / epsilon, 1 / (1 + r).
        let r = h / F::cast(self.epsilon);
        let inv = F::one() / (F::one() + r);
        self.launch(gpu, f, &self.unused, n, r, inv, failed, true)
    }

    /// The source `S(f) = (M(u(f)) - f) / epsilon` into `slope`.
    pub(crate) fn evaluate(
        &self,
        gpu: &Gpu,
        f: &DeviceArray<F>,
        slope: &DeviceArray<F>,
        n: usize,
        failed: &DeviceArray<u32>,
    ) -> Result<(), GpuError> {
        let rate = F::one() / F::cast(self.epsilon);
        self.launch(gpu, f, slope, n, rate, F::one(), failed, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        gpu: &Gpu,
        f: &DeviceArray<F>,
        slope: &DeviceArray<F>,
        n: usize,
        r: F,
        inv: F,
        failed: &DeviceArray<u32>,
        solve: bool,
    ) -> Result<(), GpuError> {
        let len = n * self.variables();
        gpu.check(f, len)?;
        if !solve {
            gpu.check(slope, len)?;
        }
        gpu.check(failed, 1)?;
        gpu.check(&self.params, 4)?;
        let share = F::one() / F::from_usize(2 * self.dim);
        let half_inv_speed = F::one() / F::cast(2.0 * self.speed);
        let constants = [share, half_inv_speed, r, inv];
        let launch = RelaxLaunch {
            n: n as u32,
            f,
            slope,
            params: &self.params,
            constants,
            failed,
            vars: self.equation.variables(self.dim),
            dim: self.dim,
            solve,
        };
        self.equation.kernels::<F>().relax(gpu, &launch);
        Ok(())
    }

    /// The device's parameter array (for the memory budget).
    pub(crate) fn buffers(&self) -> Vec<&dyn mote_core::BudgetedBuffer> {
        vec![&self.params, &self.unused]
    }

    /// The device's parameter array, mutably (for the memory budget).
    pub(crate) fn buffers_mut(&mut self) -> Vec<&mut dyn mote_core::BudgetedBuffer> {
        vec![&mut self.params, &mut self.unused]
    }
}

impl Gpu {
    /// `out = (stage - out) * inv` on the device (an implicit stage's source slope).
    pub(crate) fn solved_slope<F: GpuFloat>(
        &self,
        stage: &DeviceArray<F>,
        out: &DeviceArray<F>,
        inv: F,
    ) -> Result<(), GpuError> {
        let len = stage.len();
        self.check(out, len)?;
        // Each unit reads and writes its own element below the common length.
        launch!(
            self,
            len,
            solved_slope_kernel::<F>(stage.arg(), out.arg(), inv, len as u32)
        );
        Ok(())
    }
}

/// One launch of the relaxation kernel (the arrays' sizes checked by its caller).
pub(crate) struct RelaxLaunch<'a, F: GpuFloat> {
    n: u32,
    f: &'a DeviceArray<F>,
    slope: &'a DeviceArray<F>,
    params: &'a DeviceArray<F>,
    /// `1 / (2 D)`, `1 / (2 lambda)`, `r`, `1 / (1 + r)`.
    constants: [F; 4],
    failed: &'a DeviceArray<u32>,
    /// Macroscopic variables.
    vars: usize,
    dim: usize,
    /// Solve the implicit stage (else evaluate the source).
    solve: bool,
}

/// Launches the relaxation kernel for the macroscopic equation formulas `Q`: each unit reads
/// and writes only its own particle's entries (below `n` times the variables, checked by the
/// caller); `failed` takes an atomic minimum. A solve does not touch `slope`.
pub(crate) fn launch_relax<F: GpuFloat, Q: DeviceFormulas>(gpu: &Gpu, l: &RelaxLaunch<'_, F>) {
    let c = l.constants;
    launch!(
        gpu,
        l.n as usize,
        relaxation_kernel::<F, Q>(
            l.f.arg(),
            l.slope.arg(),
            l.n,
            l.params.arg(),
            c[0],
            c[1],
            c[2],
            c[3],
            l.failed.arg(),
            l.vars,
            l.dim,
            l.solve
        )
    );
}
