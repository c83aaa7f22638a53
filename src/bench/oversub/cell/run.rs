//! A cell measured in this process: its parameters and memory settings,
//! the operation prepared and timed, the copies counted.

use std::sync::Arc;
use std::time::Instant;

use hemem_bootstrap::linear_transform::DiagonalStorage;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use hemem_memory::cuda::cupti::{MemcpyCounters, UnifiedMemoryCounters};
use hemem_memory::policy::PolicyKind;
use hemem_memory::trace::ProfileSettings;
use hemem_memory::{MemoryClass, MemoryConfig, PolicyConfig, ProfiledConfig};

use super::{Cell, CellRecord, CellSettings, CellStatus, Operation, SweepPolicy, TraceFiles};
use crate::bench::measure::{Snapshot, Summary, peak_rss_bytes, settle_copies, time_runs};
use crate::bench::workload::{BootstrapWorkload, InferenceWorkload, random_ciphertext};
use crate::inference::{NetworkShape, WeightResidency};
use crate::{Error, Result};

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
