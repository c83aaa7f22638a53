//! One cell of the sweep: a preset, a budget, a policy and an operation,
//! measured in this process ([`run_cell`]) into a [`CellRecord`], which is
//! both the child's JSON line and a CSV row.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use hemem_bootstrap::linear_transform::DiagonalStorage;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use hemem_memory::cuda::cupti::{MemcpyCounters, UnifiedMemoryCounters};
use hemem_memory::policy::{Divergence, PolicyKind};
use hemem_memory::trace::ProfileSettings;
use hemem_memory::{
    BudgetSetting, ByteSize, MemoryClass, MemoryConfig, PolicyConfig, ProfiledConfig,
};
use serde::{Deserialize, Serialize};

use crate::bench::measure::{Snapshot, Summary, peak_rss_bytes, settle_copies, time_runs};
use crate::bench::workload::{BootstrapWorkload, InferenceWorkload, random_ciphertext};
use crate::inference::{NetworkShape, WeightResidency};
use crate::{Error, Result};

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
    /// ([`crate::inference`], [`NetworkShape::resnet20_for_slots`]):
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
    /// `bootstrap_batchB` (B ≥ 1) or `inference`.
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
                    .filter(|&b| b >= 1)
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

/// The preset's parameters: test presets allowed (they say so in their
/// name), the others checked.
fn parameters(preset: Preset) -> Result<Parameters> {
    Ok(Parameters::from_preset_with(
        preset,
        SecurityCheck::for_preset(preset),
    )?)
}

/// The memory settings of `cell`: the `HEMEM_*` variables, then the cell's
/// budget and policy; `traces` says what to record and replay.
fn memory_config(
    cell: &Cell,
    settings: &CellSettings,
    traces: &TraceFiles,
) -> Result<MemoryConfig> {
    let mut config = MemoryConfig::from_env()?;
    config.budget = cell.budget.setting();
    config.record_trace.clone_from(&traces.record);
    config.policy = match cell.policy.memory_policy() {
        PolicyKind::Profiled => PolicyConfig::Profiled(ProfiledConfig {
            trace: traces
                .replay
                .clone()
                .ok_or(hemem_memory::ConfigError::MissingTrace)
                .map_err(hemem_memory::Error::from)?,
            lifetime_threshold: ProfileSettings::default().lifetime_threshold,
            peak_pool_cap: None,
            on_divergence: settings.on_divergence,
        }),
        kind => PolicyConfig::from_kind(kind, None)?,
    };
    Ok(config)
}

/// CUPTI's counters, enabled before the context exists.
struct Counters {
    unified: UnifiedMemoryCounters,
    copies: MemcpyCounters,
}

impl Counters {
    fn enable(device: DeviceSelection) -> std::result::Result<Self, hemem_memory::Error> {
        let ordinal = match device {
            DeviceSelection::Gpu(n) => n,
            _ => 0,
        };
        Ok(Self {
            unified: UnifiedMemoryCounters::enable(u32::try_from(ordinal).unwrap_or(0))?,
            copies: MemcpyCounters::enable()?,
        })
    }

    /// `(host→device bytes, device→host bytes, GPU page faults)` since the
    /// previous collection.
    fn collect(&self, context: &Context) -> Result<(u64, u64, u64)> {
        settle_copies(context)?;
        let um = self.unified.collect()?;
        let copies = self.copies.collect()?;
        Ok((
            um.htod_bytes() + copies.htod_bytes,
            um.dtoh_bytes() + copies.dtoh_bytes,
            um.gpu_faults,
        ))
    }
}

/// What the operation needs, made once before it is timed.
enum Prepared {
    /// A fresh ciphertext and an evaluator with the operation's key.
    Single {
        evaluator: Box<Evaluator>,
        ciphertext: Box<Ciphertext>,
    },
    /// A preset's bootstrapping.
    Bootstrap(Box<BootstrapWorkload>),
    /// The inference network.
    Inference(Box<InferenceWorkload>),
}

fn prepare(context: &Context, operation: Operation, policy: SweepPolicy) -> Result<Prepared> {
    if !policy.runs(operation) {
        return Err(Error::ManualSwapUnsupported {
            operation: operation.to_string(),
        });
    }
    let mut sampler = Sampler::from_os()?;
    if operation == Operation::Inference {
        let shape = NetworkShape::resnet20_for_slots(context.params().slots());
        let residency = match policy {
            SweepPolicy::ManualSwap => WeightResidency::Swapped,
            SweepPolicy::Memory(_) => WeightResidency::Resident,
        };
        // Compact, not `Fit`: the network's own diagonals are encoded after
        // the bootstrapper, so `Fit` could not weigh them.
        let workload = InferenceWorkload::generate_with_residency(
            context,
            &shape,
            DiagonalStorage::Compact,
            residency,
        )?;
        return Ok(Prepared::Inference(Box::new(workload)));
    }
    if operation.is_bootstrap() {
        let workload =
            // Compact, not `Fit`: policies are compared on the same data, whatever
            // room each leaves.
            BootstrapWorkload::generate(context, None, DiagonalStorage::Compact, &mut sampler)?;
        return Ok(Prepared::Bootstrap(Box::new(workload)));
    }
    let keygen = KeyGenerator::new(context)?;
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    let request = KeySetRequest {
        relinearization: operation == Operation::Mult,
        conjugation: operation == Operation::Conjugate,
        rotations: if operation == Operation::Rotate {
            vec![1]
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    let keys = keygen.key_set(&secret, &request)?;
    let (_, ciphertext) = random_ciphertext(context, &public, &mut sampler)?;
    Ok(Prepared::Single {
        evaluator: Box::new(Evaluator::with_keys(context, Arc::new(keys))),
        ciphertext: Box::new(ciphertext),
    })
}

/// Runs the operation `runs` times, timed one by one.
fn run_operation(
    context: &Context,
    prepared: &Prepared,
    operation: Operation,
    runs: usize,
) -> Result<Vec<f64>> {
    let none = || Ok(());
    match (prepared, operation) {
        (
            Prepared::Single {
                evaluator,
                ciphertext,
            },
            op,
        ) => {
            let ct = ciphertext;
            time_runs(context, runs, none, |()| {
                Ok(match op {
                    Operation::Mult => evaluator.mult(ct, ct)?,
                    Operation::Rotate => evaluator.rotate(ct, 1)?,
                    Operation::Conjugate => evaluator.conjugate(ct)?,
                    _ => evaluator.add(ct, ct)?,
                })
            })
        }
        (Prepared::Bootstrap(w), Operation::BootstrapBatch(b)) => {
            let copies = || {
                (0..b)
                    .map(|_| w.input.clone_as(MemoryClass::Ciphertext))
                    .collect::<hemem_ckks::Result<Vec<_>>>()
                    .map_err(Error::from)
            };
            let times = time_runs(context, runs, copies, |inputs| {
                Ok(w.bootstrapper.bootstrap_real_many(&inputs)?)
            })?;
            Ok(times.into_iter().map(|t| t / b as f64).collect())
        }
        (Prepared::Bootstrap(w), _) => time_runs(context, runs, none, |()| {
            Ok(w.bootstrapper.bootstrap_real(&w.input)?)
        }),
        (Prepared::Inference(w), _) => {
            time_runs(context, runs, none, |()| w.network.infer(&w.input))
        }
    }
}

/// Measures `cell` in this process: sets up the context (CUPTI first, on a
/// GPU), the keys and the input, runs `warmup` untimed and `iterations`
/// timed runs, and reads the counters. Never fails: an error becomes the
/// record's status ([`CellStatus::of_error`]) and reason. For `profiled`,
/// `traces.replay` must name the recording (a run of the same cell under
/// `static` with `traces.record` set writes one).
pub fn run_cell(cell: &Cell, settings: &CellSettings, traces: &TraceFiles) -> CellRecord {
    let started = Instant::now();
    let mut record = match measure(cell, settings, traces) {
        Ok(record) => record,
        Err(e) => CellRecord::unmeasured(cell, settings, CellStatus::of_error(&e), e.with_causes()),
    };
    record.seconds = started.elapsed().as_secs_f64();
    record
}

fn measure(cell: &Cell, settings: &CellSettings, traces: &TraceFiles) -> Result<CellRecord> {
    let params = parameters(cell.preset)?;
    let config = memory_config(cell, settings, traces)?;
    let mut record = CellRecord::unmeasured(cell, settings, CellStatus::Ok, "");
    let counters = match settings.device {
        DeviceSelection::Cpu => None,
        _ if !settings.cupti => None,
        device => match Counters::enable(device) {
            Ok(c) => Some(c),
            Err(e) => {
                record.reason = format!("no CUPTI counts: {e}");
                None
            }
        },
    };
    let context = Context::with_memory(params, settings.device, &config)?;
    record.device = context.device().to_string();
    let prepared = prepare(&context, cell.operation, cell.policy)?;
    run_operation(&context, &prepared, cell.operation, settings.warmup)?;
    if let Some(c) = &counters {
        c.collect(&context)?;
    }
    let before = Snapshot::take(&context);
    let times = run_operation(&context, &prepared, cell.operation, settings.iterations)?;
    let moved = Snapshot::take(&context).since(&before);
    let runs = settings.iterations.max(1) as u64;
    if let Some(c) = &counters {
        let (htod, dtoh, faults) = c.collect(&context)?;
        record.cupti_htod_bytes = Some(htod / runs);
        record.cupti_dtoh_bytes = Some(dtoh / runs);
        record.gpu_page_faults = Some(faults / runs);
    }
    let allocator = context.backend().allocator().clone();
    if let Some(summary) = Summary::of(&times) {
        record.median_ms = Some(summary.median);
        record.min_ms = Some(summary.min);
        record.max_ms = Some(summary.max);
    }
    let usage = allocator.residency_usage();
    record.peak_device_resident_bytes = usage.map(|u| u.peak_device);
    record.budget_bytes = usage.map(|u| u.budget);
    record.pool_peak_bytes = allocator.pool_reserved_peak_bytes()?;
    if allocator.device().is_some() {
        record.to_device_bytes = Some(moved.to_device / runs);
        record.to_host_bytes = Some(moved.evicted / runs);
        record.evictions = Some(moved.evictions / runs);
    }
    // Free the workload before writing the trace, so its buffers' frees are
    // in it.
    drop((prepared, context));
    allocator.write_trace()?;
    record.peak_rss_bytes = peak_rss_bytes();
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_and_budgets_round_trip() {
        for op in Operation::DEFAULT {
            assert_eq!(op.to_string().parse::<Operation>().ok(), Some(op));
        }
        assert_eq!(
            "bootstrap_batch8".parse::<Operation>().ok(),
            Some(Operation::BootstrapBatch(8))
        );
        assert_eq!(
            "inference".parse::<Operation>().ok(),
            Some(Operation::Inference)
        );
        assert_eq!(Operation::Inference.to_string(), "inference");
        for bad in [
            "div",
            "bootstrap_batch0",
            "bootstrap_batch",
            "bootstrap_batchx",
        ] {
            assert!(
                matches!(
                    bad.parse::<Operation>(),
                    Err(Error::UnknownOperation { .. })
                ),
                "{bad}"
            );
        }
        for b in Budget::DEFAULT {
            assert_eq!(b.to_string().parse::<Budget>().ok(), Some(b));
        }
        assert_eq!(
            Budget::DEFAULT.map(|b| b.to_string()),
            ["2GiB", "4GiB", "6GiB", "none"]
        );
        assert_eq!(
            "2048MiB".parse::<Budget>().ok(),
            Some(Budget(Some(2 << 30)))
        );
        assert_eq!(Budget(Some(1000)).to_string(), "1000B");
        assert_eq!("1000B".parse::<Budget>().ok(), Some(Budget(Some(1000))));
        for bad in ["0", "lots", ""] {
            assert!(matches!(
                bad.parse::<Budget>(),
                Err(Error::InvalidBudget { .. })
            ));
        }
        assert_eq!(Budget::NONE.setting(), BudgetSetting::Auto);
    }

    #[test]
    fn sweep_policies_round_trip_and_map_to_memory_policies() {
        for p in SweepPolicy::MEMORY {
            assert_eq!(p.to_string().parse::<SweepPolicy>().ok(), Some(p));
            assert_eq!(SweepPolicy::Memory(p.memory_policy()), p);
        }
        let swap: SweepPolicy = " manual-swap".parse().expect("manual-swap");
        assert_eq!(swap, SweepPolicy::ManualSwap);
        assert_eq!(swap.to_string(), "manual-swap");
        assert_eq!(swap.memory_policy(), PolicyKind::Device);
        assert!(swap.runs(Operation::Inference));
        for op in Operation::DEFAULT {
            assert!(!swap.runs(op), "{op}");
            assert!(SweepPolicy::Memory(PolicyKind::Static).runs(op));
        }
        assert_eq!(SweepPolicy::from(PolicyKind::Planned), PolicyKind::Planned);
        for bad in ["manual", "swap", "lru", ""] {
            assert!(
                matches!(
                    bad.parse::<SweepPolicy>(),
                    Err(Error::UnknownSweepPolicy { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_manual_swap_cell_of_another_operation_fails_cleanly() {
        let cell = Cell {
            preset: Preset::TestFTb,
            budget: Budget::NONE,
            policy: SweepPolicy::ManualSwap,
            operation: Operation::Rotate,
        };
        let settings = CellSettings {
            device: DeviceSelection::Cpu,
            warmup: 0,
            iterations: 1,
            ..CellSettings::default()
        };
        let record = run_cell(&cell, &settings, &TraceFiles::default());
        assert_eq!(record.status, CellStatus::Failed);
        assert!(record.reason.contains("inference"), "{}", record.reason);
        assert_eq!(record.key(), ["test-FTb", "none", "manual-swap", "rotate"]);
    }

    #[test]
    fn errors_become_statuses() {
        let over = Error::Ckks(hemem_ckks::Error::Memory(hemem_memory::Error::OverBudget {
            requested: 1 << 30,
            placing: None,
            budget: 2 << 30,
            in_use: Box::default(),
        }));
        assert_eq!(CellStatus::of_error(&over), CellStatus::OverBudget);
        let oom = Error::Memory(hemem_memory::Error::OutOfMemory {
            requested: 8,
            placement: hemem_memory::Placement::DevicePool,
            class: MemoryClass::Temporary,
        });
        assert_eq!(CellStatus::of_error(&oom), CellStatus::OutOfMemory);
        assert_eq!(CellStatus::of_error(&Error::Font), CellStatus::Failed);
    }

    #[test]
    fn a_profiled_cell_without_a_recording_fails_cleanly() {
        let cell = Cell {
            preset: Preset::TestFTb,
            budget: Budget::NONE,
            policy: PolicyKind::Profiled.into(),
            operation: Operation::Add,
        };
        let settings = CellSettings {
            device: DeviceSelection::Cpu,
            warmup: 0,
            iterations: 1,
            ..CellSettings::default()
        };
        let record = run_cell(&cell, &settings, &TraceFiles::default());
        assert_eq!(record.status, CellStatus::Failed);
        assert!(record.reason.contains("trace"), "{}", record.reason);
    }

    #[test]
    fn a_cpu_cell_is_measured_and_leaves_gpu_counters_empty() {
        let cell = Cell {
            preset: Preset::TestFTb,
            budget: "2GiB".parse().expect("budget"),
            policy: PolicyKind::Device.into(),
            operation: Operation::Mult,
        };
        let settings = CellSettings {
            device: DeviceSelection::Cpu,
            warmup: 1,
            iterations: 3,
            ..CellSettings::default()
        };
        let record = run_cell(&cell, &settings, &TraceFiles::default());
        assert_eq!(record.status, CellStatus::Ok, "{}", record.reason);
        assert_eq!(record.device, "cpu");
        let (min, median, max) = (
            record.min_ms.expect("min"),
            record.median_ms.expect("median"),
            record.max_ms.expect("max"),
        );
        assert!(min <= median && median <= max);
        assert_eq!(record.gpu_page_faults, None);
        assert_eq!(record.peak_device_resident_bytes, None);
        assert_eq!(record.to_device_bytes, None);
        assert_eq!(record.key(), ["test-FTb", "2GiB", "device", "mult"]);
    }
}
