//! The memory system's settings: policy, device budget, eviction order,
//! oversubscription and trace recording, from the API
//! ([`MemoryConfig::default`] and its fields) or, when a program asks for
//! it with [`MemoryConfig::from_env`], parsed once from `HEMEM_*`
//! variables. Nothing in the library reads the environment by itself.
//!
//! | variable | values | default |
//! |---|---|---|
//! | `HEMEM_DEVICE_BUDGET` | a byte size (`4GiB`, `512MiB`, `1073741824`) or `auto` | `auto`: free memory minus a margin |
//! | `HEMEM_MEMORY_POLICY` | `planned`, `device`, `managed`, `static`, `profiled`, `dynamic` | `planned` |
//! | `HEMEM_POLICY_TRACE` | a trace CSV (for `profiled`) | none |
//! | `HEMEM_RECORD_TRACE` | where to write this run's trace | none |
//! | `HEMEM_MANAGED_OVERSUBSCRIPTION` | `refuse`, `allow` | `refuse` |
//! | `HEMEM_EVICTION` | `lru`, `next-use` | `lru` |
//! | `HEMEM_STREAMING_PLAN` | `planned`: `window`, `belady`, `stalls`, `auto` | `auto` |
//! | `HEMEM_STREAMING_RESERVE` | `planned`: a non-negative number | `2` |
//! | `HEMEM_STREAMING_SLACK` | `planned`: a non-negative number | `0` |
//! | `HEMEM_STREAMING_ARENA` | `planned`: `on`/`1`/`true`, `off`/`0`/`false` | `on` |
//! | `HEMEM_STREAMING_MARGIN` | `planned`: an integer ≥ 1 | `32` |
//! | `HEMEM_DEVICE_POOL` | `paged`, `driver` | `paged` |
//! | `HEMEM_DEPENDENT_LAUNCH` | `auto`, `on`/`1`/`true`, `off`/`0`/`false` | `auto`: on for compute capability 9.0 and newer |

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::cuda::{DependentLaunch, PoolKind};
use crate::policy::{
    DevicePolicy, Divergence, DynamicPolicy, ManagedPolicy, PlacementPolicy, PlannedPolicy,
    PolicyKind, ProfiledPolicy, StaticPolicy,
};
use crate::residency::{Eviction, StreamingPlan, ZeroCopy};
use crate::trace::{ProfileSettings, Trace};
use crate::{ConfigError, Error, Result};

/// A number of bytes, parsed from `4GiB`, `512 MiB`, `1.5GiB`, `64KB` or a
/// bare integer. Binary units (KiB, MiB, GiB, TiB) are powers of 1024,
/// decimal ones (KB, MB, GB, TB) powers of 1000; units are case-insensitive.
///
/// The one byte-size syntax of hemem (options, `HEMEM_*` variables, sweep
/// budgets), parsed and printed by the `bytesize` crate. `Display` prints a
/// size for people (`150.0 MiB`, `512 B`); [`ByteSize::exact`] prints one
/// that parses back to the same number (`2GiB`), for keys in files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// One GiB.
    pub const GIB: u64 = 1 << 30;
    /// One MiB.
    pub const MIB: u64 = 1 << 20;

    /// The units accepted after the number (lower case). `bytesize` also
    /// takes one-letter units (`4G`, `4Gi`), which are ambiguous between
    /// decimal and binary, and larger ones: both are refused here, as they
    /// always were.
    const UNITS: [&'static str; 10] = ["", "b", "kib", "mib", "gib", "tib", "kb", "mb", "gb", "tb"];

    /// The size as the shortest text that parses back to exactly it: `2GiB`,
    /// `512MiB`, or the bare number of bytes when no binary unit divides it.
    pub fn exact(self) -> String {
        let whole = format!("{:.0}", bytesize::ByteSize(self.0).display().iec()).replace(' ', "");
        if whole.parse::<Self>() == Ok(self) {
            whole
        } else {
            self.0.to_string()
        }
    }
}

impl FromStr for ByteSize {
    type Err = Error;

    /// Parses with `bytesize`, after checking the shape it is lenient about:
    /// digits with an optional fraction (`1.5`, not `.5` or `1.`), a known
    /// unit, and no overflow (`bytesize` saturates at `u64::MAX`).
    fn from_str(s: &str) -> Result<Self> {
        let invalid = || ConfigError::InvalidByteSize { text: s.to_owned() };
        let text = s.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let well_formed = match number.split_once('.') {
            None => !number.is_empty(),
            Some((whole, fraction)) => {
                !whole.is_empty()
                    && !fraction.is_empty()
                    && fraction.bytes().all(|b| b.is_ascii_digit())
            }
        };
        let unit = unit.trim().to_ascii_lowercase();
        if !well_formed || !Self::UNITS.contains(&unit.as_str()) {
            return Err(invalid().into());
        }
        // In bytes the number must be a whole u64 (`bytesize` saturated
        // "99999999999999999999B" to u64::MAX and truncated "1.9B" to 1);
        // in other units u64::MAX is only ever its saturation.
        if unit.is_empty() || unit == "b" {
            return number
                .parse::<u64>()
                .map(Self)
                .map_err(|_| invalid().into());
        }
        match text.parse::<bytesize::ByteSize>() {
            Ok(size) if size.as_u64() < u64::MAX => Ok(Self(size.as_u64())),
            _ => Err(invalid().into()),
        }
    }
}

impl fmt::Display for ByteSize {
    /// A size for people, in binary units with one decimal (`4.0 GiB`,
    /// `150.0 MiB`, `512 B`): `bytesize`'s IEC form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&bytesize::ByteSize(self.0).display().iec(), f)
    }
}

/// The device budget asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum BudgetSetting {
    /// The GPU's free memory when the allocator is made, minus
    /// [`MemoryConfig::margin`].
    #[default]
    Auto,
    /// A fixed budget (emulating a smaller card); it must not exceed the
    /// GPU's free memory.
    Bytes(u64),
}

impl FromStr for BudgetSetting {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        let ByteSize(bytes) = s.parse()?;
        if bytes == 0 {
            return Err(ConfigError::ZeroBudget.into());
        }
        Ok(Self::Bytes(bytes))
    }
}

/// Whether managed memory may exceed what the GPU has free.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Oversubscription {
    /// Total managed memory stays below the GPU's free memory; larger
    /// requests fail with [`Error::ManagedCapExceeded`]. On the shared GPU
    /// machines a process past it can hang the GPU.
    #[default]
    Refuse,
    /// Driver-managed oversubscription, for a real small card (Linux, a GPU
    /// with concurrent managed access) where the user accepts the driver
    /// paging managed memory beyond the card. Never run on the shared GPU
    /// machines.
    AllowDriverManaged,
}

impl FromStr for Oversubscription {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "refuse" | "" => Ok(Self::Refuse),
            "allow" => Ok(Self::AllowDriverManaged),
            other => Err(ConfigError::InvalidSetting {
                name: "HEMEM_MANAGED_OVERSUBSCRIPTION",
                value: other.to_owned(),
            }
            .into()),
        }
    }
}

/// The profiled policy's settings: the recording to replay and how to
/// analyse it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfiledConfig {
    /// The recorded trace (CSV).
    pub trace: PathBuf,
    /// The lifetime threshold below which allocations are pooled.
    pub lifetime_threshold: Duration,
    /// The cap on peak pooled bytes; `None` means the device budget.
    pub peak_pool_cap: Option<u64>,
    /// What to do when the run leaves the recording.
    pub on_divergence: Divergence,
}

/// A policy and its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PolicyConfig {
    /// `device`.
    Device,
    /// `managed`.
    Managed,
    /// `static`.
    Static,
    /// `profiled`.
    Profiled(ProfiledConfig),
    /// `dynamic` with threshold X.
    Dynamic {
        /// X: pooled while max − min of the live-count history is below it.
        threshold: u64,
    },
    /// `planned` (the default: with a budget at least the working set it
    /// keeps everything on the device once fetched; below it, it streams).
    #[default]
    Planned,
}

impl PolicyConfig {
    /// The policy's kind.
    pub fn kind(&self) -> PolicyKind {
        match self {
            Self::Device => PolicyKind::Device,
            Self::Managed => PolicyKind::Managed,
            Self::Static => PolicyKind::Static,
            Self::Profiled(_) => PolicyKind::Profiled,
            Self::Dynamic { .. } => PolicyKind::Dynamic,
            Self::Planned => PolicyKind::Planned,
        }
    }

    /// The settings of `kind` with default parameters; `trace` is the
    /// recording for `profiled`.
    ///
    /// # Errors
    /// [`ConfigError::MissingTrace`] for `profiled` without a trace.
    pub fn from_kind(kind: PolicyKind, trace: Option<PathBuf>) -> Result<Self> {
        Ok(match kind {
            PolicyKind::Device => Self::Device,
            PolicyKind::Managed => Self::Managed,
            PolicyKind::Static => Self::Static,
            PolicyKind::Planned => Self::Planned,
            PolicyKind::Dynamic => Self::Dynamic {
                threshold: DynamicPolicy::DEFAULT_THRESHOLD,
            },
            PolicyKind::Profiled => Self::Profiled(ProfiledConfig {
                trace: trace.ok_or(ConfigError::MissingTrace)?,
                lifetime_threshold: ProfileSettings::default().lifetime_threshold,
                peak_pool_cap: None,
                on_divergence: Divergence::Error,
            }),
        })
    }

    /// Builds the policy; `budget` caps pooled bytes for `profiled` when no
    /// cap is set. Reads and analyses the trace for `profiled`.
    ///
    /// # Errors
    /// Trace errors ([`crate::TraceError::Malformed`], [`crate::TraceError::Io`]);
    /// [`ConfigError::ZeroThreshold`].
    pub fn build(&self, budget: u64) -> Result<Arc<dyn PlacementPolicy>> {
        Ok(match self {
            Self::Device => Arc::new(DevicePolicy),
            Self::Managed => Arc::new(ManagedPolicy),
            Self::Static => Arc::new(StaticPolicy),
            Self::Planned => Arc::new(PlannedPolicy),
            Self::Dynamic { threshold } => Arc::new(DynamicPolicy::new(*threshold)?),
            Self::Profiled(p) => {
                let trace = Trace::read_file(&p.trace)?;
                let settings = ProfileSettings {
                    lifetime_threshold: p.lifetime_threshold,
                    peak_pool_cap: p.peak_pool_cap.unwrap_or(budget),
                };
                Arc::new(ProfiledPolicy::from_trace(
                    &trace,
                    settings,
                    p.on_divergence,
                ))
            }
        })
    }
}

/// Everything the allocator needs to know, besides the device.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    /// The placement policy.
    pub policy: PolicyConfig,
    /// The device budget.
    pub budget: BudgetSetting,
    /// What [`BudgetSetting::Auto`] leaves free for the driver and other
    /// users (default 512 MiB).
    pub margin: u64,
    /// Whether managed memory may exceed the GPU's free memory.
    pub oversubscription: Oversubscription,
    /// Where the allocation trace of this run is written
    /// (`Allocator::write_trace`); `None` records nothing.
    pub record_trace: Option<PathBuf>,
    /// Bytes of pinned host memory allocated up front for the `PinnedHost`
    /// placement (default 64 MiB).
    pub pinned_bytes: u64,
    /// The residency manager's eviction order; `None` (the default) takes
    /// the policy's ([`PlacementPolicy::eviction`]).
    pub eviction: Option<Eviction>,
    /// `planned`: how the recorded order of a phase decides what stays on
    /// the device between uses (`HEMEM_STREAMING_PLAN`): a fixed stable set
    /// and a sliding window (`window`), Belady's schedule per gap between
    /// uses, fetched ahead into a reserve (`belady`), or the window's split
    /// improved on a model of the stalls the recorded run's device times
    /// predict (`stalls`), or `stalls` for a phase of one item and `belady`
    /// for a batch (`auto`, the default).
    pub streaming_plan: StreamingPlan,
    /// `planned`: how many times the largest operation's streamed bytes are
    /// left free for fetching ahead (`HEMEM_STREAMING_RESERVE`, default 2:
    /// one operation's objects in use while the next one's arrive). With
    /// the `window` plan it is one candidate: the most bytes a short run of
    /// operations touches is the other, and an offline simulation of the
    /// recorded run picks the one that moves less.
    pub streaming_reserve: f64,
    /// `planned`, window split: how many more bytes than the fewest (as a
    /// fraction) the split may plan to move to leave more room for fetching
    /// ahead (`HEMEM_STREAMING_SLACK`, default 0: the fewest bytes). On the
    /// H100, FGb at 2 GiB with double hoisting ran 4–6 ms faster in larger
    /// streaming rooms for ~10 % more bytes; with the single hoisting a
    /// budget now selects, 0.15 chose the same split as 0
    /// (docs/BENCHMARKS.md), so the default stays 0.
    pub streaming_slack: f64,
    /// `planned`: whether streamed objects share an arena of their own, a
    /// few large chunks of the pool (`HEMEM_STREAMING_ARENA`, default on),
    /// or take a pool slot each beside the temporaries (`0`, for
    /// comparison).
    pub streaming_arena: bool,
    /// `planned`: the look-ahead leaves 1/`streaming_margin` of the budget
    /// free for the pool's fragmentation (`HEMEM_STREAMING_MARGIN`, default
    /// 32).
    pub streaming_margin: u64,
    /// `planned`: when kernels may read a key or diagonal in place from its
    /// pinned host master instead of a device copy (`HEMEM_ZERO_COPY`:
    /// `off`, `fallback` (the default: only when no device room can be
    /// made for it) or `streaming`).
    pub zero_copy: ZeroCopy,
    /// `planned`: whether every run of a phase is timed on the device, so
    /// that the usage reports what the last one waited for its fetches
    /// (`HEMEM_TIME_RUNS`, default off: only the recorded runs are).
    pub time_runs: bool,
    /// Which pool backs pooled device memory (`HEMEM_DEVICE_POOL`): device
    /// memory mapped page by page (`paged`, the default), so that any free
    /// page backs any new block under the budget, or the driver's
    /// stream-ordered pool (`driver`, for comparison), whose free memory
    /// can lie in pieces too small for the next block.
    pub device_pool: PoolKind,
    /// Whether the GPU backend launches its kernels with programmatic
    /// dependent launch, each starting its blocks during the previous
    /// kernel's last wave and waiting in the kernel for its results
    /// (`HEMEM_DEPENDENT_LAUNCH`: `auto`, the default, where the GPU has
    /// compute capability 9.0 or newer; `on`; `off`). Not a memory setting
    /// strictly, but one of how work on hemem's streams is ordered, and this
    /// is the configuration a context's GPU is opened with.
    pub dependent_launch: DependentLaunch,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            policy: PolicyConfig::Planned,
            budget: BudgetSetting::Auto,
            margin: 512 * ByteSize::MIB,
            oversubscription: Oversubscription::Refuse,
            record_trace: None,
            pinned_bytes: 64 * ByteSize::MIB,
            eviction: None,
            streaming_plan: StreamingPlan::Auto,
            streaming_reserve: 2.0,
            streaming_slack: 0.0,
            streaming_arena: true,
            streaming_margin: 32,
            zero_copy: ZeroCopy::Fallback,
            time_runs: false,
            device_pool: PoolKind::Paged,
            dependent_launch: DependentLaunch::Auto,
        }
    }
}

impl MemoryConfig {
    /// The settings from the `HEMEM_*` environment variables (the table
    /// above), over [`MemoryConfig::default`]: for programs that let their
    /// user steer the memory system from the environment (the `hemem` CLI,
    /// benchmarks, GPU test harnesses). `Context::new` does not call it.
    ///
    /// # Errors
    /// Values that do not parse ([`ConfigError`]).
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings from variables looked up with `var` (the environment for
    /// [`MemoryConfig::from_env`]; a map in tests).
    ///
    /// # Errors
    /// Values that do not parse ([`ConfigError`]).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut config = Self::default();
        if let Some(budget) = var("HEMEM_DEVICE_BUDGET") {
            config.budget = budget.parse()?;
        }
        let trace = var("HEMEM_POLICY_TRACE").map(PathBuf::from);
        if let Some(policy) = var("HEMEM_MEMORY_POLICY") {
            config.policy = PolicyConfig::from_kind(policy.trim().parse()?, trace)?;
        }
        if let Some(path) = var("HEMEM_RECORD_TRACE")
            && !path.is_empty()
        {
            config.record_trace = Some(PathBuf::from(path));
        }
        if let Some(over) = var("HEMEM_MANAGED_OVERSUBSCRIPTION") {
            config.oversubscription = over.parse()?;
        }
        if let Some(eviction) = var("HEMEM_EVICTION") {
            config.eviction = Some(eviction.trim().parse()?);
        }
        if let Some(reserve) = var("HEMEM_STREAMING_RESERVE") {
            config.streaming_reserve = non_negative("HEMEM_STREAMING_RESERVE", &reserve)?;
        }
        if let Some(slack) = var("HEMEM_STREAMING_SLACK") {
            config.streaming_slack = non_negative("HEMEM_STREAMING_SLACK", &slack)?;
        }
        if let Some(arena) = var("HEMEM_STREAMING_ARENA") {
            config.streaming_arena = switch("HEMEM_STREAMING_ARENA", &arena)?;
        }
        if let Some(time) = var("HEMEM_TIME_RUNS") {
            config.time_runs = switch("HEMEM_TIME_RUNS", &time)?;
        }
        if let Some(margin) = var("HEMEM_STREAMING_MARGIN") {
            config.streaming_margin = margin
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|m| *m >= 1)
                .ok_or(ConfigError::InvalidSetting {
                    name: "HEMEM_STREAMING_MARGIN",
                    value: margin.clone(),
                })?;
        }
        if let Some(mode) = var("HEMEM_ZERO_COPY") {
            config.zero_copy = mode.parse()?;
        }
        if let Some(plan) = var("HEMEM_STREAMING_PLAN") {
            config.streaming_plan = plan.parse()?;
        }
        if let Some(pool) = var("HEMEM_DEVICE_POOL") {
            config.device_pool = pool.parse()?;
        }
        if let Some(launch) = var("HEMEM_DEPENDENT_LAUNCH") {
            config.dependent_launch = launch.parse()?;
        }
        Ok(config)
    }

    /// Checks the `planned` policy's factors set in code (`from_env`
    /// checks them as it parses): a NaN, infinite or negative reserve or
    /// slack was used as 0 or `u64::MAX` bytes.
    ///
    /// # Errors
    /// [`ConfigError::InvalidSetting`] naming the field.
    pub(crate) fn check_streaming_numbers(&self) -> Result<()> {
        for (name, value) in [
            ("streaming_reserve", self.streaming_reserve),
            ("streaming_slack", self.streaming_slack),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(ConfigError::InvalidSetting {
                    name,
                    value: value.to_string(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// The budget in bytes for a GPU with `free` bytes free.
    ///
    /// # Errors
    /// [`ConfigError::BudgetTooLarge`] when a fixed budget exceeds `free`
    /// (or `Auto` leaves nothing after the margin); [`ConfigError::ZeroBudget`].
    pub fn resolve_budget(&self, free: u64) -> Result<u64> {
        let budget = match self.budget {
            BudgetSetting::Auto => free.saturating_sub(self.margin),
            BudgetSetting::Bytes(b) => b,
        };
        if budget == 0 {
            return Err(match self.budget {
                BudgetSetting::Auto => ConfigError::BudgetTooLarge {
                    budget: self.margin,
                    available: free,
                },
                BudgetSetting::Bytes(_) => ConfigError::ZeroBudget,
            }
            .into());
        }
        if budget > free {
            return Err(ConfigError::BudgetTooLarge {
                budget,
                available: free,
            }
            .into());
        }
        Ok(budget)
    }
}

/// An on/off setting from the variable `name`: `1`, `on`, `true` or `0`,
/// `off`, `false`.
fn switch(name: &'static str, value: &str) -> Result<bool> {
    match value.trim() {
        "1" | "on" | "true" => Ok(true),
        "0" | "off" | "false" => Ok(false),
        _ => Err(ConfigError::InvalidSetting {
            name,
            value: value.to_owned(),
        }
        .into()),
    }
}

/// A finite, non-negative number from the variable `name`.
fn non_negative(name: &'static str, value: &str) -> Result<f64> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r >= 0.0)
        .ok_or_else(|| {
            ConfigError::InvalidSetting {
                name,
                value: value.to_owned(),
            }
            .into()
        })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn streaming_factors_set_in_code_are_checked() {
        assert_eq!(MemoryConfig::default().check_streaming_numbers(), Ok(()));
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let reserve = MemoryConfig {
                streaming_reserve: bad,
                ..MemoryConfig::default()
            };
            let slack = MemoryConfig {
                streaming_slack: bad,
                ..MemoryConfig::default()
            };
            assert!(matches!(
                reserve.check_streaming_numbers(),
                Err(Error::Config(ConfigError::InvalidSetting {
                    name: "streaming_reserve",
                    ..
                }))
            ));
            assert!(matches!(
                slack.check_streaming_numbers(),
                Err(Error::Config(ConfigError::InvalidSetting {
                    name: "streaming_slack",
                    ..
                }))
            ));
        }
    }

    #[test]
    fn byte_sizes_parse() {
        let ok = [
            ("4GiB", 4 << 30),
            ("4 GiB", 4 << 30),
            ("4gib", 4 << 30),
            ("512MiB", 512 << 20),
            ("1.5GiB", 3 << 29),
            ("64KB", 64_000),
            ("2TB", 2_000_000_000_000),
            ("1073741824", 1 << 30),
            ("7B", 7),
            (" 3 MiB ", 3 << 20),
            ("2 GiB", 2 << 30),
            ("0.5MiB", 1 << 19),
            ("18446744073709551615", u64::MAX),
            ("18446744073709551615 B", u64::MAX),
        ];
        for (text, bytes) in ok {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
        for text in [
            "",
            "GiB",
            "4 GiBs",
            "-1GiB",
            "1.GiB",
            "1e9",
            "4 G",
            "99999999999TiB",
            ".5GiB",
            "4Gi",
            "1.5.1GiB",
            "auto",
            "4 PiB",
            "18446744073709551615KiB",
            "18446744073709551616",
            "18446744073709551616 B",
            "99999999999999999999B",
            "1.9B",
            "0.5",
        ] {
            assert_eq!(
                text.parse::<ByteSize>(),
                Err(ConfigError::InvalidByteSize { text: text.into() }.into()),
                "{text:?}"
            );
        }
        assert_eq!(ByteSize(4 << 30).to_string(), "4.0 GiB");
        assert_eq!(ByteSize(150 << 20).to_string(), "150.0 MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000 B");
        assert_eq!(ByteSize(1536 << 20).to_string(), "1.5 GiB");
    }

    #[test]
    fn exact_sizes_parse_back() {
        for (bytes, text) in [
            (2 << 30, "2GiB"),
            (512 << 20, "512MiB"),
            (3 << 29, "1610612736"),
            (1000, "1000B"),
            (4 << 40, "4TiB"),
            (1, "1B"),
        ] {
            assert_eq!(ByteSize(bytes).exact(), text);
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn environment_is_parsed_into_a_typed_config() {
        assert_eq!(
            MemoryConfig::from_vars(vars(&[])),
            Ok(MemoryConfig::default())
        );
        let c = MemoryConfig::from_vars(vars(&[
            ("HEMEM_DEVICE_BUDGET", "4GiB"),
            ("HEMEM_MEMORY_POLICY", "dynamic"),
            ("HEMEM_MANAGED_OVERSUBSCRIPTION", "allow"),
            ("HEMEM_RECORD_TRACE", "run.csv"),
            ("HEMEM_EVICTION", "lru"),
            ("HEMEM_STREAMING_ARENA", "off"),
            ("HEMEM_STREAMING_MARGIN", "16"),
            ("HEMEM_ZERO_COPY", "streaming"),
            ("HEMEM_STREAMING_PLAN", "belady"),
            ("HEMEM_STREAMING_SLACK", "0.15"),
            ("HEMEM_TIME_RUNS", "1"),
            ("HEMEM_DEVICE_POOL", "driver"),
            ("HEMEM_DEPENDENT_LAUNCH", "off"),
        ]))
        .expect("valid");
        assert_eq!(
            (c.dependent_launch, MemoryConfig::default().dependent_launch),
            (DependentLaunch::Off, DependentLaunch::Auto)
        );
        assert_eq!(
            (c.device_pool, MemoryConfig::default().device_pool),
            (PoolKind::Driver, PoolKind::Paged)
        );
        assert!(c.time_runs && !MemoryConfig::default().time_runs);
        assert_eq!(
            (c.streaming_plan, MemoryConfig::default().streaming_plan),
            (StreamingPlan::Belady, StreamingPlan::Auto)
        );
        let window = MemoryConfig::from_vars(vars(&[("HEMEM_STREAMING_PLAN", "window")]));
        assert_eq!(window.expect("valid").streaming_plan, StreamingPlan::Window);
        assert_eq!(
            (c.streaming_slack, MemoryConfig::default().streaming_slack),
            (0.15, 0.0)
        );
        assert_eq!(
            (c.zero_copy, MemoryConfig::default().zero_copy),
            (ZeroCopy::Streaming, ZeroCopy::Fallback)
        );
        assert!(!c.streaming_arena && MemoryConfig::default().streaming_arena);
        assert_eq!(
            (c.streaming_margin, MemoryConfig::default().streaming_margin),
            (16, 32)
        );
        assert_eq!(c.eviction, Some(Eviction::LeastRecentlyUsed));
        assert_eq!(c.budget, BudgetSetting::Bytes(4 << 30));
        assert_eq!(c.policy, PolicyConfig::Dynamic { threshold: 4 });
        assert_eq!(c.oversubscription, Oversubscription::AllowDriverManaged);
        assert_eq!(c.record_trace, Some(PathBuf::from("run.csv")));

        let c = MemoryConfig::from_vars(vars(&[
            ("HEMEM_MEMORY_POLICY", "profiled"),
            ("HEMEM_POLICY_TRACE", "rec.csv"),
        ]))
        .expect("valid");
        assert_eq!(c.policy.kind(), PolicyKind::Profiled);

        let bad: Vec<(Vec<(&str, &str)>, Error)> = vec![
            (
                vec![("HEMEM_MEMORY_POLICY", "lru")],
                ConfigError::UnknownPolicy { name: "lru".into() }.into(),
            ),
            (
                vec![("HEMEM_MEMORY_POLICY", "profiled")],
                ConfigError::MissingTrace.into(),
            ),
            (
                vec![("HEMEM_EVICTION", "mru")],
                ConfigError::UnknownEviction { name: "mru".into() }.into(),
            ),
            (
                vec![("HEMEM_DEVICE_BUDGET", "lots")],
                ConfigError::InvalidByteSize {
                    text: "lots".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_DEVICE_BUDGET", "0GiB")],
                ConfigError::ZeroBudget.into(),
            ),
            (
                vec![("HEMEM_MANAGED_OVERSUBSCRIPTION", "yes")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_MANAGED_OVERSUBSCRIPTION",
                    value: "yes".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_STREAMING_ARENA", "maybe")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_STREAMING_ARENA",
                    value: "maybe".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_DEVICE_POOL", "cuda")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_DEVICE_POOL",
                    value: "cuda".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_DEPENDENT_LAUNCH", "yes")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_DEPENDENT_LAUNCH",
                    value: "yes".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_TIME_RUNS", "yes")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_TIME_RUNS",
                    value: "yes".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_ZERO_COPY", "always")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_ZERO_COPY",
                    value: "always".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_STREAMING_SLACK", "-1")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_STREAMING_SLACK",
                    value: "-1".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_STREAMING_PLAN", "lru")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_STREAMING_PLAN",
                    value: "lru".into(),
                }
                .into(),
            ),
            (
                vec![("HEMEM_STREAMING_MARGIN", "0")],
                ConfigError::InvalidSetting {
                    name: "HEMEM_STREAMING_MARGIN",
                    value: "0".into(),
                }
                .into(),
            ),
        ];
        for (pairs, error) in bad {
            assert_eq!(MemoryConfig::from_vars(vars(&pairs)), Err(error));
        }
    }

    #[test]
    fn budgets_resolve_against_free_memory() {
        let gib = ByteSize::GIB;
        let mut c = MemoryConfig::default();
        assert_eq!(c.resolve_budget(8 * gib), Ok(8 * gib - 512 * ByteSize::MIB));
        assert_eq!(
            c.resolve_budget(100),
            Err(ConfigError::BudgetTooLarge {
                budget: 512 * ByteSize::MIB,
                available: 100
            }
            .into())
        );
        c.budget = BudgetSetting::Bytes(4 * gib);
        assert_eq!(c.resolve_budget(8 * gib), Ok(4 * gib));
        assert_eq!(
            c.resolve_budget(2 * gib),
            Err(ConfigError::BudgetTooLarge {
                budget: 4 * gib,
                available: 2 * gib
            }
            .into())
        );
    }

    #[test]
    fn policies_build_and_profiled_needs_a_valid_trace() {
        for kind in [
            PolicyKind::Device,
            PolicyKind::Managed,
            PolicyKind::Static,
            PolicyKind::Dynamic,
            PolicyKind::Planned,
        ] {
            let config = PolicyConfig::from_kind(kind, None).expect("no trace needed");
            assert_eq!(config.build(1 << 30).map(|p| p.name()), Ok(kind.name()));
        }
        let dir = std::env::temp_dir().join(format!("hemem-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("bad.csv");
        std::fs::write(&path, "id,class\n").expect("write");
        let config =
            PolicyConfig::from_kind(PolicyKind::Profiled, Some(path)).expect("has a trace");
        assert_eq!(
            config.build(1 << 30).map(|p| p.name()),
            Err(crate::TraceError::Malformed {
                line: 1,
                fault: crate::TraceFault::Header
            }
            .into())
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
