//! The fast direct-summation kernels: explicit SIMD for AVX-512F and AVX2+FMA, and a portable
//! kernel, for `f32` and `f64`.
//!
//! Every kernel computes the accelerations of a block of targets. For each target it sums over
//! *all* sources `0..N` in ascending order into per-lane accumulators (one per SIMD lane, eight
//! for the portable kernel) and reduces the lanes in a fixed order at the end: a target's
//! result depends on nothing but the inputs, so it is bitwise identical at any thread count and
//! any block split. Sources are read with contiguous loads straight from the component arrays.
//!
//! The self-interaction (`j == i`) is not skipped by a branch: its separation is exactly zero,
//! so it adds `m * 0 * f^3 = 0`; where `r^2 + eps^2 == 0` the factor is forced to 0 (point masses).
//!
//! `1/sqrt(s)` is the hardware reciprocal square-root estimate refined by Newton steps
//! `y <- y (3/2 - s/2 y^2)` where that is accurate enough (AVX-512: 14-bit estimate, two steps in
//! f64, one in f32; AVX2 f32: 12-bit estimate, one step), and `1 / sqrt(s)` with IEEE square root
//! and division otherwise (AVX2 f64, which has no double-precision estimate; the portable kernel).

use mote_core::{Real, SimdLevel};

/// The inputs every kernel reads: position and mass arrays of all sources, and `eps^2`.
pub(crate) struct Sources<'a, R> {
    pub x: &'a [R],
    pub y: &'a [R],
    pub z: &'a [R],
    pub m: &'a [R],
    pub eps2: R,
}

/// A kernel: accelerations of targets `start..start + ax.len()` into `ax`, `ay`, `az`.
pub(crate) type BlockKernel<R> = fn(&Sources<'_, R>, usize, &mut [R], &mut [R], &mut [R]);

/// The kernels of one scalar type.
pub(crate) trait DirectKernels: Real {
    /// The kernel for `level`, which the caller has checked this CPU supports.
    fn kernel(level: SimdLevel) -> BlockKernel<Self>;
}

impl DirectKernels for f32 {
    fn kernel(level: SimdLevel) -> BlockKernel<f32> {
        assert!(
            level.is_available(),
            "{level} kernel on a CPU without {level}"
        );
        match level {
            SimdLevel::Scalar => portable::<f32>,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => x86::avx2_f32,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => x86::avx512_f32,
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!("only the portable kernel exists off x86-64"),
        }
    }
}

impl DirectKernels for f64 {
    fn kernel(level: SimdLevel) -> BlockKernel<f64> {
        assert!(
            level.is_available(),
            "{level} kernel on a CPU without {level}"
        );
        match level {
            SimdLevel::Scalar => portable::<f64>,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => x86::avx2_f64,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => x86::avx512_f64,
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!("only the portable kernel exists off x86-64"),
        }
    }
}

/// Lanes of the portable kernel's accumulators: independent chains the compiler can vectorise.
const LANES: usize = 8;

/// The portable kernel: plain Rust over `LANES` independent accumulators.
fn portable<R: Real>(s: &Sources<'_, R>, start: usize, ax: &mut [R], ay: &mut [R], az: &mut [R]) {
    let n = s.x.len();
    for k in 0..ax.len() {
        let i = start + k;
        let (xi, yi, zi) = (s.x[i], s.y[i], s.z[i]);
        let mut acc = [[R::zero(); LANES]; 3];
        for j0 in (0..n).step_by(LANES) {
            let lanes = LANES.min(n - j0);
            for l in 0..lanes {
                let j = j0 + l;
                let dx = s.x[j] - xi;
                let dy = s.y[j] - yi;
                let dz = s.z[j] - zi;
                let r2 = dx * dx + dy * dy + dz * dz;
                let f = s.m[j]
                    * crate::softening::force_factor(crate::softening::inverse_distance(
                        r2, s.eps2,
                    ));
                acc[0][l] += f * dx;
                acc[1][l] += f * dy;
                acc[2][l] += f * dz;
            }
        }
        ax[k] = reduce_lanes(&acc[0]);
        ay[k] = reduce_lanes(&acc[1]);
        az[k] = reduce_lanes(&acc[2]);
    }
}

/// Pairwise sum of the lanes in a fixed tree order.
#[inline]
fn reduce_lanes<R: Real>(v: &[R]) -> R {
    if v.len() == 1 {
        v[0]
    } else {
        let h = v.len() / 2;
        reduce_lanes(&v[..h]) + reduce_lanes(&v[h..])
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The x86-64 kernels. Each safe wrapper is only handed out by `DirectKernels::kernel`
    //! after run-time detection confirmed the instruction set.

    use super::{Sources, reduce_lanes};
    use std::arch::x86_64::*;

    pub(super) fn avx512_f64(
        s: &Sources<'_, f64>,
        start: usize,
        ax: &mut [f64],
        ay: &mut [f64],
        az: &mut [f64],
    ) {
        // SAFETY: selected only where AVX-512F was detected; slice bounds are checked inside.
        unsafe { avx512_f64_impl(s, start, ax, ay, az) }
    }

    pub(super) fn avx512_f32(
        s: &Sources<'_, f32>,
        start: usize,
        ax: &mut [f32],
        ay: &mut [f32],
        az: &mut [f32],
    ) {
        // SAFETY: as above.
        unsafe { avx512_f32_impl(s, start, ax, ay, az) }
    }

    pub(super) fn avx2_f64(
        s: &Sources<'_, f64>,
        start: usize,
        ax: &mut [f64],
        ay: &mut [f64],
        az: &mut [f64],
    ) {
        // SAFETY: selected only where AVX2 and FMA were detected.
        unsafe { avx2_f64_impl(s, start, ax, ay, az) }
    }

    pub(super) fn avx2_f32(
        s: &Sources<'_, f32>,
        start: usize,
        ax: &mut [f32],
        ay: &mut [f32],
        az: &mut [f32],
    ) {
        // SAFETY: as above.
        unsafe { avx2_f32_impl(s, start, ax, ay, az) }
    }

    fn check(s: &Sources<'_, impl Copy>, start: usize, len: usize) -> usize {
        let n = s.x.len();
        assert!(
            s.y.len() == n && s.z.len() == n && s.m.len() == n,
            "source arrays of unequal length"
        );
        assert!(
            start + len <= n,
            "targets {start}..{} beyond {n} sources",
            start + len
        );
        n
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn avx512_f64_impl(
        s: &Sources<'_, f64>,
        start: usize,
        ax: &mut [f64],
        ay: &mut [f64],
        az: &mut [f64],
    ) {
        const W: usize = 8;
        let n = check(s, start, ax.len());
        let (px, py, pz, pm) = (s.x.as_ptr(), s.y.as_ptr(), s.z.as_ptr(), s.m.as_ptr());
        let eps2 = _mm512_set1_pd(s.eps2);
        let three_halves = _mm512_set1_pd(1.5);
        let half = _mm512_set1_pd(0.5);
        let zero = _mm512_setzero_pd();
        let full = n / W * W;
        let tail: __mmask8 = ((1u32 << (n - full)) - 1) as __mmask8;
        for k in 0..ax.len() {
            let i = start + k;
            let xi = _mm512_set1_pd(s.x[i]);
            let yi = _mm512_set1_pd(s.y[i]);
            let zi = _mm512_set1_pd(s.z[i]);
            let (mut sx, mut sy, mut sz) = (zero, zero, zero);
            let mut j = 0;
            while j <= full {
                // Full vectors, then one masked vector for the remainder (masked lanes load
                // zero mass and contribute exactly 0).
                let mask: __mmask8 = if j < full { 0xff } else { tail };
                if mask == 0 {
                    break;
                }
                // SAFETY: lanes past `n` are masked off and not read.
                let (xj, yj, zj, mj) = unsafe {
                    (
                        _mm512_maskz_loadu_pd(mask, px.add(j)),
                        _mm512_maskz_loadu_pd(mask, py.add(j)),
                        _mm512_maskz_loadu_pd(mask, pz.add(j)),
                        _mm512_maskz_loadu_pd(mask, pm.add(j)),
                    )
                };
                let dx = _mm512_sub_pd(xj, xi);
                let dy = _mm512_sub_pd(yj, yi);
                let dz = _mm512_sub_pd(zj, zi);
                let r2 = _mm512_fmadd_pd(dz, dz, _mm512_fmadd_pd(dy, dy, _mm512_mul_pd(dx, dx)));
                let s2 = _mm512_add_pd(r2, eps2);
                let hs = _mm512_mul_pd(half, s2);
                let mut y = _mm512_rsqrt14_pd(s2);
                y = _mm512_mul_pd(y, _mm512_fnmadd_pd(hs, _mm512_mul_pd(y, y), three_halves));
                y = _mm512_mul_pd(y, _mm512_fnmadd_pd(hs, _mm512_mul_pd(y, y), three_halves));
                // s2 == 0: a point mass and itself; the estimate is inf and must not be used.
                y = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask::<_CMP_GT_OQ>(s2, zero), y);
                let f = _mm512_mul_pd(mj, _mm512_mul_pd(y, _mm512_mul_pd(y, y)));
                sx = _mm512_fmadd_pd(f, dx, sx);
                sy = _mm512_fmadd_pd(f, dy, sy);
                sz = _mm512_fmadd_pd(f, dz, sz);
                j += W;
            }
            ax[k] = hsum_pd512(sx);
            ay[k] = hsum_pd512(sy);
            az[k] = hsum_pd512(sz);
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn avx512_f32_impl(
        s: &Sources<'_, f32>,
        start: usize,
        ax: &mut [f32],
        ay: &mut [f32],
        az: &mut [f32],
    ) {
        const W: usize = 16;
        let n = check(s, start, ax.len());
        let (px, py, pz, pm) = (s.x.as_ptr(), s.y.as_ptr(), s.z.as_ptr(), s.m.as_ptr());
        let eps2 = _mm512_set1_ps(s.eps2);
        let three_halves = _mm512_set1_ps(1.5);
        let half = _mm512_set1_ps(0.5);
        let zero = _mm512_setzero_ps();
        let full = n / W * W;
        let tail: __mmask16 = ((1u32 << (n - full)) - 1) as __mmask16;
        for k in 0..ax.len() {
            let i = start + k;
            let xi = _mm512_set1_ps(s.x[i]);
            let yi = _mm512_set1_ps(s.y[i]);
            let zi = _mm512_set1_ps(s.z[i]);
            let (mut sx, mut sy, mut sz) = (zero, zero, zero);
            let mut j = 0;
            while j <= full {
                let mask: __mmask16 = if j < full { 0xffff } else { tail };
                if mask == 0 {
                    break;
                }
                // SAFETY: lanes past `n` are masked off and not read.
                let (xj, yj, zj, mj) = unsafe {
                    (
                        _mm512_maskz_loadu_ps(mask, px.add(j)),
                        _mm512_maskz_loadu_ps(mask, py.add(j)),
                        _mm512_maskz_loadu_ps(mask, pz.add(j)),
                        _mm512_maskz_loadu_ps(mask, pm.add(j)),
                    )
                };
                let dx = _mm512_sub_ps(xj, xi);
                let dy = _mm512_sub_ps(yj, yi);
                let dz = _mm512_sub_ps(zj, zi);
                let r2 = _mm512_fmadd_ps(dz, dz, _mm512_fmadd_ps(dy, dy, _mm512_mul_ps(dx, dx)));
                let s2 = _mm512_add_ps(r2, eps2);
                let hs = _mm512_mul_ps(half, s2);
                let mut y = _mm512_rsqrt14_ps(s2);
                y = _mm512_mul_ps(y, _mm512_fnmadd_ps(hs, _mm512_mul_ps(y, y), three_halves));
                y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(s2, zero), y);
                let f = _mm512_mul_ps(mj, _mm512_mul_ps(y, _mm512_mul_ps(y, y)));
                sx = _mm512_fmadd_ps(f, dx, sx);
                sy = _mm512_fmadd_ps(f, dy, sy);
                sz = _mm512_fmadd_ps(f, dz, sz);
                j += W;
            }
            ax[k] = hsum_ps512(sx);
            ay[k] = hsum_ps512(sy);
            az[k] = hsum_ps512(sz);
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_f64_impl(
        s: &Sources<'_, f64>,
        start: usize,
        ax: &mut [f64],
        ay: &mut [f64],
        az: &mut [f64],
    ) {
        const W: usize = 4;
        let n = check(s, start, ax.len());
        let (px, py, pz, pm) = (s.x.as_ptr(), s.y.as_ptr(), s.z.as_ptr(), s.m.as_ptr());
        let eps2 = _mm256_set1_pd(s.eps2);
        let one = _mm256_set1_pd(1.0);
        let zero = _mm256_setzero_pd();
        let full = n / W * W;
        let rem = (n - full) as i64;
        let tail = _mm256_set_epi64x(
            -((rem > 3) as i64),
            -((rem > 2) as i64),
            -((rem > 1) as i64),
            -((rem > 0) as i64),
        );
        for k in 0..ax.len() {
            let i = start + k;
            let xi = _mm256_set1_pd(s.x[i]);
            let yi = _mm256_set1_pd(s.y[i]);
            let zi = _mm256_set1_pd(s.z[i]);
            let (mut sx, mut sy, mut sz) = (zero, zero, zero);
            let mut j = 0;
            while j < full {
                // SAFETY: j + W <= full <= n.
                let (xj, yj, zj, mj) = unsafe {
                    (
                        _mm256_loadu_pd(px.add(j)),
                        _mm256_loadu_pd(py.add(j)),
                        _mm256_loadu_pd(pz.add(j)),
                        _mm256_loadu_pd(pm.add(j)),
                    )
                };
                (sx, sy, sz) =
                    avx2_f64_body(xi, yi, zi, xj, yj, zj, mj, eps2, one, zero, sx, sy, sz);
                j += W;
            }
            if rem > 0 {
                // SAFETY: lanes past `n` are masked off and not read.
                let (xj, yj, zj, mj) = unsafe {
                    (
                        _mm256_maskload_pd(px.add(j), tail),
                        _mm256_maskload_pd(py.add(j), tail),
                        _mm256_maskload_pd(pz.add(j), tail),
                        _mm256_maskload_pd(pm.add(j), tail),
                    )
                };
                (sx, sy, sz) =
                    avx2_f64_body(xi, yi, zi, xj, yj, zj, mj, eps2, one, zero, sx, sy, sz);
            }
            ax[k] = hsum_pd256(sx);
            ay[k] = hsum_pd256(sy);
            az[k] = hsum_pd256(sz);
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn avx2_f64_body(
        xi: __m256d,
        yi: __m256d,
        zi: __m256d,
        xj: __m256d,
        yj: __m256d,
        zj: __m256d,
        mj: __m256d,
        eps2: __m256d,
        one: __m256d,
        zero: __m256d,
        sx: __m256d,
        sy: __m256d,
        sz: __m256d,
    ) -> (__m256d, __m256d, __m256d) {
        let dx = _mm256_sub_pd(xj, xi);
        let dy = _mm256_sub_pd(yj, yi);
        let dz = _mm256_sub_pd(zj, zi);
        let r2 = _mm256_fmadd_pd(dz, dz, _mm256_fmadd_pd(dy, dy, _mm256_mul_pd(dx, dx)));
        let s2 = _mm256_add_pd(r2, eps2);
        let y = _mm256_div_pd(one, _mm256_sqrt_pd(s2));
        let y = _mm256_and_pd(y, _mm256_cmp_pd::<_CMP_GT_OQ>(s2, zero));
        let f = _mm256_mul_pd(mj, _mm256_mul_pd(y, _mm256_mul_pd(y, y)));
        (
            _mm256_fmadd_pd(f, dx, sx),
            _mm256_fmadd_pd(f, dy, sy),
            _mm256_fmadd_pd(f, dz, sz),
        )
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_f32_impl(
        s: &Sources<'_, f32>,
        start: usize,
        ax: &mut [f32],
        ay: &mut [f32],
        az: &mut [f32],
    ) {
        const W: usize = 8;
        let n = check(s, start, ax.len());
        let (px, py, pz, pm) = (s.x.as_ptr(), s.y.as_ptr(), s.z.as_ptr(), s.m.as_ptr());
        let eps2 = _mm256_set1_ps(s.eps2);
        let three_halves = _mm256_set1_ps(1.5);
        let half = _mm256_set1_ps(0.5);
        let zero = _mm256_setzero_ps();
        let full = n / W * W;
        let rem = (n - full) as i32;
        let lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
        let tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), lane);
        for k in 0..ax.len() {
            let i = start + k;
            let xi = _mm256_set1_ps(s.x[i]);
            let yi = _mm256_set1_ps(s.y[i]);
            let zi = _mm256_set1_ps(s.z[i]);
            let (mut sx, mut sy, mut sz) = (zero, zero, zero);
            let mut j = 0;
            while j < full || (j == full && rem > 0) {
                let mask = if j < full {
                    _mm256_set1_epi32(-1)
                } else {
                    tail
                };
                // SAFETY: lanes past `n` are masked off and not read.
                let (xj, yj, zj, mj) = unsafe {
                    (
                        _mm256_maskload_ps(px.add(j), mask),
                        _mm256_maskload_ps(py.add(j), mask),
                        _mm256_maskload_ps(pz.add(j), mask),
                        _mm256_maskload_ps(pm.add(j), mask),
                    )
                };
                let dx = _mm256_sub_ps(xj, xi);
                let dy = _mm256_sub_ps(yj, yi);
                let dz = _mm256_sub_ps(zj, zi);
                let r2 = _mm256_fmadd_ps(dz, dz, _mm256_fmadd_ps(dy, dy, _mm256_mul_ps(dx, dx)));
                let s2 = _mm256_add_ps(r2, eps2);
                let hs = _mm256_mul_ps(half, s2);
                let mut y = _mm256_rsqrt_ps(s2);
                y = _mm256_mul_ps(y, _mm256_fnmadd_ps(hs, _mm256_mul_ps(y, y), three_halves));
                y = _mm256_and_ps(y, _mm256_cmp_ps::<_CMP_GT_OQ>(s2, zero));
                let f = _mm256_mul_ps(mj, _mm256_mul_ps(y, _mm256_mul_ps(y, y)));
                sx = _mm256_fmadd_ps(f, dx, sx);
                sy = _mm256_fmadd_ps(f, dy, sy);
                sz = _mm256_fmadd_ps(f, dz, sz);
                j += W;
            }
            ax[k] = hsum_ps256(sx);
            ay[k] = hsum_ps256(sy);
            az[k] = hsum_ps256(sz);
        }
    }

    // Horizontal sums through memory, reduced in one fixed tree order.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn hsum_pd512(v: __m512d) -> f64 {
        let mut a = [0.0f64; 8];
        // SAFETY: `a` holds 8 f64.
        unsafe { _mm512_storeu_pd(a.as_mut_ptr(), v) };
        reduce_lanes(&a)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn hsum_ps512(v: __m512) -> f32 {
        let mut a = [0.0f32; 16];
        // SAFETY: `a` holds 16 f32.
        unsafe { _mm512_storeu_ps(a.as_mut_ptr(), v) };
        reduce_lanes(&a)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_pd256(v: __m256d) -> f64 {
        let mut a = [0.0f64; 4];
        // SAFETY: `a` holds 4 f64.
        unsafe { _mm256_storeu_pd(a.as_mut_ptr(), v) };
        reduce_lanes(&a)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_ps256(v: __m256) -> f32 {
        let mut a = [0.0f32; 8];
        // SAFETY: `a` holds 8 f32.
        unsafe { _mm256_storeu_ps(a.as_mut_ptr(), v) };
        reduce_lanes(&a)
    }
}
