//! Building a [`Bootstrapper`]: its options, the key checks and
//! CoeffToSlot's diagonals, encoded once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hemem_ckks::Context;
use hemem_ckks::eval::Evaluator;
use hemem_ckks::progress::{NoProgress, Progress};
use hemem_memory::MemoryClass;

use super::batch::is_over_budget;
use super::footprint::{Fitted, default_shared_expansions, fit};
use super::keys::{check_keys, key_request, subsum_steps};
use super::{BootstrapKeys, Bootstrapper, STC_CACHE_CAPACITY};
use crate::ckks_ops::CkksOps;
use crate::eval_mod::EvalMod;
use crate::hoisting::Hoisting;
use crate::linear_transform::DiagonalStorage;
use crate::schedule::BootstrapSchedule;
use crate::{Error, Result};

/// How a [`Bootstrapper`] keeps its DFT diagonals and evaluates its linear
/// transforms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BootstrapOptions {
    /// Diagonals (and keys) kept as the budget allows
    /// ([`DiagonalStorage::Fit`], the default), or compact, encoded or
    /// mixed diagonals with the keys as given.
    pub storage: DiagonalStorage,
    /// Single (the default) or double hoisting in the BSGS linear
    /// transforms ([`crate::hoisting`]).
    pub hoisting: Hoisting,
    /// The working memory [`DiagonalStorage::Fit`] leaves free beside what
    /// it keeps in full, in top-level ciphertexts; `None` (the default) for
    /// [`working_ciphertexts`](super::working_ciphertexts)'s figure for the
    /// context's memory policy. Ignored with any other storage.
    pub working_reserve: Option<u64>,
    /// How many ciphertexts of a batch share each expansion of a compact
    /// diagonal ([`Bootstrapper::shared_expansions`]); `None` (the default)
    /// for [`SHARED_EXPANSIONS`](super::SHARED_EXPANSIONS) where the device budget holds
    /// [`SHARING_MIN_CIPHERTEXTS`](super::SHARING_MIN_CIPHERTEXTS) top-level
    /// ciphertexts, 1 under a smaller one. At least 1.
    pub shared_expansions: Option<usize>,
}

impl Bootstrapper {
    /// A bootstrapper for `context` with `schedule` and its keys: checks
    /// that every needed key exists and encodes CoeffToSlot's diagonals
    /// (`BootstrapConstant` memory, on the context's device), keeping them
    /// and the keys in the fastest forms the device's budget holds
    /// ([`DiagonalStorage::Fit`], the default; on a CPU, which has no
    /// budget, what half the available host memory holds).
    ///
    /// # Errors
    /// [`Error::NotBootstrappable`]; a missing key
    /// ([`hemem_ckks::KeyError`]); encoding errors.
    pub fn new(
        context: &Context,
        schedule: BootstrapSchedule,
        keys: BootstrapKeys,
    ) -> Result<Self> {
        Self::with_storage(context, schedule, keys, DiagonalStorage::default())
    }

    /// As [`Bootstrapper::new`], keeping the DFT diagonals as `storage`
    /// says: [`DiagonalStorage::Encoded`] trades their full size (2.24 GB at
    /// FGb) for no expansion work.
    ///
    /// # Errors
    /// As [`Bootstrapper::new`].
    pub fn with_storage(
        context: &Context,
        schedule: BootstrapSchedule,
        keys: BootstrapKeys,
        storage: DiagonalStorage,
    ) -> Result<Self> {
        Self::with_options(
            context,
            schedule,
            keys,
            BootstrapOptions {
                storage,
                ..BootstrapOptions::default()
            },
        )
    }

    /// As [`Bootstrapper::new`], with the diagonals kept and the linear
    /// transforms evaluated as `options` says.
    ///
    /// # Errors
    /// As [`Bootstrapper::new`]; [`Error::InvalidParameter`] for
    /// `shared_expansions` of `Some(0)`.
    pub fn with_options(
        context: &Context,
        schedule: BootstrapSchedule,
        keys: BootstrapKeys,
        options: BootstrapOptions,
    ) -> Result<Self> {
        Self::with_progress(context, schedule, keys, options, &NoProgress)
    }

    /// As [`Bootstrapper::with_options`], reporting the encoding of
    /// CoeffToSlot's diagonals to `progress` (one step per DFT factor;
    /// seconds at the real presets, more with [`DiagonalStorage::Encoded`]).
    ///
    /// # Errors
    /// As [`Bootstrapper::new`].
    pub fn with_progress(
        context: &Context,
        schedule: BootstrapSchedule,
        keys: BootstrapKeys,
        options: BootstrapOptions,
        progress: &dyn Progress,
    ) -> Result<Self> {
        let BootstrapOptions {
            storage,
            hoisting,
            working_reserve,
            shared_expansions,
        } = options;
        // Before anything sizes memory from the schedule's public fields.
        schedule.check_for(context.params())?;
        let shared_expansions = match shared_expansions {
            None => default_shared_expansions(context, &schedule),
            Some(0) => {
                return Err(Error::InvalidParameter {
                    name: "shared_expansions",
                    reason: "at least one ciphertext shares an expansion",
                });
            }
            Some(n) => n,
        };
        let mut keys = keys;
        let params = context.params();
        if params.post_bootstrap_level().is_none() {
            return Err(Error::NotBootstrappable {
                name: params.name().to_owned(),
            });
        }
        // Keys of another context switch to noise (the schedule was
        // checked above: one for other parameters would fail later with a
        // misleading scale error).
        if let Some(home) = keys.context() {
            context.check_same(home)?;
        }
        if schedule.choice.sse && keys.sse.is_none() {
            return Err(Error::InvalidParameter {
                name: "keys",
                reason: "the schedule needs sparse-secret encapsulation keys",
            });
        }
        let request = key_request(&schedule, params)?;
        check_keys(&keys.keys, &request, params)?;
        let slots = schedule.slots();
        let mut cts_dft = schedule.cts_dft()?;
        if slots < params.slots() {
            // SubSum multiplies by N/(2n); fold its inverse in.
            cts_dft.scale_evenly(slots as f64 / params.slots() as f64)?;
        }
        let fitted = match storage {
            DiagonalStorage::Fit => fit(
                context,
                &schedule,
                &mut keys,
                &cts_dft,
                hoisting,
                working_reserve,
            )?,
            other => Fitted {
                storage: other,
                ..Fitted::default()
            },
        };
        let evaluator = Evaluator::with_keys(context, Arc::clone(&keys.keys))
            .with_output_class(MemoryClass::Temporary);
        let encode = |storage| {
            let ops = CkksOps::new(&evaluator);
            cts_dft.encode_hoisted_with_progress(
                &ops,
                schedule.top_level,
                &schedule.cts_diagonal_scales,
                schedule.log_bsgs_ratio,
                storage,
                hoisting,
                progress,
            )
        };
        let (storage, cts) = match encode(fitted.storage) {
            Ok(cts) => (fitted.storage, cts),
            // What `fit` chose did not fit after all (its working reserve
            // is an estimate): compact diagonals, as with no choice.
            Err(e)
                if storage == DiagonalStorage::Fit
                    && fitted.storage != DiagonalStorage::Compact
                    && is_over_budget(&e) =>
            {
                (DiagonalStorage::Compact, encode(DiagonalStorage::Compact)?)
            }
            Err(e) => return Err(e),
        };
        // Compact diagonals mean the budget is short: hoisted rotations then
        // take their ModDowns one at a time, holding fewer temporaries.
        let evaluator = if storage == DiagonalStorage::Compact {
            evaluator.with_mod_down_batch(1)
        } else {
            evaluator
        };
        let eval_mod = EvalMod::new(schedule.choice.eval_mod)?;
        Ok(Self {
            context: context.clone(),
            subsum: subsum_steps(slots, params.slots()),
            schedule,
            evaluator,
            key_set: keys.keys,
            sse: keys.sse,
            storage,
            hoisting,
            cts,
            stc: Mutex::new(Vec::with_capacity(STC_CACHE_CAPACITY + 1)),
            eval_mod,
            batch_limit: AtomicUsize::new(usize::MAX),
            expanded_keys: fitted.expanded_keys,
            shared_expansions: AtomicUsize::new(shared_expansions),
        })
    }

    /// The schedule.
    pub fn schedule(&self) -> &BootstrapSchedule {
        &self.schedule
    }

    /// How the DFT diagonals are kept (never [`DiagonalStorage::Fit`]:
    /// what it resolved to).
    pub fn storage(&self) -> DiagonalStorage {
        self.storage
    }

    /// How many ciphertexts of a batch ([`Bootstrapper::bootstrap_many`])
    /// share each expansion of a compact diagonal: what
    /// [`BootstrapOptions::shared_expansions`] said, by default
    /// [`SHARED_EXPANSIONS`](super::SHARED_EXPANSIONS) unless the device budget is small for the
    /// preset (see [`SHARING_MIN_CIPHERTEXTS`](super::SHARING_MIN_CIPHERTEXTS)),
    /// halved each time a batch does not fit the budget (before the batch
    /// itself is split). On the H100, FGb, a batch of 8 at 2 GiB (every
    /// diagonal compact) bootstraps in 41.1–41.4 ms a ciphertext sharing by
    /// two against 42.9–43.6 one at a time, moving 3.9–4.2 GB a batch
    /// instead of 2.0–2.2; by four, 62 ms (13 GB: the baby steps crowd the
    /// streaming room out) (docs/BENCHMARKS.md, fifteenth session; in the
    /// ninth, before the paged pool and Belady's plan for batches, sharing
    /// by two lost there: 55.5 against 50.7 ms).
    pub fn shared_expansions(&self) -> usize {
        self.shared_expansions.load(Ordering::Relaxed)
    }

    /// How the DFTs' linear transforms are evaluated.
    pub fn hoisting(&self) -> Hoisting {
        self.hoisting
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use std::sync::Mutex;

    use hemem_ckks::backend::DeviceSelection;
    use hemem_ckks::keys::KeyGenerator;
    use hemem_ckks::params::{Parameters, Preset, SecurityCheck};
    use hemem_ckks::testing::seed32;

    use super::*;

    /// Key generation and diagonal encoding report their steps in order,
    /// ending at their totals: one per key (SSE's included), one per
    /// CoeffToSlot factor.
    #[test]
    fn keygen_and_encoding_report_progress() {
        let preset = Preset::TestFGb;
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
        let keygen = KeyGenerator::with_seed(&context, seed32(6));
        let secret = keygen.secret_key().unwrap();
        let schedule = BootstrapSchedule::recommended_for_slots(&params, 1 << 5).unwrap();
        assert!(
            schedule.choice.sse,
            "the test wants the SSE keys' steps too"
        );
        let seen = Mutex::new(Vec::new());
        let record = |done: u64, total: u64| {
            seen.lock().unwrap().push((done, total));
        };
        let keys =
            BootstrapKeys::generate_with_progress(&keygen, &secret, &schedule, &record).unwrap();
        let steps = std::mem::take(&mut *seen.lock().unwrap());
        let request = key_request(&schedule, &params).unwrap();
        let total = 2 + request.rotations.len() as u64 + 2;
        assert_eq!(steps.first(), Some(&(0, total)));
        assert_eq!(steps.last(), Some(&(total, total)));
        assert!(steps.windows(2).all(|w| w[0].0 + 1 == w[1].0), "{steps:?}");
        assert!(keys.len() as u64 <= total);

        let factors = schedule.cts_diagonal_scales.len() as u64;
        Bootstrapper::with_progress(
            &context,
            schedule,
            keys,
            BootstrapOptions {
                storage: DiagonalStorage::Compact,
                ..BootstrapOptions::default()
            },
            &record,
        )
        .unwrap();
        let steps = seen.into_inner().unwrap();
        assert_eq!(
            steps,
            (0..=factors).map(|d| (d, factors)).collect::<Vec<_>>()
        );
    }
}
