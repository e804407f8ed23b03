//! The layout experiment of `mote bench roofline`: one direct-summation kernel, four ways of
//! storing the sources, measured side by side.
//!
//! Layouts: component arrays (`soa`, mote's layout: x, y, z, m each contiguous), an array of
//! particle structs (`aos`: `[x, y, z, m]` per particle), an array of `Vec3` per quantity
//! (`vec3`: `[x, y, z]` per particle plus a mass array) and blocked AoSoA (`aosoa`: blocks of
//! eight particles, each block `x[8], y[8], z[8], m[8]`). Every layout hands the kernel the same
//! eight-lane source blocks and the kernel arithmetic is one generic body (softened
//! `m d / (r^2 + eps^2)^(3/2)` with a square root and a divide, f64, no fused multiply-adds), so
//! all four give bitwise the same accelerations, which is checked.
//!
//! Two loops: `resident`, the production shape (four targets share each source block; the
//! sources, at most a few MB, stay in cache across target groups), where arithmetic binds; and
//! `streaming`, one target per pass over sources far larger than the last-level cache, with no
//! tiling, where memory bandwidth binds. One thread: the question is what a core does with each
//! layout.

use std::time::Instant;

use mote_core::SimdLevel;
use serde::Serialize;

/// Lanes per source block.
const W: usize = 8;
/// Softening squared (keeps the self-interaction finite and zero).
const EPS2: f64 = 1e-4;

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutRow {
    /// `soa`, `aos`, `vec3` or `aosoa`.
    pub layout: &'static str,
    /// `resident` or `streaming`.
    pub pass: &'static str,
    /// Number of sources.
    pub sources: usize,
    /// Number of targets.
    pub targets: usize,
    /// Median seconds.
    pub seconds: f64,
    /// Interactions per second.
    pub interactions_per_s: f64,
    /// Source bytes read from memory per second (streaming: every pass reads every source).
    pub gb_per_s: f64,
}

/// Source storage that yields eight-lane blocks `[x, y, z, m][lane]`.
trait Sources: Sync {
    const NAME: &'static str;
    fn build(p: &[[f64; 4]]) -> Self;
    /// Sources `8 b .. 8 b + 8`.
    fn block(&self, b: usize) -> [[f64; W]; 4];
}

struct Soa([Vec<f64>; 4]);
struct Aos(Vec<[f64; 4]>);
struct Vec3 {
    x: Vec<[f64; 3]>,
    m: Vec<f64>,
}
struct AoSoA(Vec<[[f64; W]; 4]>);

impl Sources for Soa {
    const NAME: &'static str = "soa";
    fn build(p: &[[f64; 4]]) -> Self {
        Soa(std::array::from_fn(|c| p.iter().map(|q| q[c]).collect()))
    }
    #[inline(always)]
    fn block(&self, b: usize) -> [[f64; W]; 4] {
        std::array::from_fn(|c| self.0[c][b * W..b * W + W].try_into().expect("8 lanes"))
    }
}

impl Sources for Aos {
    const NAME: &'static str = "aos";
    fn build(p: &[[f64; 4]]) -> Self {
        Aos(p.to_vec())
    }
    #[inline(always)]
    fn block(&self, b: usize) -> [[f64; W]; 4] {
        let s: &[[f64; 4]; W] = self.0[b * W..b * W + W].try_into().expect("8 lanes");
        std::array::from_fn(|c| std::array::from_fn(|l| s[l][c]))
    }
}

impl Sources for Vec3 {
    const NAME: &'static str = "vec3";
    fn build(p: &[[f64; 4]]) -> Self {
        Vec3 {
            x: p.iter().map(|q| [q[0], q[1], q[2]]).collect(),
            m: p.iter().map(|q| q[3]).collect(),
        }
    }
    #[inline(always)]
    fn block(&self, b: usize) -> [[f64; W]; 4] {
        let s: &[[f64; 3]; W] = self.x[b * W..b * W + W].try_into().expect("8 lanes");
        let m: [f64; W] = self.m[b * W..b * W + W].try_into().expect("8 lanes");
        [
            std::array::from_fn(|l| s[l][0]),
            std::array::from_fn(|l| s[l][1]),
            std::array::from_fn(|l| s[l][2]),
            m,
        ]
    }
}

impl Sources for AoSoA {
    const NAME: &'static str = "aosoa";
    fn build(p: &[[f64; 4]]) -> Self {
        AoSoA(
            p.chunks_exact(W)
                .map(|c| std::array::from_fn(|q| std::array::from_fn(|l| c[l][q])))
                .collect(),
        )
    }
    #[inline(always)]
    fn block(&self, b: usize) -> [[f64; W]; 4] {
        self.0[b]
    }
}

/// Accelerations of the `T` targets from every source block, lanes summed in order.
#[inline(always)]
fn accelerations<S: Sources, const T: usize>(
    s: &S,
    blocks: usize,
    t: &[[f64; 3]; T],
) -> [[f64; 3]; T] {
    let mut acc = [[[0.0f64; W]; 3]; T];
    for b in 0..blocks {
        let j = s.block(b);
        for q in 0..T {
            let mut d = [[0.0f64; W]; 3];
            for c in 0..3 {
                for l in 0..W {
                    d[c][l] = j[c][l] - t[q][c];
                }
            }
            for l in 0..W {
                let r2 = d[0][l] * d[0][l] + d[1][l] * d[1][l] + d[2][l] * d[2][l] + EPS2;
                let inv = 1.0 / r2.sqrt();
                let f = j[3][l] * (inv * inv * inv);
                for c in 0..3 {
                    acc[q][c][l] += f * d[c][l];
                }
            }
        }
    }
    acc.map(|a| a.map(|lanes| lanes.iter().sum()))
}

/// Accelerations of all `targets`, four at a time (the tail one at a time).
#[inline(always)]
fn resident<S: Sources>(s: &S, blocks: usize, targets: &[[f64; 3]], out: &mut [[f64; 3]]) {
    let mut k = 0;
    while k + 4 <= targets.len() {
        let t: &[[f64; 3]; 4] = targets[k..k + 4].try_into().expect("4 targets");
        out[k..k + 4].copy_from_slice(&accelerations::<S, 4>(s, blocks, t));
        k += 4;
    }
    for q in k..targets.len() {
        out[q] = accelerations::<S, 1>(s, blocks, &[targets[q]])[0];
    }
}

/// Accelerations of all `targets`, each in its own pass over the sources.
#[inline(always)]
fn streaming<S: Sources>(s: &S, blocks: usize, targets: &[[f64; 3]], out: &mut [[f64; 3]]) {
    for (q, t) in targets.iter().enumerate() {
        out[q] = accelerations::<S, 1>(s, blocks, &[*t])[0];
    }
}

/// A reproducible cloud of `n` (a multiple of 8) sources in the unit cube, masses `1 / n`.
fn cloud(n: usize) -> Vec<[f64; 4]> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| [next(), next(), next(), 1.0 / n as f64])
        .collect()
}

/// A built layout's pass: accelerations of the targets into the slice.
type BoxedPass<'a> = Box<dyn FnMut(&mut [[f64; 3]]) + 'a>;

/// One layout, built and ready to time.
struct Timed<'a> {
    name: &'static str,
    pass: BoxedPass<'a>,
    times: Vec<f64>,
    out: Vec<[f64; 3]>,
}

fn prepare<'a, S: Sources + 'a>(
    p: &[[f64; 4]],
    targets: &'a [[f64; 3]],
    streaming_loop: bool,
) -> Timed<'a> {
    let s = S::build(p);
    let blocks = p.len() / W;
    let level = SimdLevel::best();
    let pass: BoxedPass<'a> = if streaming_loop {
        Box::new(move |out| {
            level.run(
                #[inline(always)]
                || streaming(&s, blocks, targets, out),
            )
        })
    } else {
        Box::new(move |out| {
            level.run(
                #[inline(always)]
                || resident(&s, blocks, targets, out),
            )
        })
    };
    Timed {
        name: S::NAME,
        pass,
        times: Vec::new(),
        out: vec![[0.0; 3]; targets.len()],
    }
}

/// Runs the experiment: the resident loop at each of `resident_sizes` (all particles are
/// targets), the streaming loop over `streaming_sources` sources for `streaming_targets`
/// targets. Errors if the layouts disagree in any bit.
pub fn run(
    resident_sizes: &[usize],
    streaming_sources: usize,
    streaming_targets: usize,
    repeats: usize,
) -> Result<Vec<LayoutRow>, String> {
    let mut rows = Vec::new();
    let cases = resident_sizes
        .iter()
        .map(|&n| (n, n, false))
        .chain(std::iter::once((
            streaming_sources,
            streaming_targets,
            true,
        )));
    for (n, nt, streaming_loop) in cases {
        let n = n.div_ceil(W) * W;
        let p = cloud(n);
        let targets: Vec<[f64; 3]> = p.iter().take(nt).map(|q| [q[0], q[1], q[2]]).collect();
        // All four layouts side by side, timed in turn within each repetition so that a
        // drift of the machine's speed hits them alike.
        let mut layouts = [
            prepare::<Soa>(&p, &targets, streaming_loop),
            prepare::<Aos>(&p, &targets, streaming_loop),
            prepare::<Vec3>(&p, &targets, streaming_loop),
            prepare::<AoSoA>(&p, &targets, streaming_loop),
        ];
        drop(p);
        for rep in 0..=repeats {
            for l in layouts.iter_mut() {
                let t = Instant::now();
                (l.pass)(&mut l.out);
                std::hint::black_box(&l.out);
                // Repetition 0 is the warm-up.
                if rep > 0 {
                    l.times.push(t.elapsed().as_secs_f64());
                }
            }
        }
        let reference = layouts[0].out.clone();
        for l in &mut layouts {
            let same = l
                .out
                .iter()
                .flatten()
                .zip(reference.iter().flatten())
                .all(|(a, b)| a.to_bits() == b.to_bits());
            if !same {
                return Err(format!(
                    "layout {} computed different accelerations",
                    l.name
                ));
            }
            l.times.sort_by(f64::total_cmp);
            let seconds = l.times[l.times.len() / 2];
            let interactions = (n * targets.len()) as f64;
            rows.push(LayoutRow {
                layout: l.name,
                pass: if streaming_loop {
                    "streaming"
                } else {
                    "resident"
                },
                sources: n,
                targets: targets.len(),
                seconds,
                interactions_per_s: interactions / seconds,
                gb_per_s: interactions * 32.0 / seconds / 1e9,
            });
        }
    }
    Ok(rows)
}
