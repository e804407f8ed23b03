//! Force errors of an approximate solver against the compensated reference kernel, on a sample
//! of particles: what the tree's tests assert and `mote bench gravity --solver tree` reports.

use mote_core::{CpuBackend, Real, Vec3Span};

use crate::direct::reference::acceleration_of;

/// Relative force errors `|a - a_ref| / |a_ref|` over sampled particles.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ForceErrors {
    /// Particles sampled.
    pub samples: usize,
    /// Root mean square.
    pub rms: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl ForceErrors {
    /// The errors of the accelerations `acc` of the particles at `pos` with masses `mass`, on
    /// `samples` particles evenly spaced in index (all of them if there are fewer), against
    /// [`acceleration_of`] with softening `eps2`. Particles whose reference acceleration is 0
    /// are skipped.
    pub fn measure<R: Real>(
        pos: Vec3Span<'_, R>,
        mass: &[R],
        eps2: f64,
        acc: Vec3Span<'_, R>,
        samples: usize,
        backend: CpuBackend,
    ) -> Self {
        let n = pos.len();
        let samples = samples.min(n);
        let mut errors: Vec<Option<f64>> = vec![None; samples];
        backend.for_each_particle(&mut errors[..], |k| {
            let i = k * n / samples;
            let r = acceleration_of(i, pos, mass, eps2);
            let a = acc.get(i).map(|v| v.as_f64());
            let norm = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
            let d = [a[0] - r[0], a[1] - r[1], a[2] - r[2]];
            let diff = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
            // A NaN acceleration is an infinite error, not a skipped one.
            (norm > 0.0).then(|| {
                if diff.is_nan() {
                    f64::INFINITY
                } else {
                    diff / norm
                }
            })
        });
        let mut e: Vec<f64> = errors.into_iter().flatten().collect();
        e.sort_by(f64::total_cmp);
        if e.is_empty() {
            return Self::default();
        }
        let q = |p: f64| e[((e.len() - 1) as f64 * p).round() as usize];
        Self {
            samples: e.len(),
            rms: (e.iter().map(|x| x * x).sum::<f64>() / e.len() as f64).sqrt(),
            p50: q(0.5),
            p99: q(0.99),
            max: e[e.len() - 1],
        }
    }
}
