//! The `hemem` binary, end to end.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::process::Command;

fn hemem(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hemem"))
        .args(args)
        .output()
        .expect("run hemem")
}

#[test]
fn params_json_has_heaan_figures() {
    let out = hemem(&["params", "--json"]);
    assert!(out.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 7);
    let expected = [
        ("FGa", 1555),
        ("FGb", 1555),
        ("FVa", 2070),
        ("FVb", 2292),
        ("FVc", 2341),
        ("FTa", 777),
        ("FTb", 771),
    ];
    for (name, log_qp) in expected {
        let row = rows.iter().find(|r| r["name"] == name).unwrap();
        assert_eq!(row["log_qp"], log_qp, "{name}");
        let dnum = row["dnum"].as_u64().unwrap();
        let limbs = row["q_primes"].as_u64().unwrap() + row["special_primes"].as_u64().unwrap();
        let n = 1u64 << row["log_n"].as_u64().unwrap();
        assert_eq!(
            row["switching_key_bytes"].as_u64().unwrap(),
            dnum * 2 * limbs * n * 8,
            "{name}"
        );
        assert_eq!(row["security_bits"], 128);
        for key in [
            "log_slots",
            "enc_level",
            "post_bootstrap_level",
            "hamming_weight",
            "bootstrap_key_set_bytes",
        ] {
            assert!(row.get(key).is_some(), "{name}: {key}");
        }
    }
}

#[test]
fn demo_reports_precision_as_json() {
    let out = hemem(&["demo", "--preset", "test-FGb", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["preset"], "test-FGb");
    assert_eq!(report["device"], "cpu");
    let steps = report["steps"].as_array().unwrap();
    for op in ["encrypt", "mult", "rotate", "conjugate", "add", "square"] {
        assert!(steps.iter().any(|s| s["op"] == op), "{op}");
    }
    // The squarings end at the lowest user level; test-FGb bootstraps there
    // and squares once more, one level below the level bootstrapping restores.
    let boot = steps
        .iter()
        .position(|s| s["op"] == "bootstrap")
        .expect("test-FGb bootstraps");
    assert!(boot > 0 && boot + 2 == steps.len(), "{steps:?}");
    assert_eq!(steps[boot - 1]["level"], 3, "the chain ends at level 3");
    let restored = steps[boot]["level"].as_u64().unwrap();
    assert!(restored > 3, "bootstrapping restores levels: {restored}");
    assert_eq!(steps[boot + 1]["op"], "square");
    assert_eq!(steps[boot + 1]["level"], restored - 1);
    for step in steps {
        assert!(step["precision_bits"].as_f64().unwrap() > 20.0, "{step}");
        assert!(step["ms"].as_f64().unwrap() >= 0.0);
    }
    let peaks = report["peak_bytes_by_class"].as_object().unwrap();
    assert!(peaks["ciphertext"].as_u64().unwrap() > 0);
    assert!(peaks.contains_key("bootstrap_constant"));
}

#[test]
fn unknown_preset_is_a_clean_error() {
    let out = hemem(&["demo", "--preset", "FGz"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown preset"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn gpu_selection_fails_cleanly_and_auto_falls_back() {
    // Meaningful on a machine without a GPU (CI); on a GPU machine both run.
    let auto = hemem(&["demo", "--preset", "test-FTb", "--device", "auto", "--json"]);
    assert!(
        auto.status.success(),
        "{}",
        String::from_utf8_lossy(&auto.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&auto.stdout).unwrap();
    let device = report["device"].as_str().unwrap().to_owned();
    let gpu = hemem(&["demo", "--preset", "test-FTb", "--device", "gpu"]);
    if device == "cpu" {
        assert!(!gpu.status.success());
        let err = String::from_utf8_lossy(&gpu.stderr);
        assert!(err.contains("no usable GPU"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    } else {
        assert!(gpu.status.success());
    }
}
