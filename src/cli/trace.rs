//! `hemem trace analyze FILE`: what an allocation trace says — the lifetime
//! histogram (the hybrid-UM paper reports about 92 % of bootstrapping's
//! objects living under one second), and peak pooled and managed bytes if
//! allocations living less than a threshold were pooled — with PNG plots,
//! and the scatter of allocation and free times by allocation id (the
//! paper's Figure 7).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use hemem_memory::trace::analysis::peaks_for_threshold;
use hemem_memory::trace::{LifetimeHistogram, Trace};
use serde::Serialize;

use super::report::human_bytes;
use hemem::plot::{self, Panel, Series};

/// Arguments of `hemem trace`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Lifetime histogram and peak pooled/managed bytes against the lifetime threshold.
    #[command(after_help = "Example:
  hemem trace analyze run.csv --threshold 0.5 --out plots")]
    Analyze(AnalyzeArgs),
}

/// Arguments of `hemem trace analyze`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// The trace (CSV written by --record-trace).
    file: PathBuf,
    /// The lifetime threshold of interest, in seconds.
    #[arg(long, default_value_t = 1.0)]
    threshold: f64,
    /// Folder for the PNG plots (default: beside the trace).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Bucket {
    below_seconds: Option<f64>,
    count: u64,
    bytes: u64,
}

#[derive(Debug, Serialize)]
struct ThresholdRow {
    threshold_seconds: f64,
    peak_pool_bytes: u64,
    peak_managed_bytes: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    file: String,
    allocations: u64,
    bytes: u64,
    span_seconds: f64,
    share_below_1s: f64,
    share_below_threshold: f64,
    threshold_seconds: f64,
    histogram: Vec<Bucket>,
    peaks: Vec<ThresholdRow>,
    plots: Vec<String>,
}

fn bucket_label(below: Option<Duration>, previous: Option<Duration>) -> String {
    let show = |d: Duration| {
        let s = d.as_secs_f64();
        if s >= 1.0 {
            format!("{s:.0}s")
        } else if s >= 1e-3 {
            format!("{:.0}ms", s * 1e3)
        } else {
            format!("{:.0}us", s * 1e6)
        }
    };
    match (previous, below) {
        (None, Some(b)) => format!("<{}", show(b)),
        (Some(p), Some(b)) => format!("{}-{}", show(p), show(b)),
        (Some(p), None) => format!(">={}", show(p)),
        (None, None) => "all".into(),
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned())
}

/// Runs `hemem trace`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    match &args.command {
        Command::Analyze(a) => analyze(a),
    }
}

/// `hemem trace analyze FILE --out OUT` with the default threshold, for
/// commands that write a trace (`hemem bench bm-bootstrap`).
pub fn analyze_file(file: &Path, out: Option<PathBuf>) -> anyhow::Result<()> {
    analyze(&AnalyzeArgs {
        file: file.to_path_buf(),
        threshold: 1.0,
        out,
        json: false,
    })
}

fn analyze(args: &AnalyzeArgs) -> anyhow::Result<()> {
    let threshold = Duration::try_from_secs_f64(args.threshold)
        .context("--threshold must be a non-negative number of seconds")?;
    let trace = Trace::read_file(&args.file)?;
    let histogram = LifetimeHistogram::from_trace(&trace);
    let mut thresholds: Vec<Duration> = LifetimeHistogram::BOUNDS.to_vec();
    if !thresholds.contains(&threshold) {
        thresholds.push(threshold);
        thresholds.sort();
    }
    let peaks: Vec<ThresholdRow> = thresholds
        .iter()
        .map(|&t| {
            let p = peaks_for_threshold(&trace, t);
            ThresholdRow {
                threshold_seconds: t.as_secs_f64(),
                peak_pool_bytes: p.pool,
                peak_managed_bytes: p.managed,
            }
        })
        .collect();
    let out = args.out.clone().unwrap_or_else(|| {
        args.file
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let name = stem(&args.file);
    let mut labels = Vec::new();
    let mut previous = None;
    for b in &histogram.buckets {
        labels.push(bucket_label(b.below, previous));
        previous = b.below;
    }
    let lifetimes_png = out.join(format!("{name}-lifetimes.png"));
    let counts: Vec<f64> = histogram.buckets.iter().map(|b| b.count as f64).collect();
    plot::bars(
        &lifetimes_png,
        "allocation lifetimes",
        &labels,
        &counts,
        "allocations",
    )?;
    let peaks_png = out.join(format!("{name}-peaks.png"));
    let series = |name: &str, f: fn(&ThresholdRow) -> u64| Series {
        name: name.into(),
        points: peaks
            .iter()
            .map(|r| {
                (
                    r.threshold_seconds.max(1e-9).log10(),
                    f(r) as f64 / (1u64 << 20) as f64,
                )
            })
            .collect(),
    };
    plot::line_panels(
        &peaks_png,
        &[Panel {
            title: "peak bytes if lifetimes below the threshold are pooled".into(),
            x_label: "lifetime threshold (log10 seconds)".into(),
            y_label: "peak MiB".into(),
            series: vec![
                series("pooled", |r| r.peak_pool_bytes),
                series("managed", |r| r.peak_managed_bytes),
            ],
            x_ticks: |x| format!("1e{x:.0}"),
        }],
    )?;
    let end = trace.end_ns();
    let start = trace.records.iter().map(|r| r.alloc_ns).min().unwrap_or(0);
    // The paper's Figure 7: when each allocation was made and freed, by id
    // (buffers alive at the end count as freed at the end).
    let scatter_png = out.join(format!("{name}-scatter.png"));
    let seconds = |ns: u64| ns.saturating_sub(start) as f64 * 1e-9;
    plot::scatter(
        &scatter_png,
        &Panel {
            title: "allocations and frees by allocation id".into(),
            x_label: "allocation id".into(),
            y_label: "seconds since the first allocation".into(),
            series: vec![
                Series {
                    name: "freed".into(),
                    points: trace
                        .records
                        .iter()
                        .map(|r| (r.id.0 as f64, seconds(r.free_ns.unwrap_or(end))))
                        .collect(),
                },
                Series {
                    name: "allocated".into(),
                    points: trace
                        .records
                        .iter()
                        .map(|r| (r.id.0 as f64, seconds(r.alloc_ns)))
                        .collect(),
                },
            ],
            x_ticks: |x| format!("{x:.0}"),
        },
    )?;
    let report = Report {
        file: args.file.display().to_string(),
        allocations: histogram.total(),
        bytes: trace
            .records
            .iter()
            .try_fold(0u64, |sum, r| sum.checked_add(r.bytes))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: the allocations' sizes add up to more than 2^64 bytes",
                    args.file.display()
                )
            })?,
        span_seconds: end.saturating_sub(start) as f64 * 1e-9,
        share_below_1s: histogram.share_below(Duration::from_secs(1)),
        share_below_threshold: histogram.share_below(threshold),
        threshold_seconds: threshold.as_secs_f64(),
        histogram: histogram
            .buckets
            .iter()
            .map(|b| Bucket {
                below_seconds: b.below.map(|d| d.as_secs_f64()),
                count: b.count,
                bytes: b.bytes,
            })
            .collect(),
        peaks,
        plots: vec![
            lifetimes_png.display().to_string(),
            peaks_png.display().to_string(),
            scatter_png.display().to_string(),
        ],
    };
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    out!(
        "{}: {} allocations, {} in all, over {:.3} s",
        report.file,
        report.allocations,
        human_bytes(report.bytes),
        report.span_seconds
    );
    out!(
        "{:<12} {:>10} {:>8} {:>12}",
        "lifetime",
        "count",
        "share",
        "bytes"
    );
    for (label, b) in labels.iter().zip(&report.histogram) {
        let share = if report.allocations > 0 {
            100.0 * b.count as f64 / report.allocations as f64
        } else {
            0.0
        };
        out!(
            "{label:<12} {:>10} {share:>7.1}% {:>12}",
            b.count,
            human_bytes(b.bytes)
        );
    }
    if report.threshold_seconds == 1.0 {
        out!("share below 1 s: {:.1} %", 100.0 * report.share_below_1s);
    } else {
        out!(
            "share below 1 s: {:.1} %; below {} s: {:.1} %",
            100.0 * report.share_below_1s,
            report.threshold_seconds,
            100.0 * report.share_below_threshold
        );
    }
    out!(
        "{:>14} {:>14} {:>14}",
        "threshold (s)",
        "peak pooled",
        "peak managed"
    );
    for r in &report.peaks {
        out!(
            "{:>14} {:>14} {:>14}",
            format!("{:e}", r.threshold_seconds),
            human_bytes(r.peak_pool_bytes),
            human_bytes(r.peak_managed_bytes)
        );
    }
    for p in &report.plots {
        out!("wrote {p}");
    }
    Ok(())
}
