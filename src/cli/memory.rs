//! The memory-system options shared by the commands that run workloads
//! (`--policy`, `--budget`, `--trace`, `--record-trace`, …), merged over the
//! `HEMEM_*` environment variables into one typed config.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use hemem_memory::policy::{Divergence, PolicyKind};
use hemem_memory::{BudgetSetting, ByteSize, Eviction, MemoryConfig, PolicyConfig, ProfiledConfig};

/// What to do when a profiled replay leaves its recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDivergence {
    /// Fail the allocation with a divergence error.
    Error,
    /// Place everything from then on by the static rule.
    Static,
}

/// Memory-system options (flags override `HEMEM_*` variables).
#[derive(Debug, Clone, clap::Args)]
pub struct MemoryArgs {
    /// Placement policy: planned, device, managed, static, profiled or
    /// dynamic (default: HEMEM_MEMORY_POLICY, else planned: keys and
    /// diagonals streamed from pinned host memory when the budget is below
    /// the working set, kept on the device otherwise).
    #[arg(long)]
    policy: Option<String>,
    /// Device budget, e.g. 4GiB, or auto (default: HEMEM_DEVICE_BUDGET, else
    /// the GPU's free memory minus 512 MiB). GPU runs only.
    // A value that starts with '-' (a negative size) reaches the size
    // parser, which names it, instead of being taken for a flag.
    #[arg(long, allow_hyphen_values = true)]
    budget: Option<String>,
    /// Eviction order under the budget: lru or next-use (default:
    /// HEMEM_EVICTION, else lru, the fastest measured). GPU runs only.
    #[arg(long)]
    eviction: Option<String>,
    /// The recorded trace the profiled policy replays.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write this run's allocation trace (CSV) to FILE.
    #[arg(long, value_name = "FILE")]
    record_trace: Option<PathBuf>,
    /// Profiled policy: allocations living less than this many seconds are pooled.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    lifetime_threshold: f64,
    /// Profiled policy: cap on peak pooled bytes (default: the budget).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pool_cap: Option<String>,
    /// Profiled policy: what a divergence from the recording does.
    #[arg(long, value_enum, default_value_t = OnDivergence::Error)]
    on_divergence: OnDivergence,
    /// Dynamic policy: the threshold X on the live-count history's spread.
    #[arg(long, default_value_t = 4)]
    dynamic_threshold: u64,
}

impl MemoryArgs {
    /// On the CPU, what the flags given ask for that a CPU run does not
    /// do (all its memory is host memory): a note for stderr, so that a
    /// budget or eviction order given by mistake to a CPU run is not
    /// silently taken as honoured.
    pub fn cpu_note(&self) -> Option<String> {
        let mut ignored = Vec::new();
        if self.budget.is_some() {
            ignored.push("--budget");
        }
        if self.eviction.is_some() {
            ignored.push("--eviction");
        }
        if self.pool_cap.is_some() {
            ignored.push("--pool-cap");
        }
        if let Some(policy) = &self.policy
            && !matches!(policy.as_str(), "planned" | "profiled")
        {
            ignored.push("--policy");
        }
        (!ignored.is_empty()).then(|| {
            format!(
                "note: {} {} device memory, which a CPU run does not use: ignored here",
                ignored.join(", "),
                if ignored.len() == 1 {
                    "concerns"
                } else {
                    "concern"
                }
            )
        })
    }

    /// The config: `HEMEM_*` variables, then these flags.
    ///
    /// # Errors
    /// Unknown policies, bad sizes or thresholds, a profiled policy without
    /// a trace.
    pub fn config(&self) -> anyhow::Result<MemoryConfig> {
        let mut config = MemoryConfig::from_env().context("reading HEMEM_* variables")?;
        // Parsed whatever the policy and device, so that a bad size is
        // named before anything else is tried.
        let pool_cap = self
            .pool_cap
            .as_deref()
            .map(|cap| cap.parse::<ByteSize>().map(|b| b.0))
            .transpose()?;
        if let Some(budget) = &self.budget {
            config.budget = budget.parse::<BudgetSetting>()?;
        }
        if let Some(eviction) = &self.eviction {
            config.eviction = Some(eviction.parse::<Eviction>()?);
        }
        if let Some(path) = &self.record_trace {
            config.record_trace = Some(path.clone());
        }
        if let Some(path) = &config.record_trace {
            super::check_output_path(path, "--record-trace (or HEMEM_RECORD_TRACE)")?;
        }
        let kind = match &self.policy {
            Some(name) => Some(name.parse::<PolicyKind>()?),
            None if self.trace.is_some() => Some(PolicyKind::Profiled),
            None => None,
        };
        if let Some(kind) = kind {
            let trace = self.trace.clone().or_else(|| match &config.policy {
                PolicyConfig::Profiled(p) => Some(p.trace.clone()),
                _ => None,
            });
            config.policy = PolicyConfig::from_kind(kind, trace)?;
        }
        match &mut config.policy {
            PolicyConfig::Profiled(ProfiledConfig {
                lifetime_threshold,
                peak_pool_cap,
                on_divergence,
                ..
            }) => {
                *lifetime_threshold = Duration::try_from_secs_f64(self.lifetime_threshold)
                    .context("--lifetime-threshold must be a non-negative number of seconds")?;
                if pool_cap.is_some() {
                    *peak_pool_cap = pool_cap;
                }
                *on_divergence = match self.on_divergence {
                    OnDivergence::Error => Divergence::Error,
                    OnDivergence::Static => Divergence::FallBackToStatic,
                };
            }
            PolicyConfig::Dynamic { threshold } => *threshold = self.dynamic_threshold,
            _ => {}
        }
        if pool_cap.is_some() && !matches!(config.policy, PolicyConfig::Profiled(_)) {
            anyhow::bail!(
                "--pool-cap caps the profiled policy's pool; the policy here is {}",
                config.policy.kind()
            );
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        memory: MemoryArgs,
    }

    fn config(args: &[&str]) -> anyhow::Result<MemoryConfig> {
        let cli = Cli::try_parse_from(std::iter::once("hemem").chain(args.iter().copied()))?;
        cli.memory.config()
    }

    #[test]
    fn flags_become_a_typed_config() {
        let c = config(&["--policy", "dynamic", "--dynamic-threshold", "7"]).expect("valid");
        assert_eq!(c.policy, PolicyConfig::Dynamic { threshold: 7 });
        let c = config(&[
            "--trace",
            "rec.csv",
            "--pool-cap",
            "1GiB",
            "--lifetime-threshold",
            "0.5",
            "--on-divergence",
            "static",
            "--budget",
            "2GiB",
            "--record-trace",
            "out.csv",
            "--eviction",
            "lru",
        ])
        .expect("valid");
        assert_eq!(
            c.policy,
            PolicyConfig::Profiled(ProfiledConfig {
                trace: "rec.csv".into(),
                lifetime_threshold: Duration::from_millis(500),
                peak_pool_cap: Some(1 << 30),
                on_divergence: Divergence::FallBackToStatic,
            })
        );
        assert_eq!(c.budget, BudgetSetting::Bytes(2 << 30));
        assert_eq!(c.record_trace, Some(PathBuf::from("out.csv")));
        assert_eq!(c.eviction, Some(Eviction::LeastRecentlyUsed));
        let c = config(&["--eviction", "next-use"]).expect("valid");
        assert_eq!(c.eviction, Some(Eviction::PredictedNextUse));
        assert_eq!(config(&[]).expect("valid").eviction, None);
        for bad in [
            &["--policy", "lru"][..],
            &["--policy", "profiled"][..],
            &["--budget", "lots"][..],
            &["--eviction", "mru"][..],
            &["--trace", "t.csv", "--lifetime-threshold", "-1"][..],
            &["--trace", "t.csv", "--pool-cap", "-1MiB"][..],
            &["--policy", "planned", "--pool-cap", "1GiB"][..],
            &["--pool-cap", "lots"][..],
        ] {
            assert!(config(bad).is_err(), "{bad:?}");
        }
    }
}
