//! `hemem bench`: benchmarks run from the CLI (GPU ones need a GPU).

mod alloc;
mod bm_bootstrap;
mod ckks;
mod oversub;

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
    #[command(after_help = "Example:
  hemem bench alloc --budget 4GiB --working-sets 50,100,200 --out bench-alloc")]
    Alloc(alloc::Args),
    /// The NTT and the evaluator's operations at a preset's top level
    /// (GPU by default), per memory policy, with the NTT's bandwidth against
    /// a device-to-device copy.
    #[command(after_help = "Examples:
  hemem bench ckks --preset FGb --device gpu --policies device,static
  hemem bench ckks --preset test-FGb --device cpu --ops mult,rotate --json")]
    Ckks(ckks::Args),
    /// The oversubscription sweep: presets × budgets × policies ×
    /// operations, each cell in a child process with a time limit; CSV
    /// (resumable), markdown and PNG figures (`--plot-only CSV` redraws).
    #[command(after_help = "Examples:
  hemem bench oversub --presets FGb --budgets 2GiB,4GiB,none --policies static,planned
  hemem bench oversub --presets test-FGb --device cpu --ops add,mult --csv out/oversub.csv
  hemem bench oversub --plot-only docs/oversub/h100-2026-11-24.csv")]
    Oversub(oversub::Args),
    /// One cell of the sweep, as a child process: prints one JSON line.
    #[command(hide = true)]
    OversubCell(oversub::CellArgs),
    /// BM-bootstrap: bootstrapping on every bootstrappable preset in
    /// sequence as one workload; per-preset time and peak pooled memory,
    /// its allocation trace, and a sweep of the profiled policy's cap on
    /// peak pooled bytes.
    #[command(after_help = "Example:
  hemem bench bm-bootstrap --presets FGa,FGb --budget 4GiB --thresholds 0,20,40,60,80,100")]
    BmBootstrap(bm_bootstrap::Args),
}

/// Runs `hemem bench`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    match &args.command {
        Command::Alloc(a) => alloc::run(a),
        Command::Ckks(a) => ckks::run(a),
        Command::Oversub(a) => oversub::run(a),
        Command::OversubCell(a) => oversub::run_cell(a),
        Command::BmBootstrap(a) => bm_bootstrap::run(a),
    }
}
