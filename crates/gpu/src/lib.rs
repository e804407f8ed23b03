//! The GPU backend of mote: device mirrors of the host component arrays and CubeCL kernels.
//!
//! - [`Gpu`] is an opened device (the wgpu runtime: Vulkan, Metal, DX12, integrated GPUs and
//!   Mesa's software Vulkan driver; or CUDA), chosen by a [`DeviceSpec`](mote_core::DeviceSpec).
//!   Opening fails with a clear [`GpuError`] where no adapter or driver exists: nothing falls back
//!   to the CPU silently.
//! - [`DeviceArray`] is one component array on one device, filled by an explicit upload and read
//!   back by an explicit download. Each remembers its device: a launch checks that every argument
//!   lives on the device it runs on and refuses otherwise ([`GpuError::WrongDevice`]).
//! - Device arrays are budgeted like host buffers: [`Gpu::reserve`] sizes them once against the
//!   device's memory (or a given limit), and [`Gpu::verify`] compares a fingerprint computed on
//!   the device with the host data, refusing to run on a mismatch.
//! - [`GpuNeighbourSearch`] is the meshless neighbour search on the device (counting sort with
//!   atomics, prefix sums, per-bin sort), producing the CPU's lists exactly in both layouts.
//! - [`DeviceMuscl`] (MLS derivatives, limiters, reconstruction and fluxes), [`DeviceMood`]
//!   and [`DeviceBoundaries`] are the meshless passes; [`DeviceSimulation`] steps a cloud with
//!   them, stage for stage as the CPU's `MeshlessSimulation`, with explicit tableaux or, with
//!   the kinetic relaxation source [`DeviceRelaxation`], IMEX pairs.
//! - [`meshless::Simulation`] is the meshless simulation for both backends: the same cloud,
//!   equation and scheme stepped on the CPU or on a device, chosen by a
//!   [`Backend`](mote_core::Backend) value (the library's entry point; `mote run` uses it).
//! - [`GpuDirectSolver`] is direct-summation gravity on the device (sources tiled through shared
//!   memory), a [`ForceSolver`](mote_gravity::ForceSolver) like the CPU solvers.
//!
//! CubeCL lives in this crate only, so the CPU crates build without it. Kernels are generic over
//! the float type; they take every input as an argument, never allocate, log or panic, and each
//! unit writes only its own particle's entries.

mod array;
pub mod boundary;
mod device;
pub mod diagnostics;
pub mod equation;
mod error;
pub mod formula;
pub mod gravity;
pub mod halo;
mod launch;
pub mod limiter;
mod memory;
pub mod meshless;
pub mod mls;
pub mod mood;
mod motion;
pub mod muscl;
mod primitives;
pub mod relaxation;
pub mod search;
pub mod simulation;
pub mod tree;
pub mod weno;

pub use gravity::{GpuFloat, TransferSeconds};

/// CubeCL, as this crate pins it: a user's [`DeviceFormulas`] implementation is written with
/// its `#[cube]` attribute and prelude.
pub use cubecl;

pub use array::DeviceArray;
pub use boundary::DeviceBoundaries;
pub use device::{
    AdapterInfo, DeviceMemory, Gpu, adapters, cuda_driver_present, device_count, rank_device,
    require_gpu,
};
pub use equation::{DeviceEquation, DeviceFormulas, GpuEquation};
pub use error::GpuError;
pub use gravity::GpuDirectSolver;
pub use mls::DeviceMls;
pub use mood::DeviceMood;
pub use muscl::DeviceMuscl;
pub use primitives::host_fingerprint;
pub use relaxation::DeviceRelaxation;
pub use search::{DeviceCloud, DeviceLayout, DeviceNeighbours, GpuNeighbourSearch};
pub use simulation::{DeviceSimulation, SetupSeconds, StepSeconds};
pub use tree::GpuTreeSolver;
