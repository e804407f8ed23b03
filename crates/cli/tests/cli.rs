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
