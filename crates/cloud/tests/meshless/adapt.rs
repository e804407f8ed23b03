//! Adaptivity: insertion into holes, merging of close pairs and removal of particles that left
//! the domain conserve the totals and keep the ids of the survivors; growth beyond a frozen
//! reservation is a capacity error that changes nothing.

// Loops over the two variables index several per-variable arrays at once.
#![allow(clippy::needless_range_loop)]

use mote_cloud::adapt::Adaptivity;
use mote_cloud::exact::total;
use mote_cloud::{Cloud, CloudError, Domain, LatticeOptions};
use mote_core::Budgeted;
use mote_core::columns::Permutation;

const TAU: f64 = std::f64::consts::TAU;

/// A jittered cloud of `per_side`^2 particles on the unit square with two smooth variables.
fn square(per_side: usize, periodic: bool) -> Cloud<f64, 2> {
    let lattice = LatticeOptions {
        spacing: 1.0 / per_side as f64,
        jitter: 0.25,
        seed: 3,
        boundary_layers: 0,
    };
    let domain = Domain::new_box([0.0; 2], [1.0; 2], [periodic; 2]).unwrap();
    let mut cloud = Cloud::<f64, 2>::lattice(domain, lattice, 2).unwrap();
    cloud.reorder_morton();
    for i in 0..cloud.len() {
        let x = cloud.position_of(i);
        cloud.state_var_mut(0)[i] = 1.0 + 0.5 * (TAU * x[0]).sin() * (TAU * x[1]).cos();
        cloud.state_var_mut(1)[i] = x[0] * x[1] - 0.3;
    }
    for o in cloud.orders_mut() {
        *o = 3;
    }
    cloud
}

/// Keeps the particles for which `keep(position)` holds.
fn carve(cloud: &mut Cloud<f64, 2>, keep: impl Fn([f64; 2]) -> bool) {
    let n = cloud.len();
    let kept: Vec<usize> = (0..n).filter(|&i| keep(cloud.position_of(i))).collect();
    let count = kept.len();
    let order: Vec<usize> = kept
        .into_iter()
        .chain((0..n).filter(|&i| !keep(cloud.position_of(i))))
        .collect();
    cloud.apply_permutation(&Permutation::new(order).unwrap());
    cloud.truncate(count);
}

fn totals(cloud: &Cloud<f64, 2>) -> [f64; 2] {
    [total(cloud, 0), total(cloud, 1)]
}

/// The smallest pair distance and the largest distance from a voxel centre (spacing `dx`) to
/// its nearest particle, by brute force on the periodic unit square.
fn gaps(cloud: &Cloud<f64, 2>, dx: f64) -> (f64, f64) {
    let d = cloud.domain();
    let p: Vec<[f64; 2]> = (0..cloud.len()).map(|i| cloud.position_of(i)).collect();
    let mut closest = f64::INFINITY;
    for i in 0..p.len() {
        for j in i + 1..p.len() {
            closest = closest.min(d.distance_squared(p[i], p[j]).sqrt());
        }
    }
    let cells = (1.0 / dx).round() as usize;
    let mut widest = 0.0f64;
    for a in 0..cells {
        for b in 0..cells {
            let c = [(a as f64 + 0.5) * dx, (b as f64 + 0.5) * dx];
            let near = p
                .iter()
                .map(|&x| d.distance_squared(c, x))
                .fold(f64::INFINITY, f64::min);
            widest = widest.max(near.sqrt());
        }
    }
    (closest, widest)
}

#[test]
fn insertion_and_merging_conserve_totals_and_keep_the_survivors_ids() {
    let per_side = 24;
    let dx = 1.0 / per_side as f64;
    let mut cloud = square(per_side, true);
    // A hole of radius 2.5 dx, and every 37th particle pushed next to its nearest neighbour.
    carve(&mut cloud, |x| (x[0] - 0.5).hypot(x[1] - 0.3) > 2.5 * dx);
    let n = cloud.len();
    let mut pushed = 0;
    for i in (0..n).step_by(37) {
        let xi = cloud.position_of(i);
        let j = (0..n)
            .filter(|&j| j != i)
            .min_by(|&a, &b| {
                let d = cloud.domain();
                d.distance_squared(xi, cloud.position_of(a))
                    .total_cmp(&d.distance_squared(xi, cloud.position_of(b)))
            })
            .unwrap();
        let xj = cloud.position_of(j);
        let off = cloud.domain().offset(xj, xi);
        let x = cloud
            .domain()
            .wrap([xj[0] + 0.1 * dx * off[0].signum(), xj[1]]);
        cloud.positions_mut()[0][i] = x[0];
        cloud.positions_mut()[1][i] = x[1];
        pushed += 1;
    }
    let before = totals(&cloud);
    let ids_before: Vec<u64> = cloud.ids().to_vec();
    let next_id = ids_before.iter().max().unwrap() + 1;
    let adapt = Adaptivity::default();
    let mut passes = Vec::new();
    loop {
        let stats = adapt.apply(&mut cloud).unwrap();
        let done = stats.inserted == 0 && stats.merged == 0;
        passes.push(stats);
        if done || passes.len() == 10 {
            break;
        }
    }
    let after = totals(&cloud);
    let inserted: usize = passes.iter().map(|s| s.inserted).sum();
    let merged: usize = passes.iter().map(|s| s.merged).sum();
    eprintln!(
        "passes {}: inserted {inserted} (first pass {} with {} unfilled), merged {merged} of {pushed} pushed; totals {before:?} -> {after:?}",
        passes.len(),
        passes[0].inserted,
        passes[0].unfilled
    );
    for k in 0..2 {
        assert!(
            (after[k] - before[k]).abs() <= 1e-14 * before[k].abs().max(1.0),
            "variable {k}: {} -> {}",
            before[k],
            after[k]
        );
    }
    assert!(passes.len() >= 2 && passes.len() < 10);
    assert!(
        passes[0].unfilled > 0,
        "the hole's centre is beyond the donors' reach at first"
    );
    assert!(inserted >= 15 && merged >= pushed);
    // Ids: unique; every old id that is gone was merged away; new ids are fresh.
    let mut ids: Vec<u64> = cloud.ids().to_vec();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), cloud.len());
    let survivors = ids.iter().filter(|&&id| id < next_id).count();
    assert_eq!(survivors, ids_before.len() - merged);
    assert_eq!(ids.len() - survivors, inserted);
    // No hole and no close pair remain.
    let (closest, widest) = gaps(&cloud, dx);
    eprintln!(
        "closest pair {:.3} dx, widest gap {:.3} dx",
        closest / dx,
        widest / dx
    );
    assert!(closest >= 0.25 * dx && widest <= 0.75 * dx);
}

#[test]
fn particles_leaving_the_domain_are_removed_and_reported() {
    let mut cloud = square(16, false);
    let before = totals(&cloud);
    let mut carried = [0.0; 2];
    for i in [5, 50, 100] {
        cloud.positions_mut()[0][i] = 1.2;
        for k in 0..2 {
            carried[k] += cloud.volumes()[i] * cloud.state(k)[i];
        }
    }
    let n = cloud.len();
    let stats = Adaptivity::default().apply(&mut cloud).unwrap();
    assert_eq!(stats.removed, 3);
    // Moving particles out also opens holes where they were; those are filled.
    assert_eq!(cloud.len(), n - 3 + stats.inserted - stats.merged);
    let after = totals(&cloud);
    for k in 0..2 {
        assert!((stats.removed_totals[k] - carried[k]).abs() <= 1e-15);
        assert!((after[k] - (before[k] - carried[k])).abs() <= 1e-14);
    }
}

#[test]
fn growth_beyond_a_frozen_reservation_is_refused_and_changes_nothing() {
    let mut cloud = square(16, true);
    carve(&mut cloud, |x| (x[0] - 0.5).hypot(x[1] - 0.5) > 0.1);
    for b in cloud.buffers_mut() {
        let len = b.len();
        b.reserve_and_freeze(len).unwrap();
    }
    let (n, before) = (cloud.len(), totals(&cloud));
    let volumes = cloud.volumes().to_vec();
    let err = Adaptivity::default().apply(&mut cloud).unwrap_err();
    assert!(matches!(err, CloudError::Capacity(_)), "{err}");
    assert_eq!(cloud.len(), n);
    assert_eq!(totals(&cloud), before);
    assert_eq!(cloud.volumes(), &volumes[..]);
}

#[test]
fn bad_fractions_are_refused() {
    for (hole, merge) in [(0.5, 0.6), (1.5, 0.2), (0.75, 0.0), (f64::NAN, 0.2)] {
        let a = Adaptivity {
            hole_fraction: hole,
            merge_fraction: merge,
        };
        assert!(a.validate().is_err(), "{hole} {merge}");
    }
}
