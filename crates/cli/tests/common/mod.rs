//! What the program's test binaries share.

/// Whether a GPU adapter exists (`mote info --json`); with none, GPU tests skip with a line,
/// unless `MOTE_REQUIRE_GPU=1` (as in CI) makes that a failure.
pub fn have_gpu() -> bool {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["info", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let any = !v["gpu_adapters"].as_array().unwrap().is_empty();
    if !any {
        assert!(
            std::env::var("MOTE_REQUIRE_GPU").as_deref() != Ok("1"),
            "MOTE_REQUIRE_GPU=1 but mote info lists no GPU adapter"
        );
        eprintln!("SKIPPED: no GPU adapter");
    }
    any
}
