//! Direct summation: every particle attracts every other, O(N^2) per evaluation.
//!
//! [`DirectSolver`] runs one of the [`Kernel`]s on a [`CpuBackend`]: the f64 compensated
//! [`reference`] kernel (the yardstick), or a fast kernel from [`simd`] chosen once per
//! evaluation from what the CPU supports. Threads split the targets into fixed blocks; each
//! target's sum runs over all sources in a fixed order, so results are bitwise identical at any
//! thread count. Across ranks ([`mote_core::comm`]) the targets are cut into equal contiguous
//! ranges, each rank evaluates its own range against every source and the ranges are gathered:
//! the same sums, so results are bitwise identical at any rank count too.

pub mod reference;
pub(crate) mod simd;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use mote_core::comm::{self, Comm};
use mote_core::{CpuBackend, Precision, Real, SimdLevel, Vec3Span, Vec3SpanMut};

use crate::error::GravityError;
use crate::softening::Softening;
use crate::solver::{ForceSolver, NonFiniteWatch, SolverInfo};
use simd::{DirectKernels, Sources, Targets};

/// Targets per block handed to a thread: enough to amortise a task, few enough to balance.
const TARGET_BLOCK: usize = 64;

/// A direct-summation kernel that can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// f64, compensated, explicit `j != i` skip: the yardstick, never optimised.
    Reference,
    /// A fast kernel at a SIMD level.
    Fast(SimdLevel),
}

impl Kernel {
    /// The name used on the command line and in reports (`reference`, `scalar`, `avx2`,
    /// `avx512`).
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Reference => "reference",
            Kernel::Fast(level) => level.name(),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a user asks for: a specific kernel or the best one this CPU runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KernelChoice {
    /// The fastest kernel this CPU supports.
    #[default]
    Auto,
    /// Exactly this kernel (an error where the CPU cannot run it).
    Exactly(Kernel),
}

impl KernelChoice {
    /// The kernel this choice selects on this CPU.
    pub fn resolve(self) -> Result<Kernel, GravityError> {
        match self {
            KernelChoice::Auto => Ok(Kernel::Fast(SimdLevel::best())),
            KernelChoice::Exactly(Kernel::Fast(level)) if !level.is_available() => {
                Err(GravityError::KernelUnavailable {
                    requested: level.name().to_string(),
                    detected: SimdLevel::detect()
                        .iter()
                        .map(|l| l.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
            KernelChoice::Exactly(k) => Ok(k),
        }
    }
}

impl FromStr for KernelChoice {
    type Err = GravityError;

    /// Parses `auto`, `reference`, `scalar`, `avx2` or `avx512`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => Ok(KernelChoice::Auto),
            "reference" => Ok(KernelChoice::Exactly(Kernel::Reference)),
            other => other
                .parse::<SimdLevel>()
                .map(|l| KernelChoice::Exactly(Kernel::Fast(l)))
                .map_err(|_| GravityError::UnknownName {
                    what: "kernel",
                    name: s.to_string(),
                    expected: "auto, reference, scalar, avx2, avx512",
                }),
        }
    }
}

/// Direct-summation gravity on a CPU backend.
///
/// ```
/// use mote_core::{CpuBackend, ParticleData};
/// use mote_gravity::{DirectSolver, ForceSolver, KernelChoice, Softening, SolverInfo};
///
/// let mut p = ParticleData::<f64>::new();
/// p.push([0.0, 0.0, 0.0], [0.0; 3], 1.0).unwrap();
/// p.push([2.0, 0.0, 0.0], [0.0; 3], 1.0).unwrap();
/// let mut solver = DirectSolver::new(Softening::NONE, KernelChoice::Auto, CpuBackend::Serial).unwrap();
/// solver.update(&mut p);
/// assert_eq!(p.accelerations().x(), &[0.25, -0.25]);
/// assert_eq!(solver.interactions(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct DirectSolver {
    softening: Softening,
    kernel: Kernel,
    backend: CpuBackend,
    interactions: u64,
    comm: Arc<dyn Comm>,
    watch: NonFiniteWatch,
}

impl DirectSolver {
    /// A solver with the given softening, kernel and backend; fails if the CPU cannot run the
    /// kernel.
    pub fn new(
        softening: Softening,
        kernel: KernelChoice,
        backend: CpuBackend,
    ) -> Result<Self, GravityError> {
        Ok(Self {
            softening,
            kernel: kernel.resolve()?,
            backend,
            interactions: 0,
            comm: comm::world(),
            watch: NonFiniteWatch::default(),
        })
    }

    /// The same solver on the ranks of `comm` instead of the process's world.
    pub fn with_comm(mut self, comm: Arc<dyn Comm>) -> Self {
        self.comm = comm;
        self
    }

    /// The kernel that runs.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The backend it runs on.
    pub fn backend(&self) -> CpuBackend {
        self.backend
    }
}

impl SolverInfo for DirectSolver {
    fn name(&self) -> String {
        format!("direct/{}", self.kernel)
    }

    fn softening(&self) -> Softening {
        self.softening
    }

    fn interactions(&self) -> u64 {
        self.interactions
    }
}

impl<R: Real> ForceSolver<R> for DirectSolver {
    fn accelerations(&mut self, positions: Vec3Span<'_, R>, masses: &[R], acc: Vec3SpanMut<'_, R>) {
        let n = positions.len();
        assert_eq!(
            masses.len(),
            n,
            "mass and position arrays of unequal length"
        );
        assert_eq!(
            acc.len(),
            n,
            "acceleration and position arrays of unequal length"
        );
        let ranges = comm::even_ranges(n, self.comm.size());
        let mine = ranges[self.comm.rank()].clone();
        let (ax, ay, az) = acc.components_mut();
        let mut own = Vec3SpanMut::new(
            &mut ax[mine.clone()],
            &mut ay[mine.clone()],
            &mut az[mine.clone()],
        );
        match self.kernel {
            Kernel::Reference => {
                let eps2 = self.softening.epsilon() * self.softening.epsilon();
                reference::accelerations_of_range(
                    self.backend,
                    positions,
                    masses,
                    eps2,
                    mine.start,
                    own.reborrow(),
                );
            }
            Kernel::Fast(level) => {
                let (x, y, z) = positions.components();
                let targets = [&x[mine.clone()], &y[mine.clone()], &z[mine.clone()]];
                run_fast(
                    self.backend,
                    level,
                    self.softening,
                    positions,
                    masses,
                    targets,
                    own.reborrow(),
                );
            }
        }
        let evaluation = self.watch.count();
        if self.comm.size() > 1 {
            // A test's fault: one rank's result goes bad at the third evaluation.
            if evaluation == 3 && !mine.is_empty() && comm::fault("nan", self.comm.rank()) {
                own.set(0, [R::nan(); 3]);
            }
            let (x, y, z) = own.reborrow().components_mut();
            self.watch.look([&*x, &*y, &*z], |k| mine.start + k);
            let mut scratch = Vec::new();
            for out in [ax, ay, az] {
                comm::gather_parts(self.comm.as_ref(), out, &ranges, &mut scratch);
            }
        }
        self.interactions += (n as u64) * (n as u64).saturating_sub(1);
    }

    fn potential_energy(&mut self, positions: Vec3Span<'_, R>, masses: &[R]) -> f64 {
        let eps2 = self.softening.epsilon() * self.softening.epsilon();
        reference::potential_energy_on(self.comm.as_ref(), self.backend, positions, masses, eps2)
    }

    fn first_non_finite(&self) -> Option<(u64, usize)> {
        self.watch.first()
    }

    /// Each target's sum over every source, as in [`ForceSolver::accelerations`]: the same
    /// arithmetic, so a target's result is the same whichever rank owns it.
    fn accelerations_of(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        targets: &[usize],
        mut acc: Vec3SpanMut<'_, R>,
        costs: &mut [u64],
    ) {
        let n = positions.len();
        assert_eq!(acc.len(), targets.len(), "one acceleration per target");
        match self.kernel {
            Kernel::Reference => {
                let eps2 = self.softening.epsilon() * self.softening.epsilon();
                self.backend.for_each_particle(acc.reborrow(), |k| {
                    reference::acceleration_of(targets[k], positions, masses, eps2).map(R::cast)
                });
            }
            Kernel::Fast(level) => {
                let (x, y, z) = positions.components();
                let pick = |a: &[R]| -> Vec<R> { targets.iter().map(|&t| a[t]).collect() };
                let (tx, ty, tz) = (pick(x), pick(y), pick(z));
                run_fast(
                    self.backend,
                    level,
                    self.softening,
                    positions,
                    masses,
                    [&tx, &ty, &tz],
                    acc,
                );
            }
        }
        costs.fill(n.saturating_sub(1) as u64);
        self.interactions += targets.len() as u64 * n.saturating_sub(1) as u64;
    }
}

/// Runs the fast kernel of `level` for the targets at the positions `targets` (into `acc`,
/// their accelerations). The precision is a type parameter; the SIMD kernels exist per concrete
/// type: the match runs once per evaluation and the casts are checked no-ops (same type).
fn run_fast<R: Real>(
    backend: CpuBackend,
    level: SimdLevel,
    softening: Softening,
    positions: Vec3Span<'_, R>,
    masses: &[R],
    targets: [&[R]; 3],
    acc: Vec3SpanMut<'_, R>,
) {
    let run = match R::PRECISION {
        Precision::F32 => run_fast_as::<R, f32>,
        Precision::F64 => run_fast_as::<R, f64>,
    };
    run(backend, level, softening, positions, masses, targets, acc);
}

/// [`run_fast`] in `T`, which is `R` itself.
fn run_fast_as<R: Real, T: Real + DirectKernels>(
    backend: CpuBackend,
    level: SimdLevel,
    softening: Softening,
    positions: Vec3Span<'_, R>,
    masses: &[R],
    targets: [&[R]; 3],
    acc: Vec3SpanMut<'_, R>,
) {
    assert_eq!(R::PRECISION, T::PRECISION, "scalar types differ");
    let sources = Sources {
        x: bytemuck::cast_slice::<R, T>(positions.x()),
        y: bytemuck::cast_slice::<R, T>(positions.y()),
        z: bytemuck::cast_slice::<R, T>(positions.z()),
        m: bytemuck::cast_slice::<R, T>(masses),
        eps2: softening.epsilon2::<T>(),
    };
    let (ax, ay, az) = acc.components_mut();
    let out = Vec3SpanMut::new(
        bytemuck::cast_slice_mut::<R, T>(ax),
        bytemuck::cast_slice_mut::<R, T>(ay),
        bytemuck::cast_slice_mut::<R, T>(az),
    );
    // Chosen once per evaluation: one function pointer for every block.
    let kernel = T::kernel(level);
    let [tx, ty, tz] = targets.map(bytemuck::cast_slice::<R, T>);
    backend.for_each_block(out, TARGET_BLOCK, |start, block| {
        let (ax, ay, az) = block.components_mut();
        let r = start..start + ax.len();
        let t = Targets {
            x: &tx[r.clone()],
            y: &ty[r.clone()],
            z: &tz[r],
        };
        kernel(&sources, t, ax, ay, az);
    });
}
