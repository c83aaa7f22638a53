//! `hemem bench`: benchmarks run from the CLI (GPU ones need a GPU).

mod alloc;
mod ckks;

/// Arguments of `hemem bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// The reference design's allocation micro-benchmark on the GPU: allocation
    /// and copy latency, and two kernels over working sets of 50–200 % of the
    /// budget with 0–95 % pooled (CSV and PNG).
    Alloc(alloc::Args),
    /// The NTT and the evaluator's operations at a preset's top level
    /// (GPU by default), per memory policy, with the NTT's bandwidth against
    /// a device-to-device copy.
    Ckks(ckks::Args),
}

/// Runs `hemem bench`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    match &args.command {
        Command::Alloc(a) => alloc::run(a),
        Command::Ckks(a) => ckks::run(a),
    }
}
