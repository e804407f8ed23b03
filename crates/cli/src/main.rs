//! `mote`: the command-line program of the mote particle-simulation engine.

mod bench;
mod info;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mote_core::{Backend, CpuBackend, set_default_backend};

/// mote: particle simulations (self-gravitating N-body, meshless conservation laws) on CPU
/// threads and GPUs.
#[derive(Debug, Parser)]
#[command(name = "mote", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// CPU worker threads (0: one per core).
    #[arg(long, global = true, default_value_t = 0, value_name = "N")]
    threads: usize,

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
    /// Measure kernel performance (prints the kernel that ran, timings and throughput).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    set_default_backend(Backend::Cpu(CpuBackend::threads(cli.threads)));
    let result = match cli.command {
        Command::Info(args) => info::run(&args, cli.threads),
        Command::Bench(cmd) => bench::run(&cmd, cli.threads),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
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
