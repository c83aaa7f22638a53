//! The sweep's outputs: the CSV (one [`CellRecord`] per row), a markdown
//! report and PNG figures shaped like the hybrid-UM paper's Figures 11 and 12
//! (one figure per budget; in it one panel per preset, a group of bars per
//! operation, a bar per policy with its min–max whisker, and cells without a
//! number marked by status). All of it can be made from a CSV alone
//! ([`write_report`]).

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use super::cell::{CellRecord, CellStatus};
use crate::plot::{Bar, BarGroup, BarPanel, grouped_bars};
use crate::{Error, Result};

fn csv_error(path: &Path) -> impl Fn(csv::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Csv {
        path: path.clone(),
        source,
    }
}

/// Reads every record of a sweep's CSV (lines starting with `#` are
/// comments: the committed sample says there that it is not measured data).
///
/// # Errors
/// [`Error::Csv`] for a missing, unreadable or malformed file.
pub fn read_csv(path: &Path) -> Result<Vec<CellRecord>> {
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_path(path)
        .map_err(csv_error(path))?;
    reader
        .deserialize()
        .collect::<std::result::Result<Vec<CellRecord>, _>>()
        .map_err(csv_error(path))
}

/// Appends `record` to the CSV at `path`, writing the header first when the
/// file is new or empty, and flushes.
///
/// # Errors
/// [`Error::Io`], [`Error::Csv`].
pub fn append_csv(path: &Path, record: &CellRecord) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(Error::io("opening", path))?;
    let empty = file.metadata().map_err(Error::io("reading", path))?.len() == 0;
    let mut writer = csv::WriterBuilder::new()
        .has_headers(empty)
        .from_writer(file);
    writer.serialize(record).map_err(csv_error(path))?;
    writer.flush().map_err(Error::io("writing", path))
}

/// Distinct values in order of first appearance.
fn ordered(records: &[CellRecord], field: fn(&CellRecord) -> &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for r in records {
        let v = field(r);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn find<'a>(records: &'a [CellRecord], key: [&str; 4]) -> Option<&'a CellRecord> {
    records.iter().rev().find(|r| {
        [
            r.preset.as_str(),
            r.budget.as_str(),
            r.policy.as_str(),
            r.op.as_str(),
        ] == key
    })
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn mib(v: Option<u64>) -> String {
    v.map_or_else(
        || "–".into(),
        |b| format!("{:.1}", b as f64 / (1u64 << 20) as f64),
    )
}

/// The markdown report: per budget a table of median milliseconds (min–max)
/// by preset and operation against policy, then a table of the bytes moved,
/// faults and peaks of every cell, and the reasons of the cells that did not
/// finish. `source` names the CSV.
pub fn markdown(records: &[CellRecord], source: &str) -> String {
    let mut md = String::new();
    let budgets = ordered(records, |r| &r.budget);
    let presets = ordered(records, |r| &r.preset);
    let policies = ordered(records, |r| &r.policy);
    let ops = ordered(records, |r| &r.op);
    let devices = ordered(records, |r| &r.device).join(", ");
    let runs: Vec<String> = {
        let mut v: Vec<String> = records
            .iter()
            .map(|r| format!("{} warm-up + {} timed", r.warmup, r.iterations))
            .collect();
        v.dedup();
        v.sort();
        v.dedup();
        v
    };
    // Writing to a String cannot fail.
    let _ = writeln!(md, "# Oversubscription sweep\n");
    let _ = writeln!(
        md,
        "From `{source}`: {} cells on {devices}; {} runs per cell. Median \
         milliseconds per operation (per ciphertext for a batch), min–max in \
         brackets; cells without a number say why (`over budget`: the budget \
         refused a request; `OOM`: out of memory; `timeout`: killed at the \
         time limit; `crashed`: died without a report).\n",
        records.len(),
        runs.join(", ")
    );
    for budget in &budgets {
        let _ = writeln!(md, "## Budget {budget}\n");
        let _ = writeln!(md, "| preset | operation | {} |", policies.join(" | "));
        let _ = writeln!(md, "|---|---|{}", "---|".repeat(policies.len()));
        for preset in &presets {
            for op in &ops {
                let cells: Vec<String> = policies
                    .iter()
                    .map(|policy| match find(records, [preset, budget, policy, op]) {
                        None => String::new(),
                        Some(r) => match (r.status, r.median_ms, r.min_ms, r.max_ms) {
                            (CellStatus::Ok, Some(m), Some(lo), Some(hi)) => {
                                format!("{} ({}–{})", ms(m), ms(lo), ms(hi))
                            }
                            (status, ..) => status.mark().to_owned(),
                        },
                    })
                    .collect();
                if cells.iter().any(|c| !c.is_empty()) {
                    let _ = writeln!(md, "| {preset} | {op} | {} |", cells.join(" | "));
                }
            }
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "## Memory traffic per run\n");
    let _ = writeln!(
        md,
        "MiB moved per timed run by hemem's count (to device, to host) and by \
         CUPTI's (host→device, device→host), GPU page faults per run (CUPTI, a \
         lower bound), and peaks (MiB). `–`: not measured on this device.\n"
    );
    let _ = writeln!(
        md,
        "| preset | budget | policy | operation | status | to device | to host | CUPTI h→d | CUPTI d→h | faults | peak device-resident | pool peak | peak RSS |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in records {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.preset,
            r.budget,
            r.policy,
            r.op,
            r.status,
            mib(r.to_device_bytes),
            mib(r.to_host_bytes),
            mib(r.cupti_htod_bytes),
            mib(r.cupti_dtoh_bytes),
            r.gpu_page_faults
                .map_or_else(|| "–".into(), |f| f.to_string()),
            mib(r.peak_device_resident_bytes),
            mib(r.pool_peak_bytes),
            mib(r.peak_rss_bytes),
        );
    }
    let unfinished: Vec<&CellRecord> = records
        .iter()
        .filter(|r| r.status != CellStatus::Ok)
        .collect();
    if !unfinished.is_empty() {
        let _ = writeln!(md, "\n## Cells without a measurement\n");
        for r in unfinished {
            let reason: String = r.reason.chars().take(300).collect();
            let _ = writeln!(
                md,
                "- {} / {} / {} / {}: {} — {}",
                r.preset,
                r.budget,
                r.policy,
                r.op,
                r.status,
                reason.replace('|', "/")
            );
        }
    }
    md
}

/// A file name part for a budget (`2GiB`, `none`).
fn slug(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Draws one figure per budget into `dir`, named `{stem}-{budget}.png`:
/// one panel per preset, a group per operation, a bar per policy (median,
/// min–max whisker; a red cross and the status where there is no number),
/// on a log axis. Returns the files written.
///
/// # Errors
/// [`Error::Plot`], [`Error::Font`], [`Error::Io`].
pub fn write_plots(records: &[CellRecord], dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
    let policies = ordered(records, |r| &r.policy);
    let names: Vec<String> = policies.iter().map(|p| (*p).to_owned()).collect();
    let mut written = Vec::new();
    for budget in ordered(records, |r| &r.budget) {
        let in_budget: Vec<CellRecord> = records
            .iter()
            .filter(|r| r.budget == budget)
            .cloned()
            .collect();
        let panels: Vec<BarPanel> = ordered(&in_budget, |r| &r.preset)
            .into_iter()
            .map(|preset| BarPanel {
                title: format!("{preset}, budget {budget}"),
                groups: ordered(&in_budget, |r| &r.op)
                    .into_iter()
                    .map(|op| BarGroup {
                        label: op.to_owned(),
                        bars: policies
                            .iter()
                            .enumerate()
                            .filter_map(|(series, policy)| {
                                let r = find(&in_budget, [preset, budget, policy, op])?;
                                let ok = r.status == CellStatus::Ok;
                                Some(Bar {
                                    series,
                                    value: r.median_ms.filter(|_| ok),
                                    range: r.min_ms.zip(r.max_ms).filter(|_| ok),
                                    mark: (!ok).then(|| r.status.mark().to_owned()),
                                })
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        let path = dir.join(format!("{stem}-{}.png", slug(budget)));
        grouped_bars(
            &path,
            &names,
            "median ms per operation (log scale)",
            true,
            &panels,
        )?;
        written.push(path);
    }
    Ok(written)
}

/// What [`write_report`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The markdown file.
    pub markdown: PathBuf,
    /// The PNG figures, one per budget.
    pub plots: Vec<PathBuf>,
}

/// Writes the markdown report (`{stem}.md`) and the figures
/// (`{stem}-{budget}.png`) beside the CSV at `csv`, from `records` (or, with
/// `None`, from the CSV itself: `--plot-only`).
///
/// # Errors
/// As [`read_csv`] and [`write_plots`]; [`Error::Io`].
pub fn write_report(csv: &Path, records: Option<&[CellRecord]>) -> Result<Report> {
    let read;
    let records = match records {
        Some(r) => r,
        None => {
            read = read_csv(csv)?;
            &read
        }
    };
    let dir = csv
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let stem = csv
        .file_stem()
        .map_or_else(|| "oversub".into(), |s| s.to_string_lossy().into_owned());
    let source = csv.file_name().map_or_else(
        || csv.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let markdown_path = dir.join(format!("{stem}.md"));
    std::fs::write(&markdown_path, markdown(records, &source))
        .map_err(Error::io("writing", &markdown_path))?;
    let plots = write_plots(records, dir, &stem)?;
    Ok(Report {
        markdown: markdown_path,
        plots,
    })
}

#[cfg(test)]
mod tests {
    use hemem_ckks::prelude::{DeviceSelection, Preset};
    use hemem_memory::policy::PolicyKind;

    use super::*;
    use crate::bench::oversub::{Budget, Cell, CellSettings, Operation};

    /// Every sweep CSV committed under `docs/oversub/` still reads, and its
    /// budget keys parse and print back unchanged (`2GiB`, `none`), so a
    /// resumed sweep finds its cells.
    #[test]
    fn committed_csvs_still_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/oversub");
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).expect("docs/oversub") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "csv") {
                continue;
            }
            let records = read_csv(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for r in &records {
                let budget: Budget = r.budget.parse().expect("budget");
                assert_eq!(budget.to_string(), r.budget, "{}", path.display());
            }
            files += 1;
        }
        assert!(
            files >= 2,
            "the committed CSVs are gone from {}",
            dir.display()
        );
    }

    fn record(policy: PolicyKind, op: Operation, status: CellStatus) -> CellRecord {
        let cell = Cell {
            preset: Preset::TestFGb,
            budget: Budget(Some(2 << 30)),
            policy: policy.into(),
            operation: op,
        };
        let settings = CellSettings {
            device: DeviceSelection::Cpu,
            ..CellSettings::default()
        };
        let mut r = CellRecord::unmeasured(&cell, &settings, status, "why, | not");
        if status == CellStatus::Ok {
            r.median_ms = Some(12.5);
            r.min_ms = Some(12.0);
            r.max_ms = Some(14.0);
            r.to_device_bytes = Some(3 << 20);
            r.gpu_page_faults = Some(7);
        }
        r
    }

    #[test]
    fn csv_round_trips_and_appends_under_one_header() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("deep/sweep.csv");
        let rows = [
            record(PolicyKind::Static, Operation::Add, CellStatus::Ok),
            record(
                PolicyKind::Device,
                Operation::Bootstrap,
                CellStatus::OverBudget,
            ),
            record(
                PolicyKind::Managed,
                Operation::BootstrapBatch(4),
                CellStatus::Timeout,
            ),
        ];
        for r in &rows {
            append_csv(&path, r).expect("append");
        }
        assert_eq!(read_csv(&path).expect("read"), rows);
        let text = std::fs::read_to_string(&path).expect("text");
        assert_eq!(text.matches("preset,budget,policy,op,status").count(), 1);
        assert!(text.contains(",over_budget,"));
        // Empty fields for what was not measured, never zeros.
        let line = text.lines().nth(2).expect("row");
        assert!(line.contains(",,,"), "{line}");
        assert!(matches!(
            read_csv(&dir.path().join("missing.csv")),
            Err(Error::Csv { .. })
        ));
    }

    #[test]
    fn markdown_has_a_table_per_budget_and_marks() {
        let rows = [
            record(PolicyKind::Static, Operation::Add, CellStatus::Ok),
            record(PolicyKind::Device, Operation::Add, CellStatus::OverBudget),
            record(PolicyKind::Managed, Operation::Add, CellStatus::Timeout),
        ];
        let md = markdown(&rows, "sweep.csv");
        assert!(md.contains("## Budget 2GiB"), "{md}");
        assert!(md.contains("| preset | operation | static | device | managed |"));
        assert!(
            md.contains("| test-FGb | add | 12.50 (12.00–14.00) | over budget | timeout |"),
            "{md}"
        );
        assert!(md.contains("| test-FGb | 2GiB | static | add | ok | 3.0 | – | – | – | 7 |"));
        assert!(md.contains("- test-FGb / 2GiB / device / add: over_budget — why, / not"));
    }
}
