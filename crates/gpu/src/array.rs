//! Device mirrors of host component arrays.

use std::marker::PhantomData;

use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::device::{Client, Gpu};
use crate::error::GpuError;

/// One component array on one device: a typed buffer that remembers its length, its name (for
/// error messages) and the device it lives on. It is only ever filled by an explicit upload or
/// by a kernel, and only read back by an explicit download.
pub struct DeviceArray<T> {
    handle: Handle,
    len: usize,
    device: u64,
    name: String,
    _element: PhantomData<T>,
}

impl<T> DeviceArray<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The id of the device it lives on ([`Gpu::id`]).
    pub fn device(&self) -> u64 {
        self.device
    }

    /// The launch argument for this array, on runtime `Rt` (after [`Gpu::check`]).
    pub(crate) fn arg<Rt: Runtime>(&self) -> ArrayArg<Rt> {
        // SAFETY: the handle holds `len` elements of `T` (it was created for them), and the
        // kernels index it only below `len`.
        unsafe { ArrayArg::from_raw_parts(self.handle.clone(), self.len) }
    }
}

impl Gpu {
    /// Copies `data` to a new array on this device.
    pub fn upload<T: CubeElement>(&self, name: &str, data: &[T]) -> DeviceArray<T> {
        let bytes = T::as_bytes(data);
        let handle = match &self.client {
            Client::Wgpu(c) => c.create_from_slice(bytes),
            Client::Cuda(c) => c.create_from_slice(bytes),
        };
        self.wrap(handle, name, data.len())
    }

    /// A new array of `len` elements for a kernel to write (its contents are undefined until
    /// then).
    pub fn output<T: CubeElement>(&self, name: &str, len: usize) -> DeviceArray<T> {
        let bytes = (len * std::mem::size_of::<T>()).max(std::mem::size_of::<T>());
        let handle = match &self.client {
            Client::Wgpu(c) => c.empty(bytes),
            Client::Cuda(c) => c.empty(bytes),
        };
        self.wrap(handle, name, len)
    }

    fn wrap<T>(&self, handle: Handle, name: &str, len: usize) -> DeviceArray<T> {
        DeviceArray {
            handle,
            len,
            device: self.id(),
            name: name.to_string(),
            _element: PhantomData,
        }
    }

    /// Copies an array of this device back to the host (waiting for the kernels that write it).
    pub fn download<T: CubeElement>(&self, array: &DeviceArray<T>) -> Result<Vec<T>, GpuError> {
        self.check(array, array.len)?;
        if array.len == 0 {
            return Ok(Vec::new());
        }
        let bytes = match &self.client {
            Client::Wgpu(c) => c.read_one(array.handle.clone()),
            Client::Cuda(c) => c.read_one(array.handle.clone()),
        }
        .map_err(|e| self.failure(format!("reading `{}`: {e}", array.name)))?;
        Ok(T::from_bytes(&bytes)[..array.len].to_vec())
    }

    /// An error unless `array` lives on this device and has `len` elements: every launch checks
    /// each argument with this first.
    pub fn check<T>(&self, array: &DeviceArray<T>, len: usize) -> Result<(), GpuError> {
        if array.device != self.id() {
            return Err(GpuError::WrongDevice {
                array: array.name.clone(),
                array_device: array.device,
                device: self.id(),
                name: self.name().to_string(),
            });
        }
        if array.len != len {
            return Err(GpuError::Length {
                array: array.name.clone(),
                len: array.len,
                expected: len,
            });
        }
        Ok(())
    }
}
