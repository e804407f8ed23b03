//! End-to-end checks of the `mote` program as a user runs it.

use std::process::Command;

mod common;
use common::have_gpu;

fn mote(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(args)
        .output()
        .expect("failed to start mote")
}

#[test]
fn version_names_the_package_version() {
    let out = mote(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.trim(), format!("mote {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn info_reports_the_machine() {
    let out = mote(&["info", "--threads", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let chosen = mote_core::SimdLevel::best().name();
    assert!(text.contains(&format!("chosen:   {chosen}")), "{text}");
    assert!(text.contains(&mote_core::platform::cpu_model()), "{text}");
    assert!(text.contains("threads      2 "), "{text}");
}

#[test]
fn info_json_is_one_object_with_the_machine() {
    let out = mote(&["info", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(v["logical_cores"], cores);
    assert_eq!(v["simd_detected"][0], "scalar");
    assert_eq!(v["simd_chosen"], mote_core::SimdLevel::best().name());
    assert_eq!(
        v["simd_gathers"],
        mote_core::SimdLevel::for_gathers().name()
    );
    assert_eq!(v["default_precision"], "f64");
}

#[test]
fn unknown_command_fails_with_usage() {
    let out = mote(&["fly"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized subcommand"));
}

#[test]
fn bench_gravity_json_reports_a_consistent_measurement() {
    let out = mote(&[
        "bench",
        "gravity",
        "--particles",
        "300",
        "--precision",
        "f32",
        "--threads",
        "2",
        "--repeats",
        "3",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["family"], "gravity");
    assert_eq!(v["backend"], "cpu");
    assert_eq!(v["kernel"], mote_core::SimdLevel::best().name());
    assert_eq!(v["particles"], 300);
    assert_eq!(v["precision"], "f32");
    assert_eq!(v["threads"], 2);
    let (min, med, max) = (
        v["seconds_min"].as_f64().unwrap(),
        v["seconds_median"].as_f64().unwrap(),
        v["seconds_max"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= med && med <= max, "{min} {med} {max}");
    let rate = v["interactions_per_second"].as_f64().unwrap();
    assert!((rate * med / (300.0 * 299.0) - 1.0).abs() < 1e-12);
}

#[test]
fn bench_gravity_refuses_bad_input_with_a_message() {
    let out = mote(&["bench", "gravity", "--kernel", "avx1024"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown kernel `avx1024`"));
    let out = mote(&["bench", "gravity", "--particles", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 2"));
    let out = mote(&["bench", "gravity", "--softening=-1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("softening"));
    // More particles than the machine holds: an error, not an allocation abort (exit 134).
    for family in ["gravity", "cloud"] {
        let out = mote(&["bench", family, "--particles", "4000000000000"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{family}: {err}");
        assert!(
            err.contains("bytes") && !err.contains("panicked"),
            "{family}: {err}"
        );
    }
    if !mote_core::SimdLevel::Avx512.is_available() {
        let out = mote(&["bench", "gravity", "--kernel", "avx512"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("not available"));
    }
}

fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// `mote run examples/EXAMPLE --out OUT --quiet`, with `--set` for each of `sets`.
fn run_example(example: &str, out: &std::path::Path, sets: &[&str]) -> std::process::Output {
    let config = examples_dir().join(example);
    let mut args = vec![
        "run",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    mote(&args)
}

/// Runs `examples/kepler.toml` into `out` until `end_time`, quietly, and checks it succeeded.
fn run_kepler(out: &std::path::Path, end_time: &str) {
    let cfg = examples_dir().join("kepler.toml");
    let set = format!("run.end_time={end_time}");
    let r = mote(&[
        "run",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--set",
        &set,
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

/// Rows of a diagnostics CSV as numbers.
fn read_csv(path: &std::path::Path) -> (Vec<String>, Vec<Vec<f64>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    (header, rows)
}

/// One `check:` line of an example's comment: a diagnostics column, a statistic over its rows
/// (`end`, `max`, `min`, `maxabs`) and the interval it must fall in.
struct Check {
    column: String,
    stat: String,
    lo: f64,
    hi: f64,
}

/// The `check with:` arguments and the `check:` lines of an example's comment.
fn checks_of(text: &str) -> (Vec<String>, Vec<Check>) {
    let mut args = Vec::new();
    let mut checks = Vec::new();
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some(rest) = line.strip_prefix("check with:") {
            args.extend(rest.split_whitespace().map(String::from));
        } else if let Some(rest) = line.strip_prefix("check:") {
            // COLUMN STAT in [LO, HI]
            let (head, range) = rest
                .split_once(" in ")
                .expect("`check: COLUMN STAT in [LO, HI]`");
            let mut words = head.split_whitespace();
            let (column, stat) = (words.next().unwrap(), words.next().unwrap());
            let range = range.trim().trim_start_matches('[').trim_end_matches(']');
            let (lo, hi) = range.split_once(',').unwrap();
            checks.push(Check {
                column: column.to_string(),
                stat: stat.to_string(),
                lo: lo.trim().parse().unwrap(),
                hi: hi.trim().parse().unwrap(),
            });
        }
    }
    (args, checks)
}

/// Every example states what a user will see, with its headline numbers on `check:` lines, and
/// holds: each runs (with its `check with:` settings where the full run is too long for a
/// test) and each stated statistic of its diagnostics falls in the stated interval. An example
/// without a check is an error.
#[test]
fn every_example_shows_what_its_comment_states() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let (settings, checks) = checks_of(&text);
        assert!(!checks.is_empty(), "{}: no `check:` line", path.display());
        let out = tmp.path().join(path.file_stem().unwrap());
        let mut args = vec![
            "run".to_string(),
            path.display().to_string(),
            "--out".into(),
            out.display().to_string(),
            "--quiet".into(),
        ];
        args.extend(settings);
        let run = mote(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            run.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&run.stderr)
        );
        let (header, rows) = read_csv(&out.join("diagnostics.csv"));
        for c in &checks {
            let k = header
                .iter()
                .position(|h| *h == c.column)
                .unwrap_or_else(|| panic!("{}: no column {}", path.display(), c.column));
            let values = rows.iter().map(|r| r[k]);
            let value = match c.stat.as_str() {
                "end" => rows.last().unwrap()[k],
                "max" => values.fold(f64::NEG_INFINITY, f64::max),
                "min" => values.fold(f64::INFINITY, f64::min),
                "maxabs" => values.map(f64::abs).fold(0.0, f64::max),
                s => panic!("{}: unknown statistic {s}", path.display()),
            };
            eprintln!(
                "{}: {} {} = {value:.4e} (stated [{}, {}])",
                path.file_name().unwrap().to_string_lossy(),
                c.column,
                c.stat,
                c.lo,
                c.hi
            );
            if !(c.lo..=c.hi).contains(&value) {
                failures.push(format!(
                    "{}: {} {} = {value:e}, stated [{}, {}]",
                    path.display(),
                    c.column,
                    c.stat,
                    c.lo,
                    c.hi
                ));
            }
        }
        assert!(out.join("config.toml").exists() && out.join("provenance.json").exists());
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn kepler_example_conserves_energy_and_records_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("kepler");
    run_kepler(&out, "6.283185307179586");
    let (header, rows) = read_csv(&out.join("diagnostics.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let last = rows.last().unwrap();
    // One period at 1000 Yoshida steps: energy to 1e-10, E = -m1 m2 / 2a = -0.125.
    assert!(
        last[col("relative_energy_error")] < 1e-10,
        "{}",
        last[col("relative_energy_error")]
    );
    assert!((rows[0][col("total")] + 0.125).abs() < 1e-15);
    assert_eq!(last[col("step")], 1000.0);
    let prov: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap())
            .unwrap();
    assert_eq!(prov["steps"], 1000);
    assert_eq!(prov["particles"], 2);
    assert_eq!(prov["precision"], "f64");
    assert!(prov["finished"].is_string());
    // The resolved configuration reproduces the run's settings.
    let resolved = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(resolved.contains("kind = \"yoshida4\""), "{resolved}");
    // A second run into the same directory is refused; --force replaces it.
    let cfg = examples_dir().join("kepler.toml");
    let again = mote(&[
        "run",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert!(out.join("diagnostics.csv").exists());
    let forced = mote(&[
        "run",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--force",
        "--set",
        "run.end_time=1",
    ]);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    let (_, rows) = read_csv(&out.join("diagnostics.csv"));
    assert_eq!(
        rows.last().unwrap()[1],
        1.0,
        "the replaced run's diagnostics"
    );
}

#[test]
fn config_errors_exit_2_with_file_line_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("bad.toml");
    std::fs::write(
        &cfg,
        "physics = \"gravity\"\n[run]\nend_time = 1.0\ndt = 0\n",
    )
    .unwrap();
    let out = tmp.path().join("never");
    let r = mote(&["run", cfg.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("bad.toml:4: `run.dt`"), "{err}");
    assert!(!out.exists(), "nothing is written for a bad configuration");
    std::fs::write(&cfg, "physics = \"gravity\"\n[integrator]\nknd = \"rk4\"\n").unwrap();
    let r = mote(&["show", cfg.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("bad.toml:3: `integrator.knd`: unknown field")
    );
    // A meshless configuration: a flux the problem's equation does not have.
    std::fs::write(
        &cfg,
        "physics = \"meshless\"\n[problem]\nkind = \"advection_wave\"\n[scheme]\nflux = \"hllc\"\n",
    )
    .unwrap();
    let r = mote(&["run", cfg.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("bad.toml:5: `scheme.flux`"), "{err}");
    assert!(!out.exists(), "nothing is written for a bad configuration");
}

#[test]
fn an_impossible_memory_limit_fails_before_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let r = mote(&[
        "run",
        "--out",
        out.to_str().unwrap(),
        "--memory-limit",
        "100 KiB",
        "--quiet",
    ]);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("memory limit for 4096 particles") && err.contains("estimate"),
        "{err}"
    );
    assert!(!out.exists());
    // Without a limit, the default budget (the memory available now) refuses an impossible
    // size the same way: a gravity run and a meshless one whose cloud is never built.
    let r = mote(&[
        "run",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--set",
        "initial_conditions.particles=100000000000",
    ]);
    let vortex = run_example("vortex.toml", &out, &["problem.resolution=1000000"]);
    for (r, count) in [
        (r, "100000000000 particles"),
        (vortex, "1000000000000 particles"),
    ] {
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(err.contains(count) && err.contains("bytes"), "{err}");
        assert!(!err.contains("panicked") && !out.exists(), "{err}");
    }
}

#[test]
fn show_prints_every_resolved_setting() {
    let r = mote(&["show", "--set", "initial_conditions.kind=disc_galaxy"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8(r.stdout).unwrap();
    for key in [
        "end_time",
        "dt",
        "precision",
        "disc_scale_length",
        "softening",
        "kernel",
        "diagnostics_every",
        "checkpoint_wall_interval",
        // Unset settings are shown as comments with what takes their place.
        "# memory_limit",
        "# checkpoint_interval",
    ] {
        assert!(text.contains(key), "{key} missing from\n{text}");
    }
    // A step longer than the run is allowed, with a warning.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k");
    let r = run_example("kepler.toml", &out, &["run.end_time=0.01", "run.dt=0.05"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("larger than run.end_time"));
    // More threads than cores: a warning (1000 threads ran 2900 times slower).
    let cores = std::thread::available_parallelism().unwrap().get();
    let many = (cores + 1).to_string();
    let r = mote(&["show", "--threads", &many]);
    assert!(r.status.success());
    assert!(
        String::from_utf8_lossy(&r.stderr).contains(&format!("more than the {cores} cores")),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
}

#[test]
fn bench_cloud_json_has_every_pass() {
    // The CPU's slot-major layout is in the exhaustive build only (decision 0014): the
    // default build says how to get it instead of running something else.
    for layout in ["row", "slot"] {
        let out = mote(&[
            "bench",
            "cloud",
            "--particles",
            "900",
            "--dim",
            "2",
            "--order",
            "3",
            "--threads",
            "2",
            "--repeats",
            "2",
            "--layout",
            layout,
            "--json",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        if layout == "slot" && !out.status.success() {
            assert!(
                err.contains("--layout slot") && err.contains("exhaustive-bench"),
                "{err}"
            );
            continue;
        }
        assert!(out.status.success(), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(v["family"], "cloud");
        assert_eq!(v["particles"], 900);
        assert_eq!(v["dim"], 2);
        assert_eq!(v["layout"], layout);
        assert_eq!(v["stages"], 3);
        assert!(v["neighbours_mean"].as_f64().unwrap() > 9.0);
        for pass in ["derivatives", "fluxes", "rk_stages", "rk_update"] {
            let p = &v["passes"][pass];
            assert!(p["seconds"].as_f64().unwrap() >= 0.0, "{pass}");
            assert!(p["gb_per_s"].is_number(), "{pass}");
        }
        // The passes' SIMD level: the gather passes' default, or the one asked for.
        assert_eq!(v["simd"], mote_core::SimdLevel::for_gathers().name());
    }
    let out = mote(&[
        "bench",
        "cloud",
        "--particles",
        "400",
        "--repeats",
        "1",
        "--simd",
        "scalar",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["simd"], "scalar");
    // First order has no derivative pass, so none is reported (no rate from an empty timing).
    let out = mote(&[
        "bench",
        "cloud",
        "--particles",
        "400",
        "--order",
        "1",
        "--repeats",
        "1",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["passes"]["derivatives"].is_null(), "{}", v["passes"]);
    assert!(v["passes"]["fluxes"]["seconds"].as_f64().unwrap() > 0.0);
    let out = mote(&["bench", "cloud", "--particles", "400", "--simd", "avx9"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--simd `avx9`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = mote(&["bench", "cloud", "--dim", "4"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dim"));
    // 1-D and 3-D clouds are in the exhaustive build only (decision 0014): the default build
    // says how to get them instead of running something else.
    let out = mote(&[
        "bench",
        "cloud",
        "--dim",
        "3",
        "--particles",
        "512",
        "--repeats",
        "1",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(v["dim"], 3);
    } else {
        assert!(
            err.contains("--dim 3") && err.contains("exhaustive-bench"),
            "{err}"
        );
    }
    // Euler: D + 2 variables, and the equation named; an unknown equation is refused.
    let out = mote(&[
        "bench",
        "cloud",
        "--particles",
        "400",
        "--equation",
        "euler",
        "--order",
        "2",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["equation"], "euler");
    assert_eq!(v["variables"], 4);
    // The scheme options, reported back.
    let out = mote(&[
        "bench",
        "cloud",
        "--particles",
        "400",
        "--equation",
        "euler",
        "--order",
        "2",
        "--flux",
        "hllc",
        "--limiter",
        "vk",
        "--limiter-mode",
        "hard",
        "--mood",
        "u1",
        "--mood-strategy",
        "strict",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["flux"], "hllc");
    assert_eq!(v["limiter"], "vk");
    assert_eq!(v["mood_strategy"], "strict");
    assert!(v["passes"]["limiter"]["seconds"].as_f64().unwrap() > 0.0);
    // HLLC is Euler's: refused for advection, before any work.
    let out = mote(&["bench", "cloud", "--particles", "400", "--flux", "hllc"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("flux"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = mote(&["bench", "cloud", "--particles", "400", "--equation", "mhd"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--equation `mhd`"));
}

#[test]
fn resume_continues_and_refuses_bad_requests_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k");
    run_kepler(&out, "3");
    let ckpt = out.join("checkpoint.mote");
    // An end time already reached, or a precision change: configuration errors (exit 2).
    let r = mote(&["resume", ckpt.to_str().unwrap(), "--quiet"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("later end time"));
    let r = mote(&[
        "resume",
        ckpt.to_str().unwrap(),
        "--quiet",
        "--set",
        "run.end_time=6",
        "--set",
        "run.precision=\"f32\"",
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("precision cannot change"));
    let r = mote(&[
        "resume",
        ckpt.to_str().unwrap(),
        "--quiet",
        "--set",
        "run.end_time=6",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("to t = 6"));
    // A damaged checkpoint is refused, not half-read.
    let mut bytes = std::fs::read(&ckpt).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 1;
    std::fs::write(&ckpt, &bytes).unwrap();
    let r = mote(&[
        "resume",
        ckpt.to_str().unwrap(),
        "--quiet",
        "--set",
        "run.end_time=9",
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("checksum"));
}

#[test]
fn inspect_summarises_every_output_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k");
    run_kepler(&out, "1");
    let text = |p: std::path::PathBuf| {
        let r = mote(&["inspect", p.to_str().unwrap()]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        String::from_utf8(r.stdout).unwrap()
    };
    assert!(text(out.join("snapshots/snap_00010.vtu")).contains("2 particles"));
    let c = text(out.join("checkpoint.mote"));
    assert!(
        c.contains("time 1")
            && c.contains("checksum ok")
            && c.contains("total mass 1.0000000000e0"),
        "{c}"
    );
    assert!(text(out.join("diagnostics.csv")).contains("relative_energy_error"));
    let r = mote(&["inspect", out.join("config.toml").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
}

#[test]
fn plot_draws_the_diagnostics_of_a_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k");
    run_kepler(&out, "2");
    let r = mote(&["plot", out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let png = std::fs::read(out.join("diagnostics.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big-endian, at bytes 16..24.
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1000);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 800);
    assert!(!out.join("diagnostics.partial.png").exists());
    let r = mote(&["plot", tmp.path().to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("diagnostics.csv"));
}

#[test]
fn convergence_reports_second_order_for_leapfrog_on_kepler() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = examples_dir().join("kepler.toml");
    let out = tmp.path().join("conv");
    let r = mote(&[
        "convergence",
        cfg.to_str().unwrap(),
        "--levels",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "run.end_time=3",
        "--set",
        "integrator.kind=leapfrog",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let (header, rows) = read_csv(&out.join("convergence.csv"));
    let order = header.iter().position(|h| h == "order").unwrap();
    assert!((rows[0][order] - 2.0).abs() < 0.1, "{:?}", rows[0]);
    assert!(out.join("convergence.png").exists());
    let r = mote(&["convergence", "--levels", "1"]);
    assert_eq!(r.status.code(), Some(2));
}

/// `mote convergence` on a meshless example: levels by resolution, the table on stdout, one run
/// directory per level, the CSV and the picture; a problem without an exact solution is a usage
/// error (exit code 2) with the reason.
#[test]
fn convergence_runs_meshless_problems_by_resolution() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("conv");
    let cfg = examples_dir().join("sod.toml");
    let r = mote(&[
        "convergence",
        cfg.to_str().unwrap(),
        "--levels",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "problem.resolution=100",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        stdout.contains("[50, 100]") && stdout.contains("momentum_x"),
        "{stdout}"
    );
    let (header, rows) = read_csv(&out.join("convergence.csv"));
    assert_eq!(rows.len(), 2);
    let p = header.iter().position(|h| h == "l1_order_density").unwrap();
    assert!(
        rows[0][p].is_nan() && (0.4..1.5).contains(&rows[1][p]),
        "{rows:?}"
    );
    assert!(out.join("r0050/diagnostics.csv").exists() && out.join("r0100").exists());
    assert!(out.join("convergence.png").exists());
    let cfg = examples_dir().join("quadrant.toml");
    let other = tmp.path().join("quadrant");
    let r = mote(&[
        "convergence",
        cfg.to_str().unwrap(),
        "--out",
        other.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("no exact solution"));
}

#[test]
fn roofline_reports_ceilings_places_kernels_and_writes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("roofline");
    let r = mote(&[
        "bench",
        "roofline",
        "--array-bytes",
        "8388608",
        "--repeats",
        "1",
        "--json",
        "--threads",
        "2",
        "--quick",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("one JSON object");
    assert_eq!(v["family"], "roofline");
    // Every kernel is placed: a positive rate and a fraction of its binding ceiling that is
    // positive and not absurdly above it (the roofs are measured, so a little above 1 is noise).
    let kernels = v["kernels"].as_array().unwrap();
    for name in [
        "gravity reference",
        "cloud search",
        "cloud derivatives",
        "cloud fluxes",
    ] {
        assert!(kernels.iter().any(|k| k["kernel"] == name), "{name} placed");
    }
    for k in kernels {
        let f = k["fraction"].as_f64().unwrap();
        assert!(f > 0.0 && f < 3.0, "{k}");
        assert!(["memory", "arithmetic"].contains(&k["bound"].as_str().unwrap()));
    }
    // Four layouts in each loop, and thread counts 1 and 2 in the scaling table.
    let layouts = v["layouts"].as_array().unwrap();
    for pass in ["resident", "streaming"] {
        assert_eq!(layouts.iter().filter(|l| l["pass"] == pass).count() % 4, 0);
        assert!(layouts.iter().any(|l| l["pass"] == pass));
    }
    let threads: Vec<u64> = v["scaling"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["threads"].as_u64().unwrap())
        .collect();
    assert!(threads.contains(&1) && threads.contains(&2), "{threads:?}");
    for f in ["roofline.csv", "layouts.csv", "scaling.csv", "roofline.png"] {
        assert!(out.join(f).metadata().unwrap().len() > 100, "{f}");
    }
    let figures = v["figures"].as_object().unwrap();
    for key in [
        "copy (1 thread)",
        "triad (all threads)",
        "read (all threads)",
    ] {
        assert!(figures[key]["median"].as_f64().unwrap() > 0.1, "{key}");
    }
    // Some FMA ceiling is reported, and it is a sane number of GFLOP/s (not a folded loop).
    let fma = figures
        .iter()
        .find(|(k, _)| k.contains("1 thread") && (k.contains("fma f64") || k.contains("mul+add")))
        .unwrap()
        .1;
    let g = fma["median"].as_f64().unwrap();
    assert!(g > 0.1 && g < 10_000.0, "{g}");
}

#[test]
fn a_gravity_run_on_the_gpu_follows_the_cpu_run() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = examples_dir().join("plummer.toml");
    let run = |backend: &str, dir: &std::path::Path, solver: &str| {
        mote(&[
            "run",
            cfg.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
            "--quiet",
            "--set",
            "initial_conditions.particles=300",
            "--set",
            "run.end_time=0.25",
            "--set",
            &format!("run.backend={backend}"),
            "--set",
            &format!("solver.kind={solver}"),
        ])
    };
    // A missing CUDA driver is a clear error before anything is written.
    let cuda_dir = tmp.path().join("cuda");
    let r = mote(&[
        "run",
        cfg.to_str().unwrap(),
        "--out",
        cuda_dir.to_str().unwrap(),
        "--set",
        "run.backend=gpu",
        "--set",
        "run.device=cuda",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&mote(&["info", "--json"]).stdout).unwrap();
    if v["cuda_driver"] == false {
        assert_eq!(r.status.code(), Some(1));
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains("cuda:0") && err.contains("libcuda"), "{err}");
        assert!(
            !cuda_dir.exists(),
            "no run directory for a run that could not start"
        );
    }
    if !have_gpu() {
        return;
    }
    for solver in ["direct", "tree"] {
        let (cpu, gpu) = (
            tmp.path().join(format!("cpu-{solver}")),
            tmp.path().join(format!("gpu-{solver}")),
        );
        for (b, d) in [("cpu", &cpu), ("gpu", &gpu)] {
            let r = run(b, d, solver);
            assert!(
                r.status.success(),
                "{b}: {}",
                String::from_utf8_lossy(&r.stderr)
            );
        }
        let provenance = std::fs::read_to_string(gpu.join("provenance.json")).unwrap();
        assert!(
            provenance.contains("\"backend\": \"gpu wgpu:0\""),
            "{provenance}"
        );
        // Forces agree to about 1e-15, so after 72 steps the energies agree far below the
        // integrator's own error (1e-5 here).
        let energy = |d: &std::path::Path| {
            let (h, rows) = read_csv(&d.join("diagnostics.csv"));
            let e = h.iter().position(|c| c == "total").unwrap();
            rows.last().unwrap()[e]
        };
        // The device tree sums the CPU tree's lists: the same agreement.
        let (a, b) = (energy(&cpu), energy(&gpu));
        assert!(((a - b) / a).abs() < 1e-9, "{solver}: cpu {a}, gpu {b}");
    }
}

#[test]
fn gravity_bench_on_the_gpu_reports_transfers_and_speed_up() {
    if !have_gpu() {
        return;
    }
    let r = mote(&[
        "bench",
        "gravity",
        "--backend",
        "gpu",
        "--particles",
        "512",
        "--precision",
        "f32",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["backend"], "gpu");
    for key in [
        "upload_seconds",
        "download_seconds",
        "kernel_seconds",
        "speedup_over_cpu",
        "interactions_per_second",
    ] {
        assert!(v[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }
}

#[test]
fn cloud_bench_on_the_gpu_reports_passes_transfers_and_speed_up() {
    if !have_gpu() {
        return;
    }
    let bench = |extra: &[&str]| {
        let mut a = vec![
            "bench",
            "cloud",
            "--backend",
            "gpu",
            "--particles",
            "900",
            "--order",
            "2",
            "--repeats",
            "1",
            "--json",
        ];
        a.extend_from_slice(extra);
        mote(&a)
    };
    let r = bench(&[
        "--equation",
        "euler",
        "--precision",
        "f32",
        "--limiter",
        "bj",
        "--mood",
        "u2",
        "--flux",
        "hllc",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["backend"], "gpu");
    assert_eq!(v["variables"], 4);
    for key in [
        "upload_seconds",
        "download_seconds",
        "cpu_seconds_median",
        "speedup_over_cpu",
        "seconds_median",
    ] {
        assert!(v[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }
    assert_eq!(v["limiter"], "bj");
    assert_eq!(v["mood"], "u2");
    assert_eq!(v["flux"], "hllc");
    for pass in ["derivatives", "limiter", "fluxes", "rk", "mood"] {
        assert!(
            v["passes"][pass]["seconds"].as_f64().unwrap() > 0.0,
            "{pass}: {v}"
        );
    }
    // The device search found exactly the CPU's neighbours on the same cloud.
    let cpu = mote(&[
        "bench",
        "cloud",
        "--particles",
        "900",
        "--order",
        "2",
        "--repeats",
        "1",
        "--json",
        "--equation",
        "euler",
        "--precision",
        "f32",
    ]);
    assert!(
        cpu.status.success(),
        "{}",
        String::from_utf8_lossy(&cpu.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&cpu.stdout).unwrap();
    assert_eq!(v["particles"], c["particles"]);
    assert_eq!(
        v["neighbours_mean"].as_f64().unwrap(),
        c["neighbours_mean"].as_f64().unwrap(),
        "device and CPU searches differ"
    );
    // The WENO-type reconstruction runs on the device too.
    let r = bench(&["--weno"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let w: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(w["weno"], true, "{w}");
    // Moving clouds run on the device too, with the motion's share reported: after the same
    // two steps the device's particles have the CPU's neighbours, and not those of the start.
    let moving = ["--moving", "--motion-speed", "3"];
    let r = bench(&moving);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let w: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(w["motion"], "rotation", "{w}");
    assert!(
        w["passes"]["motion"]["seconds"].as_f64().unwrap() > 0.0,
        "{w}"
    );
    let cpu_run = |extra: &[&str]| -> serde_json::Value {
        let mut a = vec![
            "bench",
            "cloud",
            "--particles",
            "900",
            "--order",
            "2",
            "--repeats",
            "1",
            "--json",
        ];
        a.extend_from_slice(extra);
        let r = mote(&a);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        serde_json::from_slice(&r.stdout).unwrap()
    };
    let moved = cpu_run(&moving)["neighbours_mean"].as_f64().unwrap();
    let fixed = cpu_run(&[])["neighbours_mean"].as_f64().unwrap();
    assert_eq!(w["neighbours_mean"].as_f64().unwrap(), moved, "{w}");
    assert_ne!(moved, fixed, "the motion changed no neighbour count");
    // What the device passes lack is refused by name, with a non-zero exit.
    let r = bench(&["--variables", "2"]);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("not supported on the GPU backend: 2 advected variables"),
        "{err}"
    );
}

// ---- Nothing lost, nothing crashes (issue #25) ----

/// `mote` with `args`, run in the directory `cwd`.
fn mote_in(cwd: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("failed to start mote")
}

/// The names in `dir`, sorted.
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn force_replaces_only_an_earlier_run_and_never_a_users_files() {
    let tmp = tempfile::tempdir().unwrap();
    let kepler = examples_dir().join("kepler.toml");
    let kepler = kepler.to_str().unwrap();
    // A directory of the user's: refused with exit 2, nothing touched, nothing created.
    let user = tmp.path().join("thesis");
    std::fs::create_dir(&user).unwrap();
    std::fs::write(user.join("thesis.tex"), "years of work").unwrap();
    std::fs::write(user.join("config.toml"), "mine").unwrap();
    let r = mote(&[
        "run",
        kepler,
        "--out",
        user.to_str().unwrap(),
        "--force",
        "--quiet",
    ]);
    assert_eq!(
        r.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(String::from_utf8_lossy(&r.stderr).contains("not a mote run directory"));
    assert_eq!(listing(&user), ["config.toml", "thesis.tex"]);
    assert_eq!(
        std::fs::read_to_string(user.join("config.toml")).unwrap(),
        "mine"
    );
    // An earlier run with a file of the user's beside it: the run is replaced, the file stays.
    let run = tmp.path().join("k");
    run_kepler(&run, "1");
    std::fs::write(run.join("notes.txt"), "keep").unwrap();
    std::fs::write(run.join("snapshots/mine.txt"), "keep").unwrap();
    let r = mote(&[
        "run",
        kepler,
        "--out",
        run.to_str().unwrap(),
        "--force",
        "--quiet",
        "--set",
        "run.end_time=0.5",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        std::fs::read_to_string(run.join("notes.txt")).unwrap(),
        "keep"
    );
    assert!(run.join("snapshots/mine.txt").exists());
    assert!(String::from_utf8_lossy(&r.stdout).contains("to t = 0.5"));
    // `.` and `..` (here a run directory and its parent) are never replaced.
    let before = listing(&run);
    for out in [".", ".."] {
        let r = mote_in(&run, &["run", kepler, "--out", out, "--force", "--quiet"]);
        assert_eq!(r.status.code(), Some(2), "--out {out}");
        assert!(
            String::from_utf8_lossy(&r.stderr).contains("working directory"),
            "{}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    assert_eq!(listing(&run), before);
    // Without --force an existing run is not touched either.
    let r = mote(&["run", kepler, "--out", run.to_str().unwrap(), "--quiet"]);
    assert_eq!(r.status.code(), Some(2));
    assert_eq!(listing(&run), before);
}

/// The first Python (Debian's, then the one on the path) that imports `module`.
fn python_with(module: &str) -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Reads every `.vtu` below `dir` with meshio (an independent reader, Debian's
/// `python3-meshio`) and checks that every point array has one entry per point and that the
/// snapshot carries its time. Skipped with a note where meshio is missing, unless
/// `MOTE_REQUIRE_MESHIO=1` (CI) makes that a failure.
fn check_with_meshio(dir: &std::path::Path) {
    const SCRIPT: &str = r#"
import glob, sys
import meshio
files = sorted(glob.glob(sys.argv[1] + "/**/*.vtu", recursive=True))
assert files, "no snapshots"
for f in files:
    m = meshio.read(f)
    n = len(m.points)
    assert n > 0, f
    for name, values in m.point_data.items():
        assert len(values) == n, f"{f}: {name} has {len(values)} values for {n} points"
    assert "TimeValue" in m.field_data, f"{f}: no TimeValue"
print(len(files), "snapshots read by meshio")
"#;
    let Some(python) = python_with("meshio") else {
        assert!(
            std::env::var("MOTE_REQUIRE_MESHIO").is_err(),
            "MOTE_REQUIRE_MESHIO is set but no python3 imports meshio (apt-get install python3-meshio)"
        );
        eprintln!("meshio not installed: snapshots checked by mote's strict reader only");
        return;
    };
    let r = Command::new(python)
        .args(["-c", SCRIPT, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "meshio: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&r.stdout).trim());
}

#[test]
fn every_snapshot_of_every_example_has_arrays_of_the_declared_length() {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let meshless = text.contains("physics = \"meshless\"");
        let out = tmp.path().join(path.file_stem().unwrap());
        let mut args = vec![
            "run".to_string(),
            path.display().to_string(),
            "--out".into(),
            out.display().to_string(),
            "--quiet".into(),
            "--set".into(),
            format!("run.end_time={}", if meshless { 0.01 } else { 0.1 }),
            "--set".into(),
            "output.snapshots=3".into(),
        ];
        if meshless {
            args.extend(["--set".into(), "problem.resolution=32".into()]);
        } else if text.contains("particles") {
            args.extend(["--set".into(), "initial_conditions.particles=32".into()]);
        }
        let r = mote(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            r.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&r.stderr)
        );
        let pvd = std::fs::read_to_string(out.join("snapshots.pvd")).unwrap();
        let snaps = listing(&out.join("snapshots"));
        // The initial and the final state at least; a step longer than the spacing of the
        // snapshot times takes one snapshot for several of them.
        assert!(
            snaps.len() >= 2 && snaps.len() == pvd.matches("<DataSet").count(),
            "{}: {snaps:?}",
            path.display()
        );
        for name in snaps {
            let file = out.join("snapshots").join(&name);
            // The strict reader: every array must hold NumberOfPoints tuples.
            let arrays = mote_io::vtk::read_vtu(&std::fs::read(&file).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let n = arrays["Points"].to_f64().len() / 3;
            assert!(n > 0, "{}", file.display());
            for (array, a) in &arrays {
                if !["connectivity", "offsets", "types", "TimeValue"].contains(&array.as_str()) {
                    assert_eq!(
                        a.to_f64().len(),
                        n * a.components,
                        "{}: {array}",
                        file.display()
                    );
                }
            }
            // Each snapshot carries its own time, the one the .pvd lists.
            let t = arrays["TimeValue"].to_f64()[0];
            assert!(
                pvd.contains(&format!("timestep=\"{t:?}\"")),
                "{}: {t}",
                file.display()
            );
            if meshless {
                assert!(
                    arrays["order"].to_f64().iter().all(|&o| o >= 1.0),
                    "{}",
                    file.display()
                );
            }
            let r = mote(&["inspect", file.to_str().unwrap()]);
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
            assert!(
                !String::from_utf8_lossy(&r.stdout).contains("inf"),
                "{}",
                file.display()
            );
        }
    }
    check_with_meshio(tmp.path());
}

#[test]
fn inspect_reports_a_snapshot_whose_arrays_are_short() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k");
    run_kepler(&out, "0.1");
    let snap = out.join("snapshots/snap_00000.vtu");
    let mut bytes = std::fs::read(&snap).unwrap();
    // Declare three points where the file holds two (one byte of the XML header changed).
    let at = bytes
        .windows(16)
        .position(|w| w == b"NumberOfPoints=\"")
        .unwrap()
        + 16;
    assert_eq!(bytes[at], b'2');
    bytes[at] = b'3';
    let bad = out.join("bad.vtu");
    std::fs::write(&bad, &bytes).unwrap();
    let r = mote(&["inspect", bad.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("declares") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn a_closed_standard_output_ends_the_program_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k");
    run_kepler(&out, "1");
    for args in [
        vec![
            "inspect",
            out.join("diagnostics.csv")
                .to_str()
                .unwrap()
                .to_string()
                .leak() as &str,
        ],
        vec!["show"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mote"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Close the reading end before mote writes: every write meets a closed pipe.
        drop(child.stdout.take());
        let r = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            matches!(r.status.code(), Some(0 | 141)),
            "{args:?}: {:?} {err}",
            r.status
        );
    }
}

#[test]
fn a_collapsing_time_step_stops_the_run_naming_the_particle() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sod");
    let r = run_example(
        "sod.toml",
        &out,
        &[
            "scheme.mood=none",
            "scheme.stepper=euler",
            "run.cfl=1.0",
            "scheme.order=3",
        ],
    );
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("collapsed") && err.contains("particle id"),
        "{err}"
    );
    // The last good state is kept.
    assert!(out.join("checkpoint.mote").exists(), "{err}");
}

#[test]
fn initial_condition_mistakes_name_file_line_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "kind = \"kepler\"\neccentricity = 1.5",
            "initial_conditions.eccentricity",
            5,
        ),
        ("kind = \"kepler\"\nm1 = -1", "initial_conditions.m1", 5),
        (
            "kind = \"uniform_sphere\"\nvirial_ratio = -3",
            "initial_conditions.virial_ratio",
            5,
        ),
        (
            "kind = \"cold_collapse\"\nradius = 0",
            "initial_conditions.radius",
            5,
        ),
    ];
    for (ic, key, line) in cases {
        let cfg = tmp.path().join("c.toml");
        std::fs::write(
            &cfg,
            format!("physics = \"gravity\"\n\n[initial_conditions]\n{ic}\n"),
        )
        .unwrap();
        let r = mote(&[
            "run",
            cfg.to_str().unwrap(),
            "--out",
            tmp.path().join("o").to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{ic}: {err}");
        assert!(
            err.contains(&format!("c.toml:{line}: `{key}`")),
            "{ic}: {err}"
        );
    }
    // Huge numbers are written in scientific notation, not as 300 digits.
    let cfg = tmp.path().join("c.toml");
    std::fs::write(&cfg, "physics = \"gravity\"\n[run]\ndt = 1e-300\n").unwrap();
    let r = mote(&["run", cfg.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("1e-300") && !err.contains("0.00000000"),
        "{err}"
    );
    // Scheme settings (the conservative form with boundary particles is refused until it is
    // fixed).
    for (set, key) in [
        ("scheme.radius=0.5", "`scheme.radius`"),
        ("scheme.formulation=conservative", "`scheme.formulation`"),
    ] {
        let r = run_example("sod.toml", &tmp.path().join("o"), &[set]);
        assert_eq!(r.status.code(), Some(2), "{set}");
        assert!(String::from_utf8_lossy(&r.stderr).contains(key), "{set}");
    }
}

/// The particle arrays of a gravity checkpoint, as raw bits.
fn checkpoint_bits(path: &std::path::Path) -> (u64, Vec<u64>) {
    let (header, arrays) = mote_io::checkpoint::read_header(path).unwrap();
    let p = mote_io::checkpoint::read_particles::<f64>(path, &arrays).unwrap();
    let (x, y, z) = p.positions().components();
    let (u, v, w) = p.velocities().components();
    let bits = [x, y, z, u, v, w]
        .iter()
        .flat_map(|c| c.iter().map(|a| a.to_bits()))
        .collect();
    (header.step, bits)
}

#[test]
fn the_readmes_resume_is_bitwise_equal_to_the_longer_run() {
    let tmp = tempfile::tempdir().unwrap();
    let short = tmp.path().join("short");
    let long = tmp.path().join("long");
    let run = |out: &std::path::Path, end: &str, extra: &[&str]| {
        let set = format!("run.end_time={end}");
        let mut sets = vec!["initial_conditions.particles=128", set.as_str()];
        sets.extend(extra);
        let r = run_example("plummer.toml", out, &sets);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    };
    run(&short, "0.5", &[]);
    run(&long, "1", &[]);
    let ckpt = short.join("checkpoint.mote");
    let r = mote(&[
        "resume",
        ckpt.to_str().unwrap(),
        "--quiet",
        "--set",
        "run.end_time=1",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        checkpoint_bits(&ckpt),
        checkpoint_bits(&long.join("checkpoint.mote"))
    );
    // Checkpoints in simulated time do not change the steps either.
    let with = tmp.path().join("with");
    run(
        &with,
        "1",
        &["output.checkpoint_interval=0.3", "run.dt=0.007"],
    );
    let without = tmp.path().join("without");
    run(&without, "1", &["run.dt=0.007"]);
    assert_eq!(
        checkpoint_bits(&with.join("checkpoint.mote")),
        checkpoint_bits(&without.join("checkpoint.mote"))
    );
}

#[test]
fn a_meshless_run_with_checkpoints_takes_the_steps_of_one_without() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |out: &std::path::Path, extra: &[&str]| {
        let mut sets = vec!["problem.resolution=24", "run.end_time=0.05"];
        sets.extend(extra);
        let r = run_example("quadrant.toml", out, &sets);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        std::fs::read(out.join("checkpoint.mote")).unwrap()
    };
    let with = run(&tmp.path().join("a"), &["output.checkpoint_interval=0.013"]);
    let without = run(&tmp.path().join("b"), &[]);
    // Same steps, state and clock: the checkpoints differ only in the configuration text.
    let (a, b) = (
        mote_io::checkpoint::read_any(&tmp.path().join("a/checkpoint.mote")).unwrap(),
        mote_io::checkpoint::read_any(&tmp.path().join("b/checkpoint.mote")).unwrap(),
    );
    let (
        mote_io::checkpoint::AnyHeader::Meshless(ha),
        mote_io::checkpoint::AnyHeader::Meshless(hb),
    ) = (&a.0, &b.0)
    else {
        panic!("meshless checkpoints");
    };
    assert_eq!((ha.step, ha.time.to_bits()), (hb.step, hb.time.to_bits()));
    assert_eq!(a.1, b.1, "state arrays bitwise");
    assert!(with.len() > 100 && without.len() > 100);
}

/// Starts a long Plummer run into `out`, waits until it has stepped, then sends `signal`.
fn interrupt_run(out: &std::path::Path, signal: &str) -> std::process::Output {
    let child = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args([
            "run",
            examples_dir().join("plummer.toml").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--set",
            "initial_conditions.particles=256",
            "--set",
            "run.end_time=100000",
            "--set",
            "output.diagnostics_every=1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let partial = out.join("diagnostics.csv.partial");
    let start = std::time::Instant::now();
    while std::fs::read_to_string(&partial).map_or(0, |t| t.lines().count()) < 4 {
        assert!(start.elapsed().as_secs() < 60, "the run did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let k = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    child.wait_with_output().unwrap()
}

#[test]
fn signals_stop_a_run_with_a_checkpoint_it_resumes_from() {
    let tmp = tempfile::tempdir().unwrap();
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let out = tmp.path().join(&signal[1..]);
        let r = interrupt_run(&out, signal);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(code), "{err}");
        assert!(err.contains("mote resume"), "{err}");
        let ckpt = out.join("checkpoint.mote");
        let (header, _) = mote_io::checkpoint::read_header(&ckpt).unwrap();
        // The diagnostics reach the checkpoint's step, and an interrupted run can be plotted.
        let csv = std::fs::read_to_string(out.join("diagnostics.csv.partial")).unwrap();
        let last: u64 = csv
            .lines()
            .last()
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(last, header.step);
        let r = mote(&["plot", out.to_str().unwrap()]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        // It continues from there to the new end, its diagnostics after the checkpoint's step.
        let t_end = header.time + 0.05;
        let end = format!("run.end_time={t_end}");
        let r = mote(&["resume", ckpt.to_str().unwrap(), "--quiet", "--set", &end]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let (h2, _) = mote_io::checkpoint::read_header(&ckpt).unwrap();
        assert_eq!(h2.time, t_end);
        assert!(h2.step > header.step);
        let (_, rows) = read_csv(&out.join("diagnostics.csv"));
        let steps: Vec<f64> = rows.iter().map(|r| r[0]).collect();
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "no repeated rows");
        assert_eq!(*steps.last().unwrap(), h2.step as f64);
    }
}

#[test]
fn convergence_does_not_overwrite_an_earlier_study_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("convergence.csv"), "earlier").unwrap();
    let cfg = examples_dir().join("kepler.toml");
    let args = [
        "convergence",
        cfg.to_str().unwrap(),
        "--levels",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "run.end_time=0.5",
    ];
    let r = mote(&args);
    assert_eq!(r.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(out.join("convergence.csv")).unwrap(),
        "earlier"
    );
    let mut forced = args.to_vec();
    forced.push("--force");
    let r = mote(&forced);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

/// HDF5 snapshots are what h5py and yt read (`pip install h5py yt`; CI sets
/// `MOTE_REQUIRE_H5PY=1` so that a missing reader fails instead of skipping), and a file a user
/// writes with h5py starts a run; a bad one exits 2 having written nothing.
#[cfg(feature = "hdf5")]
#[test]
fn hdf5_snapshots_are_read_by_h5py_and_yt_and_a_users_file_starts_a_run() {
    const SCRIPT: &str = r#"
import sys, h5py, numpy as np
gravity, meshless, ic, bad = sys.argv[1:5]
def check(path, ptype, n, dim, names):
    with h5py.File(path, "r") as f:
        h = f["Header"].attrs
        for key in ["NumPart_ThisFile", "NumPart_Total", "NumPart_Total_HighWord", "MassTable"]:
            assert h[key].shape == (6,), (key, h[key].shape)
        assert h["NumPart_ThisFile"][ptype] == n and h["NumPart_Total"][ptype] == n
        for key in ["BoxSize", "Time", "Redshift", "Omega0", "OmegaLambda", "HubbleParam"]:
            assert np.ndim(h[key]) == 0, key
        assert h["NumFilesPerSnapshot"] == 1 and h["Dimension"] == dim and h["Redshift"] == 0
        assert f["Code"].attrs["Code"] == "mote" and "[run]" in f["Code"].attrs["Configuration"]
        assert f["Units"].attrs["UnitLength_in_cm"] > 0
        g = f[f"PartType{ptype}"]
        for name, shape, kind in names:
            d = g[name]
            assert d.shape == shape and d.dtype.kind == kind[0] and d.dtype.itemsize == int(kind[1:]), (name, d.shape, d.dtype)
check(gravity, 1, 64, 3, [("Coordinates", (64, 3), "f8"), ("Velocities", (64, 3), "f8"),
      ("Accelerations", (64, 3), "f8"), ("Masses", (64,), "f8"), ("ParticleIDs", (64,), "u8")])
with h5py.File(meshless, "r") as f:
    n = f["PartType0/Coordinates"].shape[0]
check(meshless, 0, n, 1, [("Coordinates", (n, 3), "f4"), ("Velocities", (n, 3), "f4"),
      ("Density", (n,), "f4"), ("Pressure", (n,), "f4"), ("InternalEnergy", (n,), "f4"),
      ("Masses", (n,), "f4"), ("Order", (n,), "u4"), ("ParticleIDs", (n,), "u8")])
# A user's initial conditions: a cold ring of 32 bodies, ids from 100.
with h5py.File(ic, "w") as f:
    f.create_group("Header").attrs["Time"] = 0.0
    g = f.create_group("PartType1")
    a = np.linspace(0, 2 * np.pi, 32, endpoint=False)
    g["Coordinates"] = np.stack([np.cos(a), np.sin(a), np.zeros(32)], axis=1)
    g["Velocities"] = np.zeros((32, 3))
    g["Masses"] = np.full(32, 1 / 32)
    g["ParticleIDs"] = np.arange(100, 132, dtype=np.uint64)
with h5py.File(bad, "w") as f:
    g = f.create_group("PartType1")
    g["Coordinates"] = np.zeros((4, 3)); g["Velocities"] = np.zeros((4, 3))
    g["Masses"] = np.array([1.0, 1.0, 0.0, 1.0])
try:
    import yt
except ImportError:
    print("yt not installed: h5py checks only"); sys.exit(0)
yt.set_log_level(50)
for path, ptype, n in [(gravity, "PartType1", 64), (meshless, "PartType0", n)]:
    ds = yt.load(path)
    assert type(ds).__name__ == "GadgetHDF5Dataset", type(ds)
    count = ds.all_data()[ptype, "particle_mass"].shape[0]
    assert count == n, (path, count, n)
    assert ptype in ds.particle_types_raw, ds.particle_types_raw
print("h5py and yt read both snapshots")
"#;
    let tmp = tempfile::tempdir().unwrap();
    let t = |p: &str| tmp.path().join(p).display().to_string();
    let plummer = examples_dir().join("plummer.toml");
    let sod = examples_dir().join("sod.toml");
    let r = mote(&[
        "run",
        plummer.to_str().unwrap(),
        "--out",
        &t("g"),
        "--quiet",
        "--set",
        "initial_conditions.particles=64",
        "--set",
        "run.end_time=0.0625",
        "--set",
        "output.format=\"hdf5\"",
        "--set",
        "output.snapshots=1",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = mote(&[
        "run",
        sod.to_str().unwrap(),
        "--out",
        &t("m"),
        "--quiet",
        "--precision",
        "f32",
        "--set",
        "problem.resolution=64",
        "--set",
        "run.end_time=0.02",
        "--set",
        "output.format=\"both\"",
        "--set",
        "output.snapshots=1",
        "--set",
        "output.compression=4",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    // mote's own readers: inspect and plot take the HDF5 files.
    let r = mote(&["inspect", &t("m/snapshots/snap_00001.hdf5")]);
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success() && out.contains("/PartType0") && out.contains("Density"),
        "{out}"
    );

    let Some(python) = python_with("h5py") else {
        assert!(
            std::env::var("MOTE_REQUIRE_H5PY").is_err(),
            "MOTE_REQUIRE_H5PY is set but no python3 imports h5py (pip install h5py yt)"
        );
        eprintln!("h5py not installed: HDF5 snapshots checked by mote's reader only");
        return;
    };
    let r = Command::new(python)
        .args([
            "-c",
            SCRIPT,
            &t("g/snapshots/snap_00001.hdf5"),
            &t("m/snapshots/snap_00001.hdf5"),
            &t("ring.hdf5"),
            &t("bad.hdf5"),
        ])
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "python: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&r.stdout).trim());

    // The user's file starts a run: its ids carried through.
    let ring = format!("initial_conditions.path=\"{}\"", t("ring.hdf5"));
    let r = mote(&[
        "run",
        plummer.to_str().unwrap(),
        "--out",
        &t("ring"),
        "--quiet",
        "--set",
        "initial_conditions.kind=\"file\"",
        "--set",
        &ring,
        "--set",
        "initial_conditions.particles=0",
        "--set",
        "run.end_time=0.0625",
        "--set",
        "output.format=\"hdf5\"",
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("initial_conditions.particles"), "{err}");
    let text = format!(
        "physics = \"gravity\"\n[run]\nend_time = 0.0625\ndt = 0.015625\n[initial_conditions]\n\
         kind = \"file\"\npath = \"{}\"\n[output]\nformat = \"hdf5\"\n",
        t("ring.hdf5")
    );
    std::fs::write(tmp.path().join("ring.toml"), text).unwrap();
    let r = mote(&["run", &t("ring.toml"), "--out", &t("ring"), "--quiet"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = mote(&["inspect", &t("ring/snapshots/snap_00001.hdf5")]);
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(
        out.contains("32 gravitating bodies") && out.contains("ParticleIDs"),
        "{out}"
    );
    assert!(out.contains("min 1.000000e2  max 1.310000e2"), "{out}");

    // A bad file: exit 2, the dataset and the index named, no run directory.
    let bad = t("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "physics = \"gravity\"\n[initial_conditions]\nkind = \"file\"\npath = \"{}\"\n",
            t("bad.hdf5")
        ),
    )
    .unwrap();
    let r = mote(&["run", &bad, "--out", &t("bad-run"), "--quiet"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("/PartType1/Masses: index 2 is 0"), "{err}");
    assert!(!tmp.path().join("bad-run").exists());
}
