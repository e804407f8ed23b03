//! `mote`: the command-line program of the mote particle-simulation engine.

mod bench;
mod info;
mod inspect;
mod roofline;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mote_core::{Backend, CpuBackend, set_default_backend};

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
    /// Summarise a snapshot (.vtu), checkpoint (.mote) or diagnostics file (.csv).
    Inspect(inspect::InspectArgs),
    /// Draw the pictures of a run directory (diagnostics.png: energy error and virial ratio).
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
    /// The run directory.
    run_dir: std::path::PathBuf,
}

/// Errors the program reports, each with its exit code.
#[derive(Debug)]
pub enum CliError {
    /// A configuration or command-line mistake: exit code 2.
    Config(String),
    /// A failure while running: exit code 1.
    Run(String),
}

impl From<Box<dyn std::error::Error>> for CliError {
    fn from(e: Box<dyn std::error::Error>) -> Self {
        CliError::Run(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let threads = cli.threads.unwrap_or(0);
    set_default_backend(Backend::Cpu(CpuBackend::threads(threads)));
    let result = match cli.command {
        Command::Info(args) => info::run(&args, threads).map_err(CliError::from),
        Command::Bench(cmd) => bench::run(&cmd, threads).map_err(CliError::from),
        Command::Run(args) => run::run(&args, cli.threads),
        Command::Show(args) => run::show(&args),
        Command::Resume(args) => run::resume(&args, cli.threads),
        Command::Inspect(args) => inspect::run(&args),
        Command::Convergence(args) => run::convergence(&args, cli.threads),
        Command::Plot(args) => mote_io::plot::plot_run(&args.run_dir)
            .map(|files| files.iter().for_each(|f| println!("wrote {}", f.display())))
            .map_err(|e| CliError::Run(e.to_string())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Config(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(CliError::Run(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
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
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
