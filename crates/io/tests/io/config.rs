use std::path::Path;

use mote_gravity::IntegratorKind;
use mote_io::config::*;
use mote_io::{ConfigError, GravityConfig, Source};

fn parse(text: &str) -> Result<GravityConfig, ConfigError> {
    GravityConfig::parse(
        &Source {
            file: Some(Path::new("run.toml")),
            text,
        },
        &[],
    )
}

#[test]
fn defaults_fill_what_the_file_leaves_out() {
    let c = parse("physics = \"gravity\"\n").unwrap();
    assert_eq!(c.run, RunSection::default());
    assert_eq!(c.initial_conditions.kind, InitialConditionsKind::Plummer);
    assert_eq!(c.initial_conditions.particles, Some(4096));
    assert_eq!(c.initial_conditions.seed, Some(1));
    assert_eq!(c.initial_conditions.radius, None);
}

#[test]
fn unknown_key_names_file_line_and_path() {
    let text = "physics = \"gravity\"\n\n[run]\nend_time = 1.0\nedn_time = 2.0\n";
    let e = parse(text).unwrap_err();
    assert_eq!(e.line, Some(5), "{e}");
    assert_eq!(e.key.as_deref(), Some("run.edn_time"));
    assert!(e.message.contains("unknown field `edn_time`"), "{e}");
    assert!(
        e.to_string()
            .starts_with("run.toml:5: `run.edn_time`: unknown field"),
        "{e}"
    );
}

#[test]
fn wrong_type_and_bad_values_are_explained() {
    let e = parse("physics = \"gravity\"\n[run]\ndt = \"small\"\n").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("run.dt")));
    assert!(e.message.contains("invalid type"), "{e}");
    let e = parse("physics = \"gravity\"\n[run]\ndt = -0.1\n").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("run.dt")));
    assert!(e.message.contains("> 0"), "{e}");
    let e = parse("physics = \"gravity\"\n[solver]\nkernel = \"avx9\"\n").unwrap_err();
    assert!(e.message.contains("unknown kernel"), "{e}");
    let e = parse("physics = \"gravity\"\n[run]\nprecision = \"f16\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("run.precision"));
    let e = parse("physics = \"gravity\"\n[run]\nbackend = \"tpu\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("run.backend"));
    let e = parse("physics = \"gravity\"\n[run]\ndevice = \"opencl\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("run.device"));
    let e = parse("physics = \"gravity\"\n[run]\nmemory_limit = \"lots\"\n").unwrap_err();
    assert!(e.message.contains("not a memory size"), "{e}");
    // A rank cannot do less than the mean's work.
    let e = parse("physics = \"gravity\"\n[run]\nrebalance = 0.9\n").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("run.rebalance")));
    assert!(e.message.contains(">= 1"), "{e}");
    assert!(parse("physics = \"gravity\"\n[run]\nrebalance = nan\n").is_err());
    assert_eq!(
        parse("physics = \"gravity\"\n").unwrap().run.rebalance,
        1.01
    );
}

#[test]
fn keys_of_another_kind_are_contradictions() {
    let text = "physics = \"gravity\"\n[initial_conditions]\nkind = \"plummer\"\nradius = 2.0\n";
    let e = parse(text).unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(4), Some("initial_conditions.radius"))
    );
    assert!(
        e.message.contains("does not apply to kind `plummer`"),
        "{e}"
    );
}

#[test]
fn syntax_errors_and_missing_physics() {
    let e = parse("physics = \"gravity\"\n[run\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    let e = parse("[run]\ndt = 0.1\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("physics"));
    let e = parse("physics = \"plasma\"\n").unwrap_err();
    assert!(e.message.contains("not available"), "{e}");
    let e = parse("physics = \"meshless\"\n").unwrap_err();
    assert!(e.message.contains("gravity runs only"), "{e}");
}

#[test]
fn overrides_apply_on_top_and_are_blamed_as_such() {
    let src = Source {
        file: None,
        text: "physics = \"gravity\"\n[run]\ndt = 0.1\n",
    };
    let c =
        GravityConfig::parse(&src, &["run.dt=0.5".into(), "integrator.kind=rk4".into()]).unwrap();
    assert_eq!(c.run.dt, 0.5);
    assert_eq!(c.integrator.kind, IntegratorKind::Rk4);
    let e = GravityConfig::parse(&src, &["run.dt=-1".into()]).unwrap_err();
    assert_eq!(e.line, None);
    assert!(e.message.contains("--set"), "{e}");
    assert!(GravityConfig::parse(&src, &["nonsense".into()]).is_err());
}

#[test]
fn show_round_trips() {
    let c = parse("physics = \"gravity\"\n[initial_conditions]\nkind = \"kepler\"\nsemi_major_axis = 2.0\n[solver]\nsoftening = 0.01\n").unwrap();
    let again = parse(&c.to_toml()).unwrap();
    assert_eq!(c, again);
    assert!(c.to_toml().contains("end_time"));
}

#[test]
fn memory_sizes() {
    assert_eq!(parse_memory_limit("4 GiB"), Ok(4 << 30));
    assert_eq!(parse_memory_limit("500MB"), Ok(500_000_000));
    assert!(parse_memory_limit("0").is_err());
    assert!(parse_memory_limit("many").is_err());
}

#[test]
fn tree_settings_are_filled_checked_and_refused_where_they_do_not_apply() {
    let c = parse("physics = \"gravity\"\n[solver]\nkind = \"tree\"\n").unwrap();
    assert_eq!(c.solver.theta, Some(0.5));
    assert_eq!(c.solver.multipole, Some(mote_gravity::Multipole::Monopole));
    assert_eq!(c.solver.leaf_size, Some(16));
    assert!(c.to_toml().contains("theta = 0.5"), "{}", c.to_toml());
    let c = parse("physics = \"gravity\"\n").unwrap();
    assert_eq!(c.solver.theta, None);
    assert!(!c.to_toml().contains("theta"));

    let e = parse("physics = \"gravity\"\n[solver]\ntheta = 0.4\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(3), Some("solver.theta")),
        "{e}"
    );
    assert!(e.message.contains("needs solver.kind = \"tree\""), "{e}");
    let e = parse("physics = \"gravity\"\n[solver]\nkind = \"tree\"\ntheta = 1.5\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(4), Some("solver.theta")),
        "{e}"
    );
    let e = parse("physics = \"gravity\"\n[solver]\nkind = \"tree\"\nleaf_size = 0\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("solver.leaf_size"), "{e}");
    let e = parse("physics = \"gravity\"\n[solver]\nkind = \"tree\"\nmultipole = \"octupole\"\n")
        .unwrap_err();
    assert_eq!(e.key.as_deref(), Some("solver.multipole"), "{e}");
    let e = parse("physics = \"gravity\"\n[solver]\nkind = \"tree\"\nkernel = \"reference\"\n")
        .unwrap_err();
    assert_eq!(e.key.as_deref(), Some("solver.kernel"), "{e}");
    let c = parse("physics = \"gravity\"\n[run]\nbackend = \"gpu\"\n[solver]\nkind = \"tree\"\n");
    assert!(c.is_ok(), "the tree runs on the GPU backend too");
    let e = parse("physics = \"gravity\"\n[solver]\nkind = \"bh\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("solver.kind"), "{e}");
}
