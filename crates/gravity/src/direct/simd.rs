//! The fast direct-summation kernels: explicit SIMD for AVX-512F and AVX2+FMA, and a portable
//! kernel, for `f32` and `f64`.
//!
//! Every kernel computes the accelerations of a block of targets (in direct summation, a block of
//! the sources themselves; in the tree walk, a group's particles against its interaction list).
//! For each target it sums over *all* sources `0..N` in ascending order into per-lane accumulators (one per SIMD lane, eight
//! for the portable kernel) and reduces the lanes in a fixed order at the end: a target's
//! result depends on nothing but the inputs, so it is bitwise identical at any thread count and
//! any block split. Sources are read with contiguous loads straight from the component arrays.
//!
//! The self-interaction (`j == i`) is not skipped by a branch: its separation is exactly zero,
//! so it adds `m * 0 * f^3 = 0` as long as `f` is finite. Softened runs guarantee that; unsoftened
//! runs use a tiny `eps^2` instead of 0 (1e-180 in f64, 1e-24 in f32), far below the rounding
//! of any `r^2` a simulation meets, so point-mass results are unchanged (the exact two-body
//! test checks this to the last bit).
//!
//! Each kernel handles several targets per pass over the sources (three with AVX-512, two with
//! AVX2), so each source load serves several targets and independent dependency chains keep the
//! FMA units busy; three was measured fastest on an AVX-512 Xeon (see `docs/performance.md`).
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

/// The positions of the targets a kernel computes accelerations for: the sources themselves
/// in direct summation, a tree group's particles in the tree walk.
#[derive(Clone, Copy)]
pub(crate) struct Targets<'a, R> {
    pub x: &'a [R],
    pub y: &'a [R],
    pub z: &'a [R],
}

/// A kernel: the accelerations of `targets` caused by every source, into `ax`, `ay`, `az`
/// (overwritten).
pub(crate) type BlockKernel<R> = fn(&Sources<'_, R>, Targets<'_, R>, &mut [R], &mut [R], &mut [R]);

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
fn portable<R: Real>(
    s: &Sources<'_, R>,
    t: Targets<'_, R>,
    ax: &mut [R],
    ay: &mut [R],
    az: &mut [R],
) {
    let n = s.x.len();
    for k in 0..ax.len() {
        let (xi, yi, zi) = (t.x[k], t.y[k], t.z[k]);
        let mut acc = [[R::zero(); LANES]; 3];
        for j0 in (0..n).step_by(LANES) {
            for (l, j) in (j0..n.min(j0 + LANES)).enumerate() {
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
    //! The x86-64 kernels: one generic kernel body over a small vector abstraction ([`Lanes`]),
    //! instantiated inside `#[target_feature]` functions so that every vector operation inlines
    //! to its instruction. Each safe wrapper is only handed out by `DirectKernels::kernel` after
    //! run-time detection confirmed the instruction set.

    use super::{Sources, Targets, reduce_lanes};
    use std::arch::x86_64::*;

    /// The vector operations the kernel needs. All are `unsafe` because they require the CPU
    /// feature of the implementing type; `load*` also read raw memory.
    trait Lanes: Copy {
        /// The scalar type.
        type S: Copy;
        /// Lanes per vector.
        const W: usize;
        /// Newton steps after `rsqrt`: 0 where `rsqrt` is exact (sqrt and divide).
        const NEWTON: usize;
        /// Unsoftened runs use this for `eps^2`: the self-interaction then yields a finite factor
        /// times a zero separation, i.e. exactly 0, with no mask or branch. Added to `r^2` it
        /// cannot change a rounded `r^2 + eps^2` for separations above about 1e-82 (f64) or
        /// 3e-9 (f32), and caps the force only below that.
        const TINY: Self::S;
        unsafe fn splat(x: Self::S) -> Self;
        unsafe fn zero() -> Self;
        unsafe fn load(p: *const Self::S) -> Self;
        /// The first `n < W` lanes from `p`, zeros in the others (which are not read).
        unsafe fn load_partial(p: *const Self::S, n: usize) -> Self;
        unsafe fn sub(a: Self, b: Self) -> Self;
        unsafe fn mul(a: Self, b: Self) -> Self;
        /// `a * b + c`, fused.
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
        /// `c - a * b`, fused.
        unsafe fn fnma(a: Self, b: Self, c: Self) -> Self;
        /// An estimate of `1 / sqrt(x)` (exact where `NEWTON == 0`).
        unsafe fn rsqrt(x: Self) -> Self;
        /// Sum of the lanes in a fixed order.
        unsafe fn hsum(self) -> Self::S;
        fn scalar(x: f64) -> Self::S;
    }

    /// Generates, for one set of CPU features, the kernel body as functions compiled with those
    /// features (so every [`Lanes`] operation inlines to its instruction), and the safe entry
    /// points.
    ///
    /// `block` computes the accelerations of `targets`, `T` targets at a time sharing each
    /// source load, then the remaining ones singly.
    ///
    /// The Newton steps are written as `y' <- y' (3 a^2 - s y'^2)` on a scaled estimate
    /// `y' = a y` (a = 1, 2, 16, ...), which saves the multiplications by 1/2; the cube's scale
    /// `a^3`, a power of two, is divided out once per target, exactly.
    macro_rules! kernels {
        ($features:literal, $($name:ident: $lanes:ty, $scalar:ty, $targets:literal;)+) => {
            /// Adds the interactions of `T` targets (`t`) with one vector of sources (`j`: x, y, z,
            /// m) to `sum`. Written operation by operation across the targets, which keeps `T`
            /// independent dependency chains in flight.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn interact<V: Lanes, const T: usize>(
                j: [V; 4],
                t: &[[V::S; 3]; T],
                eps2: V,
                consts: &[V; 2],
                sum: &mut [[V; 3]; T],
            ) {
                // SAFETY: this function's features are enabled; no raw memory is touched.
                unsafe {
                    let mut d = [[V::zero(); 3]; T];
                    let mut s2 = [V::zero(); T];
                    let mut y = [V::zero(); T];
                    for q in 0..T {
                        for c in 0..3 {
                            d[q][c] = V::sub(j[c], V::splat(t[q][c]));
                        }
                    }
                    for q in 0..T {
                        s2[q] = V::fma(d[q][2], d[q][2], V::fma(d[q][1], d[q][1], V::fma(d[q][0], d[q][0], eps2)));
                    }
                    for q in 0..T {
                        y[q] = V::rsqrt(s2[q]);
                    }
                    for c in consts.iter().take(V::NEWTON) {
                        for q in 0..T {
                            y[q] = V::mul(y[q], V::fnma(V::mul(s2[q], y[q]), y[q], *c));
                        }
                    }
                    for q in 0..T {
                        // (m y)(y y): two independent products, a shorter dependency chain than
                        // ((y y) y) m.
                        let f = V::mul(V::mul(j[3], y[q]), V::mul(y[q], y[q]));
                        for c in 0..3 {
                            sum[q][c] = V::fma(f, d[q][c], sum[q][c]);
                        }
                    }
                }
            }

            /// Accelerations of the `T` targets from `k`, into `out[k..k + T]`.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn targets<V: Lanes, const T: usize>(
                s: &Sources<'_, V::S>,
                tg: Targets<'_, V::S>,
                k: usize,
                out: [&mut [V::S]; 3],
            ) where
                V::S: std::ops::Mul<Output = V::S> + PartialOrd,
            {
                let n = s.x.len();
                let (px, py, pz, pm) = (s.x.as_ptr(), s.y.as_ptr(), s.z.as_ptr(), s.m.as_ptr());
                // SAFETY: the features are enabled; full loads read `j..j + W` with
                // `j + W <= n`, the partial load only lanes below `n`.
                unsafe {
                    let eps2 = V::splat(if s.eps2 > V::TINY { s.eps2 } else { V::TINY });
                    let consts = [V::splat(V::scalar(3.0)), V::splat(V::scalar(12.0))];
                    // Scale of the estimate after the Newton steps: 1, 2, 16.
                    let a = [1.0, 2.0, 16.0][V::NEWTON];
                    let unscale = V::scalar(1.0 / (a * a * a));
                    let mut t = [[tg.x[k]; 3]; T];
                    for (q, tq) in t.iter_mut().enumerate() {
                        *tq = [tg.x[k + q], tg.y[k + q], tg.z[k + q]];
                    }
                    let mut sum = [[V::zero(); 3]; T];
                    let full = n / V::W * V::W;
                    let mut j = 0;
                    while j < full {
                        let src = [V::load(px.add(j)), V::load(py.add(j)), V::load(pz.add(j)), V::load(pm.add(j))];
                        interact::<V, T>(src, &t, eps2, &consts, &mut sum);
                        j += V::W;
                    }
                    if full < n {
                        // Zero-filled lanes have zero mass and contribute exactly 0.
                        let r = n - full;
                        let src = [
                            V::load_partial(px.add(j), r),
                            V::load_partial(py.add(j), r),
                            V::load_partial(pz.add(j), r),
                            V::load_partial(pm.add(j), r),
                        ];
                        interact::<V, T>(src, &t, eps2, &consts, &mut sum);
                    }
                    let [ox, oy, oz] = out;
                    for q in 0..T {
                        ox[k + q] = sum[q][0].hsum() * unscale;
                        oy[k + q] = sum[q][1].hsum() * unscale;
                        oz[k + q] = sum[q][2].hsum() * unscale;
                    }
                }
            }

            #[target_feature(enable = $features)]
            unsafe fn block<V: Lanes, const T: usize>(
                s: &Sources<'_, V::S>,
                tg: Targets<'_, V::S>,
                ax: &mut [V::S],
                ay: &mut [V::S],
                az: &mut [V::S],
            ) where
                V::S: std::ops::Mul<Output = V::S> + PartialOrd,
            {
                let n = s.x.len();
                let m = ax.len();
                assert!(s.y.len() == n && s.z.len() == n && s.m.len() == n, "source arrays of unequal length");
                assert!(tg.x.len() == m && tg.y.len() == m && tg.z.len() == m && ay.len() == m && az.len() == m, "target and output arrays of unequal length");
                let mut k = 0;
                // SAFETY: the features are enabled; the targets are in range (asserted).
                unsafe {
                    while k + T <= m {
                        targets::<V, T>(s, tg, k, [&mut *ax, &mut *ay, &mut *az]);
                        k += T;
                    }
                    while k < m {
                        targets::<V, 1>(s, tg, k, [&mut *ax, &mut *ay, &mut *az]);
                        k += 1;
                    }
                }
            }

            $(
                pub(in super::super) fn $name(s: &Sources<'_, $scalar>, t: Targets<'_, $scalar>, ax: &mut [$scalar], ay: &mut [$scalar], az: &mut [$scalar]) {
                    // SAFETY: `DirectKernels::kernel` hands this function out only after
                    // run-time detection of the features.
                    unsafe { block::<$lanes, $targets>(s, t, ax, ay, az) }
                }
            )+
        };
    }

    mod avx512 {
        use super::*;
        kernels!("avx512f",
            avx512_f64: F64x8, f64, 3;
            avx512_f32: F32x16, f32, 3;
        );
    }

    mod avx2 {
        use super::*;
        kernels!("avx2,fma",
            avx2_f64: F64x4, f64, 2;
            avx2_f32: F32x8, f32, 2;
        );
    }

    pub(super) use avx2::{avx2_f32, avx2_f64};
    pub(super) use avx512::{avx512_f32, avx512_f64};

    #[derive(Clone, Copy)]
    struct F64x8(__m512d);
    #[derive(Clone, Copy)]
    struct F32x16(__m512);
    #[derive(Clone, Copy)]
    struct F64x4(__m256d);
    #[derive(Clone, Copy)]
    struct F32x8(__m256);

    impl Lanes for F64x8 {
        type S = f64;
        const W: usize = 8;
        // 14-bit estimate -> 28 -> 56 bits.
        const NEWTON: usize = 2;
        const TINY: f64 = 1e-180;
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn splat(x: f64) -> Self {
            Self(_mm512_set1_pd(x))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn zero() -> Self {
            Self(_mm512_setzero_pd())
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn load(p: *const f64) -> Self {
            Self(unsafe { _mm512_loadu_pd(p) })
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn load_partial(p: *const f64, n: usize) -> Self {
            Self(unsafe { _mm512_maskz_loadu_pd(((1u32 << n) - 1) as __mmask8, p) })
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn sub(a: Self, b: Self) -> Self {
            Self(_mm512_sub_pd(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn mul(a: Self, b: Self) -> Self {
            Self(_mm512_mul_pd(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm512_fmadd_pd(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn fnma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm512_fnmadd_pd(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn rsqrt(x: Self) -> Self {
            Self(_mm512_rsqrt14_pd(x.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn hsum(self) -> f64 {
            let mut a = [0.0f64; 8];
            unsafe { _mm512_storeu_pd(a.as_mut_ptr(), self.0) };
            reduce_lanes(&a)
        }
        fn scalar(x: f64) -> f64 {
            x
        }
    }

    impl Lanes for F32x16 {
        type S = f32;
        const W: usize = 16;
        // 14-bit estimate -> 28 bits, beyond f32's 24.
        const NEWTON: usize = 1;
        const TINY: f32 = 1e-24;
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn splat(x: f32) -> Self {
            Self(_mm512_set1_ps(x))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn zero() -> Self {
            Self(_mm512_setzero_ps())
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn load(p: *const f32) -> Self {
            Self(unsafe { _mm512_loadu_ps(p) })
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn load_partial(p: *const f32, n: usize) -> Self {
            Self(unsafe { _mm512_maskz_loadu_ps(((1u32 << n) - 1) as __mmask16, p) })
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn sub(a: Self, b: Self) -> Self {
            Self(_mm512_sub_ps(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn mul(a: Self, b: Self) -> Self {
            Self(_mm512_mul_ps(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm512_fmadd_ps(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn fnma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm512_fnmadd_ps(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn rsqrt(x: Self) -> Self {
            Self(_mm512_rsqrt14_ps(x.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn hsum(self) -> f32 {
            let mut a = [0.0f32; 16];
            unsafe { _mm512_storeu_ps(a.as_mut_ptr(), self.0) };
            reduce_lanes(&a)
        }
        fn scalar(x: f64) -> f32 {
            x as f32
        }
    }

    impl Lanes for F64x4 {
        type S = f64;
        const W: usize = 4;
        // No double-precision estimate on AVX2: exact square root and division.
        const NEWTON: usize = 0;
        const TINY: f64 = 1e-180;
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn splat(x: f64) -> Self {
            Self(_mm256_set1_pd(x))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn zero() -> Self {
            Self(_mm256_setzero_pd())
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn load(p: *const f64) -> Self {
            Self(unsafe { _mm256_loadu_pd(p) })
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn load_partial(p: *const f64, n: usize) -> Self {
            let lane = _mm256_set_epi64x(3, 2, 1, 0);
            let mask = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), lane);
            Self(unsafe { _mm256_maskload_pd(p, mask) })
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn sub(a: Self, b: Self) -> Self {
            Self(_mm256_sub_pd(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn mul(a: Self, b: Self) -> Self {
            Self(_mm256_mul_pd(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm256_fmadd_pd(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fnma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm256_fnmadd_pd(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn rsqrt(x: Self) -> Self {
            Self(_mm256_div_pd(_mm256_set1_pd(1.0), _mm256_sqrt_pd(x.0)))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn hsum(self) -> f64 {
            let mut a = [0.0f64; 4];
            unsafe { _mm256_storeu_pd(a.as_mut_ptr(), self.0) };
            reduce_lanes(&a)
        }
        fn scalar(x: f64) -> f64 {
            x
        }
    }

    impl Lanes for F32x8 {
        type S = f32;
        const W: usize = 8;
        // 12-bit estimate -> 24 bits.
        const NEWTON: usize = 1;
        const TINY: f32 = 1e-24;
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn splat(x: f32) -> Self {
            Self(_mm256_set1_ps(x))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn zero() -> Self {
            Self(_mm256_setzero_ps())
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn load(p: *const f32) -> Self {
            Self(unsafe { _mm256_loadu_ps(p) })
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn load_partial(p: *const f32, n: usize) -> Self {
            let lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
            let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), lane);
            Self(unsafe { _mm256_maskload_ps(p, mask) })
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn sub(a: Self, b: Self) -> Self {
            Self(_mm256_sub_ps(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn mul(a: Self, b: Self) -> Self {
            Self(_mm256_mul_ps(a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm256_fmadd_ps(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fnma(a: Self, b: Self, c: Self) -> Self {
            Self(_mm256_fnmadd_ps(a.0, b.0, c.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn rsqrt(x: Self) -> Self {
            Self(_mm256_rsqrt_ps(x.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn hsum(self) -> f32 {
            let mut a = [0.0f32; 8];
            unsafe { _mm256_storeu_ps(a.as_mut_ptr(), self.0) };
            reduce_lanes(&a)
        }
        fn scalar(x: f64) -> f32 {
            x as f32
        }
    }
}
