//! The programs in `examples/`, run as tests: each example's work is a
//! `run` function that returns what it measured, included here by path, so
//! CI checks the examples a user copies against f64 (random inputs) on
//! test presets, in seconds. (`cnn_inference`'s work is the library's
//! `hemem::inference`, tested in `tests/inference.rs`.)
//!
//! `HEMEM_TEST_DEVICE=gpu` runs them on GPU 0 (the staged GPU harness); the
//! CPU otherwise.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

// Each example's `main` and argument parser are not called from here.
#[allow(dead_code)]
#[path = "../examples/encrypt_compute_decrypt.rs"]
mod encrypt_compute_decrypt;

#[allow(dead_code)]
#[path = "../examples/saved_keys.rs"]
mod saved_keys;

#[allow(dead_code)]
#[path = "../examples/budgeted_bootstrap.rs"]
mod budgeted_bootstrap;

use hemem::memory::PolicyKind;
use hemem::prelude::*;

/// Bits test-FGb keeps through a bootstrap (`bootstrap/tests/bootstrap.rs`),
/// and through encryption and a few operations.
const BOOTSTRAP_BITS: f64 = 20.0;
const COMPUTE_BITS: f64 = 24.0;

fn test_device() -> DeviceSelection {
    match std::env::var("HEMEM_TEST_DEVICE").as_deref() {
        Ok("gpu") => DeviceSelection::Gpu(0),
        _ => DeviceSelection::Cpu,
    }
}

#[test]
fn encrypt_compute_decrypt_matches_f64() {
    for seed in [1, 2] {
        let report = encrypt_compute_decrypt::run(Preset::TestFGb, test_device(), seed).unwrap();
        let names: Vec<&str> = report.steps.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), 7, "{names:?}");
        let params =
            Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
        let top = params.enc_level().get();
        // add keeps the level; the product, its rotation and the sum lose
        // one; the constant another, the plaintext values another; the
        // cubic two.
        let levels: Vec<usize> = report.steps.iter().map(|s| s.level.get()).collect();
        assert_eq!(
            levels,
            [top, top - 1, top - 1, top - 1, top - 2, top - 3, top - 2]
        );
        for step in &report.steps {
            println!("{}: 2^{:.1}", step.name, step.max_error.log2());
            assert!(
                step.max_error < 2f64.powf(-COMPUTE_BITS),
                "{}: {:e}",
                step.name,
                step.max_error
            );
            assert!(
                step.max_error > 0.0,
                "{}: an exact result is suspicious",
                step.name
            );
        }
    }
}

#[test]
fn saved_keys_load_into_a_fresh_context() {
    let dir = tempfile::tempdir().unwrap();
    let report = saved_keys::run(Preset::TestFGb, test_device(), dir.path(), 3).unwrap();
    println!("{report:?}");
    assert_eq!(report.files.len(), 5);
    assert!(report.files.iter().all(|(_, bytes)| *bytes > 0));
    let params =
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(
        Some(report.bootstrapped_level),
        params.post_bootstrap_level()
    );
    assert!(
        report.bootstrap_error < 2f64.powf(-BOOTSTRAP_BITS),
        "{:e}",
        report.bootstrap_error
    );
    assert!(
        report.fresh_error < 2f64.powf(-COMPUTE_BITS),
        "{:e}",
        report.fresh_error
    );

    // A ciphertext file of other parameters is refused with a typed error.
    let other = tempfile::tempdir().unwrap();
    let values = vec![num_complex::Complex64::new(0.5, 0.0); 4];
    saved_keys::save(
        Preset::TestFGa,
        SecurityCheck::AllowInsecure,
        DeviceSelection::Cpu,
        &values,
        other.path(),
    )
    .unwrap();
    std::fs::copy(other.path().join("input.ct"), dir.path().join("input.ct")).unwrap();
    let err = saved_keys::load_and_compute(
        SecurityCheck::AllowInsecure,
        DeviceSelection::Cpu,
        &values,
        &values,
        dir.path(),
    )
    .unwrap_err();
    let err = err.downcast::<hemem::ckks::Error>().unwrap();
    assert!(
        matches!(*err, hemem::ckks::Error::Serialization(_)),
        "{err:?}"
    );
}

#[test]
fn budgeted_bootstrap_matches_f64() {
    let report = budgeted_bootstrap::run(
        Preset::TestFGb,
        test_device(),
        2 << 30,
        PolicyKind::Planned,
        2,
        4,
    )
    .unwrap();
    println!("{report:?}");
    let params =
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(Some(report.level), params.post_bootstrap_level());
    assert_eq!(report.bootstrap_ms.len(), 2);
    assert!(
        report.max_error < 2f64.powf(-BOOTSTRAP_BITS) && report.max_error > 0.0,
        "{:e}",
        report.max_error
    );
    assert!(report.peak_bytes > 0);
    match report.device {
        Device::Cpu => assert_eq!(report.streamed_bytes, 0),
        Device::Gpu(_) => assert!(report.streamed_bytes > 0),
    }
}
