//! `mote bench roofline`: the ceilings of this machine that mote's kernels are measured against:
//! memory bandwidth (copy, triad, read; one thread and all threads, arrays far larger than the
//! last-level cache) and arithmetic throughput (FMA in f32 and f64 at the widest SIMD level,
//! square root + divide, reciprocal-square-root estimate + Newton). Each figure is the median of
//! repeated runs, with min and max.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::Instant;

use clap::Args;
use mote_core::{CpuBackend, SimdLevel};
use serde::Serialize;

/// Options of `mote bench roofline`.
#[derive(Debug, Args)]
pub struct RooflineArgs {
    /// Bytes per array for the bandwidth tests (default 1 GiB: far beyond any cache).
    #[arg(long, default_value_t = 1 << 30)]
    array_bytes: usize,
    /// Repetitions of each measurement.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Figure {
    unit: &'static str,
    median: f64,
    min: f64,
    max: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    family: &'static str,
    simd: SimdLevel,
    threads: usize,
    array_bytes: usize,
    figures: BTreeMap<String, Figure>,
}

fn summarise(mut v: Vec<f64>, unit: &'static str) -> Figure {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    };
    Figure {
        unit,
        median,
        min: v[0],
        max: v[n - 1],
    }
}

/// Runs the measurements on `threads` threads (0: all cores) and on one.
pub fn run(args: &RooflineArgs, threads: usize) -> Result<(), Box<dyn Error>> {
    if args.repeats == 0 || args.array_bytes < 1 << 20 {
        return Err("--repeats must be at least 1 and --array-bytes at least 1 MiB".into());
    }
    let all = CpuBackend::threads(threads);
    let backends = [("1 thread", CpuBackend::Serial), ("all threads", all)];
    let mut figures = BTreeMap::new();
    let n = args.array_bytes / 8;
    let mut a = vec![1.0f64; n];
    let mut b = vec![2.0f64; n];
    let c = vec![0.5f64; n];
    for (label, backend) in backends {
        let bw = |bytes: f64, f: &mut dyn FnMut()| -> Figure {
            f(); // warm-up: page in
            summarise(
                (0..args.repeats)
                    .map(|_| {
                        let t = Instant::now();
                        f();
                        bytes / t.elapsed().as_secs_f64() / 1e9
                    })
                    .collect(),
                "GB/s",
            )
        };
        let copy = bw(16.0 * n as f64, &mut || {
            backend.update_each(&mut b[..], |i, _| a[i]);
        });
        let triad = bw(24.0 * n as f64, &mut || {
            backend.update_each(&mut a[..], |i, _| b[i] + 3.0 * c[i]);
        });
        let read = bw(8.0 * n as f64, &mut || {
            // Eight independent sums: one chain of dependent adds would measure add latency,
            // not bandwidth.
            let s = backend.map_reduce(
                n,
                1 << 16,
                |r| {
                    let mut acc = [0.0f64; 8];
                    for chunk in a[r].chunks_exact(8) {
                        for k in 0..8 {
                            acc[k] += chunk[k];
                        }
                    }
                    acc.iter().sum::<f64>()
                },
                |x, y| x + y,
            );
            std::hint::black_box(s);
        });
        figures.insert(format!("copy ({label})"), copy);
        figures.insert(format!("triad ({label})"), triad);
        figures.insert(format!("read ({label})"), read);
    }
    drop((a, b, c));
    let simd = SimdLevel::best();
    for (label, backend) in backends {
        let threads_here = backend.thread_count();
        for (name, kernel, flops_per_op) in arithmetic_kernels(simd) {
            // About 0.05 s per run for each kernel: slow operations get fewer iterations.
            let iters = if name.contains("sqrt+div") {
                1_000_000u64
            } else if name.contains("rsqrt") {
                4_000_000
            } else {
                20_000_000
            };
            let mut samples = Vec::new();
            for _ in 0..args.repeats {
                let mut out = vec![0.0f64; threads_here];
                let t = Instant::now();
                backend.for_each_block(&mut out[..], 1, |_, o| o[0] = kernel(iters));
                let secs = t.elapsed().as_secs_f64();
                std::hint::black_box(&out);
                samples.push(flops_per_op * iters as f64 * threads_here as f64 / secs / 1e9);
            }
            figures.insert(format!("{name} ({label})"), summarise(samples, "G/s"));
        }
    }
    let report = Report {
        family: "roofline",
        simd,
        threads: all.thread_count(),
        array_bytes: args.array_bytes,
        figures,
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "roofline: SIMD {}, {} threads, {} MiB arrays",
            report.simd,
            report.threads,
            report.array_bytes >> 20
        );
        for (name, f) in &report.figures {
            println!(
                "  {name:<40} {:>9.2} {:<5} (min {:.2}, max {:.2})",
                f.median, f.unit, f.min, f.max
            );
        }
    }
    Ok(())
}

/// A timed arithmetic loop: `kernel(iterations)` returns a value to keep the work alive; each
/// iteration does `flops_per_op` of the measured operation.
type ArithmeticKernel = fn(u64) -> f64;

/// The arithmetic measurements at `level`: name, kernel, and what one iteration counts (12
/// chains x lanes x 2 flops for an FMA; 12 chains x lanes results for `1/sqrt`).
fn arithmetic_kernels(level: SimdLevel) -> Vec<(&'static str, ArithmeticKernel, f64)> {
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Avx512 {
        return vec![
            ("fma f64 GFLOP/s", x86::fma_f64_avx512, 12.0 * 8.0 * 2.0),
            ("fma f32 GFLOP/s", x86::fma_f32_avx512, 12.0 * 16.0 * 2.0),
            (
                "sqrt+div f64 G results/s",
                x86::sqrt_div_f64_avx512,
                12.0 * 8.0,
            ),
            (
                "rsqrt14+2 Newton f64 G results/s",
                x86::rsqrt_newton_f64_avx512,
                12.0 * 8.0,
            ),
        ];
    }
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Avx2 {
        return vec![
            ("fma f64 GFLOP/s", x86::fma_f64_avx2, 12.0 * 4.0 * 2.0),
            ("fma f32 GFLOP/s", x86::fma_f32_avx2, 12.0 * 8.0 * 2.0),
        ];
    }
    let _ = level;
    vec![("mul+add f64 GFLOP/s (portable)", portable_fma, 12.0 * 2.0)]
}

fn portable_fma(iters: u64) -> f64 {
    let mut a = [std::hint::black_box(1.0f64); 12];
    for _ in 0..iters {
        for x in a.iter_mut() {
            *x = *x * 0.999_999 + 1e-7;
        }
    }
    a.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The measured loops: twelve independent chains, enough to cover the latency of every
    //! operation measured, so the figures are throughputs. Handed out only after detection.

    use std::arch::x86_64::*;

    macro_rules! chains {
        ($name:ident, $feat:literal, $ty:ty, $splat:ident, $body:expr, $sum:expr) => {
            pub(super) fn $name(iters: u64) -> f64 {
                #[target_feature(enable = $feat)]
                unsafe fn inner(iters: u64) -> f64 {
                    // Opaque start values: the compiler must not fold the loop away.
                    let mut a: [$ty; 12] = [$splat(std::hint::black_box(1.0)); 12];
                    for _ in 0..iters {
                        for x in a.iter_mut() {
                            *x = $body(*x);
                        }
                    }
                    let mut s = 0.0;
                    for x in a {
                        s += $sum(x);
                    }
                    s
                }
                // SAFETY: selected only where the feature was detected.
                unsafe { inner(iters) }
            }
        };
    }

    chains!(
        fma_f64_avx512,
        "avx512f",
        __m512d,
        _mm512_set1_pd,
        |x| _mm512_fmadd_pd(x, _mm512_set1_pd(0.999_999), _mm512_set1_pd(1e-7)),
        |x| _mm512_reduce_add_pd(x)
    );
    chains!(
        fma_f32_avx512,
        "avx512f",
        __m512,
        _mm512_set1_ps,
        |x| _mm512_fmadd_ps(x, _mm512_set1_ps(0.999_99), _mm512_set1_ps(1e-5)),
        |x| _mm512_reduce_add_ps(x) as f64
    );
    chains!(
        sqrt_div_f64_avx512,
        "avx512f",
        __m512d,
        _mm512_set1_pd,
        |x| _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_sqrt_pd(x)),
        |x| _mm512_reduce_add_pd(x)
    );
    chains!(
        rsqrt_newton_f64_avx512,
        "avx512f",
        __m512d,
        _mm512_set1_pd,
        |x| {
            let h = _mm512_mul_pd(_mm512_set1_pd(0.5), x);
            let mut y = _mm512_rsqrt14_pd(x);
            y = _mm512_mul_pd(
                y,
                _mm512_fnmadd_pd(h, _mm512_mul_pd(y, y), _mm512_set1_pd(1.5)),
            );
            _mm512_mul_pd(
                y,
                _mm512_fnmadd_pd(h, _mm512_mul_pd(y, y), _mm512_set1_pd(1.5)),
            )
        },
        |x| _mm512_reduce_add_pd(x)
    );
    chains!(
        fma_f64_avx2,
        "avx2,fma",
        __m256d,
        _mm256_set1_pd,
        |x| _mm256_fmadd_pd(x, _mm256_set1_pd(0.999_999), _mm256_set1_pd(1e-7)),
        |x: __m256d| {
            let mut a = [0.0f64; 4];
            unsafe { _mm256_storeu_pd(a.as_mut_ptr(), x) };
            a.iter().sum::<f64>()
        }
    );
    chains!(
        fma_f32_avx2,
        "avx2,fma",
        __m256,
        _mm256_set1_ps,
        |x| _mm256_fmadd_ps(x, _mm256_set1_ps(0.999_99), _mm256_set1_ps(1e-5)),
        |x: __m256| {
            let mut a = [0.0f32; 8];
            unsafe { _mm256_storeu_ps(a.as_mut_ptr(), x) };
            a.iter().map(|&v| v as f64).sum::<f64>()
        }
    );
}
