//! The kernels a moving cloud needs besides the MUSCL passes: copying positions between the
//! cloud's axis arrays and a stage's positions (the axes end to end, unwrapped, as the
//! Runge-Kutta stages advance them), wrapping a stage's positions into the periodic box as the
//! CPU does, and the particle speed's share of the stable step.

use cubecl::prelude::*;

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::launch::{Neighbours, launch, slot_base};
use crate::search::{DeviceCloud, DeviceNeighbours};

/// `out[i] = x[offset + i]`, wrapped into `[lo, lo + len)` when `periodic` (the CPU's
/// `wrap_axis`: `lo + (r - len floor(r / len))` with `r = x - lo`, and `lo` where that rounds
/// up to the upper end).
#[cube(launch_unchecked)]
fn wrap_kernel<F: Float + ScalarArgSettings>(
    x: &Array<F>,
    offset: u32,
    out: &mut Array<F>,
    n: u32,
    lo: F,
    len: F,
    periodic: u32,
) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        let v = x[offset as usize + i];
        if periodic == 1 {
            let r = v - lo;
            let mut w = lo + (r - len * F::floor(r / len));
            if w >= lo + len {
                w = lo;
            }
            out[i] = w;
        } else {
            out[i] = v;
        }
    }
}

/// `out[offset + i] = x[i]`.
#[cube(launch_unchecked)]
fn place_kernel<F: Float>(x: &Array<F>, out: &mut Array<F>, offset: u32, n: u32) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        out[offset as usize + i] = x[i];
    }
}

/// `rates[i] = 2 sum_s |w_i . b_s|` over particle `i`'s slots: the rate the particle's own
/// motion adds to the geometric CFL condition (the CPU's moving `stable_dt`).
#[cube(launch_unchecked)]
fn motion_rate_kernel<F: Float>(
    w: &Array<F>,
    list: &Neighbours,
    coef: &Array<F>,
    rates: &mut Array<F>,
    #[comptime] dim: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let nu = list.n as usize;
        let count = list.counts[i];
        let (base, stride) = slot_base(list, i);
        let mut sum = F::new(0.0);
        for k in 0..list.max_count {
            if k < count {
                let s = base + k as usize * stride;
                let mut p = F::new(0.0);
                #[unroll]
                for d in 0..dim {
                    p += w[d * nu + i] * coef[d * list.slots as usize + s];
                }
                sum += F::abs(p);
            }
        }
        rates[i] = F::new(2.0) * sum;
    }
}

impl Gpu {
    /// Wraps the stage positions `x` (the `D` axes end to end) into the cloud's axis arrays, as
    /// the CPU's moving simulation does before each stage's search.
    pub(crate) fn wrap_positions<F: GpuFloat, const D: usize>(
        &self,
        x: &DeviceArray<F>,
        cloud: &DeviceCloud<F, D>,
    ) -> Result<(), GpuError> {
        let n = cloud.len();
        self.check(x, D * n)?;
        let domain = cloud.domain();
        let (lo, hi) = domain.bounds();
        let periodic = domain.periodic();
        for (d, out) in cloud.positions().iter().enumerate() {
            self.check(out, n)?;
            // As the CPU casts them: the lower end and the length in the run's precision.
            let (lo_r, len) = (F::cast(lo[d]), F::cast(hi[d] - lo[d]));
            // Each unit reads `x[offset + i]` (below D n, checked) and writes its own `out[i]`
            // (below n, checked).
            launch!(
                self,
                n,
                wrap_kernel::<F>(
                    x.arg(),
                    (d * n) as u32,
                    out.arg(),
                    n as u32,
                    lo_r,
                    len,
                    periodic[d] as u32
                )
            );
        }
        Ok(())
    }

    /// The cloud's positions into `x` (the `D` axes end to end).
    pub(crate) fn gather_positions<F: GpuFloat, const D: usize>(
        &self,
        cloud: &DeviceCloud<F, D>,
        x: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        let n = cloud.len();
        self.check(x, D * n)?;
        for (d, axis) in cloud.positions().iter().enumerate() {
            self.check(axis, n)?;
            // Each unit reads its own `axis[i]` and writes `x[offset + i]`, below D n (checked).
            launch!(
                self,
                n,
                place_kernel::<F>(axis.arg(), x.arg(), (d * n) as u32, n as u32)
            );
        }
        Ok(())
    }

    /// `max_i 2 sum_s |w_i . b_s|` for velocities `w` (the `D` axes end to end) and the MLS
    /// gradient coefficients `coef` (basis functions `0..D` first) over `list`.
    pub(crate) fn motion_rate<F: GpuFloat, const D: usize>(
        &self,
        w: &DeviceArray<F>,
        list: &DeviceNeighbours,
        coef: &DeviceArray<F>,
        n: usize,
    ) -> Result<f64, GpuError> {
        self.check(w, D * n)?;
        let list = list.checked(self, n)?;
        let slots = list.slots();
        // The gradient coefficients are the first D basis functions' of the fit.
        self.check(coef, coef.len())?;
        if coef.len() < D * slots {
            return Err(GpuError::Length {
                array: coef.name().to_string(),
                len: coef.len(),
                expected: D * slots,
            });
        }
        if n == 0 {
            return Ok(0.0);
        }
        let rates = self.output::<F>("motion_rates", n);
        // Each unit reads its own slots and velocity and writes its own rate.
        launch!(
            self,
            n,
            motion_rate_kernel::<F>(w.arg(), list.arg(), coef.arg(), rates.arg(), D)
        );
        let (_, worst) = self.min_max(&rates)?;
        Ok(worst.as_f64())
    }
}
