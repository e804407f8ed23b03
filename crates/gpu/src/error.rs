//! What can go wrong on a device.

use mote_cloud::CloudError;
use mote_core::CapacityError;
use thiserror::Error;

/// An error of the GPU backend.
#[derive(Debug, Error)]
pub enum GpuError {
    /// No adapter of the requested runtime exists (or the index is beyond them).
    #[error("no GPU adapter for {spec}: {reason}")]
    NoDevice {
        /// The requested device.
        spec: String,
        /// Why (which adapters exist, which driver is missing).
        reason: String,
    },
    /// The device cannot compute in the requested precision.
    #[error("device {device} does not support {precision} arithmetic")]
    Precision {
        /// The device.
        device: String,
        /// `f64` or `f32`.
        precision: &'static str,
    },
    /// An argument lives on another device than the launch.
    #[error(
        "array `{array}` lives on device #{array_device}, but the launch runs on device #{device} ({name})"
    )]
    WrongDevice {
        /// The array's name.
        array: String,
        /// The device it was uploaded to.
        array_device: u64,
        /// The launch's device.
        device: u64,
        /// The launch's device name.
        name: String,
    },
    /// Arrays of one launch disagree in length.
    #[error("array `{array}` has {len} elements, the launch expects {expected}")]
    Length {
        /// The array's name.
        array: String,
        /// Its length.
        len: usize,
        /// The expected length.
        expected: usize,
    },
    /// A device array's contents differ from the host data they should mirror (checked after a
    /// reservation moved them): the run is refused.
    #[error(
        "device array `{array}` does not hold the host data (fingerprint {device:#018x} on the \
         device, {host:#018x} on the host): refusing to run on it"
    )]
    Fingerprint {
        /// The array's name.
        array: String,
        /// The fingerprint of the device contents.
        device: u64,
        /// The fingerprint of the host data.
        host: u64,
    },
    /// A component or option without a device version yet.
    #[error("not supported on the GPU backend: {0}")]
    Unsupported(String),
    /// A device buffer or reservation does not fit (the memory budget).
    #[error(transparent)]
    Capacity(#[from] CapacityError),
    /// A gravity setting out of range.
    #[error(transparent)]
    Gravity(#[from] mote_gravity::GravityError),
    /// An invalid set-up of a meshless pass (search radius, particle count).
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// A failure on another rank of a run split between ranks (or on this one, agreed over
    /// them): the lowest failing rank's message, naming the rank.
    #[error("{0}")]
    Ranks(String),
    /// The device reported a failure (a kernel that did not validate, a lost device, a failed
    /// read).
    #[error("device {device}: {message}")]
    Device {
        /// The device.
        device: String,
        /// The runtime's message.
        message: String,
    },
}
