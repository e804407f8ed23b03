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
    let all = g.download(dev.coefficients()).unwrap();
    let slots = list.layout().slot_count();
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
