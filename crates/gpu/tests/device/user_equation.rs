//! The user-defined equation of `examples/traffic_flow.rs` (its formulas written once, its
//! `Equation`, `GpuEquation` and `DeviceFormulas` registrations in one file): it converges at
//! design order through the unchanged CPU scheme, and the device steps it as the CPU does.

use mote_core::Precision;
use mote_gpu::{Gpu, GpuFloat};

use crate::gpu;
use crate::muscl::difference;
use crate::traffic_flow;

#[test]
fn a_user_defined_equation_converges_at_design_order() {
    let end = 0.2;
    for order in [2, 3] {
        let (coarse, fine) = (
            traffic_flow::run(200, order, end),
            traffic_flow::run(400, order, end),
        );
        let measured = (coarse / fine).log2();
        eprintln!("traffic flow MUSCL{order}: {coarse:.3e} -> {fine:.3e}, order {measured:.2}");
        assert!(
            (measured - order as f64).abs() <= 0.3,
            "MUSCL{order}: order {measured}"
        );
    }
}

/// The CPU's and the device's states after `steps` equal steps of the traffic-flow run.
fn both<R: GpuFloat>(g: &Gpu, order: usize, steps: usize) -> f64 {
    let mut cpu = traffic_flow::simulation::<R>(200, order);
    let mut dev = traffic_flow::device_simulation::<R>(g, 200, order).unwrap();
    let dt = cpu.stable_dt(0.4);
    let ddt = dev.stable_dt(g, 0.4).unwrap();
    assert!(
        ((dt - ddt) / dt).abs() < 1e-5,
        "stable dt {dt} on the CPU, {ddt} on the device"
    );
    for _ in 0..steps {
        cpu.step(dt).unwrap();
        dev.step(g, dt).unwrap();
    }
    let host = cpu.cloud.state(0).to_vec();
    let device = dev.state(g).unwrap();
    // The run must have moved the state, or the comparison would test nothing.
    let (start, _) = traffic_flow::setup::<R>(200, order);
    assert!(difference(&host, start.state(0)) > 1e-3);
    difference(&device, &host)
}

#[test]
fn a_user_defined_equation_runs_on_the_device_as_on_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    for order in [1, 2, 3] {
        let diff = both::<f32>(&g, order, 20);
        eprintln!("traffic flow MUSCL{order} f32: device/CPU difference {diff:.2e}");
        assert!(diff <= 1e-5, "f32 MUSCL{order}: states differ by {diff:e}");
        if g.supports(Precision::F64) {
            let diff = both::<f64>(&g, order, 20);
            eprintln!("traffic flow MUSCL{order} f64: device/CPU difference {diff:.2e}");
            assert!(diff <= 1e-12, "f64 MUSCL{order}: states differ by {diff:e}");
        }
    }
    if g.supports(Precision::F64) {
        // The example's whole run: the device's error against the exact solution is the CPU's.
        let end = 0.2;
        let on_cpu = traffic_flow::run(400, 2, end);
        let on_device = traffic_flow::run_on_device(&g, 400, 2, end).unwrap();
        eprintln!("traffic flow MUSCL2 L1: CPU {on_cpu:.6e}, device {on_device:.6e}");
        assert!(
            ((on_device - on_cpu) / on_cpu).abs() < 1e-6,
            "L1 error {on_device:e} on the device, {on_cpu:e} on the CPU"
        );
    }
}
