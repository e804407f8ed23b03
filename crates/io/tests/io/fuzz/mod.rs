//! Fuzzing of mote's input surface: the TOML configuration path (parse, validate, resolve,
//! write back, parse again), the checkpoint reader (layout, checksum, header, arrays, and the
//! configuration a resume reads from it) and the snapshot reader. See `README.md` beside this
//! file for how to run the long campaigns.
//!
//! A mutation fuzzer on stable Rust (libFuzzer needs a nightly toolchain): seeds are the
//! example configurations and files written by mote itself, mutated by byte edits, splices,
//! token and value substitutions. Each execution runs under `catch_unwind`; a panic fails the
//! test and writes the input to `target/fuzz-failures/`. An abort (stack overflow, allocation
//! failure) ends the process, which fails the test as well. The largest single allocation an
//! execution makes is tracked by the test binary's allocator and must stay below
//! [`ALLOCATION_LIMIT`].
//!
//! `MOTE_FUZZ_EXECS` sets the executions per target (default: a smoke run of 20 000 each),
//! `MOTE_FUZZ_SEED` the random seed.

mod alloc;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use mote_io::config::{Config, Source};

/// The largest single allocation one execution may make: far below any machine's memory, and
/// far above what a valid small input needs.
const ALLOCATION_LIMIT: usize = 256 << 20;

/// A small, fast generator (xorshift64*): the fuzzer needs speed and reproducibility, not
/// statistical quality.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that sit on the edges of what parsers and validators handle.
const VALUES: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "3",
    "0.5",
    "1e-300",
    "1e300",
    "-1e300",
    "1e308",
    "2e308",
    "nan",
    "inf",
    "-inf",
    "+inf",
    "4294967296",
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "100000000000",
    "1000000",
    "\"\"",
    "\"x\"",
    "\"f32\"",
    "\"gpu\"",
    "\"cuda:7\"",
    "\"wgpu:99\"",
    "\"1 B\"",
    "\"1e30 GiB\"",
    "\"0s\"",
    "\"off\"",
    "\"1ns\"",
    "true",
    "false",
    "[]",
    "[1, 2]",
    "{}",
    "{ a = 1 }",
    "1979-05-27",
    "\"conservative\"",
    "\"hllc\"",
    "\"upwind\"",
    "\"weno\"",
    "\"u2\"",
    "\"rk4\"",
    "\"imex\"",
    "\"vk\"",
    "\"minmod\"",
];

/// Keys and section names mote knows, to splice into configurations.
const KEYS: &[&str] = &[
    "physics",
    "[run]",
    "[problem]",
    "[scheme]",
    "[output]",
    "[initial_conditions]",
    "[solver]",
    "[integrator]",
    "end_time",
    "dt",
    "cfl",
    "precision",
    "threads",
    "memory_limit",
    "backend",
    "device",
    "min_dt_ratio",
    "kind",
    "particles",
    "seed",
    "radius",
    "virial_ratio",
    "semi_major_axis",
    "eccentricity",
    "m1",
    "m2",
    "bulge_mass",
    "disc_mass",
    "separation",
    "pericentre",
    "resolution",
    "jitter",
    "gamma",
    "dim",
    "order",
    "flux",
    "formulation",
    "stepper",
    "limiter",
    "limiter_mode",
    "weno",
    "mood",
    "mood_strategy",
    "snapshots",
    "diagnostics_every",
    "checkpoint_interval",
    "checkpoint_wall_interval",
    "softening",
    "kernel",
];

/// One random mutation of `data`, with `others` to splice from and `text` choosing mutations
/// that keep a text a text.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>], text: bool) {
    let len = data.len();
    match rng.below(if text { 10 } else { 7 }) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next() as u8;
        }
        2 => {
            let i = rng.below(len + 1);
            let n = 1 + rng.below(8);
            for _ in 0..n {
                data.insert(i, rng.next() as u8);
            }
        }
        3 if len > 0 => {
            let i = rng.below(len);
            let n = (1 + rng.below(32)).min(len - i);
            data.drain(i..i + n);
        }
        4 if len > 0 => {
            // Duplicate a range (repeats lines, sections, nesting).
            let i = rng.below(len);
            let n = (1 + rng.below(64)).min(len - i);
            let copy = data[i..i + n].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, copy);
        }
        5 if !others.is_empty() => {
            // Splice in a piece of another seed.
            let o = &others[rng.below(others.len())];
            if !o.is_empty() {
                let i = rng.below(o.len());
                let n = (1 + rng.below(128)).min(o.len() - i);
                let at = rng.below(len + 1);
                data.splice(at..at, o[i..i + n].iter().copied());
            }
        }
        6 if len >= 8 => {
            // An interesting 64-bit value over eight bytes (lengths and counts in binary).
            let i = rng.below(len - 7);
            let v: u64 = [0, 1, u64::MAX, u64::MAX / 2, 1 << 32, 1 << 40, 7, 8][rng.below(8)];
            data[i..i + 8].copy_from_slice(&v.to_le_bytes());
        }
        7 => {
            // Replace a value after `=` with an edge value.
            let eqs: Vec<usize> = (0..len).filter(|&i| data[i] == b'=').collect();
            if let Some(&e) = eqs.get(rng.below(eqs.len())) {
                let end = (e..len).find(|&i| data[i] == b'\n').unwrap_or(len);
                let v = VALUES[rng.below(VALUES.len())];
                data.splice(e + 1..end, format!(" {v}").into_bytes());
            }
        }
        8 => {
            // Insert a line `key = value` or a section header.
            let k = KEYS[rng.below(KEYS.len())];
            let line = if k.starts_with('[') {
                format!("\n{k}\n")
            } else {
                format!("\n{k} = {}\n", VALUES[rng.below(VALUES.len())])
            };
            let at = rng.below(len + 1);
            data.splice(at..at, line.into_bytes());
        }
        9 => {
            // Deep nesting: arrays or inline tables within each other.
            let depth = 1 + rng.below(2000);
            let (open, close) = if rng.below(2) == 0 {
                ('[', ']')
            } else {
                ('{', '}')
            };
            let mut s = String::from("\nx = ");
            for _ in 0..depth {
                s.push(open);
                if open == '{' {
                    s.push_str("a = ");
                }
            }
            for _ in 0..depth {
                s.push(close);
            }
            let at = rng.below(len + 1);
            data.splice(at..at, s.into_bytes());
        }
        _ => {}
    }
}

/// Runs `target` on `execs` mutated inputs grown from `seeds`, fails on a panic or an
/// allocation over the limit, and reports the executions per second.
fn campaign(name: &str, seeds: &[Vec<u8>], text: bool, target: impl Fn(&[u8]) -> bool) {
    let execs: u64 = std::env::var("MOTE_FUZZ_EXECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let seed: u64 = std::env::var("MOTE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    let mut rng = Rng(seed ^ name.len() as u64 ^ 0x5151);
    let start = std::time::Instant::now();
    let mut largest = 0usize;
    let mut accepted = 0u64;
    let mut input = Vec::new();
    for k in 0..execs {
        // Mostly a fresh seed with one to three mutations (inputs stay near valid ones, so that
        // they pass the parser and reach validation); sometimes mutations stack up.
        if rng.below(8) != 0 || input.len() > 1 << 20 {
            input.clone_from(&seeds[rng.below(seeds.len())]);
        }
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut input, seeds, text);
        }
        alloc::start();
        let result = catch_unwind(AssertUnwindSafe(|| target(&input)));
        let peak = alloc::stop();
        largest = largest.max(peak);
        accepted += u64::from(result.as_ref().is_ok_and(|&ok| ok));
        if result.is_err() || peak > ALLOCATION_LIMIT {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join(format!("{name}-{k}"));
            std::fs::write(&file, &input).unwrap();
            panic!(
                "{name}: execution {k} {} (input saved to {})",
                if result.is_err() {
                    "panicked".to_string()
                } else {
                    format!("allocated {peak} bytes at once")
                },
                file.display()
            );
        }
    }
    let s = start.elapsed().as_secs_f64();
    eprintln!(
        "fuzz {name}: {execs} executions in {s:.1} s ({:.0}/s), {accepted} inputs accepted, \
         0 panics, largest allocation {largest} bytes",
        execs as f64 / s
    );
}

/// The example configurations, the seeds of the configuration target.
fn example_configs() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 8, "the examples are the seeds");
    seeds
}

/// Parse, validate and resolve a configuration; a valid one must also write back as TOML
/// that parses to the same configuration (what `config.toml` and checkpoints rely on).
fn config_target(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let file = Path::new("fuzz.toml");
    let source = Source {
        file: Some(file),
        text,
    };
    if let Ok(config) = Config::parse(&source, &[]) {
        let again = config.to_toml();
        let back = Config::parse(
            &Source {
                file: Some(file),
                text: &again,
            },
            &[],
        )
        .unwrap_or_else(|e| panic!("a valid configuration writes back invalid TOML: {e}\n{again}"));
        assert_eq!(
            back.to_toml(),
            again,
            "the written configuration reads back"
        );
        return true;
    }
    false
}

#[test]
fn fuzz_configuration_parsing() {
    let seeds = example_configs();
    campaign("config", &seeds, true, config_target);
    // Overrides take the same path as the file (`--set key=value`).
    let base = String::from_utf8(seeds[0].clone()).unwrap();
    let mut rng = Rng(7);
    for _ in 0..2000 {
        let k = KEYS[rng.below(KEYS.len())].trim_matches(|c| c == '[' || c == ']');
        let section = [
            "run",
            "problem",
            "scheme",
            "output",
            "initial_conditions",
            "",
        ][rng.below(6)];
        let set = format!("{section}.{k}={}", VALUES[rng.below(VALUES.len())]);
        let _ = Config::parse(
            &Source {
                file: None,
                text: &base,
            },
            &[set],
        );
    }
}

/// Checkpoints of both families written by mote, the seeds of the checkpoint target.
fn checkpoint_seeds() -> Vec<Vec<u8>> {
    use mote_io::checkpoint::{Header, MeshlessHeader, write, write_meshless};
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.mote");
    let particles = mote_gravity::initial_conditions::plummer::<f64>(5, 1).unwrap();
    let header = Header {
        mote_version: "0.1.0".into(),
        step: 3,
        time: 0.5,
        precision: mote_core::Precision::F64,
        config: "physics = \"gravity\"\n".into(),
        initial_energy: -0.25,
        snapshots: vec![(0.0, "snapshots/snap_00000.vtu".into())],
    };
    write(
        &g,
        &header,
        &particles,
        &mote_core::comm::RootStream::one(particles.len()),
    )
    .unwrap();
    let m = dir.path().join("m.mote");
    let meshless = MeshlessHeader {
        mote_version: "0.1.0".into(),
        physics: "meshless".into(),
        step: 2,
        time: 0.01,
        simulation_time: 0.01,
        precision: mote_core::Precision::F32,
        config: "physics = \"meshless\"\n[problem]\nkind = \"sod\"\nresolution = 8\n".into(),
        snapshots: vec![],
        particles: 3,
        variables: 2,
        mood: Default::default(),
        floor_events: Some(0),
        first_dt: Some(1e-3),
        outflow: None,
    };
    write_meshless(
        &m,
        &meshless,
        &[1, 2, 3],
        &[&[1.0f32, 2.0, 3.0], &[0.5, 0.5, 0.5]],
        &mote_core::comm::RootStream::one(3),
    )
    .unwrap();
    vec![std::fs::read(g).unwrap(), std::fs::read(m).unwrap()]
}

/// Read a checkpoint as `mote resume` and `mote inspect` do: verify it, read its arrays in
/// both precisions, and parse the configuration it carries.
fn checkpoint_target(bytes: &[u8]) -> bool {
    use mote_io::checkpoint::{AnyHeader, parse_any, read_meshless_state, read_particles};
    let path = Path::new("fuzz.mote");
    let Ok((header, arrays)) = parse_any(path, bytes) else {
        return false;
    };
    match header {
        AnyHeader::Gravity(h) => {
            let _ = read_particles::<f32>(path, &arrays);
            let whole = read_particles::<f64>(path, &arrays);
            let ok = whole.is_ok();
            // `mote resume` opens the file and reads each rank's rows: any rows answer without
            // a panic, and all of them are the particles read whole.
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), bytes).unwrap();
            if let Ok(opened) = mote_io::checkpoint::open(file.path(), true) {
                let _ = opened.gravity_count::<f32>();
                if let Ok(n) = opened.gravity_count::<f64>() {
                    for rows in [0..n.min(2), n / 2..n, n..n.saturating_add(1)] {
                        let _ = opened.gravity_rows::<f64>(rows);
                    }
                    if let (Ok(p), Ok(q)) = (&whole, opened.gravity_rows::<f64>(0..n)) {
                        assert_eq!(p.ids(), q.ids());
                        let bits = |m: &[f64]| m.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(p.masses()), bits(q.masses()));
                    }
                }
            }
            let _ = mote_io::GravityConfig::parse(
                &Source {
                    file: Some(path),
                    text: &h.config,
                },
                &["run.end_time=100".into()],
            );
            ok
        }
        AnyHeader::Meshless(h) => {
            let ok = read_meshless_state::<f64>(path, &h, &arrays).is_ok()
                | read_meshless_state::<f32>(path, &h, &arrays).is_ok();
            // `mote resume` opens the file and reads each rank's rows from it: a file of these
            // bytes opens as they parse (or its arrays' framing is refused), and any rows
            // answer without a panic.
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), bytes).unwrap();
            if let Ok(opened) = mote_io::checkpoint::open(file.path(), true) {
                assert_eq!(opened.header(), &AnyHeader::Meshless(h.clone()));
                let n = h.particles;
                for rows in [0..n.min(2), n / 2..n, n..n.saturating_add(1)] {
                    let _ = opened.meshless_rows::<f64>(rows.clone());
                    let _ = opened.meshless_rows::<f32>(rows);
                }
            }
            let _ = mote_io::MeshlessConfig::parse(
                &Source {
                    file: Some(path),
                    text: &h.config,
                },
                &[],
            );
            ok
        }
    }
}

#[test]
fn fuzz_checkpoint_reading() {
    let seeds = checkpoint_seeds();
    // Half the inputs get a valid checksum again, so that mutations reach the header and the
    // arrays instead of stopping at the checksum.
    campaign("checkpoint", &seeds, false, |bytes| {
        let mut ok = checkpoint_target(bytes);
        if bytes.len() >= 4 {
            let mut fixed = bytes.to_vec();
            let n = fixed.len() - 4;
            let crc = crc32fast::hash(&fixed[..n]);
            fixed[n..].copy_from_slice(&crc.to_le_bytes());
            ok |= checkpoint_target(&fixed);
        }
        ok
    });
}

/// Snapshots written by mote, the seeds of the snapshot target.
fn snapshot_seeds() -> Vec<Vec<u8>> {
    use mote_io::vtk::{Field, write_vtu};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.vtu");
    let points = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
    let ids = [7u64, 9];
    let v = [0.5, -0.5];
    write_vtu(
        &path,
        Some(0.25),
        &points,
        &[Field::U64("id", &ids), Field::F64("density", &v)],
    )
    .unwrap();
    let a = std::fs::read(&path).unwrap();
    write_vtu(
        &path,
        None,
        &points[..3],
        &[Field::Vec3F64("velocity", &points[..3])],
    )
    .unwrap();
    vec![a, std::fs::read(&path).unwrap()]
}

#[test]
fn fuzz_snapshot_reading() {
    let seeds = snapshot_seeds();
    campaign("snapshot", &seeds, false, |bytes| {
        let Ok(arrays) = mote_io::vtk::read_vtu(bytes) else {
            return false;
        };
        for a in arrays.values() {
            let _ = a.to_f64();
        }
        true
    });
}
