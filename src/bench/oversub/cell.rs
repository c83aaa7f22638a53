//! One cell of the sweep: a preset, a budget, a policy and an operation,
//! measured in this process ([`run_cell`]) into a [`CellRecord`], which is
//! both the child's JSON line and a CSV row.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use hemem_ckks::prelude::*;
use hemem_memory::policy::{Divergence, PolicyKind};
use hemem_memory::{BudgetSetting, ByteSize};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod run;

pub use run::run_cell;

/// An operation of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// Ciphertext + ciphertext at the encryption level.
    Add,
    /// Ciphertext × ciphertext, relinearised and rescaled.
    Mult,
    /// Rotation by one slot (one key switch).
    Rotate,
    /// Complex conjugation (one key switch).
    Conjugate,
    /// Bootstrapping of one real ciphertext from level 3.
    Bootstrap,
    /// Bootstrapping of B ciphertexts stage by stage
    /// (`Bootstrapper::bootstrap_real_many`); times are per ciphertext.
    BootstrapBatch(usize),
    /// One encrypted image through the ResNet-20-shaped network
    /// ([`crate::inference`], [`crate::inference::NetworkShape::resnet20_for_slots`]):
    /// convolutions, activations and the bootstraps between blocks. Not in
    /// [`Operation::DEFAULT`]: its keys, weights and eight bootstraps make
    /// it the heaviest cell.
    Inference,
}

impl Operation {
    /// The default operations: the paper's four, bootstrapping, and a batch
    /// of four bootstraps.
    pub const DEFAULT: [Self; 6] = [
        Self::Add,
        Self::Mult,
        Self::Rotate,
        Self::Conjugate,
        Self::Bootstrap,
        Self::BootstrapBatch(4),
    ];

    /// Whether the operation bootstraps (needs the bootstrapping keys).
    pub fn is_bootstrap(self) -> bool {
        matches!(
            self,
            Self::Bootstrap | Self::BootstrapBatch(_) | Self::Inference
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Add => f.write_str("add"),
            Self::Mult => f.write_str("mult"),
            Self::Rotate => f.write_str("rotate"),
            Self::Conjugate => f.write_str("conjugate"),
            Self::Bootstrap => f.write_str("bootstrap"),
            Self::BootstrapBatch(b) => write!(f, "bootstrap_batch{b}"),
            Self::Inference => f.write_str("inference"),
        }
    }
}

impl FromStr for Operation {
    type Err = Error;

    /// Parses `add`, `mult`, `rotate`, `conjugate`, `bootstrap`,
    /// `bootstrap_batchB` (1 ≤ B ≤ [`MAX_BATCH`](super::super::MAX_BATCH))
    /// or `inference`.
    fn from_str(s: &str) -> Result<Self> {
        let unknown = || Error::UnknownOperation { name: s.to_owned() };
        Ok(match s.trim() {
            "add" => Self::Add,
            "mult" => Self::Mult,
            "rotate" => Self::Rotate,
            "conjugate" => Self::Conjugate,
            "bootstrap" => Self::Bootstrap,
            "inference" => Self::Inference,
            other => {
                let b: usize = other
                    .strip_prefix("bootstrap_batch")
                    .and_then(|b| b.parse().ok())
                    .filter(|b| (1..=super::super::MAX_BATCH).contains(b))
                    .ok_or_else(unknown)?;
                Self::BootstrapBatch(b)
            }
        })
    }
}

/// A policy column of the sweep: one of the memory system's placement
/// policies, or `manual-swap`, the hand-written swap the hybrid-UM paper
/// measures its `profiled` scheme against (§IV, its ResNet: 22 %).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SweepPolicy {
    /// A placement policy ([`PolicyKind`]), by its own name.
    Memory(PolicyKind),
    /// `manual-swap`: the `device` policy (everything pooled, no managed
    /// memory, no streaming), and the workload swaps its own read-only
    /// buffers by hand: the inference network's weights wait in host memory
    /// and each layer's are copied to the device just before it runs and
    /// dropped after ([`crate::inference::WeightResidency::Swapped`]). Only
    /// [`Operation::Inference`] has such buffers; the other operations'
    /// cells are not made ([`SweepPolicy::runs`]).
    ManualSwap,
}

impl SweepPolicy {
    /// The memory system's six policies, in [`PolicyKind::ALL`]'s order (the
    /// default of a sweep; `manual-swap` is asked for by name).
    pub const MEMORY: [Self; 6] = [
        Self::Memory(PolicyKind::Device),
        Self::Memory(PolicyKind::Managed),
        Self::Memory(PolicyKind::Static),
        Self::Memory(PolicyKind::Profiled),
        Self::Memory(PolicyKind::Dynamic),
        Self::Memory(PolicyKind::Planned),
    ];

    /// The name in the CSV and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Memory(kind) => kind.name(),
            Self::ManualSwap => "manual-swap",
        }
    }

    /// The placement policy the cell's memory system runs
    /// (`manual-swap`: `device`).
    pub const fn memory_policy(self) -> PolicyKind {
        match self {
            Self::Memory(kind) => kind,
            Self::ManualSwap => PolicyKind::Device,
        }
    }

    /// Whether a cell of this policy and `operation` exists: `manual-swap`
    /// only for the inference, the only workload that owns buffers to swap.
    pub fn runs(self, operation: Operation) -> bool {
        match self {
            Self::Memory(_) => true,
            Self::ManualSwap => operation == Operation::Inference,
        }
    }
}

impl From<PolicyKind> for SweepPolicy {
    fn from(kind: PolicyKind) -> Self {
        Self::Memory(kind)
    }
}

impl PartialEq<PolicyKind> for SweepPolicy {
    fn eq(&self, other: &PolicyKind) -> bool {
        *self == Self::Memory(*other)
    }
}

impl fmt::Display for SweepPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SweepPolicy {
    type Err = Error;

    /// Parses a memory policy's name or `manual-swap`.
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if s == Self::ManualSwap.name() {
            return Ok(Self::ManualSwap);
        }
        s.parse::<PolicyKind>()
            .map(Self::Memory)
            .map_err(|_| Error::UnknownSweepPolicy { name: s.to_owned() })
    }
}

/// A device budget of the sweep: bytes, or `none` (the card's free memory
/// minus the margin, [`BudgetSetting::Auto`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Budget(pub Option<u64>);

impl Budget {
    /// No budget of the sweep's own.
    pub const NONE: Self = Self(None);

    /// The paper's cards (2 and 6 GiB), 4 GiB between them, and none.
    pub const DEFAULT: [Self; 4] = [
        Self(Some(2 * ByteSize::GIB)),
        Self(Some(4 * ByteSize::GIB)),
        Self(Some(6 * ByteSize::GIB)),
        Self::NONE,
    ];

    /// The memory system's setting for this budget.
    pub fn setting(self) -> BudgetSetting {
        self.0.map_or(BudgetSetting::Auto, BudgetSetting::Bytes)
    }
}

impl fmt::Display for Budget {
    /// `none`, or the size as `2GiB` ([`ByteSize::exact`], so it parses
    /// back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("none"),
            Some(bytes) => f.write_str(&ByteSize(bytes).exact()),
        }
    }
}

impl FromStr for Budget {
    type Err = Error;

    /// Parses `none` or a byte size (`2GiB`, `512MiB`, `1073741824`; the
    /// memory crate's [`ByteSize`] syntax); zero is refused.
    fn from_str(s: &str) -> Result<Self> {
        if s.trim().eq_ignore_ascii_case("none") {
            return Ok(Self::NONE);
        }
        match s.parse::<ByteSize>() {
            Ok(ByteSize(bytes)) if bytes > 0 => Ok(Self(Some(bytes))),
            _ => Err(Error::InvalidBudget { text: s.to_owned() }),
        }
    }
}

/// One cell of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cell {
    /// The parameter preset.
    pub preset: Preset,
    /// The device budget.
    pub budget: Budget,
    /// The placement policy (or `manual-swap`).
    pub policy: SweepPolicy,
    /// The operation timed.
    pub operation: Operation,
}

impl Cell {
    /// The key that identifies the cell in a CSV: preset, budget, policy and
    /// operation names.
    pub fn key(&self) -> [String; 4] {
        [
            self.preset.name().to_owned(),
            self.budget.to_string(),
            self.policy.name().to_owned(),
            self.operation.to_string(),
        ]
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} budget {} policy {} {}",
            self.preset.name(),
            self.budget,
            self.policy,
            self.operation
        )
    }
}

/// How a cell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Measured.
    Ok,
    /// The device budget refused a request (`OverBudget`), the `device`
    /// policy's expected failure on a small card.
    OverBudget,
    /// The device or the host ran out of memory, or managed memory would have
    /// exceeded its cap.
    OutOfMemory,
    /// Killed at the time limit.
    Timeout,
    /// The child process died without a report (a signal, an abort, the
    /// kernel's out-of-memory killer).
    Crashed,
    /// Any other error (its message is the record's `reason`).
    Failed,
}

impl CellStatus {
    /// The status's name in the CSV.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::OverBudget => "over_budget",
            Self::OutOfMemory => "out_of_memory",
            Self::Timeout => "timeout",
            Self::Crashed => "crashed",
            Self::Failed => "failed",
        }
    }

    /// The short mark drawn in the plots and written in the tables.
    pub const fn mark(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::OverBudget => "over budget",
            Self::OutOfMemory => "OOM",
            Self::Timeout => "timeout",
            Self::Crashed => "crashed",
            Self::Failed => "failed",
        }
    }

    /// The status of an error: `OverBudget` and out-of-memory errors are
    /// told apart from the rest.
    pub fn of_error(error: &Error) -> Self {
        if error.is_over_budget() {
            Self::OverBudget
        } else if error.is_out_of_memory() {
            Self::OutOfMemory
        } else {
            Self::Failed
        }
    }
}

impl fmt::Display for CellStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How every cell of a sweep is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellSettings {
    /// `cpu`, `gpu`, `gpu:N` or `auto`.
    pub device: DeviceSelection,
    /// Untimed runs first.
    pub warmup: usize,
    /// Timed runs (K).
    pub iterations: usize,
    /// On a GPU, count unified-memory traffic, page faults and copies with
    /// CUPTI (left empty where CUPTI cannot be enabled).
    pub cupti: bool,
    /// `profiled`: what a replay that leaves its recording does.
    pub on_divergence: Divergence,
}

impl Default for CellSettings {
    fn default() -> Self {
        Self {
            device: DeviceSelection::Gpu(0),
            warmup: 2,
            iterations: 5,
            cupti: true,
            on_divergence: Divergence::Error,
        }
    }
}

/// The allocation traces of a `profiled` cell: the recording run writes
/// `record`; the replay reads `replay`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceFiles {
    /// Write this run's allocation trace here.
    pub record: Option<PathBuf>,
    /// The recording a `profiled` run replays.
    pub replay: Option<PathBuf>,
}

/// One measured cell: the child's JSON line and one CSV row. Byte and fault
/// counts are per timed run (means over the K runs); counters that do not
/// exist on the device that ran (CUPTI's on the CPU, the residency
/// manager's without a budget) are empty, never zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRecord {
    /// Preset name.
    pub preset: String,
    /// Budget as `2GiB` or `none`.
    pub budget: String,
    /// Policy name.
    pub policy: String,
    /// Operation name.
    pub op: String,
    /// How the cell ended.
    pub status: CellStatus,
    /// The device that ran it (`cpu`, `gpu:0`).
    pub device: String,
    /// Untimed runs.
    pub warmup: usize,
    /// Timed runs.
    pub iterations: usize,
    /// Median milliseconds per run (per ciphertext for a batch).
    pub median_ms: Option<f64>,
    /// Fastest run.
    pub min_ms: Option<f64>,
    /// Slowest run.
    pub max_ms: Option<f64>,
    /// The most device-resident bytes the residency manager saw (pool
    /// footprint plus resident managed bytes), GPU only.
    pub peak_device_resident_bytes: Option<u64>,
    /// The budget the allocator enforced, in bytes (GPU only).
    pub budget_bytes: Option<u64>,
    /// The most bytes the device pool held by the driver's count (GPU only).
    pub pool_peak_bytes: Option<u64>,
    /// hemem's count of bytes moved to the device per run (prefetches of
    /// evicted managed buffers, fetches of streamed ones).
    pub to_device_bytes: Option<u64>,
    /// hemem's count of bytes evicted to the host per run.
    pub to_host_bytes: Option<u64>,
    /// Buffers evicted per run.
    pub evictions: Option<u64>,
    /// CUPTI: host→device bytes per run (unified-memory migrations and
    /// explicit copies).
    pub cupti_htod_bytes: Option<u64>,
    /// CUPTI: device→host bytes per run.
    pub cupti_dtoh_bytes: Option<u64>,
    /// CUPTI: GPU page faults on managed memory per run (a lower bound:
    /// CUPTI drops records past about 8191 per burst).
    pub gpu_page_faults: Option<u64>,
    /// The process's peak resident set (host memory).
    pub peak_rss_bytes: Option<u64>,
    /// Wall seconds of the cell, setup included.
    pub seconds: f64,
    /// Why the cell has no measurement (the error, the exit status), or
    /// what was missing (CUPTI); empty otherwise.
    pub reason: String,
}

impl CellRecord {
    /// A record of `cell` without measurements.
    pub fn unmeasured(
        cell: &Cell,
        settings: &CellSettings,
        status: CellStatus,
        reason: impl Into<String>,
    ) -> Self {
        let [preset, budget, policy, op] = cell.key();
        Self {
            preset,
            budget,
            policy,
            op,
            status,
            device: settings.device.to_string(),
            warmup: settings.warmup,
            iterations: settings.iterations,
            median_ms: None,
            min_ms: None,
            max_ms: None,
            peak_device_resident_bytes: None,
            budget_bytes: None,
            pool_peak_bytes: None,
            to_device_bytes: None,
            to_host_bytes: None,
            evictions: None,
            cupti_htod_bytes: None,
            cupti_dtoh_bytes: None,
            gpu_page_faults: None,
            peak_rss_bytes: None,
            seconds: 0.0,
            reason: reason.into(),
        }
    }

    /// The key of the cell this record measured (budget names normalised,
    /// so `2048MiB` and `2GiB` are one cell).
    pub fn key(&self) -> [String; 4] {
        let budget = self
            .budget
            .parse::<Budget>()
            .map_or_else(|_| self.budget.clone(), |b| b.to_string());
        [
            self.preset.clone(),
            budget,
            self.policy.clone(),
            self.op.clone(),
        ]
    }
}

#[cfg(test)]
mod tests;
