//! The neighbour search against brute force, across thread counts and slot layouts.

// Loops over particles and axes index several arrays at once.
#![allow(clippy::needless_range_loop)]

use mote_cloud::{
    Cloud, Domain, LatticeOptions, NeighbourList, NeighbourSearch, RowMajor, SlotLayout, SlotMajor,
};
use mote_core::rng::Rng;
use mote_core::{Budgeted, CpuBackend, Real};

/// `n` particles at uniformly random positions in the unit box.
fn random_cloud<R: Real, const D: usize>(n: usize, periodic: bool, seed: u64) -> Cloud<R, D> {
    let domain = Domain::new_box([0.0; D], [1.0; D], [periodic; D]).unwrap();
    let mut c = Cloud::<R, D>::new(domain, [1.0 / (n as f64).powf(1.0 / D as f64); D], 1).unwrap();
    c.resize(n).unwrap();
    let mut rng = Rng::new(seed);
    let pos = c.positions_mut();
    for i in 0..n {
        for a in 0..D {
            pos[a][i] = R::cast(rng.uniform());
        }
    }
    c
}

/// Every pair within `radius` by the same minimum-image arithmetic, sorted per particle.
fn brute_force<R: Real, const D: usize>(c: &Cloud<R, D>, radius: f64) -> Vec<Vec<u32>> {
    let pos = c.positions();
    let periodic = c.domain().periodic();
    let r2 = R::cast(radius * radius);
    let (one, half) = (R::one(), R::cast(0.5));
    (0..c.len())
        .map(|i| {
            (0..c.len())
                .filter(|&j| {
                    j != i && {
                        let mut d2 = R::zero();
                        for a in 0..D {
                            let mut d = pos[a][j] - pos[a][i];
                            if periodic[a] {
                                if d > half {
                                    d -= one;
                                } else if d < -half {
                                    d += one;
                                }
                            }
                            d2 += d * d;
                        }
                        d2 <= r2
                    }
                })
                .map(|j| j as u32)
                .collect()
        })
        .collect()
}

fn lists<L: SlotLayout>(l: &NeighbourList<L>) -> Vec<Vec<u32>> {
    (0..l.len()).map(|i| l.neighbours(i).collect()).collect()
}

fn sorted(mut v: Vec<Vec<u32>>) -> Vec<Vec<u32>> {
    v.iter_mut().for_each(|r| r.sort_unstable());
    v
}

fn check<R: Real, const D: usize>(n: usize, radius: f64) {
    for periodic in [true, false] {
        let c = random_cloud::<R, D>(n, periodic, 7 + D as u64);
        let mut search = NeighbourSearch::new(radius).unwrap();
        let mut row = NeighbourList::<RowMajor>::default();
        search.build(&c, CpuBackend::Serial, &mut row).unwrap();
        let expected = brute_force(&c, radius);
        assert_eq!(
            sorted(lists(&row)),
            expected,
            "D = {D}, periodic = {periodic}"
        );
        assert!(
            row.mean() > 3.0,
            "the test must see real neighbourhoods: {}",
            row.mean()
        );
        // Identical, in order, on 2 threads and in the slot-major layout.
        let mut row2 = NeighbourList::<RowMajor>::default();
        search.build(&c, CpuBackend::threads(2), &mut row2).unwrap();
        assert_eq!(lists(&row2), lists(&row));
        let mut slot = NeighbourList::<SlotMajor>::default();
        search.build(&c, CpuBackend::threads(2), &mut slot).unwrap();
        assert_eq!(lists(&slot), lists(&row));
        assert_eq!(
            lists(&row.to_layout::<SlotMajor>(CpuBackend::Serial).unwrap()),
            lists(&row)
        );
        assert_eq!(
            lists(&slot.to_layout::<RowMajor>(CpuBackend::Serial).unwrap()),
            lists(&row)
        );
        assert_eq!(slot.max(), row.max());
        assert_eq!(row.total(), expected.iter().map(Vec::len).sum::<usize>());
        // Symmetric.
        for (i, nb) in expected.iter().enumerate() {
            for &j in nb {
                assert!(expected[j as usize].contains(&(i as u32)));
            }
        }
    }
}

#[test]
fn equals_brute_force_in_1d_2d_3d_periodic_and_not() {
    check::<f64, 1>(400, 0.02);
    check::<f64, 2>(1500, 0.06);
    check::<f64, 3>(2000, 0.15);
    check::<f32, 2>(1500, 0.06);
    check::<f32, 3>(2000, 0.15);
}

#[test]
fn small_periodic_boxes_visit_each_bin_once() {
    // Radius close to half the box: only two bins per axis, which the 3^D walk must not visit
    // twice.
    check::<f64, 2>(300, 0.45);
}

#[test]
fn slot_major_layout_is_strided_and_padded() {
    let c = Cloud::<f64, 2>::lattice(
        Domain::unit_periodic(),
        LatticeOptions {
            spacing: 0.1,
            jitter: 0.4,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let mut search = NeighbourSearch::new(0.25).unwrap();
    let mut slot = NeighbourList::<SlotMajor>::default();
    search.build(&c, CpuBackend::Serial, &mut slot).unwrap();
    let n = c.len();
    assert_eq!(slot.indices().len(), n * slot.max());
    let s: Vec<usize> = slot.slots(5).collect();
    assert_eq!(s[0], 5);
    assert_eq!(s[1], 5 + n);
    // Padding slots hold the particle itself.
    let k = slot.counts()[5] as usize;
    if k < slot.max() {
        assert_eq!(slot.indices()[k * n + 5], 5);
    }
}

#[test]
fn a_reserved_list_refuses_more_neighbours() {
    let c = Cloud::<f64, 2>::lattice(
        Domain::unit_periodic(),
        LatticeOptions {
            spacing: 0.05,
            jitter: 0.3,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let mut search = NeighbourSearch::new(0.12).unwrap();
    let mut list = NeighbourList::<RowMajor>::default();
    search.build(&c, CpuBackend::Serial, &mut list).unwrap();
    let before = lists(&list);
    // Freeze at the current size, then ask for a larger radius: more slots than reserved.
    for b in list.buffers_mut() {
        let len = b.len();
        b.reserve_and_freeze(len).unwrap();
    }
    let mut wider = NeighbourSearch::new(0.2).unwrap();
    let err = wider.build(&c, CpuBackend::Serial, &mut list).unwrap_err();
    assert!(err.to_string().contains("neighbour_index"), "{err}");
    assert_eq!(lists(&list), before, "the lists are unchanged");
}

#[test]
fn radius_beyond_half_a_periodic_box_is_refused() {
    let c = random_cloud::<f64, 2>(100, true, 1);
    let mut search = NeighbourSearch::new(0.6).unwrap();
    let mut list = NeighbourList::<RowMajor>::default();
    assert!(search.build(&c, CpuBackend::Serial, &mut list).is_err());
    assert!(NeighbourSearch::new(-1.0).is_err());
}
