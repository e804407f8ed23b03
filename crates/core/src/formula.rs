//! The formula dialect's names on the CPU (`mote-formula`, decision 0019): a formula file is
//! compiled once as plain Rust against these names and once as CubeCL `#[cube]` functions
//! against the GPU crate's, so a flux, a wave speed, an opening test or a force term exists
//! once for every backend. The meshless formulas live in `crates/cloud/formulas/`, the gravity
//! tree's in `crates/gravity/formulas/`.
//!
//! A formula is generic over [`Float`], which the working precision (`f32`, `f64`: one value,
//! the scalar paths) and [`Lanes`] (`W` values at once, the batched passes) implement. Every
//! operation on lanes is a loop over the lanes, so a formula instantiated with lanes is the
//! lane-wise code the passes vectorise; choices are `select`s of masks, never branches.

use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Not, Sub, SubAssign};

use crate::Real;

/// What a formula computes with: one value of the working precision, or [`Lanes`] of them.
/// The associated functions carry CubeCL's names, so that `F::new(0.5)`, `F::sqrt(x)`,
/// `F::min(a, b)` read the same on both sides.
pub trait Float:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
{
    /// A comparison's result: `bool`, or one per lane.
    type Mask: MaskOps + Not<Output = Self::Mask>;
    /// The constant `x` (an `f32` literal, as CubeCL takes it).
    fn new(x: f32) -> Self;
    /// The square root.
    fn sqrt(x: Self) -> Self;
    /// The smaller (IEEE `minNum`: a NaN loses).
    fn min(a: Self, b: Self) -> Self;
    /// The larger (IEEE `maxNum`: a NaN loses).
    fn max(a: Self, b: Self) -> Self;
    /// The magnitude.
    fn abs(x: Self) -> Self;
    /// `a` where `m`, else `b`.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
    /// `a < b`.
    fn lt(a: Self, b: Self) -> Self::Mask;
    /// `a <= b`.
    fn le(a: Self, b: Self) -> Self::Mask;
    /// `a != b`.
    fn ne(a: Self, b: Self) -> Self::Mask;
    /// Whether NaN.
    fn is_nan(x: Self) -> Self::Mask;
    /// Whether finite.
    fn finite(x: Self) -> Self::Mask;
    /// The sum over the lanes (the value itself for one), as `f64`: how the CPU totals a
    /// formula's counts (floor events).
    fn total(x: Self) -> f64;
}

/// The mask type of `F`.
pub type Mask<F> = <F as Float>::Mask;

/// An array of states or scratch space: a slice on the CPU, a CubeCL `Array` on the device.
pub type Array<F> = [F];

impl<R: Real> Float for R {
    type Mask = bool;
    #[inline(always)]
    fn new(x: f32) -> Self {
        R::cast(f64::from(x))
    }
    #[inline(always)]
    fn sqrt(x: Self) -> Self {
        x.sqrt()
    }
    #[inline(always)]
    fn min(a: Self, b: Self) -> Self {
        a.min(b)
    }
    #[inline(always)]
    fn max(a: Self, b: Self) -> Self {
        a.max(b)
    }
    #[inline(always)]
    fn abs(x: Self) -> Self {
        x.abs()
    }
    #[inline(always)]
    fn select(m: bool, a: Self, b: Self) -> Self {
        if m { a } else { b }
    }
    #[inline(always)]
    fn lt(a: Self, b: Self) -> bool {
        a < b
    }
    #[inline(always)]
    fn le(a: Self, b: Self) -> bool {
        a <= b
    }
    #[inline(always)]
    fn ne(a: Self, b: Self) -> bool {
        a != b
    }
    #[inline(always)]
    fn is_nan(x: Self) -> bool {
        x.is_nan()
    }
    #[inline(always)]
    fn finite(x: Self) -> bool {
        x.is_finite()
    }
    #[inline(always)]
    fn total(x: Self) -> f64 {
        x.as_f64()
    }
}

/// `W` values of precision `R`, one per lane: every operation is a loop over the lanes.
///
/// The operations are `#[inline]`, not `#[inline(always)]`: LLVM then simplifies each
/// operation on its own first (its eight-lane loop unrolled while the function is small)
/// and inlines the result. Always-inlined, the hundreds of lane loops of an Euler flux were
/// inlined as loops into the flux pass and rotated and unrolled there one by one, in a
/// function of tens of thousands of instructions: 180 of the 190 CPU seconds an Euler
/// solver type took to compile (decision 0014). The generated code is the same operations
/// per lane (the same bits); every operation is still inlined (no calls in the passes).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct Lanes<R, const W: usize>(pub [R; W]);

/// `W` comparison results, each all ones (true) or all zeros (false) in an integer of the
/// float's width: what a vector compare yields, so that masks, their combinations and
/// `select` (bit operations) stay in vector registers. (Masks of `bool` went through byte
/// lanes and measured slower in the Euler Rusanov flux, decision 0019.)
#[derive(Debug, PartialEq)]
#[repr(transparent)]
pub struct LaneMask<R: Real, const W: usize>(pub [R::Bits; W]);

impl<R: Real, const W: usize> Clone for LaneMask<R, W> {
    #[inline]
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: Real, const W: usize> Copy for LaneMask<R, W> {}

impl<R: Real, const W: usize> LaneMask<R, W> {
    /// Each lane's truth.
    #[inline]
    pub fn lanes(self) -> [bool; W] {
        each(|l| self.0[l] != R::Bits::default())
    }
}

/// The mask lane of `b`.
#[inline]
fn mask_of<R: Real>(b: bool) -> R::Bits {
    if b { R::ONES } else { R::Bits::default() }
}

impl<R: Real, const W: usize> Not for LaneMask<R, W> {
    type Output = Self;
    #[inline]
    fn not(self) -> Self {
        Self(each(|l| !self.0[l]))
    }
}

/// `f` of each lane (a plain loop over the lanes: what LLVM vectorises most reliably,
/// more so than `std::array::from_fn`).
#[inline]
fn each<T: Copy + Default, const W: usize>(f: impl Fn(usize) -> T) -> [T; W] {
    let mut out = [T::default(); W];
    for (l, o) in out.iter_mut().enumerate() {
        *o = f(l);
    }
    out
}

impl<R: Real, const W: usize> Lanes<R, W> {
    /// `x` in every lane.
    #[inline]
    pub fn splat(x: R) -> Self {
        Self([x; W])
    }

    /// Rows of lanes (`u[v][lane]`, the passes' layout) as lanes values.
    #[inline]
    pub fn wrap(rows: &[[R; W]]) -> &[Self] {
        // SAFETY: `Lanes<R, W>` is `repr(transparent)` over `[R; W]`: same size, alignment
        // and validity, so a slice of one is a slice of the other.
        unsafe { &*(rows as *const [[R; W]] as *const [Self]) }
    }

    /// [`Lanes::wrap`] for writing.
    #[inline]
    pub fn wrap_mut(rows: &mut [[R; W]]) -> &mut [Self] {
        // SAFETY: as in `wrap`; the borrow is carried over.
        unsafe { &mut *(rows as *mut [[R; W]] as *mut [Self]) }
    }
}

macro_rules! lane_ops {
    ($($trait:ident $method:ident $assign:ident $assign_method:ident $op:tt),*) => {$(
        impl<R: Real, const W: usize> $trait for Lanes<R, W> {
            type Output = Self;
            #[inline]
            fn $method(self, b: Self) -> Self {
                Self(each(|l| self.0[l] $op b.0[l]))
            }
        }
        impl<R: Real, const W: usize> $assign for Lanes<R, W> {
            #[inline]
            fn $assign_method(&mut self, b: Self) {
                for l in 0..W {
                    self.0[l] = self.0[l] $op b.0[l];
                }
            }
        }
    )*};
}
lane_ops!(
    Add add AddAssign add_assign +,
    Sub sub SubAssign sub_assign -,
    Mul mul MulAssign mul_assign *,
    Div div DivAssign div_assign /
);

impl<R: Real, const W: usize> Neg for Lanes<R, W> {
    type Output = Self;
    #[inline]
    fn neg(self) -> Self {
        Self(each(|l| -self.0[l]))
    }
}

impl<R: Real, const W: usize> Float for Lanes<R, W> {
    type Mask = LaneMask<R, W>;
    #[inline]
    fn new(x: f32) -> Self {
        Self::splat(R::cast(f64::from(x)))
    }
    #[inline]
    fn sqrt(x: Self) -> Self {
        Self(each(|l| x.0[l].sqrt()))
    }
    #[inline]
    fn min(a: Self, b: Self) -> Self {
        Self(each(|l| a.0[l].min(b.0[l])))
    }
    #[inline]
    fn max(a: Self, b: Self) -> Self {
        Self(each(|l| a.0[l].max(b.0[l])))
    }
    #[inline]
    fn abs(x: Self) -> Self {
        Self(each(|l| x.0[l].abs()))
    }
    #[inline]
    fn select(m: LaneMask<R, W>, a: Self, b: Self) -> Self {
        Self(each(|l| {
            R::of_bits((a.0[l].bits() & m.0[l]) | (b.0[l].bits() & !m.0[l]))
        }))
    }
    #[inline]
    fn lt(a: Self, b: Self) -> LaneMask<R, W> {
        LaneMask(each(|l| mask_of::<R>(a.0[l] < b.0[l])))
    }
    #[inline]
    fn le(a: Self, b: Self) -> LaneMask<R, W> {
        LaneMask(each(|l| mask_of::<R>(a.0[l] <= b.0[l])))
    }
    #[inline]
    fn ne(a: Self, b: Self) -> LaneMask<R, W> {
        LaneMask(each(|l| mask_of::<R>(a.0[l] != b.0[l])))
    }
    #[inline]
    fn is_nan(x: Self) -> LaneMask<R, W> {
        LaneMask(each(|l| mask_of::<R>(x.0[l].is_nan())))
    }
    #[inline]
    fn finite(x: Self) -> LaneMask<R, W> {
        LaneMask(each(|l| mask_of::<R>(x.0[l].is_finite())))
    }
    #[inline]
    fn total(x: Self) -> f64 {
        // Counts are rare (floor events): the test for any is one vector compare and
        // reduction, the sum only runs when there is something to add.
        let any = x.0.iter().fold(false, |a, &x| a | (x != R::zero()));
        if any {
            x.0.iter().fold(R::zero(), |s, &x| s + x).as_f64()
        } else {
            0.0
        }
    }
}

/// `a` where `m`, else `b` (both evaluated, as on the device).
#[inline(always)]
pub fn select<F: Float>(m: Mask<F>, a: F, b: F) -> F {
    F::select(m, a, b)
}

/// `a < b`.
#[inline(always)]
pub fn lt<F: Float>(a: F, b: F) -> Mask<F> {
    F::lt(a, b)
}

/// `a <= b`.
#[inline(always)]
pub fn le<F: Float>(a: F, b: F) -> Mask<F> {
    F::le(a, b)
}

/// `a > b`.
#[inline(always)]
pub fn gt<F: Float>(a: F, b: F) -> Mask<F> {
    F::lt(b, a)
}

/// `a >= b`.
#[inline(always)]
pub fn ge<F: Float>(a: F, b: F) -> Mask<F> {
    F::le(b, a)
}

/// `a != b`.
#[inline(always)]
pub fn ne<F: Float>(a: F, b: F) -> Mask<F> {
    F::ne(a, b)
}

/// Comparison results: `bool` or [`LaneMask`].
pub trait MaskOps: Copy {
    /// Both.
    fn and(a: Self, b: Self) -> Self;
    /// Either.
    fn or(a: Self, b: Self) -> Self;
}

// `&` and `|`, not `&&` and `||`: no branch.
impl MaskOps for bool {
    #[inline(always)]
    fn and(a: bool, b: bool) -> bool {
        a & b
    }
    #[inline(always)]
    fn or(a: bool, b: bool) -> bool {
        a | b
    }
}

impl<R: Real, const W: usize> MaskOps for LaneMask<R, W> {
    #[inline(always)]
    fn and(a: Self, b: Self) -> Self {
        Self(each(|l| a.0[l] & b.0[l]))
    }
    #[inline(always)]
    fn or(a: Self, b: Self) -> Self {
        Self(each(|l| a.0[l] | b.0[l]))
    }
}

/// Both (no branch: both evaluated, as on the device).
#[inline(always)]
pub fn and<M: MaskOps>(a: M, b: M) -> M {
    M::and(a, b)
}

/// Either (no branch: both evaluated, as on the device).
#[inline(always)]
pub fn or<M: MaskOps>(a: M, b: M) -> M {
    M::or(a, b)
}

/// Whether `x` is NaN.
#[inline(always)]
pub fn is_nan<F: Float>(x: F) -> Mask<F> {
    F::is_nan(x)
}

/// Whether `x` is finite (neither NaN nor infinite).
#[inline(always)]
pub fn finite<F: Float>(x: F) -> Mask<F> {
    F::finite(x)
}
