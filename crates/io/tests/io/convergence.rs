use mote_io::GravityConfig;
use mote_io::config::Source;
use mote_io::convergence::*;

#[test]
fn kepler_exact_solution_closes_and_leapfrog_converges_at_second_order() {
    // One full period returns to pericentre.
    let p = kepler_exact(1.0, 0.5, 0.5, 0.5, 2.0 * std::f64::consts::PI);
    assert!(
        (p[1][0] - 0.25).abs() < 1e-14 && p[1][1].abs() < 1e-13,
        "{p:?}"
    );
    let text = "physics = \"gravity\"\n[run]\nend_time = 3.0\ndt = 0.01\n[initial_conditions]\nkind = \"kepler\"\n[integrator]\nkind = \"leapfrog\"\n";
    let c = GravityConfig::parse(&Source { file: None, text }, &[]).unwrap();
    let s = convergence_gravity(&c, 3).unwrap();
    assert_eq!(s.reference, "exact");
    for l in &s.levels[..2] {
        let o = l.order.unwrap();
        assert!((o - 2.0).abs() < 0.1, "{o}");
    }
}
