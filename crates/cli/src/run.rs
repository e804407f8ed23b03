//! `mote run` and `mote show`: configured simulations.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use mote_io::meshless::run_meshless;
use mote_io::runner::{Progress, run_gravity};
use mote_io::{Config, Source};

use crate::CliError;

/// Options of `mote run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The configuration file (TOML): `physics = "gravity"` or `"meshless"`. Without one, the
    /// built-in defaults run: a 4096-body Plummer sphere, leapfrog, to t = 2 (`mote show`
    /// prints them).
    config: Option<PathBuf>,
    /// The run directory (default: runs/<config name>). It must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Replace an existing run directory.
    #[arg(long)]
    force: bool,
    /// Override a setting: `section.key=value` (repeatable), e.g. `--set run.end_time=5`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Floating-point precision (same as `--set run.precision=...`).
    #[arg(long, value_name = "f32|f64")]
    precision: Option<String>,
    /// Memory limit for the run's buffers, e.g. "4 GiB" (same as `--set run.memory_limit=...`).
    #[arg(long, value_name = "SIZE")]
    memory_limit: Option<String>,
    /// No progress output; only the final summary.
    #[arg(short, long)]
    quiet: bool,
}

/// Options of `mote resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The checkpoint (`RUN_DIR/checkpoint.mote`, of a gravity or a meshless run); the run
    /// continues in its directory.
    checkpoint: PathBuf,
    /// Override a setting of the configuration the checkpoint carries, typically a later end:
    /// `--set run.end_time=10`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// No progress output; only the final summary.
    #[arg(short, long)]
    quiet: bool,
}

/// Options of `mote show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The configuration file (TOML); without one, the built-in defaults.
    config: Option<PathBuf>,
    /// Override a setting: `section.key=value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

/// The text of the configuration and its name; the built-in default is the minimal file.
fn read_config(path: Option<&Path>) -> Result<(String, String), CliError> {
    mote_io::config::read_config_text(path)
        .map_err(|e| CliError::Config(format!("{}: {e}", path.unwrap_or(Path::new("")).display())))
}

/// The configuration at `path` (or the built-in default) parsed by `parse`, and its name.
fn load_with<T>(
    path: Option<&Path>,
    overrides: &[String],
    parse: impl Fn(&Source<'_>, &[String]) -> Result<T, mote_io::ConfigError>,
) -> Result<(T, String), CliError> {
    let (text, stem) = read_config(path)?;
    let source = Source {
        file: path,
        text: &text,
    };
    let config = parse(&source, overrides).map_err(|e| CliError::Config(e.to_string()))?;
    Ok((config, stem))
}

/// On several MPI ranks, every rank learns whether any failed (collective): the lowest failing
/// rank's error, named, on all of them; a lone rank's early exit would leave the others
/// waiting. On one process, `result` itself.
fn agreed<T>(result: Result<T, CliError>) -> Result<T, CliError> {
    let world = mote_core::comm::world();
    if world.size() == 1 {
        return result;
    }
    let failure = match &result {
        Ok(_) => None,
        Err(CliError::Config(m)) => Some((2, m.clone())),
        Err(CliError::Run(m) | CliError::Interrupted(m, _)) => Some((1, m.clone())),
    };
    match mote_core::comm::agree(
        world.as_ref(),
        failure.as_ref().map(|(c, m)| (*c, m.as_str())),
    ) {
        Ok(()) => result,
        Err(f) if f.code == 2 => Err(CliError::Config(f.to_string())),
        Err(f) => Err(CliError::Run(f.to_string())),
    }
}

/// A configuration of either family.
fn load(path: Option<&Path>, overrides: &[String]) -> Result<(Config, String), CliError> {
    load_with(path, overrides, Config::parse)
}

/// `mote show`.
pub fn show(args: &ShowArgs) -> Result<(), CliError> {
    let (config, _) = load(args.config.as_deref(), &args.set)?;
    let (memory, interval) = match &config {
        Config::Gravity(c) => (&c.run.memory_limit, c.output.checkpoint_interval),
        Config::Meshless(c) => (&c.run.memory_limit, c.output.checkpoint_interval),
    };
    // The settings left unset have no TOML value; they are shown as comments with what
    // takes their place.
    let mut text = String::new();
    for line in config.to_toml().lines() {
        text.push_str(line);
        text.push('\n');
        if line == "[run]" && memory.is_none() {
            let budget = mote_io::runner::effective_memory_limit(None)
                .map_or("none known".to_string(), |b| {
                    format!("{:.2} GiB now", b as f64 / (1u64 << 30) as f64)
                });
            text.push_str(&format!(
                "# memory_limit: unset, so the default budget: the memory available less a \
                 margin ({budget})\n"
            ));
        }
        if line == "[output]" && interval.is_none() {
            text.push_str(
                "# checkpoint_interval: unset, so checkpoints at the end and every \
                 checkpoint_wall_interval\n",
            );
        }
    }
    print!("{text}");
    Ok(())
}

/// `mote resume`.
pub fn resume(args: &ResumeArgs, threads: Option<usize>) -> Result<(), CliError> {
    let mut overrides = args.set.clone();
    if let Some(t) = threads {
        overrides.push(format!("run.threads={t}"));
    }
    // Which kind of run: the header alone (the resume checks the whole file, and reads each
    // rank's rows only).
    let opened = agreed(
        mote_io::checkpoint::open(&args.checkpoint, false)
            .map_err(|e| CliError::Run(e.to_string())),
    )?;
    let header = opened.header().clone();
    let mut reporter = Reporter::new(args.quiet || mote_core::comm::world().rank() > 0);
    let commit = env!("MOTE_GIT_COMMIT");
    let refused = |e: mote_io::runner::ResumeError| match e {
        mote_io::runner::ResumeError::Config(c) => CliError::Config(c.to_string()),
        mote_io::runner::ResumeError::Run(r) => run_failed(r),
        other => CliError::Run(other.to_string()),
    };
    match header {
        mote_io::checkpoint::AnyHeader::Gravity(_) => {
            let result =
                mote_io::runner::resume_gravity(&args.checkpoint, &overrides, commit, &mut |p| {
                    reporter.report(p)
                });
            reporter.finish();
            print_summary(&result.map_err(refused)?);
        }
        mote_io::checkpoint::AnyHeader::Meshless(_) => {
            let result = mote_io::meshless::resume_meshless(
                &args.checkpoint,
                &overrides,
                commit,
                &mut |p| reporter.report(p),
            );
            reporter.finish();
            print_meshless_summary(&result.map_err(refused)?);
        }
    }
    Ok(())
}

/// Progress display: a bar on a terminal, plain lines every few seconds otherwise.
struct Reporter {
    bar: Option<ProgressBar>,
    quiet: bool,
    last: std::time::Instant,
}

impl Reporter {
    fn new(quiet: bool) -> Self {
        let interactive = std::io::stderr().is_terminal() && !quiet;
        let bar = interactive.then(|| {
            let b = ProgressBar::new(1);
            b.set_style(
                ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} steps  {msg}  [{elapsed_precise}, ETA {eta}]",
                )
                .expect("valid template"),
            );
            b
        });
        Self {
            bar,
            quiet,
            last: std::time::Instant::now(),
        }
    }

    fn report(&mut self, p: Progress) {
        let msg = format!("t = {:.4}  {}", p.time, p.status);
        if let Some(b) = &self.bar {
            b.set_length(p.total_steps);
            b.set_position(p.step);
            b.set_message(msg);
        } else if !self.quiet
            && (self.last.elapsed().as_secs_f64() > 5.0 || p.step == p.total_steps)
        {
            self.last = std::time::Instant::now();
            eprintln!("step {}/{}  {msg}", p.step, p.total_steps);
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

fn print_summary(report: &mote_io::runner::RunReport) {
    if mote_core::comm::world().rank() > 0 {
        return;
    }
    println!(
        "finished: {} particles, {} steps to t = {}, relative energy error {:.3e}, virial ratio {:.3}, \
         {:.2} s ({}); output in {}",
        report.particles,
        report.steps,
        report.time,
        report.energy_error,
        report.virial_ratio,
        report.wall_seconds,
        report.kernel,
        report.dir.display()
    );
}

/// The exit a failed run gets: a stop on a signal its own status, anything else 1.
fn run_failed(e: mote_io::runner::RunError) -> CliError {
    match e {
        mote_io::runner::RunError::Interrupted { signal, .. }
        | mote_io::runner::RunError::Stopped { signal, .. } => {
            CliError::Interrupted(e.to_string(), signal)
        }
        // A bad initial-conditions file is a mistake in the input (exit 2), found before
        // anything was written; on several ranks, whatever class the failing rank's error had.
        mote_io::runner::RunError::InitialConditions(_) => CliError::Config(e.to_string()),
        mote_io::runner::RunError::Rank(ref f) if f.code == 2 => CliError::Config(e.to_string()),
        other => CliError::Run(other.to_string()),
    }
}

/// `mote run`. `threads` is the global `--threads`, when given.
pub fn run(args: &RunArgs, threads: Option<usize>) -> Result<(), CliError> {
    let mut overrides = args.set.clone();
    if let Some(t) = threads {
        overrides.push(format!("run.threads={t}"));
    }
    if let Some(p) = &args.precision {
        overrides.push(format!("run.precision=\"{p}\""));
    }
    if let Some(m) = &args.memory_limit {
        overrides.push(format!("run.memory_limit=\"{m}\""));
    }
    let (config, stem) = agreed(load(args.config.as_deref(), &overrides))?;
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("runs").join(&stem));
    // Refused before anything runs: an existing directory without --force, or one --force
    // must not touch (not an earlier run, the working or home directory, the root).
    // On several MPI ranks rank 0 alone looks (it alone writes the directory), and every rank
    // learns its verdict.
    let world = mote_core::comm::world();
    agreed(if world.rank() == 0 {
        mote_io::files::check_run_dir(&dir, args.force)
            .map(|_| ())
            .map_err(|e| CliError::Config(e.to_string()))
    } else {
        Ok(())
    })?;

    let mut reporter = Reporter::new(args.quiet || world.rank() > 0);
    let commit = env!("MOTE_GIT_COMMIT");
    match config {
        Config::Gravity(config) => {
            let result = run_gravity(&config, &dir, args.force, commit, &mut |p| {
                reporter.report(p)
            });
            reporter.finish();
            let report = result.map_err(run_failed)?;
            print_summary(&report);
        }
        Config::Meshless(config) => {
            let result = run_meshless(&config, &dir, args.force, commit, &mut |p| {
                reporter.report(p)
            });
            reporter.finish();
            print_meshless_summary(&result.map_err(run_failed)?);
        }
    }
    Ok(())
}

fn print_meshless_summary(r: &mote_io::meshless::MeshlessReport) {
    if mote_core::comm::world().rank() > 0 {
        return;
    }
    let errors = r.errors.map_or(String::new(), |e| {
        format!(
            ", error against the exact solution: L1 {:.3e}, relative L2 {:.3e}",
            e.l1, e.relative_l2
        )
    });
    println!(
        "finished: {} ({} particles, {:.1} neighbours), {} steps to t = {}{errors}, \
         {} MOOD reductions, {}, {:.2} s; output in {}",
        r.problem,
        r.particles,
        r.neighbours_mean,
        r.steps,
        r.time,
        r.mood.reductions,
        r.floor_events
            .map_or("floor events not counted on the device".into(), |f| {
                format!("{f} floor events")
            }),
        r.wall_seconds,
        r.dir.display()
    );
}

/// Options of `mote convergence`.
#[derive(Debug, Args)]
pub struct ConvergenceArgs {
    /// The configuration file (TOML); without one, the built-in defaults.
    config: Option<PathBuf>,
    /// Number of levels. Gravity: the time step is halved from one level to the next. Meshless
    /// (a problem with an exact solution): the particle spacing is halved from one level to the
    /// next, the finest at the configured `problem.resolution`; the time step follows the CFL
    /// number; each level is a run directory inside the output directory.
    #[arg(long, default_value_t = 4)]
    levels: usize,
    /// Where `convergence.csv` and `convergence.png` go (default: runs/<config name>-convergence).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Override a setting: `section.key=value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Replace the files of an earlier study in the output directory.
    #[arg(long)]
    force: bool,
}

/// `mote convergence`.
pub fn convergence(args: &ConvergenceArgs, threads: Option<usize>) -> Result<(), CliError> {
    if !(2..=12).contains(&args.levels) {
        return Err(CliError::Config(format!(
            "--levels {}: between 2 and 12",
            args.levels
        )));
    }
    let mut overrides = args.set.clone();
    if let Some(t) = threads {
        overrides.push(format!("run.threads={t}"));
    }
    let (config, stem) = agreed(load(args.config.as_deref(), &overrides))?;
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("runs").join(format!("{stem}-convergence")));
    // Checked before the study runs: an earlier study is replaced only with --force.
    let earlier: Vec<_> = ["convergence.csv", "convergence.png"]
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.exists())
        .collect();
    if !args.force && !earlier.is_empty() {
        return Err(CliError::Config(format!(
            "{}: holds an earlier convergence study; pass --force to replace it or choose \
             another --out",
            earlier[0].display()
        )));
    }
    let config = match config {
        Config::Gravity(c) => c,
        Config::Meshless(c) => return convergence_meshless(&c, args, &dir),
    };
    let study = mote_io::convergence::convergence_gravity(&config, args.levels)
        .map_err(|e| CliError::Run(e.to_string()))?;
    println!(
        "{:>14} {:>10} {:>14} {:>8}   (error against the {} solution)",
        "dt",
        "steps",
        "error",
        "order",
        if study.reference == "exact" {
            "exact"
        } else {
            "next finer"
        }
    );
    for l in &study.levels {
        let e = l.error.map_or("-".to_string(), |e| format!("{e:.4e}"));
        let o = l.order.map_or("-".to_string(), |o| format!("{o:.3}"));
        println!("{:>14.6e} {:>10} {:>14} {:>8}", l.dt, l.steps, e, o);
    }
    let files = mote_io::convergence::write_study(&dir, &study)
        .map_err(|e| CliError::Run(e.to_string()))?;
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

/// `mote convergence` on a meshless problem: levels by resolution, a table per level as it ends.
fn convergence_meshless(
    config: &mote_io::meshless::MeshlessConfig,
    args: &ConvergenceArgs,
    dir: &Path,
) -> Result<(), CliError> {
    let config = config.clone().with_defaults();
    let finest = config.problem.resolution.unwrap_or(0);
    let resolutions = mote_io::convergence::meshless_resolutions(finest, args.levels)
        .map_err(CliError::Config)?;
    println!(
        "{}: {} levels at {:?} particles per unit length to t = {}, order {} (errors against the \
         exact solution; orders against the level above)",
        config.problem.kind.name(),
        args.levels,
        resolutions,
        config.run.end_time.unwrap_or(0.0),
        config.scheme.order
    );
    println!(
        "{:>10} {:>10} {:>6} {:>16} {:>11} {:>11} {:>11} {:>7} {:>7} {:>7}",
        "resolution",
        "particles",
        "steps",
        "variable",
        "L1",
        "L2",
        "max",
        "p(L1)",
        "p(L2)",
        "p(max)"
    );
    let order = |o: Option<f64>| o.map_or("-".to_string(), |o| format!("{o:.2}"));
    let study = mote_io::convergence::convergence_meshless(
        &config,
        args.levels,
        dir,
        args.force,
        env!("MOTE_GIT_COMMIT"),
        &mut |l| {
            for (k, ((name, e), o)) in l.errors.iter().zip(&l.orders).enumerate() {
                let (r, n, s) = if k == 0 {
                    (
                        l.resolution.to_string(),
                        l.particles.to_string(),
                        l.steps.to_string(),
                    )
                } else {
                    Default::default()
                };
                println!(
                    "{r:>10} {n:>10} {s:>6} {name:>16} {:>11.4e} {:>11.4e} {:>11.4e} {:>7} {:>7} \
                     {:>7}",
                    e.l1,
                    e.l2,
                    e.max,
                    order(o[0]),
                    order(o[1]),
                    order(o[2])
                );
            }
        },
    )
    .map_err(|e| match e {
        // What the configuration asks for and cannot be done: a usage error (exit code 2).
        mote_io::runner::RunError::Refused(m) => CliError::Config(m),
        e => CliError::Run(e.to_string()),
    })?;
    let files = mote_io::convergence::write_meshless_study(dir, &study)
        .map_err(|e| CliError::Run(e.to_string()))?;
    for l in &study.levels {
        println!("level run: {}", l.dir.display());
    }
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}
