//! MLS operators reproduce polynomials up to their degree.

// Loops over particles, axes and basis functions index several arrays at once.
#![allow(clippy::needless_range_loop)]

use mote_cloud::cloud::INTERIOR;
use mote_cloud::mls::{Basis, MAX_DEGREE, default_radius_factor};
use mote_cloud::{
    Cloud, Domain, LatticeOptions, Mls, NeighbourList, NeighbourSearch, RowMajor, SlotMajor, Weight,
};
use mote_core::CpuBackend;
use mote_core::rng::Rng;

/// A polynomial of total degree `p` with seeded random coefficients: its value's derivative of
/// multi-index `beta` at `x`.
struct Poly<const D: usize> {
    terms: Vec<([u8; D], f64)>,
}

impl<const D: usize> Poly<D> {
    fn new(p: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut terms = vec![([0u8; D], rng.range(-1.0, 1.0))];
        for e in Basis::<D>::new(p).unwrap().exponents() {
            terms.push((*e, rng.range(-1.0, 1.0)));
        }
        Poly { terms }
    }

    fn value(&self, x: [f64; D]) -> f64 {
        self.derivative([0; D], x)
    }

    fn derivative(&self, beta: [u8; D], x: [f64; D]) -> f64 {
        let mut total = 0.0;
        for (e, c) in &self.terms {
            let mut v = *c;
            for a in 0..D {
                if e[a] < beta[a] {
                    v = 0.0;
                    break;
                }
                // d^b x^e = e! / (e - b)! x^(e - b)
                for k in 0..beta[a] {
                    v *= (e[a] - k) as f64;
                }
                v *= x[a].powi((e[a] - beta[a]) as i32);
            }
            total += v;
        }
        total
    }
}

/// Largest relative error over interior particles and basis functions.
fn reproduction_error<const D: usize>(degree: usize, weight: Weight, slot_major: bool) -> f64 {
    let spacing = 0.1;
    let radius = default_radius_factor::<D>(degree) * spacing;
    let layers = (radius / spacing).ceil() as usize;
    let hi = if D == 3 { 0.5 } else { 1.0 };
    let domain = Domain::<D>::new_box([0.0; D], [hi; D], [false; D]).unwrap();
    let opts = LatticeOptions {
        spacing,
        jitter: 0.3,
        seed: 11,
        boundary_layers: layers,
    };
    let cloud = Cloud::<f64, D>::lattice(domain, opts, 1).unwrap();
    let mut search = NeighbourSearch::new(radius).unwrap();
    let poly = Poly::<D>::new(degree, 5 + degree as u64);
    let u: Vec<f64> = (0..cloud.len())
        .map(|i| poly.value(cloud.position_of(i)))
        .collect();
    let mut mls = Mls::<f64, D>::new(degree, weight).unwrap();
    let m = mls.basis().len();
    let mut got = vec![0.0; m];
    let mut worst: f64 = 0.0;
    let mut check = |mls: &Mls<f64, D>, derivs: &dyn Fn(usize, &mut [f64])| {
        let exps = mls.basis().exponents().to_vec();
        let mut scale = vec![0.0f64; m];
        let mut err = vec![0.0f64; m];
        for i in (0..cloud.len()).filter(|&i| cloud.tags()[i] == INTERIOR) {
            derivs(i, &mut got);
            for k in 0..m {
                let exact = poly.derivative(exps[k], cloud.position_of(i));
                scale[k] = scale[k].max(exact.abs());
                err[k] = err[k].max((got[k] - exact).abs());
            }
        }
        for k in 0..m {
            worst = worst.max(err[k] / scale[k].max(1e-300));
        }
    };
    if slot_major {
        let mut list = NeighbourList::<SlotMajor>::default();
        search
            .build(&cloud, CpuBackend::default(), &mut list)
            .unwrap();
        mls.compute(&cloud, &list, CpuBackend::default()).unwrap();
        check(&mls, &|i, out| mls.derivatives(&list, &u, i, out));
    } else {
        let mut list = NeighbourList::<RowMajor>::default();
        search
            .build(&cloud, CpuBackend::default(), &mut list)
            .unwrap();
        let fewest = (0..cloud.len())
            .filter(|&i| cloud.tags()[i] == INTERIOR)
            .map(|i| list.counts()[i])
            .min()
            .unwrap();
        assert!(
            fewest as f64 >= 1.5 * m as f64,
            "default radius: {fewest} neighbours for basis size {m}"
        );
        mls.compute(&cloud, &list, CpuBackend::default()).unwrap();
        check(&mls, &|i, out| mls.derivatives(&list, &u, i, out));
    }
    worst
}

#[test]
fn polynomials_are_reproduced_in_1d_2d_3d_for_every_degree() {
    let w = Weight::default();
    for degree in 1..=MAX_DEGREE {
        let e1 = reproduction_error::<1>(degree, w, false);
        let e2 = reproduction_error::<2>(degree, w, false);
        println!("degree {degree}: 1-D {e1:.2e}, 2-D {e2:.2e}");
        assert!(e1 <= 1e-8, "1-D degree {degree}: {e1:e}");
        assert!(e2 <= 1e-8, "2-D degree {degree}: {e2:e}");
    }
    for degree in 1..=MAX_DEGREE {
        let e3 = reproduction_error::<3>(degree, w, false);
        println!("degree {degree}: 3-D {e3:.2e}");
        assert!(e3 <= 1e-8, "3-D degree {degree}: {e3:e}");
    }
}

#[test]
fn slot_major_and_other_weights_reproduce_too() {
    let e = reproduction_error::<2>(3, Weight::default(), true);
    assert!(e <= 1e-8, "{e:e}");
    let e = reproduction_error::<2>(2, Weight::InverseDistance { power: 2.0 }, false);
    assert!(e <= 1e-8, "{e:e}");
}

#[test]
fn a_fit_that_cannot_be_determined_is_refused() {
    let cloud = Cloud::<f64, 2>::lattice(
        Domain::unit_periodic(),
        LatticeOptions {
            spacing: 0.1,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let mut search = NeighbourSearch::new(0.11).unwrap();
    let mut list = NeighbourList::<RowMajor>::default();
    search.build(&cloud, CpuBackend::Serial, &mut list).unwrap();
    let mut mls = Mls::<f64, 2>::new(3, Weight::default()).unwrap();
    let e = mls.compute(&cloud, &list, CpuBackend::Serial).unwrap_err();
    assert!(e.to_string().contains("raise the search radius"), "{e}");
}
