//! `hemem bench oversub`: the oversubscription sweep (presets × budgets ×
//! policies × operations), and its hidden per-cell child
//! `hemem bench oversub-cell`. The engine is [`hemem::bench::oversub`]; this
//! module parses arguments, draws the progress bar (on a terminal) and
//! prints where the results went.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use hemem::bench::oversub::{
    self, Budget, Cell, CellSettings, CellStatus, ChildProcessRunner, Operation, SweepEvent,
    SweepPolicy, SweepSpec, TraceFiles,
};
use hemem_ckks::prelude::Preset;
use hemem_memory::policy::Divergence;

use crate::cli::device::DeviceArgs;
use crate::cli::memory::OnDivergence;

/// Arguments of `hemem bench oversub`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("device", |a| a.default_value("gpu")))]
pub struct Args {
    /// Presets (comma-separated; any preset by name, test-* included).
    #[arg(long, value_delimiter = ',', default_value = "FGa,FGb,FVb")]
    presets: Vec<String>,
    /// Device budgets (comma-separated byte sizes, or none for the card's
    /// free memory minus 512 MiB).
    #[arg(long, value_delimiter = ',', default_value = "2GiB,4GiB,6GiB,none")]
    budgets: Vec<String>,
    /// Policies (comma-separated): the memory policies, and manual-swap
    /// (the device policy with the inference network's weights swapped to
    /// and from host memory by hand, layer by layer; inference cells only).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "device,managed,static,profiled,dynamic,planned"
    )]
    policies: Vec<String>,
    /// Operations (comma-separated): add, mult, rotate, conjugate, bootstrap,
    /// bootstrap_batchB (B ciphertexts stage by stage; time per ciphertext),
    /// inference (one image through the ResNet-20-shaped network).
    #[arg(
        long,
        alias = "operations",
        value_delimiter = ',',
        default_value = "add,mult,rotate,conjugate,bootstrap,bootstrap_batch4"
    )]
    ops: Vec<String>,
    /// Untimed runs per cell.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Timed runs per cell (median, min, max).
    #[arg(long, default_value_t = 5, value_parser = super::super::at_least_one)]
    iterations: usize,
    #[command(flatten)]
    device: DeviceArgs,
    /// Seconds a cell may run before it is killed and marked timeout (a
    /// profiled cell's recording run gets as long again).
    #[arg(long, default_value_t = 900.0, value_name = "SECONDS", value_parser = super::super::positive_seconds)]
    time_limit: f64,
    /// The results CSV: cells it already holds are skipped (resume); the
    /// markdown report and PNG figures are written beside it.
    #[arg(long, default_value = "oversub/oversub.csv")]
    csv: PathBuf,
    /// Render the markdown and the figures from this CSV without running
    /// anything.
    #[arg(long, value_name = "CSV", conflicts_with = "csv")]
    plot_only: Option<PathBuf>,
    /// Do not count unified-memory traffic, page faults and copies with
    /// CUPTI on the GPU.
    #[arg(long)]
    no_cupti: bool,
    /// profiled: what a replay that leaves its recording does.
    #[arg(long, value_enum, default_value_t = OnDivergence::Error)]
    on_divergence: OnDivergence,
}

/// Arguments of the hidden `hemem bench oversub-cell`: one cell, one JSON
/// line on standard output.
#[derive(Debug, clap::Args)]
#[command(mut_arg("device", |a| a.default_value("gpu")))]
pub struct CellArgs {
    #[arg(long)]
    preset: String,
    #[arg(long)]
    budget: String,
    #[arg(long)]
    policy: String,
    #[arg(long)]
    op: String,
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    #[arg(long, default_value_t = 5, value_parser = super::super::at_least_one)]
    iterations: usize,
    #[command(flatten)]
    device: DeviceArgs,
    #[arg(long)]
    no_cupti: bool,
    #[arg(long, value_enum, default_value_t = OnDivergence::Error)]
    on_divergence: OnDivergence,
    /// Write the cell's allocation trace here (a profiled cell's recording).
    #[arg(long)]
    record_trace: Option<PathBuf>,
    /// The recording a profiled cell replays.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Exit as soon as standard input closes (the sweep that started this
    /// cell has gone).
    #[arg(long)]
    exit_with_parent: bool,
}

/// Exits the process when standard input reaches its end: the parent sweep
/// holds the other end of the pipe until it has the cell's report.
fn exit_with_parent() {
    std::thread::spawn(|| {
        use std::io::Read as _;
        let mut byte = [0u8; 1];
        loop {
            match std::io::stdin().read(&mut byte) {
                Ok(0) | Err(_) => std::process::exit(3),
                Ok(_) => {}
            }
        }
    });
}

fn divergence(d: OnDivergence) -> Divergence {
    match d {
        OnDivergence::Error => Divergence::Error,
        OnDivergence::Static => Divergence::FallBackToStatic,
    }
}

fn parse_all<T: std::str::FromStr>(items: &[String]) -> anyhow::Result<Vec<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    items
        .iter()
        .map(|s| s.trim().parse::<T>().with_context(|| format!("{s:?}")))
        .collect()
}

/// Runs `hemem bench oversub`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if let Some(csv) = &args.plot_only {
        return report(csv, None);
    }
    let spec = SweepSpec {
        presets: parse_all::<Preset>(&args.presets)?,
        budgets: parse_all::<Budget>(&args.budgets)?,
        policies: parse_all::<SweepPolicy>(&args.policies)?,
        operations: parse_all::<Operation>(&args.ops)?,
    };
    let settings = CellSettings {
        device: args.device.selection()?,
        warmup: args.warmup,
        iterations: args.iterations,
        cupti: !args.no_cupti,
        on_divergence: divergence(args.on_divergence),
    };
    let limit = Duration::try_from_secs_f64(args.time_limit)
        .context("--time-limit must be a non-negative number of seconds")?;
    let trace_dir = args
        .csv
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("traces"), |d| d.join("traces"));
    let mut runner = ChildProcessRunner::current_exe(settings, limit, trace_dir)?;
    let bar = crate::cli::progress::bar("", false);
    let records = oversub::run_sweep(&spec, &mut runner, &args.csv, &mut |event| match event {
        SweepEvent::Planned { total, present } => {
            bar.set_length((total - present) as u64);
            if present > 0 {
                bar.suspend(|| {
                    eprintln!(
                        "{present} of {total} cells already in {}: skipped",
                        args.csv.display()
                    );
                });
            }
        }
        SweepEvent::Started { cell, .. } => bar.set_message(cell.to_string()),
        SweepEvent::Finished { record } => {
            if record.status != CellStatus::Ok {
                bar.suspend(|| {
                    eprintln!(
                        "{} / {} / {} / {}: {}",
                        record.preset, record.budget, record.policy, record.op, record.status
                    );
                });
            }
            bar.inc(1);
        }
    })?;
    bar.finish_and_clear();
    report(&args.csv, Some(&records))
}

fn report(csv: &std::path::Path, records: Option<&[oversub::CellRecord]>) -> anyhow::Result<()> {
    let written = oversub::output::write_report(csv, records)?;
    out!("wrote {}", written.markdown.display());
    for p in &written.plots {
        out!("wrote {}", p.display());
    }
    Ok(())
}

/// Runs `hemem bench oversub-cell`: measures one cell in this process and
/// prints its record as one JSON line (a failure is a status in it).
pub fn run_cell(args: &CellArgs) -> anyhow::Result<()> {
    if args.exit_with_parent {
        exit_with_parent();
    }
    let cell = Cell {
        preset: args.preset.parse()?,
        budget: args.budget.parse()?,
        policy: args.policy.parse()?,
        operation: args.op.parse()?,
    };
    let settings = CellSettings {
        device: args.device.selection()?,
        warmup: args.warmup,
        iterations: args.iterations,
        cupti: !args.no_cupti,
        on_divergence: divergence(args.on_divergence),
    };
    let traces = TraceFiles {
        record: args.record_trace.clone(),
        replay: args.trace.clone(),
    };
    let record = oversub::run_cell(&cell, &settings, &traces);
    out!("{}", serde_json::to_string(&record)?);
    Ok(())
}
