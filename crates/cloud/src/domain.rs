//! The region a cloud fills: a box (each axis periodic or not) or a sphere.

use crate::error::CloudError;

/// The shape of a domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape<const D: usize> {
    /// The box `[lo, hi)` per axis.
    Box {
        /// Lower corner.
        lo: [f64; D],
        /// Upper corner.
        hi: [f64; D],
    },
    /// The ball of `radius` around `centre`.
    Sphere {
        /// Centre.
        centre: [f64; D],
        /// Radius.
        radius: f64,
    },
}

/// A domain: a shape and, for boxes, which axes are periodic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Domain<const D: usize> {
    shape: Shape<D>,
    periodic: [bool; D],
}

impl<const D: usize> Domain<D> {
    /// A box `[lo, hi)` with the given periodic axes.
    pub fn new_box(lo: [f64; D], hi: [f64; D], periodic: [bool; D]) -> Result<Self, CloudError> {
        assert!((1..=3).contains(&D), "dimension must be 1, 2 or 3");
        for a in 0..D {
            if !(lo[a].is_finite() && hi[a].is_finite() && hi[a] > lo[a]) {
                return Err(CloudError::invalid(
                    "box",
                    format!("{lo:?}..{hi:?}"),
                    "finite corners with lo < hi on every axis",
                ));
            }
        }
        Ok(Self {
            shape: Shape::Box { lo, hi },
            periodic,
        })
    }

    /// The unit box `[0, 1)^D`, periodic on every axis.
    pub fn unit_periodic() -> Self {
        Self::new_box([0.0; D], [1.0; D], [true; D]).expect("valid unit box")
    }

    /// A ball (never periodic).
    pub fn new_sphere(centre: [f64; D], radius: f64) -> Result<Self, CloudError> {
        assert!((1..=3).contains(&D), "dimension must be 1, 2 or 3");
        if !(radius.is_finite() && radius > 0.0 && centre.iter().all(|c| c.is_finite())) {
            return Err(CloudError::invalid(
                "sphere radius",
                radius,
                "finite and > 0, with a finite centre",
            ));
        }
        Ok(Self {
            shape: Shape::Sphere { centre, radius },
            periodic: [false; D],
        })
    }

    /// The shape.
    pub fn shape(&self) -> Shape<D> {
        self.shape
    }

    /// Which axes are periodic.
    pub fn periodic(&self) -> [bool; D] {
        self.periodic
    }

    /// The bounding box `(lo, hi)`.
    pub fn bounds(&self) -> ([f64; D], [f64; D]) {
        match self.shape {
            Shape::Box { lo, hi } => (lo, hi),
            Shape::Sphere { centre, radius } => {
                (centre.map(|c| c - radius), centre.map(|c| c + radius))
            }
        }
    }

    /// Edge lengths of the bounding box.
    pub fn lengths(&self) -> [f64; D] {
        let (lo, hi) = self.bounds();
        std::array::from_fn(|a| hi[a] - lo[a])
    }

    /// Whether `x` lies inside (periodic axes: always, after wrapping).
    pub fn contains(&self, x: [f64; D]) -> bool {
        match self.shape {
            Shape::Box { lo, hi } => {
                (0..D).all(|a| self.periodic[a] || (x[a] >= lo[a] && x[a] < hi[a]))
            }
            Shape::Sphere { centre, radius } => {
                (0..D).map(|a| (x[a] - centre[a]).powi(2)).sum::<f64>() <= radius * radius
            }
        }
    }

    /// The minimum-image offset `b - a` (periodic axes: the shortest of the images).
    pub fn offset(&self, a: [f64; D], b: [f64; D]) -> [f64; D] {
        let lengths = self.lengths();
        std::array::from_fn(|d| {
            let x = b[d] - a[d];
            if self.periodic[d] {
                x - lengths[d] * (x / lengths[d]).round()
            } else {
                x
            }
        })
    }

    /// The squared minimum-image distance between `a` and `b`.
    pub fn distance_squared(&self, a: [f64; D], b: [f64; D]) -> f64 {
        self.offset(a, b).iter().map(|x| x * x).sum()
    }

    /// `x` with periodic coordinates wrapped into `[lo, hi)`.
    pub fn wrap(&self, mut x: [f64; D]) -> [f64; D] {
        let (lo, hi) = self.bounds();
        for a in 0..D {
            if self.periodic[a] {
                let l = hi[a] - lo[a];
                x[a] = lo[a] + (x[a] - lo[a]).rem_euclid(l);
                if x[a] >= hi[a] {
                    // rem_euclid can round up to exactly l.
                    x[a] = lo[a];
                }
            }
        }
        x
    }
}
