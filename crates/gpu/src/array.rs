//! Device mirrors of host component arrays, budgeted like the host buffers.

use std::marker::PhantomData;

use cubecl::prelude::*;
use cubecl::server::Handle;
use mote_core::{BudgetedBuffer, CapacityError, CapacityUnit, Scaling};

use crate::device::{Client, Gpu};
use crate::error::GpuError;

/// One component array on one device: a typed buffer that remembers its length, its capacity,
/// its name (for error messages), how it scales with the run, and the device it lives on. It is
/// only ever filled by an explicit upload or by a kernel, and only read back by an explicit
/// download.
///
/// Like a host [`Buffer`](mote_core::Buffer) it belongs to a memory budget
/// ([`BudgetedBuffer`]): [`Gpu::reserve`] sizes it once against the device's memory and freezes
/// it, after which [`DeviceArray::resize`] beyond the capacity is a [`CapacityError`] instead of a
/// reallocation.
pub struct DeviceArray<T> {
    handle: Handle,
    len: usize,
    capacity: usize,
    frozen: bool,
    scaling: Scaling,
    device: u64,
    max_buffer: u64,
    name: &'static str,
    client: Client,
    _element: PhantomData<T>,
}

impl<T: CubeElement> DeviceArray<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements it can hold without a new allocation.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The name given at creation.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The id of the device it lives on ([`Gpu::id`]).
    pub fn device(&self) -> u64 {
        self.device
    }

    /// Declares how its length scales with the run (per particle by default), for the memory
    /// budget.
    pub fn with_scaling(mut self, scaling: Scaling) -> Self {
        self.scaling = scaling;
        self
    }

    /// The launch argument for this array, on runtime `Rt` (after [`Gpu::check`]).
    pub(crate) fn arg<Rt: Runtime>(&self) -> ArrayArg<Rt> {
        // SAFETY: the handle holds at least `len` elements of `T` (it was created for
        // `capacity >= len` of them), and the kernels index it only below `len`.
        unsafe { ArrayArg::from_raw_parts(self.handle.clone(), self.len.max(1)) }
    }

    /// The launch argument viewing the contents as `len * size_of::<T>() / 4` 32-bit words
    /// (fingerprints, copies).
    pub(crate) fn words_arg<Rt: Runtime>(&self) -> ArrayArg<Rt> {
        // SAFETY: as for `arg`; every element type of the crate is a whole number of words.
        unsafe { ArrayArg::from_raw_parts(self.handle.clone(), self.words().max(1)) }
    }

    /// The device allocation.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Number of 32-bit words of the contents.
    pub(crate) fn words(&self) -> usize {
        self.len * std::mem::size_of::<T>() / 4
    }

    /// Sets the length to `len`. Elements past the old length are undefined until a kernel
    /// writes them. Within the capacity nothing is allocated; beyond it a frozen array fails with
    /// a [`CapacityError`] naming it (and is left unchanged), an unfrozen one moves to a larger
    /// allocation keeping its contents.
    pub fn resize(&mut self, len: usize) -> Result<(), CapacityError> {
        if len > self.capacity {
            if self.frozen {
                return Err(CapacityError {
                    what: format!("device buffer `{}`", self.name),
                    requested: len as u64,
                    available: self.capacity as u64,
                    unit: CapacityUnit::Elements,
                });
            }
            self.reallocate(len)?;
        }
        self.len = len;
        Ok(())
    }

    /// Moves the contents to a new allocation of `capacity` elements (at least `len`).
    fn reallocate(&mut self, capacity: usize) -> Result<(), CapacityError> {
        let bytes = (capacity * std::mem::size_of::<T>()) as u64;
        if bytes > self.max_buffer {
            return Err(CapacityError {
                what: format!(
                    "device buffer `{}` (the device's largest buffer is {} bytes)",
                    self.name, self.max_buffer
                ),
                requested: bytes,
                available: self.max_buffer,
                unit: CapacityUnit::Bytes,
            });
        }
        let handle = self.client.empty(bytes.max(8) as usize);
        let words = self.words();
        if words > 0 {
            self.client.copy_words(&self.handle, &handle, words);
        }
        self.handle = handle;
        self.capacity = capacity;
        Ok(())
    }
}

impl<T: CubeElement> BudgetedBuffer for DeviceArray<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn scaling(&self) -> Scaling {
        self.scaling
    }
    fn element_bytes(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn is_frozen(&self) -> bool {
        self.frozen
    }
    /// Moves the contents to an allocation of exactly `capacity` elements (a device-side copy)
    /// and freezes it.
    fn reserve_and_freeze(&mut self, capacity: usize) -> Result<(), CapacityError> {
        if capacity < self.len {
            return Err(CapacityError {
                what: format!("reservation of device buffer `{}`", self.name),
                requested: self.len as u64,
                available: capacity as u64,
                unit: CapacityUnit::Elements,
            });
        }
        if capacity != self.capacity {
            self.reallocate(capacity)?;
        }
        self.frozen = true;
        Ok(())
    }
    fn unfreeze(&mut self) {
        self.frozen = false;
    }
}

impl Gpu {
    /// Copies `data` to a new array on this device.
    pub fn upload<T: CubeElement>(&self, name: &'static str, data: &[T]) -> DeviceArray<T> {
        // An empty array still binds one element (`arg`): room for the widest (f64), so a
        // kernel over no particles (a rank that owns none) validates.
        let handle = if data.is_empty() {
            self.client.empty(8)
        } else {
            self.client.create_from_slice(T::as_bytes(data))
        };
        self.wrap(handle, name, data.len())
    }

    /// A new array of `len` elements for a kernel to write (its contents are undefined until
    /// then).
    pub fn output<T: CubeElement>(&self, name: &'static str, len: usize) -> DeviceArray<T> {
        let bytes = (len * std::mem::size_of::<T>()).max(8);
        let handle = self.client.empty(bytes);
        self.wrap(handle, name, len)
    }

    fn wrap<T: CubeElement>(
        &self,
        handle: Handle,
        name: &'static str,
        len: usize,
    ) -> DeviceArray<T> {
        assert!(
            std::mem::size_of::<T>().is_multiple_of(4),
            "device arrays hold whole 32-bit words"
        );
        DeviceArray {
            handle,
            len,
            capacity: len,
            frozen: false,
            scaling: Scaling::PerParticle(1),
            device: self.id(),
            max_buffer: self.memory().max_buffer,
            name,
            client: self.client.clone(),
            _element: PhantomData,
        }
    }

    /// Copies an array of this device back to the host (waiting for the kernels that write it).
    pub fn download<T: CubeElement>(&self, array: &DeviceArray<T>) -> Result<Vec<T>, GpuError> {
        self.check(array, array.len)?;
        if array.len == 0 {
            return Ok(Vec::new());
        }
        let bytes = self
            .client
            .read(array.handle.clone())
            .map_err(|e| self.failure(format!("reading `{}`: {e}", array.name)))?;
        Ok(T::from_bytes(&bytes)[..array.len].to_vec())
    }

    /// An error unless `array` lives on this device and has `len` elements: every launch checks
    /// each argument with this first.
    pub fn check<T>(&self, array: &DeviceArray<T>, len: usize) -> Result<(), GpuError> {
        if array.device != self.id() {
            return Err(GpuError::WrongDevice {
                array: array.name.to_string(),
                array_device: array.device,
                device: self.id(),
                name: self.name().to_string(),
            });
        }
        if array.len != len {
            return Err(GpuError::Length {
                array: array.name.to_string(),
                len: array.len,
                expected: len,
            });
        }
        Ok(())
    }
}
