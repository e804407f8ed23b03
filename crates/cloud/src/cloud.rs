//! [`Cloud`]: the per-particle state of a meshless run, as component arrays kept at equal length
//! by one helper, and its generation on a lattice.

use mote_core::columns::{self, Permutation};
use mote_core::rng::Rng;
use mote_core::{AnyBuffer, Budgeted, BudgetedBuffer, Buffer, CapacityError, Real, Scaling};

use crate::domain::{Domain, Shape};
use crate::error::CloudError;

/// Most conserved variables a cloud carries (Euler in 3-D has 5).
pub const MAX_VARIABLES: usize = 16;

const POSITION_NAMES: [&str; 3] = ["position_x", "position_y", "position_z"];
const STATE_NAMES: [&str; MAX_VARIABLES] = [
    "u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9", "u10", "u11", "u12", "u13", "u14",
    "u15",
];

/// Tag of interior particles; boundary particles carry the tag of the face they lie beyond
/// ([`Cloud::face_tag`]).
pub const INTERIOR: u32 = 0;

/// How to fill a domain with particles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatticeOptions {
    /// Nominal particle spacing `dx`. On a box each axis uses `L / round(L / dx)`, so that a
    /// whole number of cells fills it (and a periodic lattice has no seam).
    pub spacing: f64,
    /// Uniform random displacement of each coordinate, as a fraction of the spacing: each
    /// coordinate moves by `jitter * dx * (u - 1/2)`, `u` uniform in [0, 1). 0 gives a uniform
    /// cloud; below 1 every particle stays in its lattice cell.
    pub jitter: f64,
    /// Seed of the jitter.
    pub seed: u64,
    /// Layers of boundary particles outside every non-periodic face (unjittered).
    pub boundary_layers: usize,
}

impl Default for LatticeOptions {
    fn default() -> Self {
        Self {
            spacing: 0.05,
            jitter: 0.0,
            seed: 1,
            boundary_layers: 0,
        }
    }
}

/// The particles of a meshless run: positions (`D` arrays), volume, tag (0 interior, else the
/// boundary face), reconstruction order, stable id, and `M` conserved variables, each a
/// separate budgeted array of equal length.
///
/// **Volume**: the volume of the lattice cell a particle was generated in, `prod_a dx_a`
/// (per-axis spacing, see [`LatticeOptions::spacing`]); so `sum V_i u_i` over the interior is the
/// midpoint-rule integral of `u`.
#[derive(Clone, Debug)]
pub struct Cloud<R: Real, const D: usize> {
    domain: Domain<D>,
    spacing: [f64; D],
    position: [Buffer<R>; D],
    volume: Buffer<R>,
    tag: Buffer<u32>,
    order: Buffer<u8>,
    id: Buffer<u64>,
    state: Vec<Buffer<R>>,
    next_id: u64,
}

impl<R: Real, const D: usize> Cloud<R, D> {
    /// An empty cloud in `domain` with `variables` conserved variables.
    pub fn new(domain: Domain<D>, spacing: [f64; D], variables: usize) -> Result<Self, CloudError> {
        assert!((1..=3).contains(&D), "dimension must be 1, 2 or 3");
        if variables == 0 || variables > MAX_VARIABLES {
            return Err(CloudError::invalid(
                "variables",
                variables,
                format!("1 to {MAX_VARIABLES}"),
            ));
        }
        Ok(Self {
            domain,
            spacing,
            position: std::array::from_fn(|a| {
                Buffer::new(POSITION_NAMES[a], Scaling::PerParticle(1))
            }),
            volume: Buffer::new("volume", Scaling::PerParticle(1)),
            tag: Buffer::new("tag", Scaling::PerParticle(1)),
            order: Buffer::new("order", Scaling::PerParticle(1)),
            id: Buffer::new("id", Scaling::PerParticle(1)),
            state: (0..variables)
                .map(|k| Buffer::new(STATE_NAMES[k], Scaling::PerParticle(1)))
                .collect(),
            next_id: 0,
        })
    }

    /// The one place that lists every array. All length changes go through it.
    pub(crate) fn arrays_mut(&mut self) -> Vec<&mut dyn AnyBuffer> {
        let mut v: Vec<&mut dyn AnyBuffer> = Vec::with_capacity(D + 4 + self.state.len());
        v.extend(self.position.iter_mut().map(|b| b as &mut dyn AnyBuffer));
        v.push(&mut self.volume);
        v.push(&mut self.tag);
        v.push(&mut self.order);
        v.push(&mut self.id);
        v.extend(self.state.iter_mut().map(|b| b as &mut dyn AnyBuffer));
        v
    }

    /// Fills `domain` with a lattice of nominal spacing `options.spacing`, optionally jittered,
    /// with boundary layers outside non-periodic faces. Particles are in lattice order; see
    /// [`Cloud::reorder_morton`].
    pub fn lattice(
        domain: Domain<D>,
        options: LatticeOptions,
        variables: usize,
    ) -> Result<Self, CloudError> {
        let sites = Sites::new(&domain, options)?;
        let total = sites.count(&domain);
        sites.rows(domain, 0..total, total, variables)
    }

    /// The number of particles [`lattice`](Self::lattice) places (without placing them).
    pub fn lattice_len(domain: &Domain<D>, options: LatticeOptions) -> Result<usize, CloudError> {
        Ok(Sites::new(domain, options)?.count(domain))
    }

    /// The particles `rows` of [`lattice`](Self::lattice)'s cloud (of
    /// [`lattice_len`](Self::lattice_len) particles), the same in every bit (the jitter's
    /// random stream is drawn through the earlier sites), with the ids they have there: a rank's
    /// part of a lattice too large for one process's memory. Takes time in proportion to
    /// `rows.end`.
    pub fn lattice_rows(
        domain: Domain<D>,
        options: LatticeOptions,
        variables: usize,
        rows: std::ops::Range<usize>,
    ) -> Result<Self, CloudError> {
        let sites = Sites::new(&domain, options)?;
        let total = sites.count(&domain);
        if rows.start > rows.end || rows.end > total {
            return Err(CloudError::invalid(
                "lattice rows",
                format!("{rows:?}"),
                format!("a range within the lattice's {total} particles"),
            ));
        }
        sites.rows(domain, rows, total, variables)
    }

    /// A cloud of given particles (initial conditions from a file): their positions, volumes,
    /// tags and ids, every state variable zero and every order 1, in the given order (see
    /// [`Cloud::reorder_morton`]). `spacing` is the nominal spacing the search radius is
    /// measured in. Refused: arrays of different lengths, more than `2^32 - 1` particles, a
    /// non-finite position or a volume that is not finite and positive (the first bad index
    /// named).
    pub fn from_particles(
        domain: Domain<D>,
        spacing: [f64; D],
        positions: [&[f64]; D],
        volumes: &[f64],
        tags: &[u32],
        ids: &[u64],
        variables: usize,
    ) -> Result<Self, CloudError> {
        let n = ids.len();
        if positions.iter().any(|p| p.len() != n) || volumes.len() != n || tags.len() != n {
            return Err(CloudError::invalid(
                "particle arrays",
                format!("{n} ids"),
                "one position, volume and tag per id",
            ));
        }
        if n > u32::MAX as usize {
            return Err(CloudError::invalid(
                "particle count",
                n,
                "at most 2^32 - 1 (32-bit neighbour indices)",
            ));
        }
        if let Some(i) = (0..n).find(|&i| positions.iter().any(|p| !p[i].is_finite())) {
            return Err(CloudError::invalid(
                "position",
                format!("index {i}"),
                "finite coordinates",
            ));
        }
        if let Some(i) = (0..n).find(|&i| !(volumes[i].is_finite() && volumes[i] > 0.0)) {
            return Err(CloudError::invalid(
                "volume",
                format!("{} at index {i}", volumes[i]),
                "finite and > 0",
            ));
        }
        let mut cloud = Self::new(domain, spacing, variables)?;
        cloud.resize(n)?;
        for (a, p) in positions.iter().enumerate() {
            for (dst, &x) in cloud.position[a].as_mut_slice().iter_mut().zip(*p) {
                *dst = R::cast(x);
            }
        }
        for (dst, &v) in cloud.volume.as_mut_slice().iter_mut().zip(volumes) {
            *dst = R::cast(v);
        }
        cloud.tag.as_mut_slice().copy_from_slice(tags);
        cloud.order.as_mut_slice().fill(1);
        cloud.id.as_mut_slice().copy_from_slice(ids);
        cloud.next_id = ids.iter().max().map_or(0, |&m| m + 1);
        Ok(cloud)
    }

    /// The tag of the boundary face on `axis` (`high`: the upper face): 1 + 2 axis (+1).
    pub const fn face_tag(axis: usize, high: bool) -> u32 {
        1 + 2 * axis as u32 + high as u32
    }

    /// Sets the number of particles; new ones are zeroed and get fresh ids. All arrays change
    /// together or, on a [`CapacityError`], none does.
    pub fn resize(&mut self, n: usize) -> Result<(), CapacityError> {
        let old = self.len();
        columns::resize_all(&mut self.arrays_mut(), n)?;
        // Only growth adds particles; shrinking leaves nothing to number.
        columns::assign_fresh_ids(&mut self.id.as_mut_slice()[old.min(n)..], &mut self.next_id);
        Ok(())
    }

    /// The same particles (positions, volumes, tags, orders, ids) with `variables` state
    /// variables, all zero: the cloud of another representation of the same problem (a kinetic
    /// relaxation system's `2 D M` variables for the `M` of the conservation law).
    pub fn with_variables(&self, variables: usize) -> Result<Self, CloudError> {
        let mut out = Self::new(self.domain, self.spacing, variables)?;
        let n = self.len();
        let mut state: Vec<&mut dyn AnyBuffer> = out
            .state
            .iter_mut()
            .map(|b| b as &mut dyn AnyBuffer)
            .collect();
        columns::resize_all(&mut state, n)?;
        out.position = self.position.clone();
        out.volume = self.volume.clone();
        out.tag = self.tag.clone();
        out.order = self.order.clone();
        out.id = self.id.clone();
        out.next_id = self.next_id;
        Ok(out)
    }

    /// Keeps the first `n` particles.
    pub fn truncate(&mut self, n: usize) {
        columns::truncate_all(&mut self.arrays_mut(), n);
    }

    /// Reorders the particles: particle `perm[i]` moves to position `i` with all its arrays.
    pub fn apply_permutation(&mut self, perm: &Permutation) {
        columns::permute_all(&mut self.arrays_mut(), perm);
    }

    /// Sorts the particles along the Morton (Z-order) curve of their positions, so that
    /// particles close in space are close in memory; ids travel with them. Deterministic: ties
    /// keep their order.
    pub fn reorder_morton(&mut self) {
        let perm = Permutation::sorting_by_key(&self.morton_keys());
        self.apply_permutation(&perm);
    }

    /// Morton keys of the positions, quantised over the particles' bounding box.
    pub fn morton_keys(&self) -> Vec<u64> {
        let mut lo = [f64::INFINITY; D];
        let mut hi = [f64::NEG_INFINITY; D];
        for a in 0..D {
            for &x in self.position[a].as_slice() {
                lo[a] = lo[a].min(x.as_f64());
                hi[a] = hi[a].max(x.as_f64());
            }
        }
        self.morton_keys_over(lo, hi)
    }

    /// Morton keys of the positions quantised over the box `lo..=hi` (the bounding box of the
    /// whole cloud, for a rank's part of a split cloud).
    pub(crate) fn morton_keys_over(&self, lo: [f64; D], hi: [f64; D]) -> Vec<u64> {
        let n = self.len();
        let bits = 63 / D as u32;
        let scale = ((1u64 << bits) - 1) as f64;
        (0..n)
            .map(|i| {
                let q: [u64; D] = std::array::from_fn(|a| {
                    let w = hi[a] - lo[a];
                    let t = if w > 0.0 {
                        (self.position[a].as_slice()[i].as_f64() - lo[a]) / w
                    } else {
                        0.0
                    };
                    (t * scale).round() as u64
                });
                mote_core::morton::interleave(q, bits)
            })
            .collect()
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.id.len()
    }

    /// Whether there is no particle.
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }

    /// The domain.
    pub fn domain(&self) -> &Domain<D> {
        &self.domain
    }

    /// Per-axis lattice spacing.
    pub fn spacing(&self) -> [f64; D] {
        self.spacing
    }

    /// Number of conserved variables.
    pub fn variables(&self) -> usize {
        self.state.len()
    }

    /// The `D` coordinate arrays.
    pub fn positions(&self) -> [&[R]; D] {
        std::array::from_fn(|a| self.position[a].as_slice())
    }

    /// The `D` coordinate arrays, writable (set-up and moving clouds; positions on periodic
    /// axes must stay wrapped into the box).
    pub fn positions_mut(&mut self) -> [&mut [R]; D] {
        let mut it = self.position.iter_mut();
        std::array::from_fn(|_| it.next().expect("D arrays").as_mut_slice())
    }

    /// Particle volumes.
    pub fn volumes(&self) -> &[R] {
        self.volume.as_slice()
    }

    /// Particle volumes, writable (adaptivity moves volume between particles).
    pub fn volumes_mut(&mut self) -> &mut [R] {
        self.volume.as_mut_slice()
    }

    /// Tags: 0 interior, otherwise the boundary face.
    pub fn tags(&self) -> &[u32] {
        self.tag.as_slice()
    }

    /// Reconstruction orders.
    pub fn orders(&self) -> &[u8] {
        self.order.as_slice()
    }

    /// Reconstruction orders, writable.
    pub fn orders_mut(&mut self) -> &mut [u8] {
        self.order.as_mut_slice()
    }

    /// Stable ids.
    pub fn ids(&self) -> &[u64] {
        self.id.as_slice()
    }

    /// Conserved variable `k`.
    pub fn state(&self, k: usize) -> &[R] {
        self.state[k].as_slice()
    }

    /// What passes read of the particles besides the state.
    pub fn geometry(&self) -> Geometry<'_, R, D> {
        Self::geometry_of(
            &self.position,
            &self.volume,
            &self.order,
            &self.tag,
            &self.domain,
        )
    }

    /// Every conserved variable, writable, together with the read-only geometry (disjoint
    /// borrows: a time step updates the state while the passes read the geometry).
    pub fn state_and_geometry(&mut self) -> (Vec<&mut [R]>, Geometry<'_, R, D>) {
        let geometry = Self::geometry_of(
            &self.position,
            &self.volume,
            &self.order,
            &self.tag,
            &self.domain,
        );
        (
            self.state.iter_mut().map(|b| b.as_mut_slice()).collect(),
            geometry,
        )
    }

    /// The geometry view from the fields it borrows (so that the state can be borrowed mutably
    /// beside it).
    fn geometry_of<'a>(
        position: &'a [Buffer<R>; D],
        volume: &'a Buffer<R>,
        order: &'a Buffer<u8>,
        tag: &'a Buffer<u32>,
        domain: &Domain<D>,
    ) -> Geometry<'a, R, D> {
        Geometry {
            positions: std::array::from_fn(|a| position[a].as_slice()),
            volumes: volume.as_slice(),
            orders: order.as_slice(),
            tags: tag.as_slice(),
            periodic: domain.periodic(),
            lengths: domain.lengths(),
        }
    }

    /// Conserved variable `k`, writable.
    pub fn state_var_mut(&mut self, k: usize) -> &mut [R] {
        self.state[k].as_mut_slice()
    }

    /// Particle `i`'s position as `f64` (set-up, tests and output only).
    pub fn position_of(&self, i: usize) -> [f64; D] {
        std::array::from_fn(|a| self.position[a].as_slice()[i].as_f64())
    }
}

/// The read-only particle data the passes use besides the state.
#[derive(Clone, Copy, Debug)]
pub struct Geometry<'a, R, const D: usize> {
    /// Coordinates, one array per axis.
    pub positions: [&'a [R]; D],
    /// Volumes.
    pub volumes: &'a [R],
    /// Reconstruction orders.
    pub orders: &'a [u8],
    /// Tags.
    pub tags: &'a [u32],
    /// Periodic axes.
    pub periodic: [bool; D],
    /// Domain lengths (the periods of periodic axes).
    pub lengths: [f64; D],
}

impl<R: Real, const D: usize> Budgeted for Cloud<R, D> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        let mut v: Vec<&dyn BudgetedBuffer> = self
            .position
            .iter()
            .map(|b| b as &dyn BudgetedBuffer)
            .collect();
        v.extend([
            &self.volume as &dyn BudgetedBuffer,
            &self.tag,
            &self.order,
            &self.id,
        ]);
        v.extend(self.state.iter().map(|b| b as &dyn BudgetedBuffer));
        v
    }

    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.arrays_mut()
            .into_iter()
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect()
    }
}

/// The lattice sites of a domain ([`Cloud::lattice`]): the spacing per axis, the site counts
/// with boundary layers, and the jitter.
struct Sites<const D: usize> {
    lo: [f64; D],
    cells: [usize; D],
    dx: [f64; D],
    extra: [usize; D],
    counts: [usize; D],
    total: usize,
    options: LatticeOptions,
}

impl<const D: usize> Sites<D> {
    fn new(domain: &Domain<D>, options: LatticeOptions) -> Result<Self, CloudError> {
        let LatticeOptions {
            spacing,
            jitter,
            boundary_layers,
            ..
        } = options;
        if !(spacing.is_finite() && spacing > 0.0) {
            return Err(CloudError::invalid("spacing", spacing, "finite and > 0"));
        }
        if !(0.0..1.0).contains(&jitter) {
            return Err(CloudError::invalid(
                "jitter",
                jitter,
                "in [0, 1) (a fraction of the spacing)",
            ));
        }
        let (lo, _) = domain.bounds();
        let lengths = domain.lengths();
        let cells: [usize; D] =
            std::array::from_fn(|a| ((lengths[a] / spacing).round() as usize).max(1));
        let dx: [f64; D] = match domain.shape() {
            Shape::Box { .. } => std::array::from_fn(|a| lengths[a] / cells[a] as f64),
            Shape::Sphere { .. } => [spacing; D],
        };
        let periodic = domain.periodic();
        // Layers extend the lattice index range on non-periodic axes.
        let extra: [usize; D] =
            std::array::from_fn(|a| if periodic[a] { 0 } else { boundary_layers });
        let counts: [usize; D] = std::array::from_fn(|a| cells[a] + 2 * extra[a]);
        let total: usize = counts.iter().product();
        if total > u32::MAX as usize {
            return Err(CloudError::invalid(
                "particle count",
                total,
                "at most 2^32 - 1 (32-bit neighbour indices)",
            ));
        }
        Ok(Self {
            lo,
            cells,
            dx,
            extra,
            counts,
            total,
            options,
        })
    }

    /// Visits the sites in lattice order (first axis fastest) while `visit(site position, tag)`
    /// returns true: the unjittered position and the tag (`u32::MAX`: outside a sphere, no
    /// particle).
    fn walk(&self, domain: &Domain<D>, mut visit: impl FnMut([f64; D], u32) -> bool) {
        let (dx, extra, cells) = (self.dx, self.extra, self.cells);
        let mut index = [0usize; D];
        for _ in 0..self.total {
            let x: [f64; D] = std::array::from_fn(|a| {
                self.lo[a] + (index[a] as f64 - extra[a] as f64 + 0.5) * dx[a]
            });
            let tag = match domain.shape() {
                Shape::Box { .. } => (0..D)
                    .find_map(|a| {
                        if index[a] < extra[a] {
                            Some(Cloud::<f64, D>::face_tag(a, false))
                        } else if index[a] >= extra[a] + cells[a] {
                            Some(Cloud::<f64, D>::face_tag(a, true))
                        } else {
                            None
                        }
                    })
                    .unwrap_or(INTERIOR),
                Shape::Sphere { centre, radius } => {
                    let r = (0..D)
                        .map(|a| (x[a] - centre[a]).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    if r <= radius {
                        INTERIOR
                    } else if r
                        <= radius + self.options.boundary_layers as f64 * self.options.spacing
                    {
                        1
                    } else {
                        u32::MAX
                    }
                }
            };
            if !visit(x, tag) {
                return;
            }
            // Next lattice index, first axis fastest.
            for a in 0..D {
                index[a] += 1;
                if index[a] < self.counts[a] {
                    break;
                }
                index[a] = 0;
            }
        }
    }

    /// The number of particles: every site of a box, those inside a sphere and its layers.
    fn count(&self, domain: &Domain<D>) -> usize {
        match domain.shape() {
            Shape::Box { .. } => self.total,
            Shape::Sphere { .. } => {
                let mut n = 0;
                self.walk(domain, |_, tag| {
                    n += usize::from(tag != u32::MAX);
                    true
                });
                n
            }
        }
    }

    /// The cloud of the particles `rows` (indices among the `total` particles, in lattice order).
    fn rows<R: Real>(
        &self,
        domain: Domain<D>,
        rows: std::ops::Range<usize>,
        total: usize,
        variables: usize,
    ) -> Result<Cloud<R, D>, CloudError> {
        let mut cloud = Cloud::new(domain, self.dx, variables)?;
        let mut rng = Rng::new(self.options.seed);
        let jitter = self.options.jitter;
        let mut pos: Vec<[f64; D]> = Vec::with_capacity(rows.len());
        let mut tags: Vec<u32> = Vec::with_capacity(rows.len());
        let mut particle = 0;
        self.walk(&domain, |mut x, tag| {
            if particle >= rows.end {
                return false;
            }
            // Jitter draws happen for every lattice site, kept or not, so that a particle's
            // displacement depends only on the seed and its site.
            let shift: [f64; D] = std::array::from_fn(|_| jitter * (rng.uniform() - 0.5));
            if tag != u32::MAX {
                if particle >= rows.start {
                    if tag == INTERIOR {
                        for a in 0..D {
                            x[a] += shift[a] * self.dx[a];
                        }
                    }
                    pos.push(domain.wrap(x));
                    tags.push(tag);
                }
                particle += 1;
            }
            true
        });
        cloud.next_id = rows.start as u64;
        cloud.resize(pos.len())?;
        let volume = R::cast(self.dx.iter().product());
        for (i, (x, &t)) in pos.iter().zip(&tags).enumerate() {
            for a in 0..D {
                cloud.position[a].as_mut_slice()[i] = R::cast(x[a]);
            }
            cloud.tag.as_mut_slice()[i] = t;
        }
        cloud.volume.as_mut_slice().fill(volume);
        cloud.order.as_mut_slice().fill(1);
        // Fresh ids continue after the whole lattice's, as one process's would.
        cloud.next_id = total as u64;
        Ok(cloud)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_lattice_fills_the_box_with_the_right_volume() {
        let d = Domain::<2>::unit_periodic();
        let c = Cloud::<f64, 2>::lattice(
            d,
            LatticeOptions {
                spacing: 0.1,
                jitter: 0.3,
                seed: 4,
                boundary_layers: 2,
            },
            1,
        )
        .unwrap();
        assert_eq!(c.len(), 100);
        assert!(
            c.tags().iter().all(|&t| t == INTERIOR),
            "periodic axes have no boundary"
        );
        let total: f64 = c.volumes().iter().sum();
        assert!((total - 1.0).abs() < 1e-14);
        let [x, y] = c.positions();
        assert!(x.iter().chain(y).all(|&v| (0.0..1.0).contains(&v)));
    }

    #[test]
    fn boundary_layers_carry_face_tags() {
        let d = Domain::<2>::new_box([0.0, 0.0], [1.0, 0.5], [false, true]).unwrap();
        let c = Cloud::<f64, 2>::lattice(
            d,
            LatticeOptions {
                spacing: 0.1,
                boundary_layers: 2,
                ..Default::default()
            },
            1,
        )
        .unwrap();
        // 10 x 5 interior, plus 2 layers of 5 on each x face.
        assert_eq!(c.len(), 14 * 5);
        let low = Cloud::<f64, 2>::face_tag(0, false);
        let high = Cloud::<f64, 2>::face_tag(0, true);
        assert_eq!(c.tags().iter().filter(|&&t| t == low).count(), 10);
        assert_eq!(c.tags().iter().filter(|&&t| t == high).count(), 10);
        for i in 0..c.len() {
            let x = c.position_of(i)[0];
            let expected = if x < 0.0 {
                low
            } else if x > 1.0 {
                high
            } else {
                INTERIOR
            };
            assert_eq!(c.tags()[i], expected, "x = {x}");
        }
    }

    #[test]
    fn morton_reorder_moves_everything_and_keeps_ids() {
        let d = Domain::<3>::unit_periodic();
        let mut c = Cloud::<f32, 3>::lattice(
            d,
            LatticeOptions {
                spacing: 0.125,
                jitter: 0.5,
                ..Default::default()
            },
            2,
        )
        .unwrap();
        let before: Vec<(u64, [f64; 3])> = (0..c.len())
            .map(|i| (c.ids()[i], c.position_of(i)))
            .collect();
        c.reorder_morton();
        let keys = c.morton_keys();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        for i in 0..c.len() {
            let id = c.ids()[i] as usize;
            assert_eq!(before[id].1, c.position_of(i));
        }
        assert_ne!(c.ids()[1], 1, "the order changed");
    }

    #[test]
    fn sphere_keeps_the_ball_and_a_shell() {
        let d = Domain::<2>::new_sphere([0.0, 0.0], 1.0).unwrap();
        let c = Cloud::<f64, 2>::lattice(
            d,
            LatticeOptions {
                spacing: 0.05,
                boundary_layers: 1,
                ..Default::default()
            },
            1,
        )
        .unwrap();
        let interior = c.tags().iter().filter(|&&t| t == INTERIOR).count();
        let area = interior as f64 * 0.05 * 0.05;
        assert!((area - std::f64::consts::PI).abs() < 0.05, "{area}");
        assert!(c.tags().contains(&1));
    }

    /// A lattice's rows generated apart are the whole lattice's, every array bit for bit and
    /// every id, cut anywhere (a jittered box with boundary layers, a sphere with its shell):
    /// the jitter's stream runs through the earlier sites.
    #[test]
    fn lattice_rows_are_the_whole_lattice_cut() {
        let options = LatticeOptions {
            spacing: 0.1,
            jitter: 0.4,
            seed: 11,
            boundary_layers: 2,
        };
        let domains = [
            Domain::<2>::new_box([0.0, 0.0], [1.0, 0.7], [false, true]).unwrap(),
            Domain::<2>::new_sphere([0.0, 0.0], 0.6).unwrap(),
        ];
        for d in domains {
            let whole = Cloud::<f64, 2>::lattice(d, options, 3).unwrap();
            let n = whole.len();
            assert_eq!(Cloud::<f64, 2>::lattice_len(&d, options).unwrap(), n);
            for cuts in [vec![0, n], vec![0, 1, 37, 37, n - 2, n], vec![0, n / 2, n]] {
                let mut next = 0;
                for w in cuts.windows(2) {
                    let part = Cloud::<f64, 2>::lattice_rows(d, options, 3, w[0]..w[1]).unwrap();
                    assert_eq!(part.len(), w[1] - w[0]);
                    for i in 0..part.len() {
                        let g = w[0] + i;
                        assert_eq!(part.position_of(i), whole.position_of(g), "site {g}");
                        assert_eq!(part.ids()[i], whole.ids()[g]);
                        assert_eq!(part.tags()[i], whole.tags()[g]);
                        assert_eq!(part.volumes()[i], whole.volumes()[g]);
                    }
                    assert_eq!(part.next_id, whole.next_id, "fresh ids after the lattice's");
                    next += part.len();
                }
                assert_eq!(next, n);
            }
            assert!(Cloud::<f64, 2>::lattice_rows(d, options, 3, 0..n + 1).is_err());
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        let d = Domain::<1>::unit_periodic();
        assert!(
            Cloud::<f64, 1>::lattice(
                d,
                LatticeOptions {
                    spacing: -1.0,
                    ..Default::default()
                },
                1
            )
            .is_err()
        );
        assert!(
            Cloud::<f64, 1>::lattice(
                d,
                LatticeOptions {
                    jitter: 1.0,
                    ..Default::default()
                },
                1
            )
            .is_err()
        );
        assert!(Cloud::<f64, 1>::new(d, [0.1], 0).is_err());
    }
}
