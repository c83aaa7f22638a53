//! Helpers shared by the root crate's integration tests.

use std::process::{Command, Output};

/// Runs the `hemem` binary built for these tests with `args`.
pub fn hemem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hemem"))
        .args(args)
        .output()
        .expect("run hemem")
}
