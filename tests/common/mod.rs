//! Helpers shared by the root crate's integration tests.

use std::process::{Command, Output};

/// Runs the `hemem` binary built for these tests with `args`.
pub fn hemem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hemem"))
        .args(args)
        .output()
        .expect("run hemem")
}

/// Runs `hemem` with `args`, asserts that it succeeded (with its stderr as
/// the failure message) and parses its standard output as JSON.
#[allow(dead_code)] // Not every test crate reads JSON.
pub fn hemem_json(args: &[&str]) -> serde_json::Value {
    let out = hemem(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}
