#![allow(clippy::unwrap_used, clippy::indexing_slicing, missing_docs)]
//! The recommended schedule of every HEaaN preset, simulated at full size
//! (ignored by default: about ten seconds in release mode; run with
//! `cargo test -p hemem-bootstrap --release -- --ignored`). Figures in
//! `docs/BOOTSTRAP-SCHEDULE.md`.

use hemem_bootstrap::ckks::params::{Parameters, Preset};
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::simulate::{SimulationOptions, simulate};

/// Issue 6's end-to-end targets (bits, real inputs in [−1, 1]).
fn target(preset: Preset) -> f64 {
    match preset {
        Preset::FGb => 23.0,
        Preset::FGa => 28.0,
        Preset::FTa => 10.0,
        Preset::FTb => 17.0,
        _ => 20.0,
    }
}

#[test]
#[ignore = "full-size simulation of every preset (about ten seconds in release)"]
fn recommended_schedules_meet_the_targets_in_simulation() {
    for preset in Preset::HEAAN {
        let params = Parameters::from_preset(preset).unwrap();
        let schedule = BootstrapSchedule::recommended(&params).unwrap();
        let report = simulate(&params, &schedule, &SimulationOptions::default()).unwrap();
        let post = params.post_bootstrap_level().unwrap();
        assert_eq!(report.output_level, post.0, "{preset}");
        assert_eq!(
            report.output_scale,
            params.default_scale(post).unwrap().0,
            "{preset}"
        );
        println!("{preset}: {:.2} bits", report.precision_bits());
        assert!(
            report.precision_bits() > target(preset),
            "{preset}: {:.2} bits",
            report.precision_bits()
        );
    }
}
