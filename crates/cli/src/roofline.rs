//! `mote bench roofline`: the ceilings of this machine that mote's kernels are measured against:
//! memory bandwidth (copy, triad, read; one thread and all threads, arrays far larger than the
//! last-level cache) and arithmetic throughput (FMA in f32 and f64 at the widest SIMD level,
//! square root + divide, reciprocal-square-root estimate + Newton). Each figure is the median of
//! repeated runs, with min and max. Then, unless `--ceilings-only`: every hot kernel placed on
//! those ceilings ([`mote_bench::placement`]), the particle-layout experiment ([`mote_bench::layouts`])
//! and thread scaling; with `--out DIR`, CSV tables and a roofline figure.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use mote_core::{CpuBackend, SimdLevel};
use serde::Serialize;

use mote_bench::layouts::LayoutRow;
use mote_bench::placement::{Ceilings, KernelPoint, ScalingPoint, Sizes};

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
    /// Write roofline.csv, layouts.csv, scaling.csv and roofline.png into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Small problem sizes (seconds, for tests): the figures are then not representative.
    #[arg(long)]
    quick: bool,
    /// Measure the ceilings only.
    #[arg(long)]
    ceilings_only: bool,
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
    kernels: Vec<KernelPoint>,
    layouts: Vec<LayoutRow>,
    scaling: Vec<ScalingPoint>,
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
    let (mut kernels, mut layouts, mut scaling) = (Vec::new(), Vec::new(), Vec::new());
    if !args.ceilings_only {
        let ceilings = ceilings_of(&figures, simd);
        let sizes = if args.quick {
            Sizes {
                gravity: 1024,
                cloud: 4096,
                repeats: 1,
            }
        } else {
            Sizes {
                gravity: 8192,
                cloud: 250_000,
                repeats: args.repeats.min(3),
            }
        };
        kernels = mote_bench::placement::place(&ceilings, sizes, threads)?;
        layouts = if args.quick {
            mote_bench::layouts::run(&[256, 1024], 1 << 16, 2, 1)?
        } else {
            mote_bench::layouts::run(&[1024, 4096, 16384], 1 << 24, 4, args.repeats.min(3))?
        };
        scaling = mote_bench::placement::scaling(sizes, all.thread_count())?;
    }
    let report = Report {
        family: "roofline",
        simd,
        threads: all.thread_count(),
        array_bytes: args.array_bytes,
        figures,
        kernels,
        layouts,
        scaling,
    };
    if let Some(dir) = &args.out {
        write_outputs(dir, &report)?;
    }
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
        if !report.kernels.is_empty() {
            println!("kernels on the roofline ({} threads):", report.threads);
            for k in &report.kernels {
                println!(
                    "  {:<22} {} {:<7} N={:<7} {:>9.3e} s  {:>8.2} GFLOP/s  {:>7.2} GB/s  {:>9.2} flop/B  {:<10} bound: {:>5.1} % of {:.1} GFLOP/s",
                    k.kernel,
                    k.precision,
                    k.simd.name(),
                    k.particles,
                    k.seconds,
                    k.gflop_per_s,
                    k.gb_per_s,
                    k.intensity,
                    k.bound,
                    100.0 * k.fraction,
                    k.attainable_gflop_per_s
                );
            }
            println!("layouts (direct kernel, f64, 1 thread):");
            for l in &report.layouts {
                println!(
                    "  {:<6} {:<9} sources={:<9} targets={:<6} {:>9.3e} s  {:>9.3e} interactions/s  {:>7.2} GB/s of sources",
                    l.layout,
                    l.pass,
                    l.sources,
                    l.targets,
                    l.seconds,
                    l.interactions_per_s,
                    l.gb_per_s
                );
            }
            println!("thread scaling:");
            for p in &report.scaling {
                println!(
                    "  {:<20} threads={} {:>9.3e} s  speedup {:.2}  efficiency {:.0} %",
                    p.kernel,
                    p.threads,
                    p.seconds,
                    p.speedup,
                    100.0 * p.efficiency
                );
            }
        }
    }
    Ok(())
}

/// The ceilings kernels are placed against: the highest all-thread bandwidth and the
/// all-thread FMA peaks (the portable build measures f64 only; f32 is then taken as twice it).
fn ceilings_of(figures: &BTreeMap<String, Figure>, widest: SimdLevel) -> Ceilings {
    let all = |prefix: &str| {
        figures
            .iter()
            .find(|(k, _)| k.starts_with(prefix) && k.ends_with("(all threads)"))
            .map(|(_, f)| f.median)
    };
    let bandwidth = ["copy", "triad", "read"]
        .iter()
        .filter_map(|p| all(p))
        .fold(0.0, f64::max);
    let fma_f64 = all("fma f64").or_else(|| all("mul+add f64")).unwrap_or(1.0);
    let fma_f32 = all("fma f32").unwrap_or(2.0 * fma_f64);
    Ceilings {
        bandwidth,
        fma_f64,
        fma_f32,
        widest,
    }
}

/// roofline.csv, layouts.csv, scaling.csv and roofline.png in `dir`, each written atomically.
fn write_outputs(dir: &Path, report: &Report) -> Result<(), Box<dyn Error>> {
    use std::fmt::Write;
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))?;
    let mut csv = String::from(
        "kind,name,precision,simd,threads,particles,seconds,gflop_per_s,gflop_per_s_real,gb_per_s,intensity,bound,attainable_gflop_per_s,fraction\n",
    );
    for (name, f) in &report.figures {
        writeln!(csv, "ceiling,{name},,{},,,,{},,,,,,", report.simd, f.median)?;
    }
    for k in &report.kernels {
        writeln!(
            csv,
            "kernel,{},{},{},{},{},{:e},{},{},{},{},{},{},{}",
            k.kernel,
            k.precision,
            k.simd.name(),
            k.threads,
            k.particles,
            k.seconds,
            k.gflop_per_s,
            k.gflop_per_s_real.map_or(String::new(), |x| x.to_string()),
            k.gb_per_s,
            k.intensity,
            k.bound,
            k.attainable_gflop_per_s,
            k.fraction
        )?;
    }
    mote_io::files::write_atomic(&dir.join("roofline.csv"), csv.as_bytes())?;
    let mut csv = String::from("layout,pass,sources,targets,seconds,interactions_per_s,gb_per_s\n");
    for l in &report.layouts {
        writeln!(
            csv,
            "{},{},{},{},{:e},{},{}",
            l.layout, l.pass, l.sources, l.targets, l.seconds, l.interactions_per_s, l.gb_per_s
        )?;
    }
    mote_io::files::write_atomic(&dir.join("layouts.csv"), csv.as_bytes())?;
    let mut csv = String::from("kernel,threads,seconds,speedup,efficiency\n");
    for p in &report.scaling {
        writeln!(
            csv,
            "{},{},{:e},{},{}",
            p.kernel, p.threads, p.seconds, p.speedup, p.efficiency
        )?;
    }
    mote_io::files::write_atomic(&dir.join("scaling.csv"), csv.as_bytes())?;
    let median = |prefix: &str| {
        report
            .figures
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, f)| (k.replace(" GFLOP/s", ""), f.median))
            .collect::<Vec<_>>()
    };
    let ceilings = ceilings_of(&report.figures, report.simd);
    let bandwidths: Vec<(String, f64)> = std::iter::once((
        "memory roof (best, all threads)".to_string(),
        ceilings.bandwidth,
    ))
    .chain(median("triad (1"))
    .collect();
    let peaks: Vec<(String, f64)> = ["fma f64 GFLOP/s (all", "fma f32 GFLOP/s (all", "mul+add"]
        .iter()
        .flat_map(|p| median(p))
        .collect();
    let points: Vec<(String, f64, f64)> = report
        .kernels
        .iter()
        .map(|k| {
            (
                format!("{} {}", k.kernel, k.precision),
                k.intensity,
                k.gflop_per_s,
            )
        })
        .collect();
    mote_io::plot::roofline(
        &dir.join("roofline.png"),
        &bandwidths,
        &peaks,
        &points,
        &format!(
            "mote roofline: {} threads, {}",
            report.threads,
            mote_core::platform::cpu_model()
        ),
    )?;
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
