//! Tree gravity on the device: the host builds the Barnes-Hut tree (`mote_gravity::tree`), the
//! device walks it once per group of targets and sums the interaction lists.
//!
//! 1. The tree (particles in tree order, node records, groups) is uploaded.
//! 2. `walk_kernel`, one unit per group, walks the tree from the root with the group's bounding
//!    box and the opening test of `crates/gravity/formulas/tree.rs` (the CPU walk's), in the
//!    CPU's order: first counting each group's list, then (after a prefix sum on the device)
//!    writing it. Entries are particle indices, or node indices flagged with
//!    [`mote_gravity::tree::NODE`]; so the lists are the CPU's, entry for entry.
//! 3. `sum_kernel`, one unit per target, sums its group's list in list order: monopoles as
//!    point masses, and the quadrupole terms of the same formula file. Only the summation order
//!    within a list differs from the CPU's lanes, so the accelerations agree to round-off.
//!
//! The stack of a walk lives in device memory, `STACK` entries per group: the tree is at most
//! `KEY_BITS + 1` levels deep, and a depth-first walk holds at most 7 pending siblings per level
//! plus the 8 children of the node it opened last.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use cubecl::prelude::*;
use mote_core::comm::{self, Comm};
use mote_core::{CpuBackend, Real, Vec3Span, Vec3SpanMut};
use mote_gravity::tree::{
    GroupCut, KEY_BITS, Multipole, NODE, Tree, TreeSettings, group_interactions,
};
use mote_gravity::{ForceSolver, NonFiniteWatch, Softening, SolverInfo};

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::formula::tree::{accepted, quadrupole_acceleration, quadrupole_potential};
use crate::gravity::{GpuFloat, TransferSeconds};
use crate::launch::launch;

/// Stack entries per group walk.
const STACK: usize = 8 * (KEY_BITS as usize + 1);

/// The tree as the kernels read it: particles in tree order, and the node records (centre of
/// mass and squared opening radius 4 per node; first child, children, first particle and count
/// 4 per node; masses; quadrupoles 5 per node, or one unused value).
#[derive(CubeLaunch, CubeType)]
struct TreeArrays<F: Float> {
    x: Array<F>,
    y: Array<F>,
    z: Array<F>,
    m: Array<F>,
    geometry: Array<F>,
    links: Array<u32>,
    node_mass: Array<F>,
    quad: Array<F>,
}

/// Appends `v` to a group's list: written in the filling pass, counted in both.
#[cube]
fn emit(list: &mut Array<u32>, at: u32, len: u32, v: u32, #[comptime] fill: bool) -> u32 {
    if fill {
        list[(at + len) as usize] = v;
    }
    len + 1
}

/// One unit per group: counts (`fill = false`, into `counts`) or writes (from `starts[g]`) the
/// group's interaction list.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
fn walk_kernel<F: Float>(
    t: &TreeArrays<F>,
    groups: &Array<u32>,
    starts: &Array<u32>,
    counts: &mut Array<u32>,
    list: &mut Array<u32>,
    stack: &mut Array<u32>,
    n_groups: u32,
    #[comptime] fill: bool,
    #[comptime] depth: usize,
) {
    let g = ABSOLUTE_POS;
    if g < n_groups as usize {
        let s = groups[2 * g] as usize;
        let c = groups[2 * g + 1] as usize;
        let mut lo_x = t.x[s];
        let mut lo_y = t.y[s];
        let mut lo_z = t.z[s];
        let mut hi_x = t.x[s];
        let mut hi_y = t.y[s];
        let mut hi_z = t.z[s];
        for k in s + 1..s + c {
            lo_x = F::min(lo_x, t.x[k]);
            lo_y = F::min(lo_y, t.y[k]);
            lo_z = F::min(lo_z, t.z[k]);
            hi_x = F::max(hi_x, t.x[k]);
            hi_y = F::max(hi_y, t.y[k]);
            hi_z = F::max(hi_z, t.z[k]);
        }
        let base = g * depth;
        let mut at = 0u32;
        if fill {
            at = starts[g];
        }
        let mut len = 0u32;
        stack[base] = 0u32;
        let mut top = 1usize;
        loop {
            if top == 0 {
                break;
            }
            top -= 1;
            let nd = stack[base + top] as usize;
            let first = t.links[4 * nd + 2];
            let bodies = t.links[4 * nd + 3];
            let children = t.links[4 * nd + 1];
            if accepted::<F>(
                lo_x,
                lo_y,
                lo_z,
                hi_x,
                hi_y,
                hi_z,
                t.geometry[4 * nd],
                t.geometry[4 * nd + 1],
                t.geometry[4 * nd + 2],
                t.geometry[4 * nd + 3],
            ) {
                // A one-particle node is its particle, exactly.
                let v = select(bodies == 1, first, NODE | nd as u32);
                len = emit(list, at, len, v, fill);
            } else if children == 0 {
                for k in first..first + bodies {
                    len = emit(list, at, len, k, fill);
                }
            } else {
                // Reversed, so that children are taken in Morton order, as on the CPU.
                let cs = t.links[4 * nd];
                for q in 0..children {
                    stack[base + top + q as usize] = cs + children - 1 - q;
                }
                top += children as usize;
            }
        }
        if !fill {
            counts[g] = len;
        }
    }
}

/// One unit per target of `first..first + count` (tree order): its group's list (`group_of`,
/// indexed from `first`, names it among the walked groups) summed in list order, into the
/// accelerations, or (`potential`) `-phi` into `ax`, indexed from `first`.
// The source's coordinates are declared, then set by the branch (a kernel's variables are
// assigned in place).
#[allow(clippy::too_many_arguments, unused_assignments)]
#[cube(launch_unchecked)]
fn sum_kernel<F: Float + ScalarArgSettings>(
    t: &TreeArrays<F>,
    group_of: &Array<u32>,
    starts: &Array<u32>,
    list: &Array<u32>,
    ax: &mut Array<F>,
    ay: &mut Array<F>,
    az: &mut Array<F>,
    eps2: F,
    first: u32,
    count: u32,
    #[comptime] quadrupole: bool,
    #[comptime] potential: bool,
) {
    let out = ABSOLUTE_POS;
    if out < count as usize {
        let k = first as usize + out;
        let g = group_of[out] as usize;
        let px = t.x[k];
        let py = t.y[k];
        let pz = t.z[k];
        let mut sx = F::new(0.0);
        let mut sy = F::new(0.0);
        let mut sz = F::new(0.0);
        for e in starts[g]..starts[g + 1] {
            let v = list[e as usize];
            let j = (v & (NODE - 1)) as usize;
            let is_node = v >= NODE;
            let mut cx = F::new(0.0);
            let mut cy = F::new(0.0);
            let mut cz = F::new(0.0);
            let mut mass = F::new(0.0);
            if is_node {
                cx = t.geometry[4 * j];
                cy = t.geometry[4 * j + 1];
                cz = t.geometry[4 * j + 2];
                mass = t.node_mass[j];
            } else {
                cx = t.x[j];
                cy = t.y[j];
                cz = t.z[j];
                mass = t.m[j];
            }
            let dx = cx - px;
            let dy = cy - py;
            let dz = cz - pz;
            let s2 = dx * dx + dy * dy + dz * dz + eps2;
            // 1 / sqrt(0) is 0, as on the CPU: coincident particles without softening exert
            // no force on each other (`mote_gravity::softening::inverse_distance`).
            let inv = select(s2 > F::new(0.0), F::new(1.0) / F::sqrt(s2), F::new(0.0));
            // The target itself adds exactly nothing.
            let own = !is_node && j == k;
            if potential {
                sx += select(own, F::new(0.0), mass * inv);
                if quadrupole && is_node {
                    sx += quadrupole_potential::<F>(
                        dx,
                        dy,
                        dz,
                        eps2,
                        t.quad[5 * j],
                        t.quad[5 * j + 1],
                        t.quad[5 * j + 2],
                        t.quad[5 * j + 3],
                        t.quad[5 * j + 4],
                    );
                }
            } else {
                let f = select(own, F::new(0.0), mass * (inv * inv * inv));
                sx += f * dx;
                sy += f * dy;
                sz += f * dz;
                if quadrupole && is_node {
                    let (qx, qy, qz) = quadrupole_acceleration::<F>(
                        dx,
                        dy,
                        dz,
                        eps2,
                        t.quad[5 * j],
                        t.quad[5 * j + 1],
                        t.quad[5 * j + 2],
                        t.quad[5 * j + 3],
                        t.quad[5 * j + 4],
                    );
                    sx += qx;
                    sy += qy;
                    sz += qz;
                }
            }
        }
        ax[out] = sx;
        if !potential {
            ay[out] = sy;
            az[out] = sz;
        }
    }
}

/// The tree on the device for one evaluation.
struct DeviceTree<F> {
    x: DeviceArray<F>,
    y: DeviceArray<F>,
    z: DeviceArray<F>,
    m: DeviceArray<F>,
    geometry: DeviceArray<F>,
    links: DeviceArray<u32>,
    node_mass: DeviceArray<F>,
    quad: DeviceArray<F>,
    group_of: DeviceArray<u32>,
    starts: DeviceArray<u32>,
}

impl<F: GpuFloat> DeviceTree<F> {
    /// The kernels' view of the tree.
    fn arrays<Rt: Runtime>(&self) -> TreeArraysLaunch<F, Rt> {
        TreeArraysLaunch::new(
            self.x.arg(),
            self.y.arg(),
            self.z.arg(),
            self.m.arg(),
            self.geometry.arg(),
            self.links.arg(),
            self.node_mass.arg(),
            self.quad.arg(),
        )
    }
}

/// Barnes-Hut tree gravity with the walk and the list sums on a device, as a
/// [`ForceSolver`]: the tree is built on the host (the CPU solver's build), the lists are the
/// CPU solver's, entry for entry, and the accelerations agree with the CPU tree to round-off.
///
/// On several ranks ([`GpuTreeSolver::with_comm`]; the process's world by default) every rank
/// builds the tree and its device walks and sums its own contiguous range of groups, cut by
/// measured cost as on the CPU ([`GroupCut`]); a target's list and its sum do not depend on the
/// other groups, so the gathered results are one device's, bit for bit.
pub struct GpuTreeSolver<R: Real> {
    gpu: Gpu,
    softening: Softening,
    settings: TreeSettings,
    tree: Tree<R>,
    interactions: u64,
    seconds: TransferSeconds,
    comm: Arc<dyn Comm>,
    cut: GroupCut,
    watch: NonFiniteWatch,
}

impl<R: Real> GpuTreeSolver<R> {
    /// A solver on `gpu` (an error where the device cannot compute in `R`).
    pub fn new(gpu: Gpu, softening: Softening, settings: TreeSettings) -> Result<Self, GpuError> {
        gpu.check_precision(R::PRECISION)?;
        let settings = settings.checked()?;
        Ok(Self {
            gpu,
            softening,
            settings,
            tree: Tree::new(settings.multipole),
            interactions: 0,
            seconds: TransferSeconds::default(),
            comm: comm::world(),
            cut: GroupCut::new(),
            watch: NonFiniteWatch::default(),
        })
    }

    /// The same solver on the ranks of `comm` instead of the process's world.
    pub fn with_comm(mut self, comm: Arc<dyn Comm>) -> Self {
        self.comm = comm;
        self
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The host tree of the last evaluation.
    pub fn tree(&self) -> &Tree<R> {
        &self.tree
    }

    /// Transfer and kernel seconds since the last call (the host's tree build counts as
    /// upload), and resets them.
    pub fn take_seconds(&mut self) -> TransferSeconds {
        std::mem::take(&mut self.seconds)
    }

    /// Builds the tree on the host and runs the device evaluation of this rank's groups in the
    /// tree's precision, then gathers every rank's; `None` where the input has no tree (a
    /// non-finite position or mass).
    fn evaluate(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        potential: bool,
    ) -> Result<Option<Evaluation>, GpuError> {
        let clock = Instant::now();
        if self
            .tree
            .build(positions, masses, &self.settings, CpuBackend::default())
            .is_err()
        {
            return Ok(None);
        }
        self.seconds.upload += clock.elapsed().as_secs_f64();
        let size = self.comm.size();
        let groups = if size > 1 {
            self.cut.group_ranges(&self.tree, size)
        } else {
            comm::even_ranges(self.tree.group_count(), 1)
        };
        let shares = GroupCut::particle_ranges(&self.tree, &groups);
        let rank = self.comm.rank();
        let job = Job {
            gpu: &self.gpu,
            quadrupole: self.settings.multipole == Multipole::Quadrupole,
            eps2: self.softening.epsilon2::<f64>(),
            potential,
            groups: groups[rank].clone(),
            targets: shares[rank].clone(),
            seconds: &mut self.seconds,
        };
        let any: &dyn std::any::Any = &self.tree;
        let mut e = if let Some(t) = any.downcast_ref::<Tree<f32>>() {
            evaluate_f32(job, t)?
        } else {
            evaluate_f64(job, any.downcast_ref().expect("a Real is f32 or f64"))?
        };
        if size > 1 {
            // Every group's list length and every target's results, on every rank.
            e.lengths = self
                .cut
                .gather(self.comm.as_ref(), &self.tree, &groups, &e.lengths);
            let n = self.tree.order().len();
            let own = shares[rank].clone();
            if !potential {
                self.watch.count();
                let order = self.tree.order();
                let mine = [&e.out[0][..], &e.out[1][..], &e.out[2][..]];
                self.watch.look(mine, |k| order[own.start + k] as usize);
            }
            let scratch = &mut Vec::new();
            for values in &mut e.out {
                let mut all = vec![0.0; n];
                all[own.clone()].copy_from_slice(values);
                comm::gather_parts(self.comm.as_ref(), &mut all, &shares, scratch);
                *values = all;
            }
        }
        // Forces count, as on the CPU; the diagnostics' potential does not.
        if !potential {
            self.interactions += group_interactions(self.tree.groups(), &e.lengths);
        }
        Ok(Some(e))
    }

    fn host_accelerations(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        mut acc: Vec3SpanMut<'_, R>,
    ) -> Result<(), GpuError> {
        if masses.is_empty() {
            return Ok(());
        }
        let Some(e) = self.evaluate(positions, masses, false)? else {
            acc.fill([R::nan(); 3]);
            return Ok(());
        };
        let order = self.tree.order();
        let (ax, ay, az) = acc.components_mut();
        for (host, values) in [ax, ay, az].into_iter().zip(&e.out) {
            for (k, &v) in values.iter().enumerate() {
                host[order[k] as usize] = R::cast(v);
            }
        }
        Ok(())
    }

    fn host_potential(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
    ) -> Result<f64, GpuError> {
        if masses.is_empty() {
            return Ok(0.0);
        }
        let Some(e) = self.evaluate(positions, masses, true)? else {
            return Ok(f64::NAN);
        };
        let m = self.tree.masses();
        Ok(-0.5
            * m.iter()
                .zip(&e.out[0])
                .map(|(m, p)| m.as_f64() * p)
                .sum::<f64>())
    }
}

/// What a device evaluation needs besides the tree.
struct Job<'a> {
    gpu: &'a Gpu,
    quadrupole: bool,
    eps2: f64,
    /// `-phi` instead of the accelerations.
    potential: bool,
    /// The groups this rank walks, and their particles (tree order).
    groups: Range<usize>,
    targets: Range<usize>,
    seconds: &'a mut TransferSeconds,
}

/// A device evaluation's results in tree order (as `f64`, exactly the device's values) for its
/// targets: the accelerations, or `-phi` in the first array; and each walked group's list
/// length.
struct Evaluation {
    out: Vec<Vec<f64>>,
    lengths: Vec<u64>,
}

// The device evaluation per precision, compiled once in this crate rather than in every crate
// that runs a `GpuTreeSolver<R>` (decision 0014).
fn evaluate_f32(job: Job<'_>, tree: &Tree<f32>) -> Result<Evaluation, GpuError> {
    evaluate_on_device(job, tree)
}

fn evaluate_f64(job: Job<'_>, tree: &Tree<f64>) -> Result<Evaluation, GpuError> {
    evaluate_on_device(job, tree)
}

/// Uploads the tree, writes the interaction lists of the job's groups on the device, sums them
/// for the job's targets and downloads the results.
fn evaluate_on_device<F: GpuFloat>(job: Job<'_>, t: &Tree<F>) -> Result<Evaluation, GpuError> {
    let gpu = job.gpu;
    let clock = Instant::now();
    let [px, py, pz] = t.positions();
    let flat_geometry: &[F] = bytemuck::cast_slice(t.node_geometry());
    let flat_links: &[u32] = bytemuck::cast_slice(t.node_links());
    let walked = &t.groups()[job.groups.clone()];
    let flat_groups: &[u32] = bytemuck::cast_slice(walked);
    let quad: Vec<F> = if job.quadrupole {
        let q = t.quadrupoles();
        (0..t.node_count())
            .flat_map(|j| (0..5).map(move |c| q[c][j]))
            .collect()
    } else {
        vec![F::cast(0.0)]
    };
    // Each target's group among the walked ones, indexed from the first target.
    let first = job.targets.start;
    let n = job.targets.len();
    let mut group_of = vec![0u32; n];
    for (g, &[s, c]) in walked.iter().enumerate() {
        group_of[s as usize - first..(s + c) as usize - first].fill(g as u32);
    }
    let n_groups = walked.len();
    let outputs = if job.potential { 1 } else { 3 };
    if n_groups == 0 {
        // A rank with no groups (more ranks than groups) walks nothing.
        return Ok(Evaluation {
            out: vec![Vec::new(); outputs],
            lengths: Vec::new(),
        });
    }
    let groups = gpu.upload("tree groups", flat_groups);
    let d = DeviceTree {
        x: gpu.upload("tree x", px),
        y: gpu.upload("tree y", py),
        z: gpu.upload("tree z", pz),
        m: gpu.upload("tree mass", t.masses()),
        geometry: gpu.upload("tree node geometry", flat_geometry),
        links: gpu.upload("tree node links", flat_links),
        node_mass: gpu.upload("tree node mass", t.node_masses()),
        quad: gpu.upload("tree node quadrupoles", &quad),
        group_of: gpu.upload("tree group of", &group_of),
        starts: gpu.output("tree list starts", n_groups + 1),
    };
    let counts = gpu.output::<u32>("tree list counts", n_groups);
    let stack = gpu.output::<u32>("tree walk stacks", n_groups * STACK);
    job.seconds.upload += clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let walk = |fill: bool, list: &DeviceArray<u32>| {
        // One unit per group; each reads its group's particles and the nodes, writes its own
        // count, its own stack segment and (filling) its own list segment, which the prefix
        // sum of the counts sized.
        launch!(
            gpu,
            n_groups,
            walk_kernel::<F>(
                d.arrays(),
                groups.arg(),
                d.starts.arg(),
                counts.arg(),
                list.arg(),
                stack.arg(),
                n_groups as u32,
                fill,
                STACK
            )
        );
    };
    // Counting writes no list: a stand-in.
    walk(false, &gpu.output::<u32>("tree list", 0));
    gpu.exclusive_scan(&counts, &d.starts)?;
    gpu.sync()?;
    let starts = gpu.download(&d.starts)?;
    let entries = starts[n_groups] as usize;
    let lengths: Vec<u64> = starts.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
    let list = gpu.output::<u32>("tree list", entries);
    walk(true, &list);

    let out: Vec<DeviceArray<F>> = (0..3)
        .map(|k| gpu.output("tree sums", if k < outputs { n } else { 1 }))
        .collect();
    // One unit per target of the job's range (`n` of them); it reads its group's list and
    // writes its own entries (only the first output with `potential`).
    launch!(
        gpu,
        n,
        sum_kernel::<F>(
            d.arrays(),
            d.group_of.arg(),
            d.starts.arg(),
            list.arg(),
            out[0].arg(),
            out[1].arg(),
            out[2].arg(),
            F::cast(job.eps2),
            first as u32,
            n as u32,
            job.quadrupole,
            job.potential
        )
    );
    gpu.sync()?;
    job.seconds.kernel += clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let mut values = Vec::with_capacity(outputs);
    for a in &out[..outputs] {
        values.push(gpu.download(a)?.into_iter().map(|v| v.as_f64()).collect());
    }
    job.seconds.download += clock.elapsed().as_secs_f64();
    Ok(Evaluation {
        out: values,
        lengths,
    })
}

impl<R: Real> SolverInfo for GpuTreeSolver<R> {
    fn name(&self) -> String {
        let s = &self.settings;
        format!(
            "tree/gpu ({})/theta={}/{}/leaf={}/group={}",
            self.gpu.name(),
            s.theta,
            s.multipole,
            s.leaf_size,
            s.group_size
        )
    }

    fn softening(&self) -> Softening {
        self.softening
    }

    fn interactions(&self) -> u64 {
        self.interactions
    }
}

impl<R: Real> ForceSolver<R> for GpuTreeSolver<R> {
    /// Unusable input (a non-finite position or mass) gives NaN accelerations, as on the CPU.
    ///
    /// # Panics
    /// If the device fails: the trait has no error path, and a run must not continue on stale
    /// accelerations.
    fn accelerations(&mut self, positions: Vec3Span<'_, R>, masses: &[R], acc: Vec3SpanMut<'_, R>) {
        if let Err(e) = self.host_accelerations(positions, masses, acc) {
            panic!("GPU tree evaluation failed: {e}");
        }
    }

    fn potential_energy(&mut self, positions: Vec3Span<'_, R>, masses: &[R]) -> f64 {
        self.host_potential(positions, masses)
            .unwrap_or_else(|e| panic!("GPU tree potential failed: {e}"))
    }

    fn budgeted(&mut self) -> Vec<&mut dyn mote_core::Budgeted> {
        vec![&mut self.tree]
    }

    fn first_non_finite(&self) -> Option<(u64, usize)> {
        self.watch.first()
    }
}
