//! Adaptivity: particles are inserted where a cloud has holes, pairs that came too close are
//! merged, and particles that left a non-periodic domain are removed, conserving the totals
//! `sum_i V_i u_i` of every variable (to round-off) and keeping the ids of every particle that
//! survives.
//!
//! - **Holes** are judged on a voxel grid of the nominal spacing `dx` over the domain: a voxel
//!   centre with no particle within `hole_fraction * dx` gets a new particle there. Its donors
//!   are the interior particles within `dx` of it: each gives it the fraction `1 / (k + 1)` of
//!   its volume (`k` donors), with its own state, so the new particle's state is the donors'
//!   volume-weighted mean and no donor's state changes (what the donors lose, it gains). A hole
//!   with no particle within `dx` is left (counted as unfilled).
//! - **Merging**: an interior particle and its nearest interior neighbour closer than
//!   `merge_fraction * dx` become one particle at their volume-weighted mean position, with the
//!   summed volume and the volume-weighted mean state. The lower index survives with its id.
//! - **Removal**: interior particles outside a non-periodic domain are removed; what they
//!   carried is reported.
//!
//! Every length change goes through the cloud's length helper; growth beyond a frozen
//! reservation is a [`mote_core::CapacityError`] (merges and removals done before it stand; no
//! insertion is made). All decisions are taken in particle-index and voxel order: the result
//! does not depend on the thread count.

use mote_core::Real;
use mote_core::columns::Permutation;

use crate::cloud::{Cloud, INTERIOR, MAX_VARIABLES};
use crate::domain::Domain;
use crate::error::CloudError;

/// Adaptivity settings, as fractions of the nominal spacing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adaptivity {
    /// A voxel centre farther than this from every particle is a hole (default 0.75).
    pub hole_fraction: f64,
    /// Pairs closer than this merge (default 0.25).
    pub merge_fraction: f64,
}

impl Default for Adaptivity {
    fn default() -> Self {
        Self {
            hole_fraction: 0.75,
            merge_fraction: 0.25,
        }
    }
}

/// What one adaptation did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdaptStats {
    /// Particles inserted into holes.
    pub inserted: usize,
    /// Holes without a particle within one spacing (no donors): left as they are.
    pub unfilled: usize,
    /// Pairs merged.
    pub merged: usize,
    /// Particles removed for leaving the domain.
    pub removed: usize,
    /// `sum V u` per variable that the removed particles carried out of the domain.
    pub removed_totals: Vec<f64>,
}

/// Voxels of side `cell` over a box, with the particles of each voxel in index order.
struct Voxels<const D: usize> {
    lo: [f64; D],
    cell: [f64; D],
    cells: [usize; D],
    periodic: [bool; D],
    start: Vec<usize>,
    members: Vec<usize>,
}

impl<const D: usize> Voxels<D> {
    fn new(domain: &Domain<D>, spacing: f64) -> Self {
        let (lo, hi) = domain.bounds();
        let cells: [usize; D] =
            std::array::from_fn(|a| (((hi[a] - lo[a]) / spacing).round() as usize).max(1));
        Self {
            lo,
            cell: std::array::from_fn(|a| (hi[a] - lo[a]) / cells[a] as f64),
            cells,
            periodic: domain.periodic(),
            start: Vec::new(),
            members: Vec::new(),
        }
    }

    /// The voxel coordinate of `x`, clamped on non-periodic axes.
    fn coord(&self, x: [f64; D]) -> [usize; D] {
        std::array::from_fn(|a| {
            let c = ((x[a] - self.lo[a]) / self.cell[a]).floor() as i64;
            c.clamp(0, self.cells[a] as i64 - 1) as usize
        })
    }

    fn linear(&self, c: [usize; D]) -> usize {
        let mut k = 0;
        for a in (0..D).rev() {
            k = k * self.cells[a] + c[a];
        }
        k
    }

    /// Bins `points` by counting sort (stable: index order inside each voxel).
    fn fill(&mut self, points: &[[f64; D]]) {
        let total: usize = self.cells.iter().product();
        let bins: Vec<usize> = points.iter().map(|&x| self.linear(self.coord(x))).collect();
        self.start = vec![0; total + 1];
        for &b in &bins {
            self.start[b + 1] += 1;
        }
        for b in 0..total {
            self.start[b + 1] += self.start[b];
        }
        let mut next = self.start.clone();
        self.members = vec![0; points.len()];
        for (i, &b) in bins.iter().enumerate() {
            self.members[next[b]] = i;
            next[b] += 1;
        }
    }

    /// Calls `f(i)` for every binned point in the `3^D` voxels around `c`.
    fn around(&self, c: [usize; D], mut f: impl FnMut(usize)) {
        for_voxels_around(self, c, |lin| {
            for &i in &self.members[self.start[lin]..self.start[lin + 1]] {
                f(i);
            }
        });
    }
}

impl Adaptivity {
    /// Checks the fractions: `0 < merge_fraction < hole_fraction <= 1`.
    pub fn validate(&self) -> Result<(), CloudError> {
        let (h, m) = (self.hole_fraction, self.merge_fraction);
        if !(m > 0.0 && m < h && h <= 1.0) {
            return Err(CloudError::invalid(
                "adaptivity fractions",
                format!("hole {h}, merge {m}"),
                "0 < merge_fraction < hole_fraction <= 1 (fractions of the spacing)",
            ));
        }
        Ok(())
    }

    /// Removes, merges and inserts particles (in that order) in `cloud`.
    pub fn apply<R: Real, const D: usize>(
        &self,
        cloud: &mut Cloud<R, D>,
    ) -> Result<AdaptStats, CloudError> {
        self.validate()?;
        let domain = *cloud.domain();
        let dx = cloud.spacing().into_iter().fold(f64::INFINITY, f64::min);
        let m = cloud.variables();
        let mut stats = AdaptStats {
            removed_totals: vec![0.0; m],
            ..Default::default()
        };
        let n = cloud.len();
        let mut alive = vec![true; n];
        // 1. Interior particles outside the domain leave.
        for i in 0..n {
            if cloud.tags()[i] == INTERIOR && !domain.contains(cloud.position_of(i)) {
                alive[i] = false;
                stats.removed += 1;
                let v = cloud.volumes()[i].as_f64();
                for (k, t) in stats.removed_totals.iter_mut().enumerate() {
                    *t += v * cloud.state(k)[i].as_f64();
                }
            }
        }
        // 2. Close pairs merge into the lower index.
        let points: Vec<[f64; D]> = (0..n).map(|i| cloud.position_of(i)).collect();
        let mut voxels = Voxels::new(&domain, dx);
        voxels.fill(&points);
        let limit = (self.merge_fraction * dx).powi(2);
        for i in 0..n {
            if !alive[i] || cloud.tags()[i] != INTERIOR {
                continue;
            }
            let mut best: Option<(f64, usize)> = None;
            voxels.around(voxels.coord(points[i]), |j| {
                if j != i && alive[j] && cloud.tags()[j] == INTERIOR {
                    let d2 = domain.distance_squared(points[i], points[j]);
                    if d2 < limit && best.is_none_or(|(b, bj)| d2 < b || (d2 == b && j < bj)) {
                        best = Some((d2, j));
                    }
                }
            });
            if let Some((_, j)) = best {
                merge(cloud, &domain, i, j);
                alive[j] = false;
                stats.merged += 1;
            }
        }
        // Survivors keep their order; the others go to the end and are cut off.
        if alive.iter().any(|a| !a) {
            let kept: Vec<usize> = (0..n).filter(|&i| alive[i]).collect();
            let count = kept.len();
            let order: Vec<usize> = kept
                .into_iter()
                .chain((0..n).filter(|&i| !alive[i]))
                .collect();
            let perm = Permutation::new(order).expect("a permutation of the particles");
            cloud.apply_permutation(&perm);
            cloud.truncate(count);
        }
        // 3. Holes: plan every insertion first (nothing changes), then grow once.
        let n = cloud.len();
        let points: Vec<[f64; D]> = (0..n).map(|i| cloud.position_of(i)).collect();
        voxels.fill(&points);
        let hole = (self.hole_fraction * dx).powi(2);
        let reach = dx * dx;
        let mut plans: Vec<([f64; D], Vec<usize>)> = Vec::new();
        let mut new_near: Vec<Vec<[f64; D]>> = vec![Vec::new(); voxels.start.len() - 1];
        let total_voxels: usize = voxels.cells.iter().product();
        for lin in 0..total_voxels {
            let mut c = [0usize; D];
            let mut rest = lin;
            for a in 0..D {
                c[a] = rest % voxels.cells[a];
                rest /= voxels.cells[a];
            }
            let centre: [f64; D] =
                std::array::from_fn(|a| voxels.lo[a] + (c[a] as f64 + 0.5) * voxels.cell[a]);
            if !domain.contains(centre) {
                continue;
            }
            let mut nearest = f64::INFINITY;
            let mut donors = Vec::new();
            voxels.around(c, |j| {
                let d2 = domain.distance_squared(centre, points[j]);
                nearest = nearest.min(d2);
                if d2 <= reach && cloud.tags()[j] == INTERIOR {
                    donors.push(j);
                }
            });
            // Particles planned in this adaptation count as present.
            let mut neighbours_planned = false;
            for_voxels_around(&voxels, c, |v| {
                for &p in &new_near[v] {
                    if domain.distance_squared(centre, p) <= hole {
                        neighbours_planned = true;
                    }
                }
            });
            if nearest <= hole || neighbours_planned {
                continue;
            }
            if donors.is_empty() {
                stats.unfilled += 1;
                continue;
            }
            new_near[lin].push(centre);
            plans.push((centre, donors));
        }
        if plans.is_empty() {
            return Ok(stats);
        }
        // Grow (all arrays or none), then move volume and state.
        cloud.resize(n + plans.len())?;
        // Donors give in plan order; each donation is 1/(k+1) of the donor's volume at that
        // moment.
        for (p, (centre, donors)) in plans.iter().enumerate() {
            let new = n + p;
            let share = R::one() / R::from_usize(donors.len() + 1);
            let mut volume = R::zero();
            let mut content = [R::zero(); MAX_VARIABLES];
            let mut order = 1u8;
            for &j in donors {
                let give = cloud.volumes()[j] * share;
                cloud.volumes_mut()[j] -= give;
                volume += give;
                for (k, c) in content.iter_mut().take(m).enumerate() {
                    *c += give * cloud.state(k)[j];
                }
                order = order.max(cloud.orders()[j]);
            }
            cloud.volumes_mut()[new] = volume;
            for k in 0..m {
                cloud.state_var_mut(k)[new] = content[k] / volume;
            }
            cloud.orders_mut()[new] = order;
            let pos = cloud.positions_mut();
            for (a, x) in pos.into_iter().enumerate() {
                x[new] = R::cast(centre[a]);
            }
        }
        stats.inserted = plans.len();
        Ok(stats)
    }
}

/// Calls `f(voxel)` for the `3^D` voxels around `c` (periodic wrap, each once).
fn for_voxels_around<const D: usize>(v: &Voxels<D>, c: [usize; D], mut f: impl FnMut(usize)) {
    // At most 27 voxels: a stack array, no allocation per call.
    let mut seen = [usize::MAX; 27];
    let mut count = 0;
    for k in 0..3usize.pow(D as u32) {
        let mut rest = k;
        let mut cc = [0usize; D];
        let mut skip = false;
        for a in 0..D {
            let off = (rest % 3) as i64 - 1;
            rest /= 3;
            let mut x = c[a] as i64 + off;
            let n = v.cells[a] as i64;
            if v.periodic[a] {
                x = x.rem_euclid(n);
            } else if x < 0 || x >= n {
                skip = true;
            }
            cc[a] = x as usize;
        }
        if skip {
            continue;
        }
        let lin = v.linear(cc);
        if !seen[..count].contains(&lin) {
            seen[count] = lin;
            count += 1;
            f(lin);
        }
    }
}

/// Merges particle `j` into `i`: summed volume, volume-weighted mean state and position (the
/// minimum image of `j` relative to `i`, wrapped), the lower order.
fn merge<R: Real, const D: usize>(cloud: &mut Cloud<R, D>, domain: &Domain<D>, i: usize, j: usize) {
    let (vi, vj) = (cloud.volumes()[i], cloud.volumes()[j]);
    let v = vi + vj;
    for k in 0..cloud.variables() {
        let u = cloud.state(k);
        let mean = (vi * u[i] + vj * u[j]) / v;
        cloud.state_var_mut(k)[i] = mean;
    }
    let (xi, xj) = (cloud.position_of(i), cloud.position_of(j));
    let off = domain.offset(xi, xj);
    let w = vj.as_f64() / v.as_f64();
    let x = domain.wrap(std::array::from_fn(|a| xi[a] + w * off[a]));
    for (a, p) in cloud.positions_mut().into_iter().enumerate() {
        p[i] = R::cast(x[a]);
    }
    cloud.volumes_mut()[i] = v;
    let o = cloud.orders()[i].min(cloud.orders()[j]);
    cloud.orders_mut()[i] = o;
}
