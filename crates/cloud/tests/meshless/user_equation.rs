//! The user-defined equation of `examples/traffic_flow.rs` (one file implementing the
//! `Equation` trait) runs through the unchanged scheme at design order.

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
