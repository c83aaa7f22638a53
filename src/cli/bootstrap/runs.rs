//! The timed bootstraps of `hemem bootstrap` on one device: each timed to
//! the device's completion, its copies counted (the residency manager's
//! snapshots, and CUPTI's records with `--cupti`), and with `--chain` each
//! output multiplied by fresh ±1 values and bootstrapped again.

use std::sync::Arc;
use std::time::Instant;

use hemem::bench::measure::{Movement, Snapshot, settle_copies};
use hemem_bootstrap::Bootstrapper;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use hemem_memory::MemoryClass;
use hemem_memory::cuda::cupti::{KernelTimeline, MemcpyCounters};
use num_complex::Complex64;
use serde::Serialize;

use super::super::progress::Status;
use super::super::report::{human_bytes, precision_bits};
use super::setup::slot_error;
use super::{Args, timeline};

/// One bootstrap of a chain.
#[derive(Debug, Serialize)]
pub(super) struct ChainStep {
    pub ms: f64,
    /// Precision of this bootstrap alone: its output against its decrypted input.
    pub bits: f64,
    /// Precision against the exact product of the inputs so far.
    pub end_to_end_bits: f64,
}

/// What each bootstrap of a run measured, in the report's fields.
#[derive(Debug, Default, Serialize)]
pub(super) struct Measured {
    /// Milliseconds per ciphertext, to the device's completion.
    pub bootstrap_ms: Vec<f64>,
    /// When each bootstrap's call returned on the host, before waiting for
    /// the device (ms per ciphertext): a figure close to `bootstrap_ms`
    /// says the host, not the device, set the pace.
    pub submit_ms: Vec<f64>,
    /// Managed bytes prefetched back to the device during each bootstrap
    /// (buffers that had been evicted; 0 under `managed`, whose pages fault
    /// in instead).
    pub to_device_bytes: Vec<u64>,
    /// Managed bytes evicted to the host during each bootstrap.
    pub evicted_bytes: Vec<u64>,
    /// With `--cupti`: host→device bytes CUPTI's copy records saw during
    /// each bootstrap.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cupti_htod_bytes: Vec<u64>,
    /// With `--cupti`: device→host bytes of the copy records.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cupti_dtoh_bytes: Vec<u64>,
    /// With `--gpu-timeline`: each bootstrap's device time by CUPTI's
    /// kernel and copy records.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_timeline: Vec<timeline::Idle>,
    /// Buffers evicted during each bootstrap (with `evicted_bytes`, the mean
    /// size of a move).
    pub evictions: Vec<u64>,
    /// Times the device pool was trimmed during each bootstrap.
    pub pool_trims: Vec<u64>,
    /// GPU runs under a budget: host milliseconds spent in the residency
    /// driver's calls during each bootstrap, by kind (order, trim, advise_on,
    /// advise_off, to_device, to_host).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub driver_ms: Vec<serde_json::Map<String, serde_json::Value>>,
    /// `planned`: each bootstrap's streaming arena and pool refusals (see
    /// `Movement::residency`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub residency: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Bytes evicted per memory class during the last bootstrap.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub last_evicted_bytes_by_class: serde_json::Map<String, serde_json::Value>,
}

impl Measured {
    fn record(&mut self, timed: Timed) {
        let Timed {
            ms,
            submit_ms,
            movement,
            cupti,
            timeline,
        } = timed;
        self.bootstrap_ms.push(ms);
        self.submit_ms.push(submit_ms);
        if let Some((htod, dtoh)) = cupti {
            self.cupti_htod_bytes.push(htod);
            self.cupti_dtoh_bytes.push(dtoh);
        }
        self.gpu_timeline.extend(timeline);
        self.to_device_bytes.push(movement.to_device);
        self.evicted_bytes.push(movement.evicted);
        self.evictions.push(movement.evictions);
        self.pool_trims.push(movement.pool_trims);
        self.driver_ms.extend(movement.driver_ms);
        self.residency.extend(movement.residency);
        self.last_evicted_bytes_by_class = movement.evicted_by_class;
    }
}

/// What one bootstrap measured.
struct Timed {
    /// Milliseconds per ciphertext to the device's completion, and to the
    /// call's return.
    ms: f64,
    submit_ms: f64,
    /// The copies the residency manager counted.
    movement: Movement,
    /// With `--cupti`: the copy records' host→device and device→host bytes.
    cupti: Option<(u64, u64)>,
    /// With `--gpu-timeline`: the device's time by kernel and copy records.
    timeline: Option<timeline::Idle>,
}

/// What a run ends with.
pub(super) struct Outcome {
    pub measured: Measured,
    /// With `--chain`: every bootstrap of the chain.
    pub chain: Vec<ChainStep>,
    /// The last bootstrap's output.
    pub output: Ciphertext,
    /// Its largest slot error end to end (against the inputs, times the
    /// chain's factors but the last).
    pub error: f64,
}

/// The run's fixed parts: where it runs, what it bootstraps with, what
/// it counts.
pub(super) struct Runner<'a> {
    pub args: &'a Args,
    pub context: &'a Context,
    pub bootstrapper: &'a Bootstrapper,
    pub secret: &'a SecretKey,
    pub public: &'a PublicKey,
    pub cupti: Option<&'a MemcpyCounters>,
    pub kernels: Option<&'a KernelTimeline>,
    pub progress: Status,
}

impl Runner<'_> {
    /// `--iterations` bootstraps of `input` (an encryption of `values` at
    /// level 3), or of each link of the chain.
    pub(super) fn run(
        &self,
        values: &[Complex64],
        input: Ciphertext,
        sampler: &mut Sampler,
    ) -> anyhow::Result<Outcome> {
        let args = self.args;
        let iterations = args.iterations;
        let batch = args.batch;
        let mut measured = Measured::default();
        let mut chain = Vec::new();
        let evaluator = Evaluator::with_keys(self.context, Arc::clone(self.bootstrapper.key_set()));
        let mut input = input;
        let mut expected = values.to_vec();
        let mut output = None;
        for i in 0..iterations {
            let before = args.chain.then(|| self.decode(&input)).transpose()?;
            let (result, timed) = self.bootstrap_once(&input, batch, i + 1 == iterations)?;
            let moved = format!(
                "{} back to the device, {} evicted",
                human_bytes(timed.movement.to_device),
                human_bytes(timed.movement.evicted)
            );
            if let Some(before) = before {
                let after = self.decode(&result)?;
                let step = ChainStep {
                    ms: timed.ms,
                    bits: precision_bits(slot_error(&after, &before, args.complex)),
                    end_to_end_bits: precision_bits(slot_error(&after, &expected, args.complex)),
                };
                self.progress.say(&format!(
                    "  bootstrap {i}: {:.1} ms, {:.2} bits ({:.2} end to end), {moved}",
                    timed.ms, step.bits, step.end_to_end_bits
                ));
                chain.push(step);
                input = self.next_link(&evaluator, &result, &mut expected, sampler)?;
            } else {
                self.progress
                    .say(&format!("  bootstrap {i}: {:.1} ms, {moved}", timed.ms));
            }
            measured.record(timed);
            output = Some(result);
        }
        let output = output.ok_or_else(|| anyhow::anyhow!("no bootstrap ran"))?;
        let error = match chain.last() {
            Some(step) => 2f64.powf(-step.end_to_end_bits),
            None => slot_error(&self.decode(&output)?, values, args.complex),
        };
        Ok(Outcome {
            measured,
            chain,
            output,
            error,
        })
    }

    /// One timed bootstrap of `input` (of `batch` copies of it, stage by
    /// stage), bracketed by `cuProfilerStart`/`Stop` when `profiled` so
    /// that `ncu --profile-from-start off` sees one warm bootstrap only:
    /// the output and what it measured.
    fn bootstrap_once(
        &self,
        input: &Ciphertext,
        batch: usize,
        profiled: bool,
    ) -> anyhow::Result<(Ciphertext, Timed)> {
        let context = self.context;
        let copies = if batch > 1 {
            (0..batch)
                .map(|_| input.clone_as(MemoryClass::Ciphertext))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        if let Some(c) = self.cupti {
            settle_copies(context)?;
            c.collect()?;
        }
        if let Some(k) = self.kernels {
            k.collect()?;
        }
        let moved_before = Snapshot::take(context);
        let gpu = context.backend().allocator().device().filter(|_| profiled);
        if let Some(d) = gpu {
            d.set_profiling(true)?;
        }
        let t = Instant::now();
        let result = match (batch > 1, self.args.complex) {
            (true, complex) => {
                let mut outs = if complex {
                    self.bootstrapper.bootstrap_many(&copies)?
                } else {
                    self.bootstrapper.bootstrap_real_many(&copies)?
                };
                drop(copies);
                outs.truncate(1);
                outs.pop()
                    .ok_or_else(|| anyhow::anyhow!("an empty batch came back"))?
            }
            (false, true) => self.bootstrapper.bootstrap(input)?,
            (false, false) => self.bootstrapper.bootstrap_real(input)?,
        };
        let submit_ms = t.elapsed().as_secs_f64() * 1e3 / batch as f64;
        context.synchronize()?;
        let ms = t.elapsed().as_secs_f64() * 1e3 / batch as f64;
        if let Some(d) = gpu {
            d.set_profiling(false)?;
        }
        let cupti = match self.cupti {
            Some(c) => {
                settle_copies(context)?;
                let copies = c.collect()?;
                Some((copies.htod_bytes, copies.dtoh_bytes))
            }
            None => None,
        };
        let timeline = match self.kernels {
            Some(k) => Some(timeline::Idle::of(&k.collect()?.summary())),
            None => None,
        };
        let timed = Timed {
            ms,
            submit_ms,
            movement: Snapshot::take(context).since(&moved_before),
            cupti,
            timeline,
        };
        Ok((result, timed))
    }

    /// The chain's next input: `result` times a fresh encryption of random
    /// ±1 values (the magnitudes stay in range), levelled down to 3;
    /// `expected` follows the product.
    fn next_link(
        &self,
        evaluator: &Evaluator,
        result: &Ciphertext,
        expected: &mut [Complex64],
        sampler: &mut Sampler,
    ) -> anyhow::Result<Ciphertext> {
        let context = self.context;
        let params = context.params();
        let post = params
            .post_bootstrap_level()
            .ok_or_else(|| anyhow::anyhow!("the preset is not bootstrappable"))?;
        let slots = expected.len();
        let signs: Vec<Complex64> = (0..slots)
            .map(|_| {
                let s = if sampler.uniform_f64() < 0.5 {
                    -1.0
                } else {
                    1.0
                };
                Complex64::new(s, 0.0)
            })
            .collect();
        let encoder = Encoder::new(context);
        let factor = Encryptor::new(context)?.encrypt(
            &encoder.encode_at(&signs, post, params.default_scale(post)?, slots)?,
            self.public,
        )?;
        let product = evaluator.mult(result, &factor)?;
        for (e, f) in expected.iter_mut().zip(&signs) {
            *e *= f;
        }
        Ok(evaluator.level_down(&product, Level(3))?)
    }

    fn decode(&self, ct: &Ciphertext) -> anyhow::Result<Vec<Complex64>> {
        let plain = Decryptor::new(self.context).decrypt(ct, self.secret)?;
        Ok(Encoder::new(self.context).decode(&plain)?)
    }
}
