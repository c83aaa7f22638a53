//! The `hemem` binary, end to end.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use common::{hemem, hemem_json};

#[test]
fn params_json_has_heaan_figures() {
    let rows = hemem_json(&["params", "--json"]);
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

/// A parameter file for FGb's description at N = 2^11 (log QP = 1555, the
/// table's bound 53), named FGb, with `claim` in the file's security slot.
fn forged_parameter_file(claim: Option<u32>) -> Vec<u8> {
    use hemem::ckks::params::{Parameters, Preset, SecurityCheck};
    use hemem::ckks::serialize::{Kind, Writer};
    let mut spec = Preset::FGb.spec();
    spec.log_n = 11;
    spec.log_slots = 10;
    let fingerprint = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure)
        .unwrap()
        .fingerprint();
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out, Kind::Parameters, fingerprint).unwrap();
    w.u32(spec.name.len() as u32).unwrap();
    w.bytes(spec.name.as_bytes()).unwrap();
    w.u32(spec.log_n).unwrap();
    w.u32(spec.log_slots).unwrap();
    for bits in [&spec.q_bits, &spec.p_bits] {
        w.u32(bits.len() as u32).unwrap();
        for &b in bits {
            w.u32(b).unwrap();
        }
    }
    let opt = |v: Option<usize>| v.map_or(u32::MAX, |v| v as u32);
    w.u32(spec.dnum as u32).unwrap();
    w.u32(spec.enc_level as u32).unwrap();
    w.u32(opt(spec.post_bootstrap_level)).unwrap();
    w.u32(spec.user_primes as u32).unwrap();
    w.u32(spec.hamming_weight as u32).unwrap();
    w.u32(opt(claim.map(|c| c as usize))).unwrap();
    w.u8(0).unwrap();
    w.u32(opt(spec.bootstrap_rotation_keys)).unwrap();
    w.finish().unwrap();
    out
}

#[test]
fn params_file_security_is_decided_by_hemem_not_by_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let forged = dir.path().join("forged.params");
    std::fs::write(&forged, forged_parameter_file(Some(128))).unwrap();
    let forged = forged.to_str().unwrap();
    // Refused as insecure, and not loaded even on opt-in: the claim is a lie.
    let out = hemem(&["params", "--file", forged, "--json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("insecure parameters refused"));
    let out = hemem(&["params", "--file", forged, "--json", "--allow-insecure"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("claimed_security_bits"));

    // Without the claim, opting in loads it, at 0 bits.
    let honest = dir.path().join("honest.params");
    std::fs::write(&honest, forged_parameter_file(None)).unwrap();
    let honest = honest.to_str().unwrap();
    let out = hemem(&["params", "--file", honest, "--json"]);
    assert!(!out.status.success());
    let rows = hemem_json(&["params", "--file", honest, "--json", "--allow-insecure"]);
    assert_eq!(rows[0]["name"], "FGb");
    assert_eq!(rows[0]["log_n"], 11);
    assert_eq!(rows[0]["security_bits"], 0);

    // The real FGb, saved and loaded: matched to the preset again.
    let real = dir.path().join("fgb.params");
    let fgb = hemem::ckks::params::Parameters::from_preset(hemem::ckks::params::Preset::FGb);
    hemem::ckks::serialize::Save::save_to_path(&fgb.unwrap(), &real).unwrap();
    let rows = hemem_json(&["params", "--file", real.to_str().unwrap(), "--json"]);
    assert_eq!(rows[0]["security_bits"], 128);
    assert!(
        rows[0]["security_source"]
            .as_str()
            .unwrap()
            .contains("exact structure")
    );
}

/// The text report prints every class's peak in human sizes, the same
/// figures `--json` gives in bytes.
#[test]
fn demo_text_prints_the_peaks_by_class() {
    let text = hemem(&["demo", "--preset", "test-FTb", "--no-bootstrap"]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    let json = hemem(&["demo", "--preset", "test-FTb", "--no-bootstrap", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let peaks = report["peak_bytes_by_class"].as_object().unwrap();
    assert!(!peaks.is_empty());
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "peak memory by class:")
        .skip(1)
        .take(peaks.len())
        .collect();
    assert_eq!(section.len(), peaks.len(), "{text}");
    for (line, (class, bytes)) in section.iter().zip(peaks) {
        let bytes = bytes.as_u64().unwrap();
        let (name, size) = line.trim().split_once(' ').unwrap();
        assert_eq!(name, class, "{text}");
        // The two runs are alike, not identical: compare the unit only.
        let unit = |s: &str| s.trim().rsplit(' ').next().unwrap().to_owned();
        let expected = hemem::memory::ByteSize(bytes).to_string();
        assert_eq!(unit(size), unit(&expected), "{line}");
    }
}

#[test]
fn demo_reports_precision_as_json() {
    let report = hemem_json(&["demo", "--preset", "test-FGb", "--json"]);
    assert_eq!(report["preset"], "test-FGb");
    assert_eq!(report["device"], "cpu");
    let steps = report["steps"].as_array().unwrap();
    for op in ["encrypt", "mult", "rotate", "conjugate", "add", "square"] {
        assert!(steps.iter().any(|s| s["op"] == op), "{op}");
    }
    // The squaring chain ends at level 3, is bootstrapped to test-FGb's
    // post-bootstrap level 12, and squared once more.
    let boot = steps
        .iter()
        .position(|s| s["op"] == "bootstrap")
        .expect("a bootstrap step");
    assert_eq!(steps[boot - 1]["op"], "square");
    assert_eq!(steps[boot - 1]["level"], 3, "the chain ends at level 3");
    assert_eq!(steps[boot]["level"], 12, "the post-bootstrap level");
    assert_eq!(steps.last().unwrap()["op"], "square");
    assert_eq!(steps.last().unwrap()["level"], 11);
    for step in steps {
        assert!(step["precision_bits"].as_f64().unwrap() > 20.0, "{step}");
        assert!(step["ms"].as_f64().unwrap() >= 0.0);
    }
    let peaks = report["peak_bytes_by_class"].as_object().unwrap();
    assert!(peaks["ciphertext"].as_u64().unwrap() > 0);
    assert!(peaks.contains_key("bootstrap_constant"));
}

#[test]
fn bootstrap_command_reports_a_chain_as_json() {
    let report = hemem_json(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--iterations",
        "3",
        "--chain",
        "--json",
    ]);
    assert_eq!(report["output_level"], 4, "test-FTb's post-bootstrap level");
    assert_eq!(report["bootstrap_ms"].as_array().unwrap().len(), 3);
    let chain = report["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 3);
    for step in chain {
        assert!(step["bits"].as_f64().unwrap() > 15.0, "{step}");
    }
    assert!(report["chain_spread_bits"].as_f64().unwrap() < 2.0);
    assert!(report["keys"].as_u64().unwrap() > 0);
    assert!(report["key_set_bytes"].as_u64().unwrap() > 0);
    // `--diagonals fit` (the default) on the CPU keeps everything in full
    // where half the available host memory holds it: encoded diagonals, every
    // key's halves stored.
    assert_eq!(report["diagonal_storage"], "encoded");
    assert_eq!(report["keys_expanded"], report["keys"]);
    let peaks = report["peak_bytes_by_class"].as_object().unwrap();
    assert!(peaks["evaluation_key"].as_u64().unwrap() > 0);
    assert!(peaks["bootstrap_constant"].as_u64().unwrap() > 0);
}

#[test]
fn bootstrap_command_runs_a_batch() {
    let report = hemem_json(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--iterations",
        "1",
        "--batch",
        "3",
        "--json",
    ]);
    assert_eq!(report["batch"], 3);
    assert_eq!(report["uniform_prf"], "ChaCha12");
    assert!(
        report["precision_bits"].as_f64().unwrap() > 15.0,
        "{report}"
    );
    let refused = hemem(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--batch",
        "2",
        "--chain",
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--batch and --chain"));
}

/// `--devices` with CPU contexts as logical devices: every input is
/// bootstrapped (the shares add up to the batch, even or by chunks), the
/// report has the throughput and each device's peak, and the outputs
/// decrypt to the inputs.
#[test]
fn bootstrap_command_spreads_a_batch_over_devices() {
    for (chunk, shares) in [(None, vec![2, 1]), (Some("1"), vec![])] {
        let mut args = vec![
            "bootstrap",
            "--preset",
            "test-FTb",
            "--iterations",
            "2",
            "--batch",
            "3",
            "--devices",
            "cpu,cpu",
            "--json",
        ];
        if let Some(c) = chunk {
            args.extend(["--chunk", c]);
        }
        let report = hemem_json(&args);
        assert_eq!(report["devices"], serde_json::json!(["cpu", "cpu"]));
        assert_eq!(report["batch"], 3);
        assert!(report["bootstraps_per_second"].as_f64().unwrap() > 0.0);
        assert_eq!(report["batch_ms"].as_array().unwrap().len(), 2);
        assert!(
            report["precision_bits"].as_f64().unwrap() > 15.0,
            "{report}"
        );
        let devices = report["per_device"].as_array().unwrap();
        assert_eq!(devices.len(), 2);
        let counts: Vec<u64> = devices
            .iter()
            .map(|d| d["bootstrapped"].as_u64().unwrap())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 6, "two batches of three");
        if !shares.is_empty() {
            assert_eq!(counts, shares.iter().map(|s| s * 2).collect::<Vec<u64>>());
            assert_eq!(report["split"], "even");
        } else {
            assert_eq!(report["split"], "stealing:1");
        }
        assert_eq!(report["diagonal_storage"], "fit");
        for d in devices {
            let peaks = d["peak_bytes_by_class"].as_object().unwrap();
            assert!(peaks["evaluation_key"].as_u64().unwrap() > 0, "{d}");
            // CPU contexts have no device budget: `fit` keeps in full what
            // half the available host memory holds (here everything).
            assert_eq!(d["diagonal_storage"], "encoded", "{d}");
            assert!(d["keys_expanded"].as_u64().unwrap() > 0, "{d}");
        }
    }
    let text = hemem(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--iterations",
        "1",
        "--batch",
        "2",
        "--devices",
        "cpu,cpu",
    ]);
    assert!(text.status.success());
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("bootstraps per second"), "{stdout}");
    assert!(stdout.contains("device 1 (cpu): 1 bootstrap,"), "{stdout}");
    let refused = hemem(&["bootstrap", "--preset", "test-FTb", "--devices", "nowhere"]);
    assert!(!refused.status.success());
}

#[test]
fn unknown_preset_is_a_clean_error() {
    let out = hemem(&["demo", "--preset", "FGz"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown preset"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Bad flag values are refused before any key is made: zero counts, an
/// unknown hoisting or storage, output folders that do not exist, a
/// streaming trace a CPU run cannot record.
#[test]
fn bad_flags_are_refused_before_key_setup() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder").join("out");
    let missing = missing.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["bootstrap", "--iterations", "0"], "at least 1"),
        (&["bootstrap", "--batch", "0"], "at least 1"),
        (&["bootstrap", "--batch", "1025"], "at most 1024"),
        (&["bench", "alloc", "--pooled", "101"], "0..=100"),
        (
            &["bench", "alloc", "--working-sets", "3000000000"],
            "1..=10000",
        ),
        (
            &["bootstrap", "--batch", "4611686018427387904"],
            "at most 1024",
        ),
        (&["bootstrap", "--shared-expansions", "0"], "at least 1"),
        (&["bench", "ckks", "--iterations", "0"], "at least 1"),
        (
            &["bench", "ckks", "--device", "cpu", "--policies", "foo"],
            "unknown memory policy",
        ),
        (&["bench", "oversub", "--time-limit", "0"], "above 0"),
        (&["bench", "oversub", "--time-limit", "nan"], "above 0"),
        (
            &["bench", "bm-bootstrap", "--iterations", "0"],
            "at least 1",
        ),
        (&["bootstrap", "--hoisting", "foo"], "hoisting"),
        (
            &["bootstrap", "--log-bsgs-ratio", "5"],
            "fit or a number 0..=4",
        ),
        (&["keygen", "--log-bsgs-ratio=-1"], "fit or a number 0..=4"),
        (
            &["keygen", "--log-bsgs-ratio", "two"],
            "fit or a number 0..=4",
        ),
        (&["bootstrap", "--diagonals", "foo"], "diagonal storage"),
        (&["bootstrap", "--record-trace", missing], "does not exist"),
        (
            &["bootstrap", "--streaming-trace", missing],
            "does not exist",
        ),
        (
            &["bootstrap", "--streaming-trace", "trace.json"],
            "only the planned policy on a GPU",
        ),
        (&["keygen", "--out", missing], "does not exist"),
        (&["demo", "--record-trace", missing], "does not exist"),
    ];
    for &(args, message) in cases {
        let mut all = args.to_vec();
        all.extend(match args[..2] {
            ["bench", "oversub" | "bm-bootstrap"] => &["--presets", "test-FTb"][..],
            ["bench", "alloc"] => &[][..],
            _ => &["--preset", "test-FTb"][..],
        });
        let out = hemem(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{all:?}");
        assert!(err.contains(message), "{all:?}: {err}");
        assert!(!err.contains("generated"), "{all:?} made keys first: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
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

#[test]
fn keygen_writes_key_files_that_bootstrap_and_demo_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ftb.keys");
    let path = file.to_str().unwrap();
    // ChaCha20 keys (as earlier builds made them) load and bootstrap too.
    let report = hemem_json(&[
        "keygen",
        "--preset",
        "test-FTb",
        "--out",
        path,
        "--uniform-prf",
        "chacha20",
        "--json",
    ]);
    assert_eq!(report["preset"], "test-FTb");
    let file_bytes = report["key_file_bytes"].as_u64().unwrap();
    assert_eq!(file_bytes, std::fs::metadata(&file).unwrap().len());
    // Compact keys: the file holds what the keys hold, plus a little framing.
    let held = report["key_set_bytes"].as_u64().unwrap();
    assert!(file_bytes >= held && file_bytes < held + held / 100 + 4096);
    let secret = dir.path().join("ftb.keys.secret");
    assert!(dir.path().join("ftb.keys.public").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    let report = hemem_json(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--iterations",
        "1",
        "--keys",
        path,
        "--json",
    ]);
    assert!(report["key_load_ms"].as_f64().unwrap() > 0.0);
    assert!(report.get("key_setup_ms").is_none());
    assert!(report["uniform_prf"].is_null(), "{report}");
    assert_eq!(report["key_file_bytes"].as_u64().unwrap(), file_bytes);
    assert!(
        report["precision_bits"].as_f64().unwrap() > 15.0,
        "{report}"
    );

    let report = hemem_json(&["demo", "--preset", "test-FTb", "--keys", path, "--json"]);
    assert!(report["key_load_ms"].as_f64().unwrap() > 0.0);
    let steps = report["steps"].as_array().unwrap();
    assert!(steps.iter().any(|s| s["op"] == "bootstrap"));
    for step in steps {
        assert!(step["precision_bits"].as_f64().unwrap() > 10.0, "{step}");
    }

    // Another preset, a truncated file, a corrupted file, a missing file:
    // a typed message and a failure exit, never a panic.
    let refused = |args: &[&str], message: &str| {
        let out = hemem(args);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    refused(
        &["bootstrap", "--preset", "test-FGb", "--keys", path],
        "belongs to other parameters",
    );
    let bytes = std::fs::read(&file).unwrap();
    let damaged = dir.path().join("damaged.keys");
    let damaged_path = damaged.to_str().unwrap();
    for suffix in [".public", ".secret"] {
        std::fs::copy(format!("{path}{suffix}"), format!("{damaged_path}{suffix}")).unwrap();
    }
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let args = ["bootstrap", "--preset", "test-FTb", "--keys", damaged_path];
    refused(&args, "truncated");
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 3;
    flipped[middle] ^= 0x20;
    std::fs::write(&damaged, &flipped).unwrap();
    refused(&args, "corrupted");
    refused(
        &["demo", "--preset", "test-FTb", "--keys", damaged_path],
        "corrupted",
    );
    std::fs::write(&damaged, &bytes).unwrap();
    std::fs::remove_file(format!("{damaged_path}.secret")).unwrap();
    refused(&args, "secret key");

    // Files of two key generations side by side: each passes its own
    // checks, the three together are refused before any bootstrap.
    let other = dir.path().join("other.keys");
    let other_path = other.to_str().unwrap();
    let made = hemem(&["keygen", "--preset", "test-FTb", "--out", other_path]);
    assert!(made.status.success());
    let mixed = dir.path().join("mixed.keys");
    let mixed_path = mixed.to_str().unwrap();
    let mix = |file: &str, public: &str, secret: &str| {
        std::fs::copy(file, mixed_path).unwrap();
        std::fs::copy(format!("{public}.public"), format!("{mixed_path}.public")).unwrap();
        std::fs::copy(format!("{secret}.secret"), format!("{mixed_path}.secret")).unwrap();
    };
    let args = ["bootstrap", "--preset", "test-FTb", "--keys", mixed_path];
    mix(path, path, other_path);
    refused(&args, "the public key does not belong to this secret key");
    mix(path, other_path, other_path);
    refused(
        &args,
        "the bootstrap key set does not belong to this secret key",
    );
    refused(
        &["demo", "--preset", "test-FTb", "--keys", mixed_path],
        "the bootstrap key set does not belong",
    );
}

/// `--log-bsgs-ratio`: `keygen` makes keys for the ratio the room holds
/// (on the CPU, the faster one where it changes the rotations, as on
/// test-FGb), `bootstrap --keys` takes the larger ratio the keys serve, and
/// a ratio they do not serve is refused before any bootstrap.
#[test]
fn keygen_and_bootstrap_agree_on_the_bsgs_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let keys = |name: &str, ratio: &str| {
        let file = dir.path().join(name);
        let path = file.to_str().unwrap().to_owned();
        let made = hemem_json(&[
            "keygen",
            "--preset",
            "test-FGb",
            "--out",
            &path,
            "--log-bsgs-ratio",
            ratio,
            "--json",
        ]);
        (path, made)
    };
    // A bootstrap of test-FGb with `extra` flags (`--keys FILE` to load).
    let bootstrap = |extra: &[&str]| {
        let mut args = vec![
            "bootstrap",
            "--preset",
            "test-FGb",
            "--iterations",
            "1",
            "--json",
        ];
        args.extend(extra);
        hemem_json(&args)
    };
    let ratio_and_precision = |report: serde_json::Value, ratio: i32| {
        assert_eq!(report["log_bsgs_ratio"], ratio, "{report}");
        assert!(
            report["precision_bits"].as_f64().unwrap() > 20.0,
            "{report}"
        );
    };
    let (fit, made) = keys("fit.keys", "fit");
    assert_eq!(made["log_bsgs_ratio"], 2, "{made}");
    let fit_keys = made["keys"].as_u64().unwrap();
    ratio_and_precision(bootstrap(&["--keys", &fit]), 2);

    let (fewest, made) = keys("fewest.keys", "0");
    assert_eq!(made["log_bsgs_ratio"], 0, "{made}");
    assert!(made["keys"].as_u64().unwrap() < fit_keys, "{made}");
    ratio_and_precision(bootstrap(&["--keys", &fewest]), 0);

    // The demo takes the ratio its loaded keys serve too.
    let demo = hemem_json(&["demo", "--preset", "test-FGb", "--keys", &fewest, "--json"]);
    assert!(
        demo["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["op"] == "bootstrap")
    );
    // A ratio the keys do not serve is refused before the keys are expanded.
    let out = hemem(&[
        "bootstrap",
        "--preset",
        "test-FGb",
        "--keys",
        &fewest,
        "--log-bsgs-ratio",
        "2",
        "--expand-keys",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("made for BSGS ratio 0"), "{err}");
    assert!(err.contains("not 2"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // Keys of a ratio fit never takes are recognised and bootstrap.
    let (three, made) = keys("three.keys", "3");
    assert_eq!(made["log_bsgs_ratio"], 3, "{made}");
    assert!(made["keys"].as_u64().unwrap() > fit_keys, "{made}");
    ratio_and_precision(bootstrap(&["--keys", &three]), 3);
    // Several devices load keys of the fitted ratio too.
    ratio_and_precision(
        bootstrap(&["--keys", &fit, "--batch", "2", "--devices", "cpu,cpu"]),
        2,
    );
    // Generated keys: a working reserve past the host's memory leaves no
    // room for more keys; a forced ratio is followed.
    ratio_and_precision(bootstrap(&["--fit-reserve", "100000000000"]), 0);
    ratio_and_precision(bootstrap(&["--log-bsgs-ratio", "3"]), 3);
}

/// Without `--json` the demo prints byte counts for people (`KiB`, `MiB`),
/// and with it, raw integers and nothing but the report on stdout; every
/// help ends with examples.
#[test]
fn human_sizes_in_tables_raw_integers_in_json_and_examples_in_help() {
    let out = hemem(&["demo", "--preset", "test-FTb", "--no-bootstrap"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let peaks: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("peak memory by class"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(!peaks.is_empty(), "{text}");
    for line in peaks {
        assert!(line.ends_with('B'), "{line}");
        assert!(
            !line
                .split_whitespace()
                .last()
                .unwrap()
                .chars()
                .all(|c| c.is_ascii_digit())
        );
    }
    // Run directly: its stderr is checked below.
    let out = hemem(&["demo", "--preset", "test-FTb", "--no-bootstrap", "--json"]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["peak_bytes_by_class"]["ciphertext"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for args in [
        &["--help"][..],
        &["keygen", "--help"],
        &["bench", "oversub", "--help"],
    ] {
        let out = hemem(args);
        assert!(out.status.success());
        assert!(
            String::from_utf8(out.stdout).unwrap().contains("Example"),
            "{args:?}"
        );
    }
}

/// `hemem bootstrap --record-trace FILE` writes the run's allocation trace
/// (a CSV the profiled policy can replay), says where, and refuses the
/// option with `--devices`, where one file cannot hold several devices'.
#[test]
fn bootstrap_command_writes_the_recorded_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bootstrap-trace.csv");
    let report = hemem_json(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--iterations",
        "1",
        "--record-trace",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(report["trace_written"], path.display().to_string());
    let trace = hemem_memory::trace::Trace::read_file(&path).unwrap();
    assert!(
        trace.records.len() > 100,
        "{} allocations",
        trace.records.len()
    );
    let out = hemem(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--devices",
        "cpu,cpu",
        "--batch",
        "2",
        "--record-trace",
        path.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--record-trace"));
}

/// Byte counts that add up past 2^64 are an error, not a wrapped total.
#[test]
fn trace_analyze_refuses_sizes_that_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.csv");
    let max = u64::MAX;
    std::fs::write(
        &file,
        format!(
            "id,class,bytes,placement,stream,alloc_ns,free_ns\n\
             1,temporary,{max},host,compute,1,2\n\
             2,temporary,{max},host,compute,3,4\n"
        ),
    )
    .unwrap();
    let out = hemem(&[
        "trace",
        "analyze",
        file.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("more than 2^64 bytes"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A key file does not record its slot count: `bootstrap --keys` finds the
/// count the keys serve, refuses a `--slots` they do not serve with the
/// count they do, and the demo (every slot) refuses them.
#[test]
fn keys_made_for_fewer_slots_are_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s256.keys");
    let path = file.to_str().unwrap();
    let made = hemem(&[
        "keygen", "--preset", "test-FTb", "--slots", "256", "--out", path,
    ]);
    assert!(made.status.success());
    let report = hemem_json(&[
        "bootstrap",
        "--preset",
        "test-FTb",
        "--keys",
        path,
        "--iterations",
        "1",
        "--json",
    ]);
    assert_eq!(report["slots"], 256, "{report}");
    assert!(
        report["precision_bits"].as_f64().unwrap() > 15.0,
        "{report}"
    );
    for (args, message) in [
        (
            vec![
                "bootstrap",
                "--preset",
                "test-FTb",
                "--keys",
                path,
                "--slots",
                "128",
            ],
            "serve 256 slots, not 128",
        ),
        (
            vec!["demo", "--preset", "test-FTb", "--keys", path],
            "do not bootstrap the 1024 slots",
        ),
    ] {
        let out = hemem(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
}

/// `bench ckks --device auto` reports where it ran, and without a GPU runs
/// once, with no policy comparison and no NTT figure when no NTT ran.
#[test]
fn bench_ckks_reports_the_device_auto_chose() {
    let report = hemem_json(&[
        "bench",
        "ckks",
        "--preset",
        "test-FTb",
        "--device",
        "auto",
        "--ops",
        "add",
        "--iterations",
        "1",
        "--json",
    ]);
    let device = report["device"].as_str().unwrap();
    assert!(device == "cpu" || device.starts_with("gpu"), "{report}");
    let runs = report["runs"].as_array().unwrap();
    if device == "cpu" {
        assert_eq!(runs.len(), 1, "{report}");
    }
    assert!(
        runs.iter().all(|r| r.get("ntt_gb_per_s").is_none()),
        "{report}"
    );
}

/// On the CPU the `profiled` policy places nothing but still checks the run
/// against its recording: the recorded run replays, another preset's run
/// diverges (an error, or with `--on-divergence static` a fallback the
/// report names).
#[test]
fn profiled_replay_is_checked_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("ftb.csv");
    let trace = trace.to_str().unwrap();
    let recorded = hemem(&[
        "demo",
        "--preset",
        "test-FTb",
        "--no-bootstrap",
        "--record-trace",
        trace,
    ]);
    assert!(recorded.status.success());
    let replay = |preset: &str, extra: &[&str]| {
        let mut args = vec![
            "demo",
            "--preset",
            preset,
            "--no-bootstrap",
            "--policy",
            "profiled",
            "--trace",
            trace,
        ];
        args.extend(extra);
        hemem(&args)
    };
    let same = replay("test-FTb", &["--json"]);
    assert!(
        same.status.success(),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&same.stdout).unwrap();
    assert!(report.get("policy_divergence").is_none(), "{report}");
    let other = replay("test-FGb", &[]);
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("replay diverged"), "{err}");
    let fallback = replay("test-FGb", &["--on-divergence", "static", "--json"]);
    assert!(fallback.status.success());
    let report: serde_json::Value = serde_json::from_slice(&fallback.stdout).unwrap();
    assert!(
        report["policy_divergence"]
            .as_str()
            .unwrap()
            .contains("replay diverged"),
        "{report}"
    );
}

/// Device-memory flags given to a CPU run are named as ignored, not
/// silently dropped.
#[test]
fn device_memory_flags_on_the_cpu_are_named_as_ignored() {
    let out = hemem(&[
        "demo",
        "--preset",
        "test-FTb",
        "--no-bootstrap",
        "--device",
        "cpu",
        "--budget",
        "1MiB",
        "--eviction",
        "next-use",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("note: --budget, --eviction concern device memory"),
        "{err}"
    );
    let plain = hemem(&[
        "demo",
        "--preset",
        "test-FTb",
        "--no-bootstrap",
        "--device",
        "cpu",
    ]);
    assert!(!String::from_utf8_lossy(&plain.stderr).contains("note:"));
}

/// A negative size reaches the size parser, which names it, whether it is
/// written `--budget -3GiB` or `--budget=-3GiB` (clap took the first for
/// an unknown flag `-3`).
#[test]
fn negative_sizes_are_named_by_the_size_parser() {
    for args in [&["--budget", "-3GiB"][..], &["--budget=-3GiB"][..]] {
        let mut all = vec!["demo", "--preset", "test-FTb", "--no-bootstrap"];
        all.extend_from_slice(args);
        let out = hemem(&all);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("invalid byte size \"-"), "{args:?}: {err}");
    }
}
