//! The device neighbour search produces the CPU's lists exactly, in both slot layouts.

use mote_cloud::mls::default_radius_factor;
use mote_cloud::{
    Cloud, Domain, LatticeOptions, NeighbourList, NeighbourSearch, RowMajor, SlotMajor,
};
use mote_core::rng::Rng;
use mote_core::{CpuBackend, Precision};
use mote_gpu::{DeviceCloud, DeviceLayout, DeviceNeighbours, GpuFloat, GpuNeighbourSearch};

use crate::gpu;

/// A jittered lattice of spacing `dx` in the unit box.
pub fn lattice<R: GpuFloat, const D: usize>(dx: f64, periodic: bool, seed: u64) -> Cloud<R, D> {
    let domain = Domain::new_box([0.0; D], [1.0; D], [periodic; D]).unwrap();
    let options = LatticeOptions {
        spacing: dx,
        jitter: 0.6,
        seed,
        boundary_layers: 0,
    };
    Cloud::lattice(domain, options, 1).unwrap()
}

/// `n` particles at uniformly random positions in the unit box.
fn random<R: GpuFloat, const D: usize>(n: usize, periodic: bool, seed: u64) -> Cloud<R, D> {
    let domain = Domain::new_box([0.0; D], [1.0; D], [periodic; D]).unwrap();
    let mut c = Cloud::<R, D>::new(domain, [1.0 / (n as f64).powf(1.0 / D as f64); D], 1).unwrap();
    c.resize(n).unwrap();
    let mut rng = Rng::new(seed);
    let pos = c.positions_mut();
    for p in pos {
        for x in p.iter_mut() {
            *x = R::cast(rng.uniform());
        }
    }
    c
}

/// The device lists of `cloud` in `layout`, as (counts, indices, total, max).
pub fn device_lists<R: GpuFloat, const D: usize>(
    gpu: &mote_gpu::Gpu,
    cloud: &Cloud<R, D>,
    radius: f64,
    layout: DeviceLayout,
) -> (Vec<u32>, Vec<u32>, usize, usize) {
    let dc = DeviceCloud::upload(gpu, cloud).unwrap();
    let mut search = GpuNeighbourSearch::new(gpu, radius).unwrap();
    let mut list = DeviceNeighbours::new(gpu, layout);
    search.build(gpu, &dc, &mut list).unwrap();
    (
        gpu.download(list.counts()).unwrap(),
        gpu.download(list.indices()).unwrap(),
        list.total(),
        list.max(),
    )
}

/// Device lists equal the CPU's in both layouts (counts, every index in order, padding,
/// total, maximum, row starts); returns the mean neighbour count.
pub fn compare<R: GpuFloat, const D: usize>(
    gpu: &mote_gpu::Gpu,
    c: &Cloud<R, D>,
    radius: f64,
) -> f64 {
    let mut search = NeighbourSearch::new(radius).unwrap();
    let mut row = NeighbourList::<RowMajor>::default();
    search.build(c, CpuBackend::Serial, &mut row).unwrap();
    let slot: NeighbourList<SlotMajor> = row.to_layout(CpuBackend::Serial).unwrap();
    let what = format!(
        "{} D={D} n={} periodic={:?}",
        R::PRECISION.name(),
        c.len(),
        c.domain().periodic()
    );
    for (layout, cpu) in [
        (DeviceLayout::RowMajor, row.indices()),
        (DeviceLayout::SlotMajor, slot.indices()),
    ] {
        let (counts, indices, total, max) = device_lists(gpu, c, radius, layout);
        assert_eq!(counts, row.counts(), "{what} {layout:?}: counts");
        assert_eq!((total, max), (row.total(), row.max()), "{what} {layout:?}");
        assert!(indices == cpu, "{what} {layout:?}: indices differ");
    }
    row.mean()
}

fn all_cases<R: GpuFloat>(gpu: &mote_gpu::Gpu) {
    for periodic in [true, false] {
        let m1 = compare::<R, 1>(
            gpu,
            &lattice(1.0 / 500.0, periodic, 3),
            default_radius_factor::<1>(3) / 500.0,
        );
        let m2 = compare::<R, 2>(
            gpu,
            &lattice(1.0 / 45.0, periodic, 4),
            default_radius_factor::<2>(2) / 45.0,
        );
        let m3 = compare::<R, 3>(
            gpu,
            &lattice(1.0 / 14.0, periodic, 5),
            default_radius_factor::<3>(2) / 14.0,
        );
        let r2 = compare::<R, 2>(gpu, &random(3000, periodic, 6), 0.04);
        let r3 = compare::<R, 3>(gpu, &random(3000, periodic, 7), 0.12);
        eprintln!(
            "{} periodic={periodic}: mean neighbours {m1:.1} (1-D), {m2:.1} (2-D), {m3:.1} (3-D), \
             random {r2:.1} (2-D), {r3:.1} (3-D)",
            R::PRECISION.name()
        );
        // The lists are not trivially empty or all-to-all.
        assert!(m2 > 10.0 && m3 > 20.0 && r2 > 5.0 && r3 > 10.0);
    }
}

#[test]
fn device_neighbour_lists_equal_the_cpu_lists_in_both_layouts_f32_and_f64() {
    let Some(g) = gpu() else {
        return;
    };
    all_cases::<f32>(&g);
    if g.supports(Precision::F64) {
        all_cases::<f64>(&g);
    } else {
        eprintln!("SKIPPED f64: {g} has no f64 support");
    }
}

#[test]
fn a_large_cloud_exercises_the_multi_level_prefix_sums() {
    let Some(g) = gpu() else {
        return;
    };
    // 300^2 = 90 000 particles: the scans of the counts and of the bins take two levels of
    // block sums (more than 256^2 elements); the grid of cubes needs a second row.
    let c = lattice::<f32, 2>(1.0 / 300.0, true, 8);
    assert!(c.len() > 65_536);
    let mean = compare::<f32, 2>(&g, &c, default_radius_factor::<2>(2) / 300.0);
    assert!(mean > 10.0, "{mean}");
}

#[test]
fn an_invalid_radius_or_an_empty_cloud_is_handled() {
    let Some(g) = gpu() else {
        return;
    };
    assert!(GpuNeighbourSearch::new(&g, 0.0).is_err());
    // Larger than half the periodic box: the same refusal as the CPU search.
    let c = lattice::<f32, 2>(0.1, true, 1);
    let dc = DeviceCloud::upload(&g, &c).unwrap();
    let mut s = GpuNeighbourSearch::new(&g, 0.6).unwrap();
    let mut list = DeviceNeighbours::new(&g, DeviceLayout::RowMajor);
    let err = s.build(&g, &dc, &mut list).unwrap_err();
    assert!(err.to_string().contains("search radius"), "{err}");
    // No particles: empty lists.
    let mut empty = c.clone();
    empty.resize(0).unwrap();
    let dc = DeviceCloud::upload(&g, &empty).unwrap();
    let mut s = GpuNeighbourSearch::new(&g, 0.2).unwrap();
    s.build(&g, &dc, &mut list).unwrap();
    assert_eq!((list.total(), list.max(), list.counts().len()), (0, 0, 0));
}
