//! Scalar precision: the [`Real`] trait and the run-time [`Precision`] choice.
//!
//! All numerical code in mote is generic over `R: Real`. A run picks its precision once, at
//! start-up, with [`Precision::dispatch`]: that selects one monomorphised code path for the whole
//! run, so no per-particle or per-pair branch on the precision ever exists.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A floating-point scalar that mote's kernels can run in: implemented for `f32` and `f64`.
///
/// The bounds are what kernels, reductions and device transfers need: IEEE arithmetic and the
/// usual functions (`num_traits::Float`), plain-old-data for byte-exact uploads to a device
/// (`bytemuck::Pod`), and thread safety for the CPU backends.
pub trait Real:
    num_traits::Float
    + num_traits::FloatConst
    + bytemuck::Pod
    + Default
    + Debug
    + Display
    + Send
    + Sync
    + Sum
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + 'static
{
    /// The run-time tag of this type.
    const PRECISION: Precision;

    /// Converts from `f64`, rounding to nearest when `Self` is narrower. Use it for constants
    /// and set-up values; kernels keep their arithmetic in `Self`.
    fn cast(x: f64) -> Self;

    /// Converts to `f64` exactly (every `f32` is an `f64`).
    fn as_f64(self) -> f64;

    /// Converts a count or index to `Self` (rounded to nearest for counts beyond 2^24 in `f32`).
    fn from_usize(n: usize) -> Self;

    /// An unsigned integer of the float's width: per-lane masks of all ones or all zeros, which
    /// select by bit operations as vector code does (`mote_cloud::formula::Lanes`).
    type Bits: Copy
        + Default
        + PartialEq
        + Debug
        + Send
        + Sync
        + 'static
        + std::ops::BitAnd<Output = Self::Bits>
        + std::ops::BitOr<Output = Self::Bits>
        + std::ops::Not<Output = Self::Bits>;

    /// Every bit set.
    const ONES: Self::Bits;

    /// The float's bits.
    fn bits(self) -> Self::Bits;

    /// The float with these bits.
    fn of_bits(bits: Self::Bits) -> Self;
}

impl Real for f32 {
    const PRECISION: Precision = Precision::F32;

    type Bits = u32;

    const ONES: u32 = u32::MAX;

    #[inline(always)]
    fn bits(self) -> u32 {
        self.to_bits()
    }

    #[inline(always)]
    fn of_bits(bits: u32) -> Self {
        f32::from_bits(bits)
    }

    #[inline(always)]
    fn cast(x: f64) -> Self {
        x as f32
    }

    #[inline(always)]
    fn as_f64(self) -> f64 {
        f64::from(self)
    }

    #[inline(always)]
    fn from_usize(n: usize) -> Self {
        n as f32
    }
}

impl Real for f64 {
    const PRECISION: Precision = Precision::F64;

    type Bits = u64;

    const ONES: u64 = u64::MAX;

    #[inline(always)]
    fn bits(self) -> u64 {
        self.to_bits()
    }

    #[inline(always)]
    fn of_bits(bits: u64) -> Self {
        f64::from_bits(bits)
    }

    #[inline(always)]
    fn cast(x: f64) -> Self {
        x
    }

    #[inline(always)]
    fn as_f64(self) -> f64 {
        self
    }

    #[inline(always)]
    fn from_usize(n: usize) -> Self {
        n as f64
    }
}

/// The floating-point precision of a run, chosen at run time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// IEEE single precision (`f32`).
    F32,
    /// IEEE double precision (`f64`), the default: correctness first.
    #[default]
    F64,
}

impl Precision {
    /// Both precisions, narrowest first.
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::F64];

    /// The lower-case name used on the command line and in config files (`"f32"`, `"f64"`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// Size of one scalar in bytes.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }

    /// Runs `job` monomorphised for the scalar type this precision names.
    ///
    /// This is the single place where a run-time precision becomes a compile-time type: call it
    /// once per run (or per benchmark), never inside a loop over particles.
    ///
    /// ```
    /// use mote_core::{Precision, Real, PrecisionJob};
    ///
    /// struct Epsilon;
    /// impl PrecisionJob for Epsilon {
    ///     type Output = f64;
    ///     fn run<R: Real>(self) -> f64 {
    ///         R::epsilon().as_f64()
    ///     }
    /// }
    /// assert_eq!(Precision::F32.dispatch(Epsilon), f32::EPSILON as f64);
    /// assert_eq!(Precision::F64.dispatch(Epsilon), f64::EPSILON);
    /// ```
    pub fn dispatch<J: PrecisionJob>(self, job: J) -> J::Output {
        match self {
            Precision::F32 => job.run::<f32>(),
            Precision::F64 => job.run::<f64>(),
        }
    }
}

/// Work that is generic over the scalar type, started for a run-time [`Precision`] by
/// [`Precision::dispatch`].
pub trait PrecisionJob {
    /// What the job returns; the same type for every precision.
    type Output;
    /// Runs the job with scalar type `R`.
    fn run<R: Real>(self) -> Self::Output;
}

impl Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of parsing a [`Precision`] from text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown precision `{0}`: expected `f32` or `f64`")]
pub struct ParsePrecisionError(pub String);

impl FromStr for Precision {
    type Err = ParsePrecisionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "single" => Ok(Precision::F32),
            "f64" | "double" => Ok(Precision::F64),
            _ => Err(ParsePrecisionError(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Describe;
    impl PrecisionJob for Describe {
        type Output = (Precision, usize, f64);
        fn run<R: Real>(self) -> Self::Output {
            (
                R::PRECISION,
                std::mem::size_of::<R>(),
                R::cast(0.1).as_f64(),
            )
        }
    }

    #[test]
    fn dispatch_selects_the_matching_type() {
        assert_eq!(
            Precision::F32.dispatch(Describe),
            (Precision::F32, 4, 0.1f32 as f64)
        );
        assert_eq!(Precision::F64.dispatch(Describe), (Precision::F64, 8, 0.1));
        for p in Precision::ALL {
            assert_eq!(p.dispatch(Describe).1, p.bytes());
        }
    }

    #[test]
    fn parses_names_and_rejects_others() {
        assert_eq!("f32".parse::<Precision>(), Ok(Precision::F32));
        assert_eq!(" F64 ".parse::<Precision>(), Ok(Precision::F64));
        assert_eq!("double".parse::<Precision>(), Ok(Precision::F64));
        let err = "f16".parse::<Precision>().unwrap_err();
        assert!(err.to_string().contains("`f16`"), "{err}");
        for p in Precision::ALL {
            assert_eq!(p.to_string().parse::<Precision>(), Ok(p));
        }
    }

    #[test]
    fn cast_rounds_to_nearest() {
        // 1 + 2^-30 is not representable in f32 and must round to 1; 2^-30 alone must survive.
        assert_eq!(f32::cast(1.0 + 2f64.powi(-30)), 1.0);
        assert_eq!(f32::cast(2f64.powi(-30)).as_f64(), 2f64.powi(-30));
        assert_eq!(f64::from_usize(1 << 53), 2f64.powi(53));
    }
}
