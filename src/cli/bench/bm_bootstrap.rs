//! `hemem bench bm-bootstrap`: the hybrid-UM paper's BM-bootstrap. The
//! engine is [`hemem::bench::bm_bootstrap`]; this module parses arguments,
//! draws a progress bar (on a terminal) and runs `hemem trace analyze` on
//! the workload's trace.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use hemem::bench::bm_bootstrap::{BmSettings, run_bm_bootstrap};
use hemem::bench::oversub::Budget;
use hemem_ckks::prelude::Preset;
use hemem_memory::policy::{Divergence, PolicyKind};

use crate::cli::device::DeviceArgs;
use crate::cli::memory::OnDivergence;

/// Arguments of `hemem bench bm-bootstrap`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("device", |a| a.default_value("gpu")))]
pub struct Args {
    /// Presets in workload order (comma-separated); those that cannot
    /// bootstrap are skipped.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "FGa,FGb,FVa,FVb,FVc,FTa,FTb"
    )]
    presets: Vec<String>,
    #[command(flatten)]
    device: DeviceArgs,
    /// Device budget (a byte size, or none for the card's free memory minus
    /// 512 MiB).
    #[arg(long, default_value = "none")]
    budget: String,
    /// The recording pass's policy.
    #[arg(long, default_value = "static")]
    policy: String,
    /// Bootstraps per preset.
    #[arg(long, default_value_t = 3, value_parser = super::super::at_least_one)]
    iterations: usize,
    /// Sweep the profiled policy's cap on peak pooled bytes over these
    /// percentages of the recording's peak live bytes (comma-separated, e.g.
    /// 0,20,40,60,80,100); each replays every preset's recording.
    #[arg(long, value_delimiter = ',', value_name = "PCT")]
    thresholds: Vec<f64>,
    /// The profiled replays' lifetime threshold in seconds.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    lifetime_threshold: f64,
    /// What a replay that leaves its recording does.
    #[arg(long, value_enum, default_value_t = OnDivergence::Error)]
    on_divergence: OnDivergence,
    /// Output folder.
    #[arg(long, default_value = "bm-bootstrap")]
    out: PathBuf,
    /// Do not run `hemem trace analyze` on the workload's trace.
    #[arg(long)]
    no_analyze: bool,
}

/// Runs `hemem bench bm-bootstrap`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let presets = args
        .presets
        .iter()
        .map(|p| p.trim().parse::<Preset>())
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(bad) = args.thresholds.iter().find(|t| !(0.0..=100.0).contains(*t)) {
        anyhow::bail!("--thresholds are percentages from 0 to 100, not {bad}");
    }
    let settings = BmSettings {
        presets,
        device: args.device.selection()?,
        budget: args.budget.parse::<Budget>()?,
        policy: args.policy.parse::<PolicyKind>()?,
        iterations: args.iterations,
        thresholds: args.thresholds.iter().map(|t| t / 100.0).collect(),
        lifetime_threshold: Duration::try_from_secs_f64(args.lifetime_threshold)
            .context("--lifetime-threshold must be a non-negative number of seconds")?,
        on_divergence: match args.on_divergence {
            OnDivergence::Error => Divergence::Error,
            OnDivergence::Static => Divergence::FallBackToStatic,
        },
        out: args.out.clone(),
    };
    let bar = crate::cli::progress::bar("", false);
    let report = run_bm_bootstrap(&settings, &mut |step| {
        bar.set_length(step.total);
        bar.set_position(step.done);
        bar.set_message(match step.threshold_pct {
            Some(p) => format!("{} {p:.0} % {}", step.pass, step.preset),
            None => format!("{} {}", step.pass, step.preset),
        });
    });
    bar.finish_and_clear();
    let report = report?;
    for r in &report.rows {
        let time = r
            .median_ms
            .map_or_else(|| r.status.mark().to_owned(), |m| format!("{m:.1} ms"));
        let cap = r
            .threshold_pct
            .map_or_else(String::new, |t| format!(" cap {t:.0} %"));
        out!("{:<8} {:<10}{cap} {:<9} {time}", r.pass, r.preset, r.policy);
    }
    out!("wrote {}", report.csv.display());
    out!("wrote {}", report.markdown.display());
    out!("wrote {}", report.trace.display());
    if let Some(p) = &report.plot {
        out!("wrote {}", p.display());
    }
    if !args.no_analyze {
        crate::cli::trace::analyze_file(&report.trace, Some(args.out.clone()))?;
    }
    Ok(())
}
