//! Opening a device: adapter discovery, the CubeCL client, the precision check.

use std::sync::atomic::{AtomicU64, Ordering};

use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::prelude::*;
use cubecl::server::Handle;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use mote_core::{DeviceApi, DeviceSpec, Precision};

use crate::error::GpuError;

/// Runs `$body` with `$c` bound to the CubeCL client inside `$client` (a `&Client`), whatever its
/// runtime: the one place where a launch is dispatched over the runtimes, so that every kernel's
/// argument list is written once.
macro_rules! with_client {
    ($client:expr, |$c:ident| $body:expr) => {
        match $client {
            $crate::device::Client::Wgpu($c) => $body,
            $crate::device::Client::Cuda($c) => $body,
        }
    };
}
pub(crate) use with_client;

/// The CubeCL client of one opened device; every launch dispatches on it once. Cloning it is
/// cheap (a shared handle to the same device).
#[derive(Clone)]
pub(crate) enum Client {
    Wgpu(ComputeClient<WgpuRuntime>),
    Cuda(ComputeClient<CudaRuntime>),
}

impl Client {
    /// A new allocation of `bytes` (contents undefined).
    pub(crate) fn empty(&self, bytes: usize) -> Handle {
        match self {
            Client::Wgpu(c) => c.empty(bytes),
            Client::Cuda(c) => c.empty(bytes),
        }
    }

    /// A new allocation holding `bytes`.
    pub(crate) fn create_from_slice(&self, bytes: &[u8]) -> Handle {
        match self {
            Client::Wgpu(c) => c.create_from_slice(bytes),
            Client::Cuda(c) => c.create_from_slice(bytes),
        }
    }

    /// The contents of `handle` (after the kernels that write it).
    pub(crate) fn read(&self, handle: Handle) -> Result<Vec<u8>, String> {
        match self {
            Client::Wgpu(c) => c.read_one(handle).map(|b| b.to_vec()),
            Client::Cuda(c) => c.read_one(handle).map(|b| b.to_vec()),
        }
        .map_err(|e| e.to_string())
    }

    /// Copies the first `words` 32-bit words of `src` into `dst`, on the device.
    pub(crate) fn copy_words(&self, src: &Handle, dst: &Handle, words: usize) {
        match self {
            Client::Wgpu(c) => crate::primitives::copy_words(c, src, dst, words),
            Client::Cuda(c) => crate::primitives::copy_words(c, src, dst, words),
        }
    }
}

/// What a device offers the memory budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    /// The device's memory in bytes, where the runtime reports it (CUDA does; the wgpu runtime
    /// does not, so runs there are budgeted against a limit the user gives).
    pub total: Option<u64>,
    /// The largest single buffer in bytes (a storage-buffer binding on wgpu, a memory page on
    /// CUDA).
    pub max_buffer: u64,
}

/// An opened device.
pub struct Gpu {
    spec: DeviceSpec,
    id: u64,
    name: String,
    f64: bool,
    workgroup: u32,
    memory: DeviceMemory,
    pub(crate) client: Client,
}

/// One wgpu adapter of this machine, as `mote info` lists them.
#[derive(Clone, Debug)]
pub struct AdapterInfo {
    /// Its index in `--device wgpu:INDEX`.
    pub index: usize,
    /// The adapter's name.
    pub name: String,
    /// `discrete`, `integrated`, `virtual`, `cpu` (a software driver) or `other`.
    pub kind: &'static str,
    /// The graphics API behind it.
    pub backend: String,
    /// Whether shaders can compute in f64.
    pub f64: bool,
}

/// The backends the wgpu runtime uses on this platform (CubeCL's automatic choice).
fn wgpu_backends() -> wgpu::Backends {
    if cfg!(target_os = "macos") {
        wgpu::Backends::METAL
    } else if cfg!(target_os = "windows") {
        wgpu::Backends::DX12
    } else {
        wgpu::Backends::VULKAN
    }
}

fn wgpu_adapters() -> Vec<wgpu::Adapter> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu_backends(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    cubecl::future::block_on(instance.enumerate_adapters(wgpu_backends()))
}

fn kind_name(t: wgpu::DeviceType) -> &'static str {
    use wgpu::DeviceType;
    match t {
        DeviceType::DiscreteGpu => "discrete",
        DeviceType::IntegratedGpu => "integrated",
        DeviceType::VirtualGpu => "virtual",
        DeviceType::Cpu => "cpu",
        DeviceType::Other => "other",
    }
}

/// The wgpu adapters of this machine (empty where there is no Vulkan/Metal/DX12 driver).
pub fn adapters() -> Vec<AdapterInfo> {
    wgpu_adapters()
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let info = a.get_info();
            AdapterInfo {
                index,
                name: info.name.clone(),
                kind: kind_name(info.device_type),
                backend: format!("{:?}", info.backend),
                f64: a.features().contains(wgpu::Features::SHADER_F64),
            }
        })
        .collect()
}

/// Whether the environment demands a GPU (`MOTE_REQUIRE_GPU=1`, as CI sets): GPU tests then
/// fail instead of skipping when no adapter exists.
pub fn require_gpu() -> bool {
    std::env::var("MOTE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Where the CUDA driver library is, if anywhere: the CUDA runtime loads it at run time and
/// panics without it, so it is looked for first.
fn cuda_driver() -> Option<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for d in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/compat",
        "/usr/lib/wsl/lib",
    ] {
        dirs.push(d.into());
    }
    dirs.into_iter()
        .map(|d| d.join("libcuda.so.1"))
        .find(|p| p.exists())
}

/// Whether the CUDA driver library is present (what `--device cuda` needs).
pub fn cuda_driver_present() -> bool {
    cuda_driver().is_some()
}

/// How many devices of `api` this machine has: the wgpu adapters ([`adapters`]), or the CUDA
/// devices the driver reports (after `CUDA_VISIBLE_DEVICES`; 0 without the driver).
pub fn device_count(api: DeviceApi) -> usize {
    match api {
        DeviceApi::Wgpu => wgpu_adapters().len(),
        DeviceApi::Cuda => {
            if cuda_driver().is_none() {
                return 0;
            }
            // The driver is loaded at run time; a failure to load it is a panic there.
            std::panic::catch_unwind(cudarc::driver::CudaContext::device_count)
                .ok()
                .and_then(Result::ok)
                .map_or(0, |n| n.max(0) as usize)
        }
    }
}

/// The device local rank `local` of an MPI run uses when the run asks for `spec`: `spec`'s
/// index plus the local rank, wrapping around this machine's devices of that API and of the
/// configured device's kind (a wgpu list can hold a discrete GPU and Mesa's software driver:
/// the ranks spread over the GPUs, never onto the software driver unless it is what was asked
/// for), so that the ranks of one machine take its devices in turn, sharing them where there
/// are more ranks than devices. A `spec` past the machine's devices is refused as on one
/// process.
pub fn rank_device(spec: DeviceSpec, local: usize) -> Result<DeviceSpec, GpuError> {
    let kinds: Vec<&'static str> = match spec.api {
        DeviceApi::Wgpu => adapters().iter().map(|a| a.kind).collect(),
        DeviceApi::Cuda => vec!["cuda"; device_count(DeviceApi::Cuda)],
    };
    let Some(index) = take_in_turn(&kinds, spec.index, local) else {
        return Err(GpuError::NoDevice {
            spec: spec.to_string(),
            reason: format!(
                "this machine has {} {} device(s)",
                kinds.len(),
                match spec.api {
                    DeviceApi::Wgpu => "wgpu",
                    DeviceApi::Cuda => "CUDA",
                }
            ),
        });
    };
    Ok(DeviceSpec {
        api: spec.api,
        index,
    })
}

/// Among devices of the given kinds, the one `local` places after `first` in the list of those
/// of `first`'s kind, wrapping around; `None` where `first` is past the list.
fn take_in_turn<K: PartialEq>(kinds: &[K], first: usize, local: usize) -> Option<usize> {
    let kind = kinds.get(first)?;
    let same: Vec<usize> = (0..kinds.len()).filter(|&i| kinds[i] == *kind).collect();
    let at = same.iter().position(|&i| i == first)?;
    Some(same[(at + local) % same.len()])
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Runs `f`, turning a panic inside the runtime (a missing driver, a failed device creation)
/// into an error.
fn guarded<T>(spec: &DeviceSpec, f: impl FnOnce() -> T) -> Result<T, GpuError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        let message = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the runtime panicked".into());
        GpuError::NoDevice {
            spec: spec.to_string(),
            reason: message,
        }
    })
}

impl Gpu {
    /// Opens the device `spec` (`wgpu:INDEX` indexes [`adapters`]; `cuda:INDEX` the CUDA
    /// devices), with the default workgroup size of 256.
    pub fn open(spec: DeviceSpec) -> Result<Self, GpuError> {
        let (name, client) = match spec.api {
            DeviceApi::Wgpu => {
                let list = wgpu_adapters();
                let Some(adapter) = list.get(spec.index) else {
                    let names: Vec<String> =
                        list.iter().map(|a| a.get_info().name.clone()).collect();
                    return Err(GpuError::NoDevice {
                        spec: spec.to_string(),
                        reason: if names.is_empty() {
                            "no Vulkan/Metal/DX12 adapter on this machine (on Debian, \
                             `apt-get install mesa-vulkan-drivers` gives a software one)"
                                .into()
                        } else {
                            format!("adapters are {names:?}")
                        },
                    });
                };
                let info = adapter.get_info();
                // CubeCL selects adapters by kind and rank within the kind.
                let rank = list[..spec.index]
                    .iter()
                    .filter(|a| a.get_info().device_type == info.device_type)
                    .count();
                use wgpu::DeviceType;
                let device = match info.device_type {
                    DeviceType::DiscreteGpu => WgpuDevice::DiscreteGpu(rank),
                    DeviceType::IntegratedGpu => WgpuDevice::IntegratedGpu(rank),
                    DeviceType::VirtualGpu => WgpuDevice::VirtualGpu(rank),
                    DeviceType::Cpu => WgpuDevice::Cpu,
                    DeviceType::Other => WgpuDevice::DefaultDevice,
                };
                let client = guarded(&spec, || WgpuRuntime::client(&device))?;
                (info.name.clone(), Client::Wgpu(client))
            }
            DeviceApi::Cuda => {
                if cuda_driver().is_none() {
                    return Err(GpuError::NoDevice {
                        spec: spec.to_string(),
                        reason: "the CUDA driver library libcuda.so.1 was not found (searched \
                                 LD_LIBRARY_PATH and the usual system directories)"
                            .into(),
                    });
                }
                let device = CudaDevice { index: spec.index };
                let client = guarded(&spec, || CudaRuntime::client(&device))?;
                (format!("CUDA device {}", spec.index), Client::Cuda(client))
            }
        };
        let f64 = match &client {
            Client::Wgpu(c) => c
                .properties()
                .supports_type(f64::as_type_native_unchecked()),
            // Every CUDA device computes in f64 (in hardware since compute capability 1.3), and
            // the CUDA compiler takes `double`; CubeCL 0.10 leaves f64 out of the CUDA runtime's
            // registered types only because of a matrix-multiply issue of its own, so its
            // `supports_type` would refuse f64 runs on every NVIDIA GPU (measured on an H200).
            Client::Cuda(_) => true,
        };
        let memory = match &client {
            // CubeCL's CUDA runtime sets its page size to a quarter of cuDeviceTotalMem.
            Client::Cuda(c) => {
                let page = c.properties().memory.max_page_size;
                DeviceMemory {
                    total: Some(page.saturating_mul(4)),
                    max_buffer: page,
                }
            }
            Client::Wgpu(c) => DeviceMemory {
                total: None,
                max_buffer: c.properties().memory.max_page_size,
            },
        };
        Ok(Self {
            spec,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name,
            f64,
            workgroup: 256,
            memory,
            client,
        })
    }

    /// The specification it was opened with.
    pub fn spec(&self) -> DeviceSpec {
        self.spec
    }

    /// A number unique to this opened device within the process (what residency checks
    /// compare).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The adapter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether kernels can run in `precision` here.
    pub fn supports(&self, precision: Precision) -> bool {
        precision == Precision::F32 || self.f64
    }

    /// An error unless kernels can run in `precision` here.
    pub fn check_precision(&self, precision: Precision) -> Result<(), GpuError> {
        if self.supports(precision) {
            Ok(())
        } else {
            Err(GpuError::Precision {
                device: self.to_string(),
                precision: precision.name(),
            })
        }
    }

    /// The device's memory as the runtime reports it.
    pub fn memory(&self) -> DeviceMemory {
        self.memory
    }

    /// Units per workgroup (cube) of the kernels.
    pub fn workgroup(&self) -> u32 {
        self.workgroup
    }

    /// Sets the workgroup size (a power of two from 32 to 1024).
    pub fn set_workgroup(&mut self, units: u32) -> Result<(), GpuError> {
        if !units.is_power_of_two() || !(32..=1024).contains(&units) {
            return Err(GpuError::Device {
                device: self.to_string(),
                message: format!("workgroup size {units}: expected a power of two in 32..=1024"),
            });
        }
        self.workgroup = units;
        Ok(())
    }

    /// Waits for every launched kernel; reports a failed launch (a kernel that did not
    /// validate leaves its outputs untouched, and only this reports it).
    pub fn sync(&self) -> Result<(), GpuError> {
        let r = with_client!(&self.client, |c| c
            .flush()
            .and_then(|_| cubecl::future::block_on(c.sync())));
        r.map_err(|e| self.failure(e))
    }

    pub(crate) fn failure(&self, e: impl std::fmt::Display) -> GpuError {
        GpuError::Device {
            device: self.to_string(),
            message: e.to_string(),
        }
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("spec", &self.spec)
            .field("id", &self.id)
            .field("name", &self.name)
            .field("f64", &self.f64)
            .field("workgroup", &self.workgroup)
            .finish()
    }
}

impl std::fmt::Display for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, #{})", self.spec, self.name, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::take_in_turn;

    #[test]
    fn ranks_take_the_devices_of_the_configured_kind_in_turn() {
        let kinds = ["discrete", "cpu", "discrete", "discrete"];
        let from = |first, ranks: usize| -> Vec<Option<usize>> {
            (0..ranks).map(|l| take_in_turn(&kinds, first, l)).collect()
        };
        // Four ranks from the first GPU: the three GPUs in turn, never the software driver.
        assert_eq!(from(0, 4), [Some(0), Some(2), Some(3), Some(0)]);
        // From the second GPU, wrapping around.
        assert_eq!(from(2, 3), [Some(2), Some(3), Some(0)]);
        // The software driver asked for: every rank shares it.
        assert_eq!(from(1, 2), [Some(1), Some(1)]);
        // Past the list: refused.
        assert_eq!(take_in_turn(&kinds, 4, 0), None);
        assert_eq!(take_in_turn::<&str>(&[], 0, 0), None);
    }
}
