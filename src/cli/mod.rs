//! Argument parsing and dispatch, one module per subcommand.

/// `println!` that returns an error instead of panicking when stdout is
/// closed (`hemem params | head`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?;
    }};
}

mod bench;
mod bootstrap;
mod demo;
mod keygen;
mod memory;
mod params;
mod report;
mod trace;

use clap::{Parser, Subcommand};
use hemem_ckks::backend::DeviceSelection;
use hemem_ckks::params::{Parameters, Preset, SecurityCheck};

/// CKKS homomorphic encryption with a hybrid CPU/GPU memory system.
#[derive(Debug, Parser)]
#[command(name = "hemem", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the parameter presets (FGa, FGb, FVa, FVb, FVc, FTa, FTb).
    Params(params::Args),
    /// Encrypt random values, multiply, rotate, conjugate, add, square down to
    /// level 3, and report every step's precision and time.
    Demo(demo::Args),
    /// Generate a preset's bootstrapping keys and save them: FILE (bootstrap
    /// key set), FILE.public and FILE.secret (mode 0600), for `--keys FILE`.
    Keygen(keygen::Args),
    /// Run K bootstraps on a preset: time per bootstrap, precision, key-set
    /// and constant sizes, peak memory per class.
    Bootstrap(bootstrap::Args),
    /// Benchmarks (`hemem bench alloc`: the GPU allocation micro-benchmark).
    Bench(bench::Args),
    /// Allocation traces (`hemem trace analyze FILE`).
    Trace(trace::Args),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Params(args) => params::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Bootstrap(args) => bootstrap::run(&args),
        Command::Keygen(args) => keygen::run(&args),
        Command::Trace(args) => trace::run(&args),
    }
}

/// A preset by name and its parameters: the insecure `test-*` presets are
/// allowed (they are named as such), every other one is security-checked.
fn preset_parameters(name: &str) -> anyhow::Result<(Preset, Parameters)> {
    let preset: Preset = name.parse()?;
    let check = if preset.is_test() {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    Ok((preset, Parameters::from_preset_with(preset, check)?))
}

/// The device from `--device` and `--gpu N` (`--gpu` picks the GPU when the
/// device is `gpu`).
fn device_selection(device: &str, gpu: Option<usize>) -> anyhow::Result<DeviceSelection> {
    Ok(match (device, gpu) {
        ("gpu", Some(ordinal)) => DeviceSelection::Gpu(ordinal),
        (name, _) => name.parse()?,
    })
}
