//! Argument parsing and dispatch, one module per subcommand.

/// `println!` that returns an error instead of panicking when stdout is
/// closed (`hemem params | head`): [`StdoutClosed`], which `main` alone
/// treats as a normal end.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::cli::stdout_error)?;
    }};
}

/// The reader of stdout went away (`hemem params | head`): the output was
/// not wanted further, so the command ends successfully. Any other broken
/// pipe (a child process, a file) stays an error.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// A failed write to stdout as the command's error: [`StdoutClosed`] for
/// a closed pipe, else the I/O error itself.
pub fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        anyhow::Error::new(StdoutClosed)
    } else {
        anyhow::Error::new(e).context("writing to stdout")
    }
}

mod bench;
mod bootstrap;
mod demo;
mod device;
mod keygen;
mod memory;
mod params;
mod progress;
mod report;
mod trace;

use clap::{Parser, Subcommand};
use hemem_ckks::params::{Parameters, Preset, SecurityCheck};

/// A count that must be at least one (`--iterations`, `--batch`, …): zero
/// would measure nothing, and a figure divided by it would be made up.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A batch size: at least one, at most [`hemem::bench::MAX_BATCH`].
fn batch_size(s: &str) -> Result<usize, String> {
    use hemem::bench::MAX_BATCH;
    match at_least_one(s)? {
        n if n > MAX_BATCH => Err(format!("must be at most {MAX_BATCH}")),
        n => Ok(n),
    }
}

/// Checks, before any long work, that `path` can be created: its folder
/// exists (a mistyped folder would otherwise be found only when the
/// results are written, after minutes of key generation or bootstraps).
fn check_output_path(path: &std::path::Path, flag: &str) -> anyhow::Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if folder.is_dir() {
        Ok(())
    } else {
        anyhow::bail!(
            "{flag} {}: the folder {} does not exist",
            path.display(),
            folder.display()
        )
    }
}

/// A number of seconds above zero and finite (`--time-limit`).
fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        Ok(_) => Err("must be a finite number of seconds above 0".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// CKKS homomorphic encryption with a hybrid CPU/GPU memory system.
#[derive(Debug, Parser)]
#[command(
    name = "hemem",
    version,
    about,
    after_help = "Examples:
  hemem params                                   the presets and their sizes
  hemem demo --preset test-FTb                   a quick tour on an insecure test preset
  hemem keygen --preset FTb --out ftb.keys       generate and save bootstrapping keys
  hemem bootstrap --preset FTb --keys ftb.keys   bootstrap with them
  hemem bootstrap --preset FGb --device gpu --budget 2GiB

Memory settings come from the flags, else from HEMEM_* environment variables
(HEMEM_DEVICE_BUDGET, HEMEM_MEMORY_POLICY, ...; see the README)."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the parameter presets (FGa, FGb, FVa, FVb, FVc, FTa, FTb).
    #[command(after_help = "Examples:
  hemem params
  hemem params --json
  hemem params --file saved.params --allow-insecure")]
    Params(params::Args),
    /// Encrypt random values, multiply, rotate, conjugate, add, square down to
    /// level 3, and report every step's precision and time.
    #[command(after_help = "Examples:
  hemem demo                                 FTb on the CPU
  hemem demo --preset test-FGb --no-bootstrap
  hemem demo --preset FGb --device gpu --policy planned --budget 4GiB
  hemem demo --preset FTb --keys ftb.keys --json")]
    Demo(demo::Args),
    /// Generate a preset's bootstrapping keys and save them: FILE (bootstrap
    /// key set), FILE.public and FILE.secret (mode 0600), for `--keys FILE`.
    Keygen(keygen::Args),
    /// Run K bootstraps on a preset: time per bootstrap, precision, key-set
    /// and constant sizes, peak memory per class.
    #[command(after_help = "Examples:
  hemem bootstrap --preset test-FGb --iterations 2
  hemem bootstrap --preset FGb --device gpu --budget 2GiB --batch 4
  hemem bootstrap --preset FTb --keys ftb.keys --json
  hemem bootstrap --preset FGb --devices 0,1 --batch 16")]
    Bootstrap(bootstrap::Args),
    /// Benchmarks: the GPU allocation micro-benchmark (`alloc`), CKKS
    /// operations (`ckks`), the oversubscription sweep (`oversub`) and
    /// BM-bootstrap (`bm-bootstrap`).
    #[command(after_help = "Examples:
  hemem bench ckks --preset FGb --device gpu
  hemem bench oversub --presets test-FGb --budgets 2GiB,none --ops add,bootstrap
  hemem bench bm-bootstrap --presets FGb --thresholds 0,50,100")]
    Bench(bench::Args),
    /// Allocation traces (`hemem trace analyze FILE`).
    #[command(after_help = "Example:
  hemem demo --record-trace run.csv && hemem trace analyze run.csv --threshold 0.5")]
    Trace(trace::Args),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Params(args) => params::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Bootstrap(args) => bootstrap::run(&args),
        Command::Keygen(args) => keygen::run(&args),
        Command::Trace(args) => trace::run(&args),
    }
}

/// A preset by name and its parameters: the insecure `test-*` presets are
/// allowed (they are named as such), every other one is security-checked
/// ([`SecurityCheck::for_preset`]). Every command that takes `--preset`
/// goes through here.
fn preset_parameters(name: &str) -> anyhow::Result<(Preset, Parameters)> {
    let preset: Preset = name.parse()?;
    let params = Parameters::from_preset_with(preset, SecurityCheck::for_preset(preset))?;
    Ok((preset, params))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::Cli;

    /// `hemem --help` and every visible subcommand's help end with an
    /// example.
    #[test]
    fn every_help_has_an_example() {
        fn check(command: &clap::Command, path: &str) {
            if command.is_hide_set() {
                return;
            }
            let help = command
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(help.contains("Example"), "{path}: no example in its help");
            for sub in command.get_subcommands() {
                if sub.get_name() != "help" {
                    check(sub, &format!("{path} {}", sub.get_name()));
                }
            }
        }
        let mut cli = Cli::command();
        cli.build();
        check(&cli, "hemem");
        cli.debug_assert();
    }

    /// Every example command in the help parses: `hemem …` lines (before
    /// the two-space gap that starts a comment, each side of `&&`) are
    /// given to the parser as a user would type them.
    #[test]
    fn every_example_in_the_help_parses() {
        fn examples(command: &clap::Command, found: &mut Vec<String>) {
            let help = command
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            for line in help.lines().filter(|l| l.starts_with("  hemem ")) {
                let line = line.trim_start();
                let command = line.split("  ").next().unwrap_or(line);
                found.extend(command.split("&&").map(|c| c.trim().to_owned()));
            }
            for sub in command.get_subcommands() {
                examples(sub, found);
            }
        }
        let mut cli = Cli::command();
        cli.build();
        let mut found = Vec::new();
        examples(&cli, &mut found);
        assert!(found.len() >= 20, "{found:?}");
        for example in &found {
            if let Err(e) = Cli::try_parse_from(example.split_whitespace()) {
                panic!("`{example}` does not parse: {e}");
            }
        }
    }

    /// Every command that runs a workload takes the one `--device`/`--gpu`
    /// pair ([`super::device::DeviceArgs`]): the benchmarks default to the
    /// GPU, the others to the CPU.
    #[test]
    fn one_device_argument_with_its_default() {
        let mut cli = Cli::command();
        cli.build();
        let find = |path: &[&str]| -> clap::Command {
            let mut command = cli.clone();
            for name in path {
                command = command
                    .find_subcommand(name)
                    .unwrap_or_else(|| panic!("no subcommand {name}"))
                    .clone();
            }
            command
        };
        let cases: [(&[&str], &str); 7] = [
            (&["demo"], "cpu"),
            (&["bootstrap"], "cpu"),
            (&["keygen"], "cpu"),
            (&["bench", "ckks"], "gpu"),
            (&["bench", "oversub"], "gpu"),
            (&["bench", "oversub-cell"], "gpu"),
            (&["bench", "bm-bootstrap"], "gpu"),
        ];
        for (path, default) in cases {
            let command = find(path);
            for id in ["device", "gpu"] {
                assert!(
                    command.get_arguments().any(|a| a.get_id() == id),
                    "{path:?}: no --{id}"
                );
            }
            let device = command
                .get_arguments()
                .find(|a| a.get_id() == "device")
                .map(|a| a.get_default_values().to_vec());
            assert_eq!(device, Some(vec![default.into()]), "{path:?}");
        }
        // The parsed value goes through DeviceArgs's parser.
        let parsed = super::Cli::try_parse_from(["hemem", "demo", "--device", "gpu:x"]);
        assert!(parsed.is_err());
    }
}
