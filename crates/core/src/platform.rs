//! What the machine offers: CPU model, cores, memory, and the SIMD instruction sets that the
//! fast kernels can use.
//!
//! SIMD is chosen at run time, once per call of a kernel, from what [`SimdLevel::detect`]
//! reports: a binary built for baseline x86-64 still runs its AVX-512 kernels where the CPU has
//! them.

use serde::Serialize;

/// An instruction-set level a kernel can be compiled for, ordered from least to most capable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SimdLevel {
    /// Portable code; whatever the compiler auto-vectorises for the baseline target.
    Scalar,
    /// AVX2 with FMA (256-bit vectors).
    Avx2,
    /// AVX-512F (512-bit vectors).
    Avx512,
}

impl SimdLevel {
    /// Every level, least capable first.
    pub const ALL: [SimdLevel; 3] = [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }

    /// Whether this CPU can run kernels of this level.
    pub fn is_available(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Every level this CPU supports, least capable first.
    pub fn detect() -> Vec<SimdLevel> {
        Self::ALL.into_iter().filter(|l| l.is_available()).collect()
    }

    /// The most capable level this CPU supports: what `auto` kernel selection picks.
    pub fn best() -> SimdLevel {
        *Self::detect().last().expect("scalar is always available")
    }

    /// The level for passes bound by gathers of neighbours' values (the meshless neighbour
    /// loops): AVX2 where the CPU has it, even when it has AVX-512, otherwise [`Self::best`].
    /// Such passes load each lane's value separately and insert it into a vector, and on an
    /// AVX-512 Xeon their 512-bit instantiations ran 10-25 % slower than the 256-bit ones
    /// (fewer ports execute 512-bit operations, and the inserts compete with the arithmetic
    /// for them; `docs/performance.md`). Every level gives the same bits there, so the choice
    /// is speed only. Compute-bound kernels (direct gravity) keep [`Self::best`].
    pub fn for_gathers() -> SimdLevel {
        if SimdLevel::Avx2.is_available() {
            SimdLevel::Avx2
        } else {
            Self::best()
        }
    }

    /// The levels the gather-bound passes (the meshless neighbour loops) are compiled for, of
    /// those this CPU has: scalar and AVX2. [`Self::for_gathers`] never picks AVX-512 for them
    /// (it is slower there), and a third copy of every meshless pass for every precision,
    /// dimension, layout and equation lengthened the program's build for nothing (decision
    /// 0014).
    pub fn gather_levels() -> Vec<SimdLevel> {
        Self::detect()
            .into_iter()
            .filter(|&l| l != SimdLevel::Avx512)
            .collect()
    }

    /// [`run`](Self::run) for the gather-bound passes: `body` compiled for the scalar and the
    /// AVX2 levels only ([`Self::gather_levels`]); at the AVX-512 level it runs the AVX2 body
    /// (every AVX-512 CPU has AVX2), which is why the passes refuse to be set to that level.
    ///
    /// # Panics
    /// If this CPU does not support the level.
    #[inline(always)]
    pub fn run_gathers<T>(self, body: impl FnOnce() -> T) -> T {
        self.run_each_gathers(
            body,
            #[inline(always)]
            |b| b(),
            #[inline(always)]
            |b| b(),
        )
    }

    /// [`run_each`](Self::run_each) for the gather-bound passes (see [`Self::run_gathers`]).
    ///
    /// # Panics
    /// If this CPU does not support the level.
    #[inline(always)]
    pub fn run_each_gathers<A, T>(
        self,
        arg: A,
        scalar: impl FnOnce(A) -> T,
        avx2: impl FnOnce(A) -> T,
    ) -> T {
        let level = if self == SimdLevel::Avx512 && self.is_available() {
            SimdLevel::Avx2
        } else {
            self
        };
        // No AVX-512 body is compiled: that level is mapped to AVX2 above.
        level.run_each(arg, scalar, avx2, |_| {
            unreachable!("AVX-512 runs the AVX2 body")
        })
    }

    /// Runs `body` compiled for this level: `body` is instantiated inside a
    /// `#[target_feature]` function of the level, so that it, and every `#[inline(always)]`
    /// function it calls, is compiled with the level's instructions (the compiler vectorises
    /// lane loops to the level's width). Call it once per block of work, not per element.
    ///
    /// # Panics
    /// If this CPU does not support the level (check [`SimdLevel::is_available`] first).
    #[inline(always)]
    pub fn run<T>(self, body: impl FnOnce() -> T) -> T {
        // The body is the argument, and each level's wrapper calls it.
        self.run_each(
            body,
            #[inline(always)]
            |b| b(),
            #[inline(always)]
            |b| b(),
            #[inline(always)]
            |b| b(),
        )
    }

    /// [`run`](Self::run) with a separate body per level, each compiled only for its own level:
    /// a kernel can carry a specialisation at the level where it pays (the one
    /// [`Self::for_gathers`] picks, say) without compiling it, and lengthening the build, for
    /// the others. The bodies must compute the same thing; `arg` goes to the one that runs.
    ///
    /// # Panics
    /// If this CPU does not support the level (check [`SimdLevel::is_available`] first).
    #[inline(always)]
    pub fn run_each<A, T>(
        self,
        arg: A,
        scalar: impl FnOnce(A) -> T,
        avx2: impl FnOnce(A) -> T,
        avx512: impl FnOnce(A) -> T,
    ) -> T {
        assert!(self.is_available(), "SIMD level {self} not available");
        // The wrappers are inlined into the `#[target_feature]` functions, so that the bodies
        // are compiled with the level's instructions.
        match self {
            SimdLevel::Scalar => scalar(arg),
            // SAFETY: the level's CPU features were checked just above.
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => unsafe {
                features::avx2(
                    #[inline(always)]
                    || avx2(arg),
                )
            },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => unsafe {
                features::avx512(
                    #[inline(always)]
                    || avx512(arg),
                )
            },
            #[cfg(not(target_arch = "x86_64"))]
            _ => {
                let _ = (avx2, avx512);
                scalar(arg)
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod features {
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2<T>(body: impl FnOnce() -> T) -> T {
        body()
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512<T>(body: impl FnOnce() -> T) -> T {
        body()
    }
}

impl std::fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for SimdLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|l| l.name() == s.trim())
            .ok_or_else(|| format!("unknown SIMD level `{s}`: expected scalar, avx2 or avx512"))
    }
}

/// A description of the machine, as `mote info` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct MachineInfo {
    /// The CPU's brand string.
    pub cpu_model: String,
    /// Logical cores available to this process.
    pub logical_cores: usize,
    /// SIMD levels this CPU supports.
    pub simd_detected: Vec<SimdLevel>,
    /// The level `auto` kernels use (direct gravity).
    pub simd_chosen: SimdLevel,
    /// The level of the gather-bound meshless passes ([`SimdLevel::for_gathers`]).
    pub simd_gathers: SimdLevel,
    /// Installed memory in bytes, where the operating system reports it.
    pub memory_bytes: Option<u64>,
}

impl MachineInfo {
    /// Reads the machine's properties.
    pub fn detect() -> Self {
        Self {
            cpu_model: cpu_model(),
            logical_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            simd_detected: SimdLevel::detect(),
            simd_chosen: SimdLevel::best(),
            simd_gathers: SimdLevel::for_gathers(),
            memory_bytes: memory_bytes(),
        }
    }
}

/// The CPU's brand string from CPUID (x86-64), or a generic name elsewhere.
pub fn cpu_model() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        // `__cpuid` is a safe function in newer Rust releases; the blocks keep older ones building.
        #![allow(unused_unsafe)]
        use std::arch::x86_64::__cpuid;
        // SAFETY: CPUID is available on every x86-64 processor.
        let max_ext = unsafe { __cpuid(0x8000_0000) }.eax;
        if max_ext >= 0x8000_0004 {
            let mut bytes = Vec::with_capacity(48);
            for leaf in 0x8000_0002u32..=0x8000_0004 {
                // SAFETY: the leaf is within the range the processor reported.
                let r = unsafe { __cpuid(leaf) };
                for reg in [r.eax, r.ebx, r.ecx, r.edx] {
                    bytes.extend_from_slice(&reg.to_le_bytes());
                }
            }
            let s = String::from_utf8_lossy(&bytes);
            let s = s.trim_matches(|c: char| c == '\0' || c.is_whitespace());
            if !s.is_empty() {
                return s.to_string();
            }
        }
    }
    format!("unknown {} processor", std::env::consts::ARCH)
}

/// The value of `key` (e.g. `MemTotal:`) in `/proc/meminfo`, in bytes (Linux); `None`
/// elsewhere.
fn meminfo_bytes(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Installed memory from `/proc/meminfo` (Linux); `None` elsewhere.
fn memory_bytes() -> Option<u64> {
    meminfo_bytes("MemTotal:")
}

/// Memory this process can have now: the kernel's `MemAvailable` (else `MemFree`), or less
/// where a cgroup v2 limit (a container) leaves less. `None` where the system does not say.
pub fn available_memory_bytes() -> Option<u64> {
    let mut available = meminfo_bytes("MemAvailable:").or_else(|| meminfo_bytes("MemFree:"))?;
    if let Ok(text) = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        && let Ok(max) = text.trim().parse::<u64>()
    {
        let used = std::fs::read_to_string("/sys/fs/cgroup/memory.current")
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0);
        available = available.min(max.saturating_sub(used));
    }
    Some(available)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_is_consistent() {
        let levels = SimdLevel::detect();
        assert_eq!(levels[0], SimdLevel::Scalar);
        assert!(levels.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(SimdLevel::best(), *levels.last().unwrap());
        for l in SimdLevel::ALL {
            assert_eq!(l.name().parse::<SimdLevel>(), Ok(l));
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            levels.contains(&SimdLevel::Avx512),
            std::arch::is_x86_feature_detected!("avx512f")
        );
    }

    /// `run_each` runs the body of the level it is given (on x86-64; elsewhere the scalar one),
    /// with its argument, and nothing else.
    #[test]
    fn run_each_runs_the_given_levels_body() {
        for level in SimdLevel::detect() {
            let mut ran = Vec::new();
            let got = level.run_each(
                &mut ran,
                |r| {
                    r.push(SimdLevel::Scalar);
                    1
                },
                |r| {
                    r.push(SimdLevel::Avx2);
                    2
                },
                |r| {
                    r.push(SimdLevel::Avx512);
                    3
                },
            );
            assert_eq!(ran, [level], "{level}");
            assert_eq!(got, level as usize + 1, "{level}");
        }
    }

    #[test]
    fn machine_info_is_plausible() {
        let m = MachineInfo::detect();
        assert!(!m.cpu_model.is_empty());
        assert!(m.logical_cores >= 1);
        if let Some(b) = m.memory_bytes {
            assert!(b > 1 << 20);
        }
    }
}
