//! # mote-core
//!
//! The foundation every other mote crate stands on:
//!
//! - [`Real`] and [`Precision`]: numerical code is generic over `f32`/`f64`; a run selects one
//!   monomorphised path once, with [`Precision::dispatch`].
//! - [`ParticleData`]: particle state as ten 64-byte-aligned component arrays plus stable ids,
//!   kept at equal length by one helper; [`Vec3Span`]/[`Vec3SpanMut`] views.
//! - [`Backend`] and [`CpuBackend`]: serial, threaded and device execution; CPU per-particle
//!   passes are launched through [`CpuBackend::for_each_particle`] in the pull form, so serial
//!   and threaded results are bitwise identical.
//! - [`memory`]: every buffer is a budgeted [`Buffer`]; a run is priced with
//!   [`memory::memory_estimate`], sized once with [`memory::reserve`], and growth past the
//!   reservation is a [`CapacityError`].
//! - [`platform`]: CPU model, cores, memory and run-time SIMD detection.
//! - [`formula`]: the formula dialect's names on the CPU (formulas written once for every backend).
//! - [`morton`]: Morton (Z-order) keys, for the clouds' ordering and the gravity tree.
//! - [`rng`]: seeded random numbers that are bit-identical on every platform.
//! - [`sum`]: exact, order-independent sums (totals equal on any number of threads or ranks).
//! - [`comm`]: the processes a run spans (MPI ranks, or one process), their collective
//!   operations and the partition of work between them.
//! - [`decomposition`]: particles owned by ranks in cost-balanced ranges of the Morton curve,
//!   and their migration between ranks.
//!
//! The crate has no GPU dependency: device buffers and kernels live in `mote-gpu`, which mirrors
//! these containers one to one (see `docs/architecture.md`).

#![warn(missing_docs)]

pub mod backend;
pub mod buffer;
pub mod columns;
pub mod comm;
pub mod decomposition;
pub mod formula;
pub mod memory;
pub mod morton;
pub mod particles;
pub mod platform;
pub mod real;
pub mod rng;
pub mod sum;

pub use backend::{
    Backend, BackendError, Chunks, CpuBackend, DeviceApi, DeviceSpec, ParticleOutputs,
    ParticleState, Rows, SlotWriter, SplitOutputs, StridedRows,
};
pub use buffer::{
    AnyBuffer, BUFFER_ALIGN, BudgetedBuffer, Buffer, CapacityError, CapacityUnit, Scaling,
};
pub use columns::{Permutation, PermutationError};
pub use memory::{Budgeted, MemoryModel, Reservation, ReserveOptions};
pub use particles::{
    COMPONENTS, Component, Particle, ParticleData, ParticlesMut, Vec3Span, Vec3SpanMut,
};
pub use platform::{MachineInfo, SimdLevel};
pub use real::{ParsePrecisionError, Precision, PrecisionJob, Real};
