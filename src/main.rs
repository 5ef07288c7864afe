//! `nmpsim`: the command-line front door. It parses arguments, wires the library
//! crates together and prints; all simulation and kernel logic lives in the crates.

mod build_info;
#[macro_use]
mod out;
mod cmd;
mod rundir;
mod signals;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "nmpsim",
    version = build_info::long_version(),
    about = "Simulator and emulation testbed for near-memory processing of DLRM embedding training",
    long_about = None,
    after_help = "Examples:\n  nmpsim demo\n  nmpsim trace gen --profile criteo-kaggle --batches 4 -o kaggle.nmpt\n  nmpsim trace stats kaggle.nmpt\n  nmpsim kernels check --tables 4 --batch 512 --rows 100000 --dim 64\n  nmpsim dram --engine dramsim3 --preset DDR4-3200-x8 --stream random --requests 100000"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job on an embedded default: an RM1-like trace through every primitive.
    Demo(cmd::demo::DemoArgs),
    /// Embedding traces: generate, convert from Criteo TSV, inspect.
    #[command(subcommand)]
    Trace(cmd::trace::TraceCommand),
    /// Embedding primitives: equivalence checks across backends.
    #[command(subcommand)]
    Kernels(cmd::kernels::KernelsCommand),
    /// What this machine offers the GPU paths: CUDA libraries, device 0, the CUDA sources compiled.
    Gpu(cmd::gpu::GpuArgs),
    /// Modelled host CPUs: presets, host files, the model's time of a CPU primitive.
    #[command(subcommand)]
    Host(cmd::host::HostCommand),
    /// DDR4 DRAM engines (DRAMsim3, Ramulator, native): streams, address and embedding traces.
    Dram(cmd::dram::DramCommand),
    /// The NMP pool: embedding primitives on per-rank NMP cores over simulated DDR4 ranks.
    #[command(subcommand)]
    Nmp(cmd::nmp::NmpCommand),
    /// SCARS's communication cost model: traffic per epoch with coalescing and a device cache, and the cache size of least traffic.
    #[command(subcommand)]
    Scars(cmd::scars::ScarsCommand),
    /// Tensor-train (EL-Rec's Eff-TT) tables: the shapes of a model's tables, their size and FLOPs against the dense ones.
    Tt(cmd::tt::TtArgs),
    /// Train a DLRM in Tensor Casting's system modes, with the iteration timeline of each.
    Train(Box<cmd::train::TrainArgs>),
    /// Design-space sweeps: many runs of one command from a TOML spec, one tidy results.csv.
    Sweep(cmd::sweep::SweepCommand),
    /// Charts (SVG and PNG) of a results table: columns of a sweep's results.csv.
    Plot(cmd::plot::PlotArgs),
    /// The Tensor Casting paper's figures and tables: runs, CSV, plots, and a report beside the paper's values.
    Reproduce(cmd::reproduce::ReproduceArgs),
}

/// A binary built for x86-64-v3 (see `.cargo/config.toml`) must not run its
/// kernels on a CPU without AVX2 / FMA: say so instead of dying on an illegal
/// instruction.
fn check_cpu() -> Result<(), String> {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
        return Err(
            "this nmpsim was built for x86-64-v3 (AVX2, FMA) but this CPU lacks them; \
                    rebuild with `RUSTFLAGS= cargo build --release`"
                .into(),
        );
    }
    Ok(())
}

/// `nmpsim trace stats big.nmpt | head` should stop quietly when `head` exits, as
/// Unix tools do, instead of panicking on a broken pipe: restore the default SIGPIPE
/// disposition that the Rust runtime replaces with "ignore".
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a
    // valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The command line with every option that takes a value accepting one that
/// looks like a negative number (`--write-fraction -0.1`): the value then
/// reaches the option's own check, whose error names the option and what it
/// expects, instead of clap's "unexpected argument '-0' found".
fn with_negative_numbers(c: clap::Command) -> clap::Command {
    c.mut_args(|a| {
        if !a.is_positional() && a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(with_negative_numbers)
}

fn main() -> std::process::ExitCode {
    restore_sigpipe();
    signals::install();
    if let Err(e) = check_cpu() {
        eprintln!("error: {e}");
        return std::process::ExitCode::from(2);
    }
    let cli = match with_negative_numbers(Cli::command())
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        // `--help` and `--version` go to stdout like any output: one that
        // cannot be written is an error (clap's own printing ignores it).
        Err(e) if !e.use_stderr() => {
            use std::io::IsTerminal;
            let styled = e.render();
            let text = if std::io::stdout().is_terminal() {
                styled.ansi().to_string()
            } else {
                styled.to_string()
            };
            return match out!("{text}").and_then(|_| out::flush()) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::ExitCode::from(1)
                }
            };
        }
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Trace(c) => cmd::trace::run(c),
        Command::Kernels(c) => cmd::kernels::run(c),
        Command::Gpu(a) => cmd::gpu::run(a),
        Command::Host(c) => cmd::host::run(c),
        Command::Dram(c) => cmd::dram::run(c),
        Command::Nmp(c) => cmd::nmp::run(c),
        Command::Scars(c) => cmd::scars::run(c),
        Command::Tt(a) => cmd::tt::run(a),
        Command::Train(a) => cmd::train::run(*a),
        Command::Sweep(c) => cmd::sweep::run(c),
        Command::Plot(a) => cmd::plot::run(a),
        Command::Reproduce(a) => cmd::reproduce::run(a),
    };
    // A Criteo file whose last line has no line end may have been cut short
    // inside that line's last field, which then still parses.
    for (path, line) in nmpsim_traces::criteo::take_unterminated() {
        eprintln!(
            "warning: {}: line {line}, the last, has no line end; if the file was cut short, that sample's last field is wrong",
            path.display()
        );
    }
    // (What stdout still buffers is written now, not silently dropped at exit.)
    let result = result.and_then(|code| Ok(out::flush().map(|_| code)?));
    match result {
        Ok(code) => code,
        // Said without the context added on the way up: the output is what failed.
        Err(e) if e.downcast_ref::<out::StdoutError>().is_some() => {
            let e = e.downcast_ref::<out::StdoutError>().expect("checked");
            eprintln!("error: {e}");
            std::process::ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
