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

fn meshless(text: &str) -> mote_io::meshless::MeshlessConfig {
    mote_io::meshless::MeshlessConfig::parse(&Source { file: None, text }, &[]).unwrap()
}

/// A meshless study halves the spacing from the configured resolution down: smooth advection
/// with MUSCL3 shows order 3 and MUSCL2 order 2 in every norm; the Sod tube (a shock and a
/// contact) converges in L1 at an order near 1 and not at all in max; every level is a run
/// directory, the CSV has every variable's norms, the picture is written.
#[test]
fn meshless_studies_observe_the_schemes_orders() {
    let tmp = tempfile::tempdir().unwrap();
    for order in [2usize, 3] {
        let c = meshless(&format!(
            "physics = \"meshless\"\n[run]\nend_time = 0.25\nthreads = 2\n[problem]\n\
             kind = \"advection_wave\"\ndim = 1\nresolution = 320\n[scheme]\norder = {order}\n\
             mood = \"none\"\n"
        ));
        let dir = tmp.path().join(format!("advection{order}"));
        let s = convergence_meshless(&c, 3, &dir, false, "test", &mut |_| {}).unwrap();
        let resolutions: Vec<usize> = s.levels.iter().map(|l| l.resolution).collect();
        assert_eq!(resolutions, [80, 160, 320]);
        assert!(s.levels[0].orders[0].iter().all(Option::is_none));
        for l in &s.levels[1..] {
            for p in l.orders[0] {
                let p = p.unwrap();
                eprintln!("advection, MUSCL{order}, {}: order {p:.3}", l.resolution);
                assert!((p - order as f64).abs() < 0.25, "{p}");
            }
            assert!(l.dir.join("diagnostics.csv").exists());
        }
        let files = write_meshless_study(&dir, &s).unwrap();
        let csv = std::fs::read_to_string(&files[0]).unwrap();
        assert!(csv.starts_with("resolution,spacing,particles,steps,l1_error_u,l2_error_u"));
        assert_eq!(csv.lines().count(), 4);
    }
    let c = meshless(
        "physics = \"meshless\"\n[run]\nthreads = 2\n[problem]\nkind = \"sod\"\nresolution = 400\n",
    );
    let dir = tmp.path().join("sod");
    let s = convergence_meshless(&c, 3, &dir, false, "test", &mut |_| {}).unwrap();
    let names: Vec<&str> = s.levels[0].errors.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["density", "momentum_x", "energy"]);
    for l in &s.levels[1..] {
        for (v, o) in l.orders.iter().enumerate() {
            let (l1, max) = (o[0].unwrap(), o[2].unwrap());
            eprintln!(
                "Sod, {} {}: L1 order {l1:.3}, max {max:.3}",
                l.resolution, names[v]
            );
            assert!((0.5..1.3).contains(&l1), "{l1}");
            assert!(max.abs() < 0.5, "{max}");
        }
    }
    write_meshless_study(&dir, &s).unwrap();
    let png = std::fs::read(dir.join("convergence.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");

    // A problem without an exact solution, too many levels: refused before anything runs.
    let c = meshless("physics = \"meshless\"\n[problem]\nkind = \"quadrant\"\n");
    let dir = tmp.path().join("quadrant");
    let e = convergence_meshless(&c, 3, &dir, false, "test", &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("no exact solution"), "{e}");
    assert!(!dir.exists());
    let c = meshless("physics = \"meshless\"\n[problem]\nkind = \"sod\"\nresolution = 64\n");
    let e = convergence_meshless(&c, 6, &dir, false, "test", &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("at least 4"), "{e}");
    assert!(!dir.exists());
}
