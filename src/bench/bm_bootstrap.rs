//! BM-bootstrap (`hemem bench bm-bootstrap`): the hybrid-UM paper's
//! bootstrapping benchmark (Choi et al., §III-C and §IV, Figures 6, 7 and
//! 10). Every bootstrappable preset of a list is bootstrapped in sequence as
//! one workload — parameters, keys and diagonals made for a preset, used,
//! and dropped before the next one — which is also the recording workload
//! of the `profiled` policy.
//!
//! 1. **Recording pass.** Each preset under the recording policy (default
//!    `static`, the paper's) with its allocation trace recorded; per preset,
//!    key setup time, the bootstraps' median/min/max, precision, and peak
//!    pooled and peak live bytes. The per-preset traces are merged into one
//!    trace of the whole workload (ids renumbered in order, times shifted
//!    onto the workload's clock) for `hemem trace analyze`'s lifetime
//!    histogram and scatter.
//! 2. **Threshold sweep** (optional). For each cap fraction f, each preset
//!    again under `profiled`, replaying its recording with the cap on peak
//!    pooled bytes set to f × the peak of live bytes in the recording (f = 1:
//!    everything short-lived may be pooled), as the paper's "peak
//!    asynchronous memory threshold". The figure plots bootstrap time against
//!    f, one line per preset (Figure 10).
//!
//! A preset that fails (over the budget, out of memory, a divergence from
//! its recording) is a row with that status; the workload goes on.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hemem_bootstrap::linear_transform::DiagonalStorage;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use hemem_memory::policy::{Divergence, PolicyKind};
use hemem_memory::trace::analysis::peaks_for_threshold;
use hemem_memory::trace::{ProfileSettings, Trace};
use hemem_memory::{AllocationId, MemoryConfig, PolicyConfig, ProfiledConfig};
use serde::{Deserialize, Serialize};

use crate::bench::measure::{Summary, peak_pooled_bytes, time_runs};
use crate::bench::oversub::{Budget, CellStatus};
use crate::bench::workload::BootstrapWorkload;
use crate::plot::{Panel, Series, line_panels};
use crate::{Error, Result};

/// What BM-bootstrap runs.
#[derive(Debug, Clone, PartialEq)]
pub struct BmSettings {
    /// Presets in workload order; those that cannot bootstrap are left out.
    pub presets: Vec<Preset>,
    /// `cpu`, `gpu:N` or `auto`.
    pub device: DeviceSelection,
    /// The device budget.
    pub budget: Budget,
    /// The recording pass's policy (`static` in the paper).
    pub policy: PolicyKind,
    /// Bootstraps per preset.
    pub iterations: usize,
    /// Cap fractions of the threshold sweep (0–1); empty: no sweep.
    pub thresholds: Vec<f64>,
    /// The profiled replays' lifetime threshold (allocations living less
    /// are pooled while the cap allows).
    pub lifetime_threshold: Duration,
    /// What a replay that leaves its recording does.
    pub on_divergence: Divergence,
    /// Folder for the CSV, traces, markdown and figure.
    pub out: PathBuf,
}

impl Default for BmSettings {
    fn default() -> Self {
        Self {
            presets: Preset::HEAAN.to_vec(),
            device: DeviceSelection::Gpu(0),
            budget: Budget::NONE,
            policy: PolicyKind::Static,
            iterations: 3,
            thresholds: Vec::new(),
            lifetime_threshold: ProfileSettings::default().lifetime_threshold,
            on_divergence: Divergence::Error,
            out: PathBuf::from("bm-bootstrap"),
        }
    }
}

/// One preset of one pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BmRow {
    /// `record` (the recording pass) or `profiled`.
    pub pass: String,
    /// The cap fraction of a profiled replay, in percent.
    pub threshold_pct: Option<f64>,
    /// The preset.
    pub preset: String,
    /// The policy that ran.
    pub policy: String,
    /// How it ended.
    pub status: CellStatus,
    /// Key generation and diagonal encoding.
    pub setup_ms: Option<f64>,
    /// Median bootstrap.
    pub median_ms: Option<f64>,
    /// Fastest bootstrap.
    pub min_ms: Option<f64>,
    /// Slowest bootstrap.
    pub max_ms: Option<f64>,
    /// Bits of precision of the last bootstrap (real parts).
    pub precision_bits: Option<f64>,
    /// The most bytes pooled on the device at once (0 on the CPU).
    pub peak_pooled_bytes: Option<u64>,
    /// The most bytes live at once, every placement.
    pub peak_bytes: Option<u64>,
    /// The profiled replay's cap on pooled bytes.
    pub pool_cap_bytes: Option<u64>,
    /// Why there is no measurement; empty otherwise.
    pub reason: String,
}

/// What [`run_bm_bootstrap`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct BmReport {
    /// Every row, recording pass first.
    pub rows: Vec<BmRow>,
    /// The merged allocation trace of the recording pass (for
    /// `hemem trace analyze`).
    pub trace: PathBuf,
    /// The CSV of the rows.
    pub csv: PathBuf,
    /// The markdown summary.
    pub markdown: PathBuf,
    /// The threshold figure, when there was a sweep.
    pub plot: Option<PathBuf>,
}

/// What one preset's run measured.
struct Measured {
    setup_ms: f64,
    times: Vec<f64>,
    precision_bits: f64,
    peak_pooled: u64,
    peak: u64,
}

fn parameters(preset: Preset) -> Result<Parameters> {
    Ok(Parameters::from_preset_with(
        preset,
        SecurityCheck::for_preset(preset),
    )?)
}

/// The presets of `list` that can be bootstrapped, in order.
///
/// # Errors
/// Parameter errors.
pub fn bootstrappable(list: &[Preset]) -> Result<Vec<Preset>> {
    let mut out = Vec::new();
    for &p in list {
        if parameters(p)?.post_bootstrap_level().is_some() && !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// Bootstraps `preset` `iterations` times under `config`, then writes the
/// trace if `config` records one.
fn run_preset(preset: Preset, settings: &BmSettings, config: &MemoryConfig) -> Result<Measured> {
    let context = Context::with_memory(parameters(preset)?, settings.device, config)?;
    let mut sampler = Sampler::from_os()?;
    let workload =
        // Compact, not `Fit`: policies are compared on the same data, whatever
        // room each leaves.
        BootstrapWorkload::generate(&context, None, DiagonalStorage::Compact, &mut sampler)?;
    let mut last = None;
    let times = time_runs(
        &context,
        settings.iterations.max(1),
        || Ok(()),
        |()| {
            last = Some(workload.bootstrapper.bootstrap_real(&workload.input)?);
            Ok(())
        },
    )?;
    let error = match &last {
        Some(out) => workload.max_error(&context, out)?,
        None => f64::NAN,
    };
    drop(last);
    let statistics = context.memory_statistics();
    let allocator = context.backend().allocator().clone();
    let setup_ms = workload.setup_ms;
    drop((workload, context));
    allocator.write_trace()?;
    Ok(Measured {
        setup_ms,
        times,
        precision_bits: -error.log2(),
        peak_pooled: peak_pooled_bytes(&statistics),
        peak: statistics.total().bytes.peak,
    })
}

fn row(
    pass: &str,
    threshold_pct: Option<f64>,
    preset: Preset,
    policy: PolicyKind,
    pool_cap_bytes: Option<u64>,
    result: Result<Measured>,
) -> BmRow {
    let mut row = BmRow {
        pass: pass.into(),
        threshold_pct,
        preset: preset.name().into(),
        policy: policy.name().into(),
        status: CellStatus::Ok,
        setup_ms: None,
        median_ms: None,
        min_ms: None,
        max_ms: None,
        precision_bits: None,
        peak_pooled_bytes: None,
        peak_bytes: None,
        pool_cap_bytes,
        reason: String::new(),
    };
    match result {
        Ok(m) => {
            let summary = Summary::of(&m.times);
            row.setup_ms = Some(m.setup_ms);
            row.median_ms = summary.map(|s| s.median);
            row.min_ms = summary.map(|s| s.min);
            row.max_ms = summary.map(|s| s.max);
            row.precision_bits = Some(m.precision_bits).filter(|b| b.is_finite());
            row.peak_pooled_bytes = Some(m.peak_pooled);
            row.peak_bytes = Some(m.peak);
        }
        Err(e) => {
            row.status = CellStatus::of_error(&e);
            row.reason = e.with_causes();
        }
    }
    row
}

/// The per-preset traces as one: ids renumbered in workload order, times
/// shifted by each preset's start on the workload's clock.
pub fn merge_traces(parts: &[(u64, Trace)]) -> Trace {
    let mut merged = Trace::default();
    let mut next_id = 0u64;
    for (offset_ns, trace) in parts {
        let base = next_id;
        for r in &trace.records {
            let mut r = *r;
            r.id = AllocationId(base + r.id.0);
            next_id = next_id.max(r.id.0);
            r.alloc_ns += offset_ns;
            r.free_ns = r.free_ns.map(|f| f + offset_ns);
            merged.records.push(r);
        }
    }
    merged
}

fn write_rows(path: &Path, rows: &[BmRow]) -> Result<()> {
    let csv_error = |source| Error::Csv {
        path: path.to_path_buf(),
        source,
    };
    let mut writer = csv::Writer::from_path(path).map_err(csv_error)?;
    for r in rows {
        writer.serialize(r).map_err(csv_error)?;
    }
    writer.flush().map_err(Error::io("writing", path))
}

fn markdown(rows: &[BmRow], settings: &BmSettings) -> String {
    use std::fmt::Write as _;
    let mut md = String::from("# BM-bootstrap\n\n");
    let _ = writeln!(
        md,
        "Every bootstrappable preset in sequence, {} bootstrap{} each, on {}, budget {}; \
         recording policy {}. Milliseconds per bootstrap, median (min–max); peaks in MiB.\n",
        settings.iterations,
        if settings.iterations == 1 { "" } else { "s" },
        settings.device,
        settings.budget,
        settings.policy
    );
    let _ = writeln!(
        md,
        "| pass | cap % | preset | policy | status | setup ms | bootstrap ms | bits | peak pooled | peak live | cap |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    let mib = |b: Option<u64>| {
        b.map_or_else(
            || "–".into(),
            |b| format!("{:.1}", b as f64 / (1u64 << 20) as f64),
        )
    };
    for r in rows {
        let time = match (r.median_ms, r.min_ms, r.max_ms) {
            (Some(m), Some(lo), Some(hi)) => format!("{m:.1} ({lo:.1}–{hi:.1})"),
            _ => r.status.mark().to_owned(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {time} | {} | {} | {} | {} |",
            r.pass,
            r.threshold_pct
                .map_or_else(String::new, |t| format!("{t:.0}")),
            r.preset,
            r.policy,
            r.status,
            r.setup_ms.map_or_else(|| "–".into(), |s| format!("{s:.0}")),
            r.precision_bits
                .map_or_else(|| "–".into(), |b| format!("{b:.1}")),
            mib(r.peak_pooled_bytes),
            mib(r.peak_bytes),
            mib(r.pool_cap_bytes),
        );
    }
    md
}

/// The threshold figure: bootstrap median against the cap fraction, one
/// line per preset (the paper's Figure 10).
///
/// # Errors
/// [`Error::Plot`], [`Error::Font`].
pub fn plot_thresholds(path: &Path, rows: &[BmRow]) -> Result<()> {
    let mut presets: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.threshold_pct.is_some()) {
        if !presets.contains(&r.preset.as_str()) {
            presets.push(&r.preset);
        }
    }
    let series = presets
        .iter()
        .map(|p| Series {
            name: (*p).to_owned(),
            points: rows
                .iter()
                .filter(|r| r.preset == *p)
                .filter_map(|r| Some((r.threshold_pct?, r.median_ms?)))
                .collect(),
        })
        .collect();
    line_panels(
        path,
        &[Panel {
            title: "BM-bootstrap under profiled: time against the pooled-bytes cap".into(),
            x_label: "cap on peak pooled bytes (% of the recording's peak live bytes)".into(),
            y_label: "median ms per bootstrap".into(),
            series,
            x_ticks: |x| format!("{x:.0}"),
        }],
    )
}

/// A step of [`run_bm_bootstrap`] as it starts: which pass, threshold and
/// preset, and how many steps are done of how many (the total shrinks when
/// a preset's recording fails: it has nothing to replay).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BmStep<'a> {
    /// `record` or `profiled`.
    pub pass: &'a str,
    /// The profiled pass's cap, in percent of the recording's peak.
    pub threshold_pct: Option<f64>,
    /// The preset about to run.
    pub preset: Preset,
    /// Steps finished.
    pub done: u64,
    /// Steps in all.
    pub total: u64,
}

/// Runs BM-bootstrap as [`BmSettings`] says and writes, into `settings.out`:
/// `bm-bootstrap.csv`, `bm-bootstrap.md`, `traces/bm-<preset>.csv` (each
/// preset's recording), `bm-bootstrap-trace.csv` (the merged trace) and,
/// with thresholds, `bm-bootstrap-threshold.png`. `observer` hears each
/// step as it starts ([`BmStep`]).
///
/// # Errors
/// [`Error::EmptyAxis`] when no preset of the list bootstraps; file errors.
/// A preset's own failure is its row's status.
pub fn run_bm_bootstrap(
    settings: &BmSettings,
    observer: &mut dyn FnMut(BmStep<'_>),
) -> Result<BmReport> {
    let presets = bootstrappable(&settings.presets)?;
    if presets.is_empty() {
        return Err(Error::EmptyAxis { axis: "presets" });
    }
    let traces = settings.out.join("traces");
    std::fs::create_dir_all(&traces).map_err(Error::io("creating", &traces))?;
    let mut base = MemoryConfig::from_env()?;
    base.budget = settings.budget.setting();
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut recorded: Vec<(Preset, PathBuf, u64)> = Vec::new();
    let passes = 1 + settings.thresholds.len() as u64;
    let mut total = presets.len() as u64 * passes;
    let mut done = 0;
    for &preset in &presets {
        observer(BmStep {
            pass: "record",
            threshold_pct: None,
            preset,
            done,
            total,
        });
        done += 1;
        let path = traces.join(format!("bm-{}.csv", preset.name()));
        let offset = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let config = MemoryConfig {
            policy: PolicyConfig::from_kind(settings.policy, None)?,
            record_trace: Some(path.clone()),
            ..base.clone()
        };
        let result = run_preset(preset, settings, &config);
        if result.is_ok() {
            recorded.push((preset, path, offset));
        } else {
            total -= passes - 1;
        }
        rows.push(row("record", None, preset, settings.policy, None, result));
    }
    let mut parts = Vec::new();
    for (_, path, offset) in &recorded {
        parts.push((*offset, Trace::read_file(path)?));
    }
    let trace_path = settings.out.join("bm-bootstrap-trace.csv");
    merge_traces(&parts).write_file(&trace_path)?;

    for &fraction in &settings.thresholds {
        for ((preset, path, _), (_, trace)) in recorded.iter().zip(&parts) {
            let pct = fraction * 100.0;
            observer(BmStep {
                pass: "profiled",
                threshold_pct: Some(pct),
                preset: *preset,
                done,
                total,
            });
            done += 1;
            let all_pooled = peaks_for_threshold(trace, Duration::MAX).pool;
            let cap = (all_pooled as f64 * fraction.max(0.0)) as u64;
            let config = MemoryConfig {
                policy: PolicyConfig::Profiled(ProfiledConfig {
                    trace: path.clone(),
                    lifetime_threshold: settings.lifetime_threshold,
                    peak_pool_cap: Some(cap),
                    on_divergence: settings.on_divergence,
                }),
                record_trace: None,
                ..base.clone()
            };
            let result = run_preset(*preset, settings, &config);
            rows.push(row(
                "profiled",
                Some(pct),
                *preset,
                PolicyKind::Profiled,
                Some(cap),
                result,
            ));
        }
    }

    let csv = settings.out.join("bm-bootstrap.csv");
    write_rows(&csv, &rows)?;
    let markdown_path = settings.out.join("bm-bootstrap.md");
    std::fs::write(&markdown_path, markdown(&rows, settings))
        .map_err(Error::io("writing", &markdown_path))?;
    let plot = if settings.thresholds.is_empty() {
        None
    } else {
        let path = settings.out.join("bm-bootstrap-threshold.png");
        plot_thresholds(&path, &rows)?;
        Some(path)
    };
    Ok(BmReport {
        rows,
        trace: trace_path,
        csv,
        markdown: markdown_path,
        plot,
    })
}

#[cfg(test)]
mod tests {
    use hemem_memory::{MemoryClass, Placement, StreamId};

    use super::*;

    fn trace(records: &[(u64, u64, Option<u64>)]) -> Trace {
        Trace {
            records: records
                .iter()
                .map(
                    |&(id, alloc_ns, free_ns)| hemem_memory::trace::TraceRecord {
                        id: AllocationId(id),
                        class: MemoryClass::Temporary,
                        bytes: 64,
                        placement: Placement::Host,
                        stream: StreamId::Compute,
                        alloc_ns,
                        free_ns,
                    },
                )
                .collect(),
        }
    }

    #[test]
    fn traces_merge_onto_one_clock_with_fresh_ids() {
        let a = trace(&[(1, 0, Some(10)), (2, 5, None)]);
        let b = trace(&[(1, 0, Some(3))]);
        let merged = merge_traces(&[(0, a), (100, b)]);
        let ids: Vec<u64> = merged.records.iter().map(|r| r.id.0).collect();
        assert_eq!(ids, [1, 2, 3]);
        let last = merged.records.last().expect("record");
        assert_eq!((last.alloc_ns, last.free_ns), (100, Some(103)));
    }

    #[test]
    fn only_bootstrappable_presets_run() {
        let all = bootstrappable(&Preset::TEST).expect("params");
        assert!(!all.is_empty());
        for p in &all {
            assert!(
                parameters(*p)
                    .expect("params")
                    .post_bootstrap_level()
                    .is_some()
            );
        }
        let settings = BmSettings {
            presets: Vec::new(),
            ..BmSettings::default()
        };
        assert!(matches!(
            run_bm_bootstrap(&settings, &mut |_| {}),
            Err(Error::EmptyAxis { axis: "presets" })
        ));
    }
}
