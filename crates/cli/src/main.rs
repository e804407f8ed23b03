//! `mote`: the command-line program of the mote particle-simulation engine.

// Output that cannot panic. The standard `print!`/`println!` panic when standard output is a
// closed pipe (`mote inspect FILE | head -1`); these crate-wide replacements end the program
// quietly instead, with the status a shell reports for a SIGPIPE (141). Progress and errors
// on standard error are best effort: a closed standard error loses the message, not the run.
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}
macro_rules! println {
    () => {
        $crate::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Writes to standard output; a closed pipe ends the program quietly (status 141, as SIGPIPE).
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        let _ = writeln!(std::io::stderr(), "error: writing to standard output: {e}");
        std::process::exit(1);
    }
}

mod apibench;
mod bench;
mod info;
mod inspect;
mod roofline;
mod run;
mod snapbench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mote: particle simulations (self-gravitating N-body, meshless conservation laws) on CPU
/// threads and GPUs.
#[derive(Debug, Parser)]
#[command(name = "mote", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// CPU worker threads (default: one per core).
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,

    /// More log output (-v: debug, -vv: trace). `MOTE_LOG` takes a tracing filter instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Describe this machine: CPU, cores, memory, SIMD levels detected and chosen, threads.
    Info(info::InfoArgs),
    /// Run a simulation from a configuration file (or the built-in defaults).
    Run(run::RunArgs),
    /// Continue a run from its checkpoint (bitwise identical to an uninterrupted run).
    Resume(run::ResumeArgs),
    /// Run a configuration at successively halved time steps; report errors and orders.
    Convergence(run::ConvergenceArgs),
    /// Summarise a snapshot (.vtu or .hdf5), checkpoint (.mote) or diagnostics file (.csv).
    Inspect(inspect::InspectArgs),
    /// Draw the pictures of a run directory: diagnostics.png (energy error and virial ratio, or
    /// conserved totals and errors) and the fields of a snapshot (profile.png, fields.png,
    /// surface_density.png, orbits.png; movie.gif with --movie).
    Plot(PlotArgs),
    /// Print every resolved setting of a configuration, defaults included, as TOML.
    Show(run::ShowArgs),
    /// Measure kernel performance (prints the kernel that ran, timings and throughput).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// Options of `mote plot`.
#[derive(Debug, clap::Args)]
struct PlotArgs {
    /// The run directory (a running or interrupted run's too: what it has written so far).
    run_dir: std::path::PathBuf,
    /// The snapshot the field pictures show, by its index in `snapshots.pvd` (default: the
    /// last).
    #[arg(long, value_name = "INDEX")]
    snapshot: Option<usize>,
    /// Also write `movie.gif`: one frame per snapshot.
    #[arg(long)]
    movie: bool,
}

/// Errors the program reports, each with its exit code.
#[derive(Debug)]
pub enum CliError {
    /// A configuration or command-line mistake: exit code 2.
    Config(String),
    /// A failure while running: exit code 1.
    Run(String),
    /// A run stopped by a signal after writing its checkpoint: exit code 128 + the signal
    /// (130 for SIGINT, 143 for SIGTERM).
    Interrupted(String, usize),
}

/// SIGINT and SIGTERM ask the running simulation to stop after its current step, with a
/// checkpoint (see `mote_io::interrupt`); a second signal ends the program at once (exit
/// status 128 + the signal).
fn catch_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::sync::atomic::AtomicBool;
    static SEEN: AtomicBool = AtomicBool::new(false);
    for signal in [SIGINT, SIGTERM] {
        // The order matters: the shutdown checks the flag before the flag is set, so only a
        // second signal exits.
        let result = signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, &SEEN)
            .and_then(|_| signal_hook::flag::register(signal, &SEEN))
            .and_then(|_| {
                signal_hook::flag::register_usize(
                    signal,
                    mote_io::interrupt::flag(),
                    signal as usize,
                )
            });
        if let Err(e) = result {
            tracing::warn!(
                "signal {signal} cannot be caught ({e}); it will end runs without a checkpoint"
            );
        }
    }
}

impl From<Box<dyn std::error::Error>> for CliError {
    fn from(e: Box<dyn std::error::Error>) -> Self {
        CliError::Run(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    // Under mpirun: MPI started, the world communicator installed (kept until the end of
    // `main`, where dropping it finalises MPI).
    let ranks = match mote_distributed::start() {
        Ok(started) => started,
        Err(e) => {
            // Every copy fails alike; the first speaks.
            if mote_core::comm::launched_rank() == 0 {
                eprintln!("error: {e}");
            }
            return ExitCode::from(2);
        }
    };
    // Every rank reaches the same verdict; rank 0 alone talks to the user.
    let root = ranks.is_root();
    if ranks.size > 1 && !matches!(cli.command, Command::Run(_) | Command::Resume(_)) {
        if root {
            eprintln!(
                "error: only `mote run` and `mote resume` run on several MPI ranks ({} were \
                 started); run this command without mpirun",
                ranks.size
            );
        }
        return ExitCode::from(2);
    }
    let threads = cli.threads.unwrap_or(0);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads > cores {
        tracing::warn!(
            "--threads {threads} is more than the {cores} cores of this machine: the extra \
             threads only wait for each other (runs get slower, not faster)"
        );
    }
    if matches!(cli.command, Command::Run(_) | Command::Resume(_)) {
        catch_signals();
    }
    let result = match cli.command {
        Command::Info(args) => info::run(&args, threads).map_err(CliError::from),
        Command::Bench(cmd) => bench::run(&cmd, threads).map_err(CliError::from),
        Command::Run(args) => run::run(&args, cli.threads),
        Command::Show(args) => run::show(&args),
        Command::Resume(args) => run::resume(&args, cli.threads),
        Command::Inspect(args) => inspect::run(&args),
        Command::Convergence(args) => run::convergence(&args, cli.threads),
        Command::Plot(args) => mote_io::plot::plot_run(
            &args.run_dir,
            &mote_io::plot::FieldOptions {
                snapshot: args.snapshot,
                movie: args.movie,
            },
        )
        .map(|files| files.iter().for_each(|f| println!("wrote {}", f.display())))
        .map_err(|e| CliError::Run(e.to_string())),
    };
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Config(e)) => {
            if root {
                eprintln!("error: {e}");
            }
            ExitCode::from(2)
        }
        Err(CliError::Run(e)) => {
            if root {
                eprintln!("error: {e}");
            }
            ExitCode::FAILURE
        }
        Err(CliError::Interrupted(e, signal)) => {
            if root {
                eprintln!("{e}");
            }
            ExitCode::from((128 + signal).min(255) as u8)
        }
    };
    // `ranks` lives to here: dropping it (at the end of this scope) finalises MPI after every
    // rank has printed and before the exit status is returned.
    code
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("MOTE_LOG").unwrap_or_else(|_| {
        EnvFilter::new(match verbose {
            0 => "warn",
            1 => "debug",
            _ => "trace",
        })
    });
    // Colours only on a terminal: escape codes in a log file or a pipe are noise.
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
