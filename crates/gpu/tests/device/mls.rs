//! MLS moment solves on the device against the CPU fits.

use mote_cloud::mls::{Mls, default_radius_factor};
use mote_cloud::{Cloud, NeighbourList, NeighbourSearch, RowMajor, SlotLayout, SlotMajor, Weight};
use mote_core::{CpuBackend, Precision};
use mote_gpu::{
    DeviceCloud, DeviceLayout, DeviceMls, DeviceNeighbours, Gpu, GpuFloat, GpuNeighbourSearch,
};

use crate::gpu;
use crate::search::lattice;

/// Norm-wise relative difference of the device coefficients from the CPU's, the worst over the
/// basis functions.
fn difference<R: GpuFloat, const D: usize, L: SlotLayout>(
    g: &Gpu,
    cloud: &Cloud<R, D>,
    degree: usize,
    weight: Weight,
    layout: DeviceLayout,
) -> f64 {
    // Without periodic images the corners see a quarter ball: a wider radius keeps them
    // determined.
    let widen = if cloud.domain().periodic()[0] {
        1.0
    } else {
        1.7
    };
    let radius = widen * default_radius_factor::<D>(degree) * cloud.spacing()[0];
    let mut search = NeighbourSearch::new(radius).unwrap();
    let mut row = NeighbourList::<RowMajor>::default();
    search.build(cloud, CpuBackend::Serial, &mut row).unwrap();
    let list: NeighbourList<L> = row.to_layout(CpuBackend::Serial).unwrap();
    let mut cpu = Mls::<R, D>::new(degree, weight).unwrap();
    cpu.compute(cloud, &list, CpuBackend::Serial).unwrap();

    let dc = DeviceCloud::upload(g, cloud).unwrap();
    let mut ds = GpuNeighbourSearch::new(g, radius).unwrap();
    let mut dl = DeviceNeighbours::new(g, layout);
    ds.build(g, &dc, &mut dl).unwrap();
    let mut dev = DeviceMls::<R>::new::<D>(g, degree, weight).unwrap();
    dev.compute(g, &dc, &dl).unwrap();
    assert_eq!(dev.size(), cpu.basis().len());
    assert_eq!(dev.spacing(), cpu.spacing());
    coefficient_difference(g, &dev, &cpu, list.layout().slot_count())
}

/// The worst over the basis functions of the norm-wise relative difference of the device fit's
/// coefficients from the CPU's.
fn coefficient_difference<R: GpuFloat, const D: usize>(
    g: &Gpu,
    dev: &DeviceMls<R>,
    cpu: &Mls<R, D>,
    slots: usize,
) -> f64 {
    let all = g.download(dev.coefficients()).unwrap();
    assert_eq!(all.len(), slots * dev.size());
    let mut worst: f64 = 0.0;
    for k in 0..dev.size() {
        let (mut d, mut s) = (0.0f64, 0.0f64);
        for (a, b) in all[k * slots..(k + 1) * slots]
            .iter()
            .zip(cpu.coefficients(k))
        {
            d += (a.as_f64() - b.as_f64()).powi(2);
            s += b.as_f64().powi(2);
        }
        assert!(s > 0.0, "function {k} has coefficients");
        worst = worst.max((d / s).sqrt());
    }
    worst
}

fn cases<R: GpuFloat>(g: &Gpu, bound: f64) {
    let exp = Weight::default();
    let inv = Weight::InverseDistance { power: 2.0 };
    let mut report = Vec::new();
    for periodic in [true, false] {
        for degree in 1..=3 {
            let c1 = lattice::<R, 1>(1.0 / 200.0, periodic, 11);
            let c2 = lattice::<R, 2>(1.0 / 24.0, periodic, 12);
            let c3 = lattice::<R, 3>(1.0 / 9.0, periodic, 13);
            report.push((
                "1-D row exp",
                degree,
                difference::<R, 1, RowMajor>(g, &c1, degree, exp, DeviceLayout::RowMajor),
            ));
            report.push((
                "2-D row exp",
                degree,
                difference::<R, 2, RowMajor>(g, &c2, degree, exp, DeviceLayout::RowMajor),
            ));
            report.push((
                "2-D slot inv",
                degree,
                difference::<R, 2, SlotMajor>(g, &c2, degree, inv, DeviceLayout::SlotMajor),
            ));
            report.push((
                "2-D row inv",
                degree,
                difference::<R, 2, RowMajor>(g, &c2, degree, inv, DeviceLayout::RowMajor),
            ));
            report.push((
                "2-D slot exp",
                degree,
                difference::<R, 2, SlotMajor>(g, &c2, degree, exp, DeviceLayout::SlotMajor),
            ));
            report.push((
                "3-D row exp",
                degree,
                difference::<R, 3, RowMajor>(g, &c3, degree, exp, DeviceLayout::RowMajor),
            ));
            report.push((
                "3-D slot exp",
                degree,
                difference::<R, 3, SlotMajor>(g, &c3, degree, exp, DeviceLayout::SlotMajor),
            ));
        }
    }
    let c2 = lattice::<R, 2>(1.0 / 24.0, true, 14);
    report.push((
        "2-D row exp",
        4,
        difference::<R, 2, RowMajor>(g, &c2, 4, exp, DeviceLayout::RowMajor),
    ));
    let worst = report.iter().map(|r| r.2).fold(0.0, f64::max);
    eprintln!(
        "{}: worst device/CPU MLS difference {worst:.2e} over {} fits",
        R::PRECISION.name(),
        report.len()
    );
    for (what, degree, d) in report {
        assert!(
            d <= bound,
            "{} {what} degree {degree}: {d:e}",
            R::PRECISION.name()
        );
    }
}

#[test]
fn device_mls_coefficients_agree_with_the_cpu_in_f32_and_f64() {
    let Some(g) = gpu() else {
        return;
    };
    cases::<f32>(&g, 1e-5);
    if g.supports(Precision::F64) {
        cases::<f64>(&g, 1e-12);
    }
}

#[test]
fn device_mls_refuses_what_the_cpu_refuses() {
    let Some(g) = gpu() else {
        return;
    };
    // Too small a radius for a degree-3 basis in 2-D: an interior particle is underdetermined.
    let c = lattice::<f32, 2>(0.05, true, 3);
    let dc = DeviceCloud::upload(&g, &c).unwrap();
    let mut s = GpuNeighbourSearch::new(&g, 1.1 * 0.05).unwrap();
    let mut l = DeviceNeighbours::new(&g, DeviceLayout::RowMajor);
    s.build(&g, &dc, &mut l).unwrap();
    let mut m = DeviceMls::<f32>::new::<2>(&g, 3, Weight::default()).unwrap();
    let err = m.compute(&g, &dc, &l).unwrap_err();
    assert!(
        err.to_string().contains("at least the basis size 9"),
        "{err}"
    );
    // Non-integer inverse-distance powers have no device version yet.
    let err = DeviceMls::<f32>::new::<2>(&g, 2, Weight::InverseDistance { power: 1.5 })
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("not supported on the GPU backend"),
        "{err}"
    );
}

/// A one-sided fit (`axis`, `high`) on the device against the CPU's: the existence flags must
/// be equal; returns the norm-wise difference of the coefficients and the number of particles
/// where the fit does not exist.
fn one_sided_difference<R: GpuFloat, const D: usize, L: SlotLayout>(
    g: &Gpu,
    cloud: &Cloud<R, D>,
    degree: usize,
    axis: usize,
    high: bool,
    layout: DeviceLayout,
) -> (f64, usize) {
    let radius = default_radius_factor::<D>(degree + 1) * cloud.spacing()[0];
    let mut search = NeighbourSearch::new(radius).unwrap();
    let mut row = NeighbourList::<RowMajor>::default();
    search.build(cloud, CpuBackend::Serial, &mut row).unwrap();
    let list: NeighbourList<L> = row.to_layout(CpuBackend::Serial).unwrap();
    let weight = Weight::default();
    let mut cpu = Mls::<R, D>::one_sided(degree, weight, axis, high).unwrap();
    cpu.compute(cloud, &list, CpuBackend::Serial).unwrap();

    let dc = DeviceCloud::upload(g, cloud).unwrap();
    let mut ds = GpuNeighbourSearch::new(g, radius).unwrap();
    let mut dl = DeviceNeighbours::new(g, layout);
    ds.build(g, &dc, &mut dl).unwrap();
    let mut dev = DeviceMls::<R>::one_sided::<D>(g, degree, weight, axis, high).unwrap();
    dev.compute(g, &dc, &dl).unwrap();
    let valid: Vec<u8> = g
        .download(dev.valid())
        .unwrap()
        .iter()
        .map(|&v| v as u8)
        .collect();
    assert_eq!(
        valid,
        cpu.valid(),
        "axis {axis} high {high}: existence flags"
    );
    let worst = coefficient_difference(g, &dev, &cpu, list.layout().slot_count());
    (worst, valid.iter().filter(|&&v| v == 0).count())
}

/// `bound` for the fits on periodic clouds; `box_bound` in boxes, where a particle near a face
/// may have barely the basis size of neighbours on a side: its fit is ill-conditioned and the
/// rounding differences grow with it (measured in f64: 4e-15 periodic, up to 2.5e-10 in the
/// 2-D box at degree 2).
fn one_sided_cases<R: GpuFloat>(g: &Gpu, bound: f64, box_bound: f64) {
    let (mut periodic, mut boxed): (f64, f64) = (0.0, 0.0);
    for degree in [1, 2] {
        // Without periodic images the particles near a face lack one side: those fits must be
        // missing on both backends (and only those).
        let c1 = lattice::<R, 1>(1.0 / 100.0, false, 15);
        let c2 = lattice::<R, 2>(1.0 / 20.0, false, 16);
        let p2 = lattice::<R, 2>(1.0 / 20.0, true, 17);
        let c3 = lattice::<R, 3>(1.0 / 8.0, false, 18);
        for high in [false, true] {
            let (d, missing) = one_sided_difference::<R, 1, RowMajor>(
                g,
                &c1,
                degree,
                0,
                high,
                DeviceLayout::RowMajor,
            );
            assert!(missing > 0, "1-D: some fits must be missing");
            boxed = boxed.max(d);
            for axis in 0..2 {
                let (d, missing) = one_sided_difference::<R, 2, SlotMajor>(
                    g,
                    &c2,
                    degree,
                    axis,
                    high,
                    DeviceLayout::SlotMajor,
                );
                assert!(
                    missing > 0 && missing < c2.len(),
                    "2-D box: {missing} missing"
                );
                boxed = boxed.max(d);
                let (d, missing) = one_sided_difference::<R, 2, RowMajor>(
                    g,
                    &p2,
                    degree,
                    axis,
                    high,
                    DeviceLayout::RowMajor,
                );
                assert_eq!(missing, 0, "a periodic cloud has both sides everywhere");
                periodic = periodic.max(d);
            }
            let (d, _) = one_sided_difference::<R, 3, RowMajor>(
                g,
                &c3,
                degree,
                2,
                high,
                DeviceLayout::RowMajor,
            );
            boxed = boxed.max(d);
        }
    }
    eprintln!(
        "{}: worst device/CPU one-sided MLS difference {periodic:.2e} periodic, {boxed:.2e} in \
         boxes",
        R::PRECISION.name()
    );
    assert!(
        periodic <= bound && boxed <= box_bound,
        "{}: {periodic:e} periodic, {boxed:e} in boxes",
        R::PRECISION.name()
    );
}

#[test]
fn one_sided_device_fits_and_their_existence_agree_with_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    one_sided_cases::<f32>(&g, 1e-5, 1e-5);
    if g.supports(Precision::F64) {
        one_sided_cases::<f64>(&g, 1e-12, 1e-8);
    }
}
