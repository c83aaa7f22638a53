//! The `hemem` command-line tool: parameter tables, the demo, benchmarks.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if e.chain().any(|c| c.is::<cli::StdoutClosed>()) {
                return std::process::ExitCode::SUCCESS;
            }
            eprintln!("hemem: error: {}", hemem::join_causes(e.chain()));
            std::process::ExitCode::FAILURE
        }
    }
}
