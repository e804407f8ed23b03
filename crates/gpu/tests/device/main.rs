//! The GPU backend's tests, in one test binary (CubeCL and the kernels are compiled once).
//! They run on whatever adapter exists (Mesa's software Vulkan driver in CI, or the device
//! `MOTE_TEST_DEVICE` names, e.g. `cuda:0`); without one each test prints a skip line, unless
//! `MOTE_REQUIRE_GPU=1` makes that a failure.

#[path = "../../../../examples/traffic_flow.rs"]
mod traffic_flow;

mod gravity;
mod memory;
mod mls;
mod moving;
mod muscl;
mod ranks;
mod relaxation;
mod search;
mod simulation;
mod split;
mod tree;
mod user_equation;

use mote_core::DeviceSpec;
use mote_gpu::require_gpu;

/// The device under test (`MOTE_TEST_DEVICE`, default the first wgpu adapter), or `None` (with
/// a skip line) where there is none and none is required.
pub fn gpu() -> Option<mote_gpu::Gpu> {
    match mote_gpu::Gpu::open(spec()) {
        Ok(g) => Some(g),
        Err(e) if !require_gpu() => {
            eprintln!("SKIPPED: no GPU adapter ({e}); set MOTE_REQUIRE_GPU=1 to make this fail");
            None
        }
        Err(e) => panic!("MOTE_REQUIRE_GPU=1 but no GPU: {e}"),
    }
}

/// The device under test's spec (`MOTE_TEST_DEVICE`, default the first wgpu adapter).
pub fn spec() -> DeviceSpec {
    std::env::var("MOTE_TEST_DEVICE")
        .unwrap_or_else(|_| "wgpu:0".into())
        .parse()
        .expect("MOTE_TEST_DEVICE: wgpu|cuda[:INDEX]")
}
