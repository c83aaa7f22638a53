//! `hemem bench oversub` and `hemem bench bm-bootstrap`, end to end on the
//! CPU with test presets, and the figures drawn from the committed sample
//! CSV (synthetic numbers, not measurements).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use std::path::Path;

use common::{hemem, hemem_json};
use hemem::bench::oversub::CellStatus;
use hemem::bench::oversub::output::{read_csv, write_report};

fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(bytes.get(1..4), Some(&b"PNG"[..]), "{}", path.display());
}

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/oversub/sample.csv");

#[test]
fn the_sample_csv_renders_figures_and_a_report() {
    let records = read_csv(Path::new(SAMPLE)).unwrap();
    assert!(records.iter().all(|r| r.device == "sample"));
    assert!(records.iter().any(|r| r.status == CellStatus::OverBudget));
    assert!(records.iter().any(|r| r.status == CellStatus::Timeout));

    // Through the library…
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("sample.csv");
    std::fs::copy(SAMPLE, &csv).unwrap();
    let report = write_report(&csv, None).unwrap();
    assert_eq!(report.plots.len(), 2, "one figure per budget");
    for p in &report.plots {
        assert_png(p);
    }
    let md = std::fs::read_to_string(&report.markdown).unwrap();
    assert!(md.contains("## Budget 2GiB") && md.contains("## Budget 6GiB"));
    assert!(md.contains("over budget") && md.contains("timeout"));

    // …and through `--plot-only`, which runs nothing.
    let other = tempfile::tempdir().unwrap();
    let csv = other.path().join("figures.csv");
    std::fs::copy(SAMPLE, &csv).unwrap();
    let out = hemem(&["bench", "oversub", "--plot-only", csv.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_png(&other.path().join("figures-2GiB.png"));
    assert_png(&other.path().join("figures-6GiB.png"));
    assert!(other.path().join("figures.md").is_file());
    assert_eq!(read_csv(&csv).unwrap(), records, "the CSV is left alone");
}

#[test]
fn a_tiny_sweep_runs_through_child_processes_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("sweep.csv");
    let args = [
        "bench",
        "oversub",
        "--presets",
        "test-FTb",
        "--budgets",
        "none",
        "--policies",
        "device",
        "--ops",
        "add",
        "--device",
        "cpu",
        "--warmup",
        "1",
        "--iterations",
        "3",
        "--time-limit",
        "120",
        "--csv",
        csv.to_str().unwrap(),
    ];
    let out = hemem(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = read_csv(&csv).unwrap();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(
        (
            r.preset.as_str(),
            r.budget.as_str(),
            r.policy.as_str(),
            r.op.as_str()
        ),
        ("test-FTb", "none", "device", "add")
    );
    assert_eq!(r.status, CellStatus::Ok, "{}", r.reason);
    assert_eq!((r.device.as_str(), r.warmup, r.iterations), ("cpu", 1, 3));
    let (lo, mid, hi) = (r.min_ms.unwrap(), r.median_ms.unwrap(), r.max_ms.unwrap());
    assert!(0.0 < lo && lo <= mid && mid <= hi);
    // No GPU: the GPU's counters are empty, not zero.
    assert_eq!(r.gpu_page_faults, None);
    assert_eq!(r.cupti_htod_bytes, None);
    assert!(dir.path().join("sweep.md").is_file());
    assert_png(&dir.path().join("sweep-none.png"));

    // The same sweep again: the cell is in the CSV, nothing runs.
    let out = hemem(&args);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 of 1 cells already in"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read_csv(&csv).unwrap(), records);
}

#[test]
fn the_cell_command_prints_one_json_record() {
    let record = hemem_json(&[
        "bench",
        "oversub-cell",
        "--preset",
        "test-FTb",
        "--budget",
        "2GiB",
        "--policy",
        "static",
        "--op",
        "rotate",
        "--device",
        "cpu",
        "--warmup",
        "0",
        "--iterations",
        "2",
    ]);
    assert_eq!(record["status"], "ok");
    assert_eq!(record["op"], "rotate");
    assert_eq!(record["budget"], "2GiB");
    assert!(record["gpu_page_faults"].is_null());
    let bad = hemem(&["bench", "oversub", "--ops", "divide", "--device", "cpu"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown operation"));
}

/// A `manual-swap` cell runs the inference with its weights swapped by
/// hand under the `device` policy and reports under its own policy name; a
/// sweep asking manual-swap of other operations only says why it has no
/// cell.
#[test]
fn a_manual_swap_inference_cell_runs_and_other_operations_are_refused() {
    let record = hemem_json(&[
        "bench",
        "oversub-cell",
        "--preset",
        "test-FGb",
        "--budget",
        "2GiB",
        "--policy",
        "manual-swap",
        "--op",
        "inference",
        "--device",
        "cpu",
        "--warmup",
        "0",
        "--iterations",
        "1",
    ]);
    assert_eq!(record["status"], "ok", "{record}");
    assert_eq!(record["policy"], "manual-swap");
    assert_eq!(record["op"], "inference");
    assert!(record["median_ms"].as_f64().unwrap() > 0.0);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("swap.csv");
    let bad = hemem(&[
        "bench",
        "oversub",
        "--presets",
        "test-FTb",
        "--policies",
        "manual-swap",
        "--ops",
        "add,rotate",
        "--device",
        "cpu",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("manual-swap runs the inference operation only"),
        "{stderr}"
    );
    assert!(!csv.exists(), "no cell ran");
    let unknown = hemem(&["bench", "oversub", "--policies", "swap", "--device", "cpu"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown sweep policy"));
}

#[test]
fn bm_bootstrap_runs_test_presets_in_sequence_and_sweeps_the_pool_cap() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("bm");
    let out = hemem(&[
        "bench",
        "bm-bootstrap",
        "--presets",
        "test-FTb,test-FTa",
        "--device",
        "cpu",
        "--iterations",
        "1",
        "--thresholds",
        "50,100",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut reader = csv::Reader::from_path(out_dir.join("bm-bootstrap.csv")).unwrap();
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = reader
        .deserialize::<std::collections::HashMap<String, String>>()
        .map(|r| {
            r.unwrap()
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::from(v)))
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 2 + 2 * 2, "two recordings, two replays per cap");
    let presets: Vec<&str> = rows.iter().map(|r| r["preset"].as_str().unwrap()).collect();
    assert_eq!(presets[..2], ["test-FTb", "test-FTa"], "in the order given");
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r:?}");
        let bits: f64 = r["precision_bits"].as_str().unwrap().parse().unwrap();
        assert!(bits > 10.0, "{r:?}");
    }
    assert!(
        rows.iter()
            .filter(|r| r["pass"] == "profiled")
            .all(|r| r["policy"] == "profiled")
    );
    assert_png(&out_dir.join("bm-bootstrap-threshold.png"));
    assert!(out_dir.join("bm-bootstrap.md").is_file());
    // The merged trace is `hemem trace analyze`'s input; the command ran it.
    let trace =
        hemem::memory::trace::Trace::read_file(&out_dir.join("bm-bootstrap-trace.csv")).unwrap();
    assert!(!trace.records.is_empty());
    assert_png(&out_dir.join("bm-bootstrap-trace-lifetimes.png"));
    assert_png(&out_dir.join("bm-bootstrap-trace-scatter.png"));
    assert_png(&out_dir.join("bm-bootstrap-trace-peaks.png"));
}
