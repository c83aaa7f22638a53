//! `HEMEM_*` variables are read only where a program asks for them
//! (`MemoryConfig::from_env()`): a library `Context::new` uses the defaults
//! whatever the environment says.
//!
//! The test runs itself again as a child process with the variables set
//! (a test binary's threads share one environment, so setting them in
//! place would race the other tests), once with a random valid policy and
//! once with a random malformed budget.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::process::Command;

use hemem_ckks::prelude::*;
use hemem_ckks::testing::seeded_rng;
use rand_core::Rng;

const TEST: &str = "context_new_reads_no_environment";
/// Set in the child: what it was given (`policy:NAME` or `budget:TEXT`).
const CASE: &str = "HEMEM_TEST_ENVIRONMENT_CASE";
/// Policies a `HEMEM_MEMORY_POLICY` can name without further settings,
/// none of them the default (`planned`).
const POLICIES: [&str; 4] = ["device", "managed", "static", "dynamic"];

fn context(config: Option<&MemoryConfig>) -> hemem_ckks::Result<Context> {
    let params =
        Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap();
    match config {
        None => Context::new(params, DeviceSelection::Cpu),
        Some(config) => Context::with_memory(params, DeviceSelection::Cpu, config),
    }
}

fn policy(context: &Context) -> Option<&'static str> {
    context.backend().allocator().policy_name()
}

/// In the child: the environment is seen by `from_env` and by nothing else.
fn check_child(case: &str) {
    let default = policy(&context(None).unwrap());
    assert_eq!(
        default,
        policy(&context(Some(&MemoryConfig::default())).unwrap()),
        "Context::new is not the default configuration"
    );
    if let Some(name) = case.strip_prefix("policy:") {
        assert_ne!(default, Some(name));
        let from_env = MemoryConfig::from_env().unwrap();
        assert_eq!(policy(&context(Some(&from_env)).unwrap()), Some(name));
    } else if let Some(text) = case.strip_prefix("budget:") {
        assert!(
            MemoryConfig::from_env().is_err(),
            "HEMEM_DEVICE_BUDGET={text} parsed"
        );
    } else {
        panic!("unknown case {case}");
    }
}

#[test]
fn context_new_reads_no_environment() {
    if let Ok(case) = std::env::var(CASE) {
        check_child(&case);
        return;
    }
    let seed = 0x5eed_e4f1;
    let mut rng = seeded_rng(seed);
    let name = POLICIES[(rng.next_u64() % POLICIES.len() as u64) as usize];
    // Letters a byte size never starts with, then random digits.
    let garbage = format!("x{}q", rng.next_u32());
    let runs = [
        (
            format!("policy:{name}"),
            "HEMEM_MEMORY_POLICY",
            name.to_owned(),
        ),
        (
            format!("budget:{garbage}"),
            "HEMEM_DEVICE_BUDGET",
            garbage.clone(),
        ),
    ];
    for (case, variable, value) in runs {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(CASE, &case)
            .env(variable, &value)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "seed {seed}, {variable}={value}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The child ran the test, not nothing.
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
