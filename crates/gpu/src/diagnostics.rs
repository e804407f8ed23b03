//! Diagnostics reduced on the device: the conserved totals `sum_i V_i u_i` and the error norms
//! of [`mote_cloud::exact`] over the interior particles, without downloading the state.
//!
//! One kernel reduces, per workgroup and in a fixed tree order, six moments of one variable:
//! `sum V u`, `sum V |u - e|`, `sum V (u - e)^2`, `sum V e^2`, `sum V` and `max |u - e|` (`e` the
//! exact values, uploaded by the host). The arithmetic is in f64 where the device supports it
//! (the CPU's diagnostics are f64 whatever the run's precision; a product of two f32 values is
//! exact in f64), else in f32. Only the per-workgroup partials come back (six numbers per
//! workgroup); the host adds them in workgroup order, compensated for the totals as the CPU
//! does, so a result is the same from run to run.

// A bounds test stays apart from the read it guards (a kernel's `&&` need not short-circuit).
#![allow(clippy::collapsible_if)]

use cubecl::prelude::*;
use mote_cloud::exact::Errors;
use mote_core::Precision;
use mote_core::sum::ExactSum;

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::launch::launch;
use crate::primitives::cubes;

/// Moments per workgroup.
const MOMENTS: usize = 6;

/// Per workgroup: the six moments of `u[offset..offset + n]` over the interior particles into
/// `partial[cube * 6 ..]`.
#[cube(launch_unchecked)]
fn moments_kernel<F: Float, G: Float>(
    u: &Array<F>,
    offset: u32,
    n: u32,
    volumes: &Array<F>,
    tags: &Array<u32>,
    exact: &Array<G>,
    partial: &mut Array<G>,
    #[comptime] block: usize,
    #[comptime] with_exact: bool,
) {
    let unit = UNIT_POS as usize;
    let i = ABSOLUTE_POS;
    let mut sh = SharedMemory::<G>::new(block * MOMENTS);
    #[unroll]
    for k in 0..MOMENTS {
        sh[k * block + unit] = G::new(0.0);
    }
    if i < n as usize {
        if tags[i] == 0 {
            let v = G::cast_from(volumes[i]);
            let x = G::cast_from(u[offset as usize + i]);
            sh[unit] = v * x;
            sh[4 * block + unit] = v;
            if comptime![with_exact] {
                let e = exact[i];
                let d = x - e;
                sh[block + unit] = v * G::abs(d);
                sh[2 * block + unit] = v * d * d;
                sh[3 * block + unit] = v * e * e;
                sh[5 * block + unit] = G::abs(d);
            }
        }
    }
    sync_cube();
    let mut s = (block / 2).runtime();
    while s > 0 {
        if unit < s {
            #[unroll]
            for k in 0..MOMENTS - 1 {
                sh[k * block + unit] = sh[k * block + unit] + sh[k * block + unit + s];
            }
            let m = (MOMENTS - 1) * block;
            sh[m + unit] = G::max(sh[m + unit], sh[m + unit + s]);
        }
        sync_cube();
        s /= 2;
    }
    if unit == 0 {
        #[unroll]
        for k in 0..MOMENTS {
            partial[CUBE_POS * MOMENTS + k] = sh[k * block];
        }
    }
}

/// The six moments of one variable, summed over the workgroups on the host.
struct Moments {
    total: f64,
    l1: f64,
    squares: f64,
    exact_squares: f64,
    volume: f64,
    max: f64,
}

/// Reduces variable `var` of the state `u` (the variables of `volumes.len()` particles end to
/// end) against the exact values `exact` (none: only the total and the volume).
fn moments<F: GpuFloat>(
    gpu: &Gpu,
    u: &DeviceArray<F>,
    var: usize,
    volumes: &DeviceArray<F>,
    tags: &DeviceArray<u32>,
    exact: Option<&[f64]>,
) -> Result<Moments, GpuError> {
    let n = volumes.len();
    gpu.check(volumes, n)?;
    gpu.check(tags, n)?;
    gpu.check(u, u.len())?;
    if u.len() < (var + 1) * n {
        return Err(GpuError::Length {
            array: "state".into(),
            len: u.len(),
            expected: (var + 1) * n,
        });
    }
    if let Some(e) = exact
        && e.len() != n
    {
        return Err(GpuError::Length {
            array: "exact values".into(),
            len: e.len(),
            expected: n,
        });
    }
    if n == 0 {
        return Ok(Moments {
            total: 0.0,
            l1: 0.0,
            squares: 0.0,
            exact_squares: 0.0,
            volume: 0.0,
            max: 0.0,
        });
    }
    let partials = if gpu.supports(Precision::F64) {
        launch::<F, f64>(gpu, u, var, volumes, tags, exact)?
    } else {
        launch::<F, f32>(gpu, u, var, volumes, tags, exact)?
    };
    // The workgroups' partials summed exactly, as the CPU's `exact` sums its terms.
    let mut sums: [ExactSum; 5] = Default::default();
    let mut max = 0.0f64;
    for p in partials.chunks(MOMENTS) {
        for (sum, &x) in sums.iter_mut().zip(p) {
            sum.add(x);
        }
        max = max.max(p[5]);
    }
    let [total, l1, squares, exact_squares, volume] = sums.map(|s| s.value());
    Ok(Moments {
        total,
        l1,
        squares,
        exact_squares,
        volume,
        max,
    })
}

/// Launches the moments kernel with arithmetic in `G`; the partials as f64.
fn launch<F: GpuFloat, G: GpuFloat>(
    gpu: &Gpu,
    u: &DeviceArray<F>,
    var: usize,
    volumes: &DeviceArray<F>,
    tags: &DeviceArray<u32>,
    exact: Option<&[f64]>,
) -> Result<Vec<f64>, GpuError> {
    let n = volumes.len();
    let wg = gpu.workgroup();
    let parts = cubes(n, wg);
    let partial = gpu.output::<G>("diagnostic_partials", parts * MOMENTS);
    let with_exact = exact.is_some();
    let values: Vec<G> = match exact {
        Some(e) => e.iter().map(|&x| G::cast(x)).collect(),
        None => vec![G::cast(0.0)],
    };
    let exact = gpu.upload("exact_values", &values);
    // Units below n read their own particle's entries (the state holds the variable's n
    // values from `offset`, checked); one unit per workgroup writes that workgroup's partials,
    // below `cubes * 6`.
    launch!(
        gpu,
        n,
        moments_kernel::<F, G>(
            u.arg(),
            (var * n) as u32,
            n as u32,
            volumes.arg(),
            tags.arg(),
            exact.arg(),
            partial.arg(),
            wg as usize,
            with_exact
        )
    );
    Ok(gpu
        .download(&partial)?
        .into_iter()
        .map(|x| x.as_f64())
        .collect())
}

/// `sum_i V_i u_i` of variable `var` of the state `u` over the interior particles (the
/// CPU's [`mote_cloud::exact::total`]), reduced on the device.
pub fn total<F: GpuFloat>(
    gpu: &Gpu,
    u: &DeviceArray<F>,
    var: usize,
    volumes: &DeviceArray<F>,
    tags: &DeviceArray<u32>,
) -> Result<f64, GpuError> {
    Ok(moments(gpu, u, var, volumes, tags, None)?.total)
}

/// The errors of variable `var` of the state `u` against the exact values `exact` (one per
/// particle) over the interior particles (the CPU's [`mote_cloud::exact::errors`]), reduced on
/// the device.
pub fn errors<F: GpuFloat>(
    gpu: &Gpu,
    u: &DeviceArray<F>,
    var: usize,
    volumes: &DeviceArray<F>,
    tags: &DeviceArray<u32>,
    exact: &[f64],
) -> Result<Errors, GpuError> {
    let m = moments(gpu, u, var, volumes, tags, Some(exact))?;
    Ok(Errors {
        l1: m.l1 / m.volume,
        l2: (m.squares / m.volume).sqrt(),
        relative_l2: (m.squares / m.exact_squares).sqrt(),
        max: m.max,
    })
}
