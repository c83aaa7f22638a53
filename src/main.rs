//! The `hemem` command-line tool: parameter tables, the demo, benchmarks.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let closed_pipe = e
                .chain()
                .filter_map(|c| c.downcast_ref::<std::io::Error>())
                .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe);
            if closed_pipe {
                return std::process::ExitCode::SUCCESS;
            }
            eprintln!("hemem: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
