//! End-to-end checks of the `mote` program as a user runs it.

use std::process::Command;

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
    if !mote_core::SimdLevel::Avx512.is_available() {
        let out = mote(&["bench", "gravity", "--kernel", "avx512"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("not available"));
    }
}
