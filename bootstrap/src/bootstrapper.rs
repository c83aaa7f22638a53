//! [`Bootstrapper`]: SlotToCoeff-first CKKS bootstrapping on real
//! ciphertexts, for the HEaaN presets' structure (BOOTSTRAP-NOTES §1,
//! `docs/BOOTSTRAP-SCHEDULE.md`):
//!
//! 1. drop the input to level 3, keeping its scale;
//! 2. **SlotToCoeff** (levels 3 → 0), whose diagonal scales absorb the
//!    input scale and land on `Δ0 = q0·2^−ρ`;
//! 3. *(sparse-secret encapsulation)* switch to an ephemeral secret of
//!    Hamming weight 32 at level 0 (Bossuat et al., ePrint 2022/024);
//! 4. **ModRaise** to the top level, read at scale `q0`; *(SSE)* switch back
//!    to the dense secret;
//! 5. *(sparse slots)* SubSum: the trace onto the slots' subring;
//! 6. **CoeffToSlot** (levels `L → L−3`), one conjugation to split real and
//!    imaginary parts;
//! 7. **EvalMod** (scaled cosine, double angles, arcsine) on each part,
//!    recombined and relabelled to the post-bootstrap level's default scale.
//!
//! Written once over [`SlotArithmetic`] (through [`CkksOps`]), so it runs
//! wherever its ciphertexts live. Intermediates are `Temporary` memory, the
//! encoded DFT diagonals `BootstrapConstant`, the keys `EvaluationKey`.
//!
//! The diagonals are kept compact by default ([`DiagonalStorage::Compact`]:
//! one word per coefficient, expanded into `Temporary` memory a few at a
//! time as each transform runs); SlotToCoeff's, which absorb the input
//! scale, are cached for the [`STC_CACHE_CAPACITY`] most recent input
//! scales.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use hemem_ckks::Context;
use hemem_ckks::encoding::{CompactPlaintext, Plaintext};
use hemem_ckks::eval::{Ciphertext, Evaluator};
use hemem_ckks::keys::{KeyGenerator, KeyKind, KeySet, KeySetRequest, SecretKey, SwitchingKey};
use hemem_ckks::ntt::GaloisElement;
use hemem_ckks::params::{Level, Parameters};
use hemem_ckks::progress::{NoProgress, Progress};
use hemem_memory::MemoryClass;

use crate::arith::SlotArithmetic;
use crate::ckks_ops::CkksOps;
use crate::dft::EncodedDft;
use crate::eval_mod::EvalMod;
use crate::hoisting::Hoisting;
use crate::linear_transform::{Diagonal, DiagonalStorage};
use crate::schedule::{BootstrapSchedule, INPUT_LEVEL, SSE_HAMMING_WEIGHT};
use crate::simulate::{
    coeff_to_slot, eval_mod_and_recombine, slot_to_coeff, slot_to_coeff_many, split,
};
use crate::{Error, Result};

/// The switching keys of sparse-secret encapsulation: dense → sparse (used
/// at level 0, before ModRaise) and sparse → dense (at the top level, after).
#[derive(Debug)]
pub struct SseKeys {
    pub(crate) to_sparse: SwitchingKey,
    pub(crate) to_dense: SwitchingKey,
}

/// Every key a bootstrap needs: relinearisation, conjugation and the DFTs'
/// (and SubSum's) rotations, plus the SSE keys when the schedule uses it.
#[derive(Debug)]
pub struct BootstrapKeys {
    pub(crate) keys: Arc<KeySet>,
    pub(crate) sse: Option<SseKeys>,
}

impl BootstrapKeys {
    /// Generates the keys `schedule` needs for `secret`.
    ///
    /// # Errors
    /// Key-generation errors.
    pub fn generate(
        keygen: &KeyGenerator,
        secret: &SecretKey,
        schedule: &BootstrapSchedule,
    ) -> Result<Self> {
        Self::generate_with(keygen, secret, schedule, &KeySetRequest::default())
    }

    /// As [`BootstrapKeys::generate`], with the keys `extra` asks for in the
    /// same key set: a workload that bootstraps between its own rotations
    /// and multiplications (an encrypted network) then holds each key once,
    /// made for the highest level either use needs, and evaluates with
    /// [`BootstrapKeys::key_set`].
    ///
    /// # Errors
    /// Key-generation errors.
    pub fn generate_with(
        keygen: &KeyGenerator,
        secret: &SecretKey,
        schedule: &BootstrapSchedule,
        extra: &KeySetRequest,
    ) -> Result<Self> {
        Self::build(keygen, secret, schedule, extra, &NoProgress)
    }

    /// As [`BootstrapKeys::generate`], reporting each key made to
    /// `progress` (the SSE keys are the last two steps).
    ///
    /// # Errors
    /// As [`BootstrapKeys::generate`].
    pub fn generate_with_progress(
        keygen: &KeyGenerator,
        secret: &SecretKey,
        schedule: &BootstrapSchedule,
        progress: &dyn Progress,
    ) -> Result<Self> {
        Self::build(
            keygen,
            secret,
            schedule,
            &KeySetRequest::default(),
            progress,
        )
    }

    /// The keys of `schedule` and `extra`, each reported to `progress`.
    fn build(
        keygen: &KeyGenerator,
        secret: &SecretKey,
        schedule: &BootstrapSchedule,
        extra: &KeySetRequest,
        progress: &dyn Progress,
    ) -> Result<Self> {
        let params = keygen.context().params();
        let sse_keys = if schedule.choice.sse { 2 } else { 0 };
        let set_total = AtomicU64::new(0);
        let in_set = |done: u64, total: u64| {
            set_total.store(total, Ordering::Relaxed);
            progress.update(done, total + sse_keys);
        };
        let request = merge_requests(key_request(schedule, params)?, extra, params);
        let keys = keygen.key_set_with_progress(secret, &request, &in_set)?;
        let sse = if schedule.choice.sse {
            // Dense → sparse runs at level 0 (before ModRaise), sparse →
            // dense at the top level (after it).
            let total = set_total.load(Ordering::Relaxed) + sse_keys;
            let sparse = keygen.secret_key_with_weight(SSE_HAMMING_WEIGHT)?;
            let to_sparse = keygen.switching_key_at(secret, &sparse, Level(0))?;
            progress.update(total - 1, total);
            let to_dense = keygen.switching_key_at(&sparse, secret, Level(schedule.top_level))?;
            progress.update(total, total);
            Some(SseKeys {
                to_sparse,
                to_dense,
            })
        } else {
            None
        };
        Ok(Self {
            keys: Arc::new(keys),
            sse,
        })
    }

    /// The bytes [`BootstrapKeys::generate`] makes for `schedule` (compressed,
    /// level-aware keys; the SSE keys included), computed without making
    /// them.
    ///
    /// # Errors
    /// As [`key_request`].
    pub fn planned_bytes(schedule: &BootstrapSchedule, params: &Parameters) -> Result<u64> {
        let sse = if schedule.choice.sse {
            params.switching_key_bytes_at(Level(0), false)
                + params.switching_key_bytes_at(Level(schedule.top_level), false)
        } else {
            0
        };
        Ok(key_request(schedule, params)?.key_bytes(params) + sse)
    }

    /// Regenerates and keeps every key's uniform halves (twice the bytes):
    /// key switches then read `a` instead of generating it, for a device
    /// with memory to spare ([`SwitchingKey::expand`]).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when the key set is shared (an
    /// evaluator holds it); allocation errors.
    pub fn expand(&mut self) -> Result<()> {
        let keys = Arc::get_mut(&mut self.keys).ok_or(Error::InvalidParameter {
            name: "keys",
            reason: "the key set is shared; expand the keys before building a bootstrapper",
        })?;
        for key in keys.keys_mut() {
            key.expand()?;
        }
        if let Some(sse) = &mut self.sse {
            sse.to_sparse.expand()?;
            sse.to_dense.expand()?;
        }
        Ok(())
    }

    /// The context the keys were made in (or loaded into); `None` for an
    /// empty key set.
    pub fn context(&self) -> Option<&Context> {
        self.keys
            .keys()
            .next()
            .or_else(|| self.sse.as_ref().map(|s| &s.to_sparse))
            .map(SwitchingKey::context)
    }

    /// The key set (relinearisation, conjugation, rotations).
    pub fn key_set(&self) -> &Arc<KeySet> {
        &self.keys
    }

    /// Number of switching keys, SSE keys included.
    pub fn len(&self) -> usize {
        self.keys.len() + if self.sse.is_some() { 2 } else { 0 }
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of every key as held.
    pub fn size_bytes(&self) -> usize {
        self.keys.size_bytes()
            + self
                .sse
                .as_ref()
                .map_or(0, |s| s.to_sparse.size_bytes() + s.to_dense.size_bytes())
    }
}

/// The rotation steps of SubSum for `slots` of `max_slots`: `slots·2^i`
/// (full-slot rotations) while below `max_slots`.
fn subsum_steps(slots: usize, max_slots: usize) -> Vec<i64> {
    let mut steps = Vec::new();
    let mut k = slots;
    while k < max_slots {
        steps.push(k as i64);
        k *= 2;
    }
    steps
}

/// The evaluation keys `schedule` needs, as a request: relinearisation,
/// conjugation, the DFTs' rotations and, for sparse slots, SubSum's — each
/// for the highest level the bootstrap uses it at (level-aware keys): a
/// CoeffToSlot rotation at its factor's level (`L`, `L−1`, `L−2`), a
/// SlotToCoeff-only rotation at levels 3…1 (a few percent of a full key),
/// SubSum at `L`, conjugation (the real/imaginary split) and
/// relinearisation (EvalMod) at `L−3`, raised to the parameters' encryption
/// level so that the same keys serve user computation.
///
/// # Errors
/// [`Error::InvalidSlots`] for a schedule of more slots than `params` have.
pub fn key_request(schedule: &BootstrapSchedule, params: &Parameters) -> Result<KeySetRequest> {
    let n = params.degree().get();
    let mut levels: BTreeMap<KeyKind, Level> = BTreeMap::new();
    let mut need = |kind: KeyKind, level: usize| {
        let entry = levels.entry(kind).or_insert(Level(level));
        *entry = (*entry).max(Level(level));
    };
    let mut rotations = BTreeSet::new();
    let dfts = [
        (schedule.cts_dft()?, schedule.top_level),
        (schedule.stc_dft()?, INPUT_LEVEL),
    ];
    for (dft, start) in &dfts {
        for (i, transform) in dft
            .linear_transforms(schedule.log_bsgs_ratio)
            .iter()
            .enumerate()
        {
            for step in transform.rotations() {
                let step = step as i64;
                rotations.insert(step);
                need(
                    KeyKind::Rotation(GaloisElement::rotation(step, n)),
                    start - i,
                );
            }
        }
    }
    for step in subsum_steps(schedule.slots(), params.slots()) {
        rotations.insert(step);
        need(
            KeyKind::Rotation(GaloisElement::rotation(step, n)),
            schedule.top_level,
        );
    }
    let user = params.enc_level().0;
    need(KeyKind::Conjugation, schedule.eval_mod_level.max(user));
    need(KeyKind::Relinearization, schedule.eval_mod_level.max(user));
    Ok(KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: rotations.into_iter().collect(),
        levels,
    })
}

/// `base` with `extra`'s keys added, each kind made for the higher of the
/// two levels that ask for it (a kind without a level serves the top).
fn merge_requests(
    mut base: KeySetRequest,
    extra: &KeySetRequest,
    params: &Parameters,
) -> KeySetRequest {
    let n = params.degree().get();
    let top = params.max_level();
    let mut kinds = Vec::new();
    if extra.relinearization {
        kinds.push(KeyKind::Relinearization);
    }
    if extra.conjugation {
        kinds.push(KeyKind::Conjugation);
    }
    kinds.extend(
        extra
            .rotations
            .iter()
            .map(|&k| KeyKind::Rotation(GaloisElement::rotation(k, n))),
    );
    for kind in kinds {
        let wanted = extra.level_of(kind, top);
        let requested = match kind {
            KeyKind::Relinearization => base.relinearization,
            KeyKind::Conjugation => base.conjugation,
            KeyKind::Rotation(g) => base
                .rotations
                .iter()
                .any(|&k| GaloisElement::rotation(k, n) == g),
            KeyKind::Generic => false,
        };
        let level = if requested {
            base.level_of(kind, top).max(wanted)
        } else {
            wanted
        };
        base.levels.insert(kind, level);
    }
    base.relinearization |= extra.relinearization;
    base.conjugation |= extra.conjugation;
    for &k in &extra.rotations {
        if !base.rotations.contains(&k) {
            base.rotations.push(k);
        }
    }
    base
}

/// Checks that `keys` hold every key `request` names, each serving its level.
fn check_keys(keys: &KeySet, request: &KeySetRequest, params: &Parameters) -> Result<()> {
    let n = params.degree().get();
    let top = params.max_level();
    let check = |key: &SwitchingKey| -> Result<()> {
        let needed = request.level_of(key.kind(), top);
        if key.level() < needed {
            return Err(
                hemem_ckks::Error::from(hemem_ckks::KeyError::KeyLevelTooLow {
                    kind: key.kind().name(),
                    needed: needed.0,
                    level: key.level().0,
                })
                .into(),
            );
        }
        Ok(())
    };
    check(keys.relinearization_key()?)?;
    check(keys.conjugation_key()?)?;
    for &step in &request.rotations {
        let key = keys
            .rotation_key(GaloisElement::rotation(step, n))
            .ok_or_else(|| {
                hemem_ckks::Error::from(hemem_ckks::KeyError::MissingRotationKey { step })
            })?;
        check(key)?;
    }
    Ok(())
}

/// The intermediate ciphertexts of one bootstrap, in order, as
/// [`Bootstrapper::bootstrap_observed`] hands them out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// After SlotToCoeff: level 0, scale `Δ0`, slots holding what is now
    /// the coefficient encoding.
    SlotToCoeff,
    /// After ModRaise (and SSE's switch back): the top level, read at scale
    /// `q0`; slots hold the coefficients plus `q0·I` multiples.
    ModRaise,
    /// After SubSum (sparse slots only).
    SubSum,
    /// After CoeffToSlot: level `L − 3`, scale `S_em`.
    CoeffToSlot,
    /// The real part `(a/K)` split off for EvalMod.
    RealPart,
    /// The imaginary part `(b/K)` (complex bootstraps only).
    ImaginaryPart,
}

/// SlotToCoeff's diagonals as the bootstrapper keeps them.
type StcDft = EncodedDft<Plaintext, CompactPlaintext>;

/// Input scales whose SlotToCoeff diagonals a [`Bootstrapper`] keeps (least
/// recently used first out). Inputs usually arrive at one scale (a level's
/// default); a second covers alternating between two levels. Compact, one
/// entry is `2·slots` words per diagonal (about 83 MB at FGb, 0.25 GB
/// encoded); a scale beyond the cache is encoded again when it comes back.
pub const STC_CACHE_CAPACITY: usize = 2;

/// How a [`Bootstrapper`] keeps its DFT diagonals and evaluates its linear
/// transforms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BootstrapOptions {
    /// Compact (the default), encoded or mixed diagonals.
    pub storage: DiagonalStorage,
    /// Single (the default) or double hoisting in the BSGS linear
    /// transforms ([`crate::hoisting`]).
    pub hoisting: Hoisting,
}

/// Refreshes ciphertexts: see the [module documentation](self).
///
/// Inputs must be at level 3 or above, with the schedule's slot count, and
/// their slot values within the unit disk (|Re|, |Im| ≤ 1): values beyond
/// it are reduced modulo 1 by EvalMod and come out wrong — this cannot be
/// detected without the secret key. The output is at the preset's
/// post-bootstrap level with exactly that level's default scale.
pub struct Bootstrapper {
    context: Context,
    schedule: BootstrapSchedule,
    evaluator: Evaluator,
    sse: Option<SseKeys>,
    storage: DiagonalStorage,
    hoisting: Hoisting,
    cts: EncodedDft<Plaintext, CompactPlaintext>,
    /// SlotToCoeff by input scale (bits), most recently used first.
    stc: Mutex<Vec<(u64, Arc<StcDft>)>>,
    eval_mod: EvalMod,
    subsum: Vec<i64>,
    /// The most ciphertexts a batch runs together: halved whenever a batch
    /// did not fit the device budget ([`Bootstrapper::bootstrap_many`]).
    batch_limit: AtomicUsize,
}

impl std::fmt::Debug for Bootstrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrapper")
            .field("parameters", &self.context.params().name())
            .field("slots", &self.schedule.slots())
            .field("sse", &self.sse.is_some())
            .field("storage", &self.storage)
            .field("hoisting", &self.hoisting)
            .finish_non_exhaustive()
    }
}

impl Bootstrapper {
    /// A bootstrapper for `context` with `schedule` and its keys: checks
    /// that every needed key exists and encodes CoeffToSlot's diagonals
    /// (`BootstrapConstant` memory, on the context's device), compactly
    /// ([`DiagonalStorage::default`]).
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
    /// As [`Bootstrapper::new`].
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
        let BootstrapOptions { storage, hoisting } = options;
        let params = context.params();
        if params.post_bootstrap_level().is_none() {
            return Err(Error::NotBootstrappable {
                name: params.name().to_owned(),
            });
        }
        if schedule.choice.sse && keys.sse.is_none() {
            return Err(Error::InvalidParameter {
                name: "keys",
                reason: "the schedule needs sparse-secret encapsulation keys",
            });
        }
        let request = key_request(&schedule, params)?;
        check_keys(&keys.keys, &request, params)?;
        let evaluator = Evaluator::with_keys(context, Arc::clone(&keys.keys))
            .with_output_class(MemoryClass::Temporary);
        let slots = schedule.slots();
        let mut cts_dft = schedule.cts_dft()?;
        if slots < params.slots() {
            // SubSum multiplies by N/(2n); fold its inverse in.
            cts_dft.scale_evenly(slots as f64 / params.slots() as f64)?;
        }
        let cts = {
            let ops = CkksOps::new(&evaluator);
            cts_dft.encode_hoisted_with_progress(
                &ops,
                schedule.top_level,
                &schedule.cts_diagonal_scales,
                schedule.log_bsgs_ratio,
                storage,
                hoisting,
                progress,
            )?
        };
        let eval_mod = EvalMod::new(schedule.choice.eval_mod)?;
        Ok(Self {
            context: context.clone(),
            subsum: subsum_steps(slots, params.slots()),
            schedule,
            evaluator,
            sse: keys.sse,
            storage,
            hoisting,
            cts,
            stc: Mutex::new(Vec::with_capacity(STC_CACHE_CAPACITY + 1)),
            eval_mod,
            batch_limit: AtomicUsize::new(usize::MAX),
        })
    }

    /// The schedule.
    pub fn schedule(&self) -> &BootstrapSchedule {
        &self.schedule
    }

    /// How the DFT diagonals are kept.
    pub fn storage(&self) -> DiagonalStorage {
        self.storage
    }

    /// How the DFTs' linear transforms are evaluated.
    pub fn hoisting(&self) -> Hoisting {
        self.hoisting
    }

    /// Bytes of the DFT diagonals held now, as stored (CoeffToSlot, and
    /// SlotToCoeff for each input scale in the cache).
    pub fn constant_bytes(&self) -> usize {
        self.diagonal_bytes(|d, _| match d {
            Diagonal::Encoded(p) => p.poly().buffer().bytes(),
            Diagonal::Compact(c) => c.size_bytes(),
        })
    }

    /// Bytes the same diagonals would take encoded
    /// ([`DiagonalStorage::Encoded`]; over `Q_l ∪ P` in the transforms
    /// evaluated with double hoisting): [`Bootstrapper::constant_bytes`]
    /// for comparison.
    pub fn constant_encoded_bytes(&self) -> usize {
        let params = self.context.params();
        let special = params.p_moduli().len() * params.degree().get() * 8;
        self.diagonal_bytes(|d, hoisting| match d {
            Diagonal::Encoded(p) => p.poly().buffer().bytes(),
            Diagonal::Compact(c) => match hoisting {
                Hoisting::Double => c.expanded_bytes() + special,
                Hoisting::Single | Hoisting::Auto => c.expanded_bytes(),
            },
        })
    }

    /// The sum of `bytes` over every diagonal held, each with its
    /// transform's hoisting.
    fn diagonal_bytes(
        &self,
        bytes: impl Fn(&Diagonal<Plaintext, CompactPlaintext>, Hoisting) -> usize,
    ) -> usize {
        let dft_bytes = |d: &StcDft| -> usize {
            d.transforms()
                .iter()
                .flat_map(|t| t.diagonals().map(|d| bytes(d, t.hoisting())))
                .sum()
        };
        dft_bytes(&self.cts)
            + self
                .stc
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(_, d)| dft_bytes(d))
                .sum::<usize>()
    }

    /// Input scales whose SlotToCoeff diagonals are held now, most recently
    /// used first (at most [`STC_CACHE_CAPACITY`]).
    pub fn cached_scales(&self) -> Vec<hemem_ckks::params::Scale> {
        self.stc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|&(bits, _)| hemem_ckks::params::Scale(f64::from_bits(bits)))
            .collect()
    }

    /// Encodes SlotToCoeff's diagonals for inputs at `scale` ahead of the
    /// first bootstrap of such an input (which otherwise does it: the
    /// diagonals absorb the input scale exactly). The bootstrapper keeps
    /// them for the [`STC_CACHE_CAPACITY`] most recently used scales; on
    /// FGb one scale takes about 83 MB compact (0.25 GB encoded) of
    /// `BootstrapConstant` memory.
    ///
    /// # Errors
    /// A scale the schedule cannot absorb; encoding errors.
    pub fn prepare_for_scale(&self, scale: hemem_ckks::params::Scale) -> Result<()> {
        self.stc_for(scale.get()).map(|_| ())
    }

    /// SlotToCoeff's diagonals for inputs at `scale`, from the cache (moved
    /// to its front) or encoded now (the first factor absorbs the input
    /// scale exactly) and cached, dropping the least recently used scale
    /// beyond [`STC_CACHE_CAPACITY`].
    fn stc_for(&self, scale: f64) -> Result<Arc<StcDft>> {
        let key = scale.to_bits();
        {
            let mut cache = self.stc.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
                let entry = cache.remove(i);
                let dft = Arc::clone(&entry.1);
                cache.insert(0, entry);
                return Ok(dft);
            }
        }
        let params = self.context.params();
        let scales = self.schedule.stc_diagonal_scales(params, scale)?;
        let ops = CkksOps::new(&self.evaluator);
        let encoded = Arc::new(self.schedule.stc_dft()?.encode_hoisted(
            &ops,
            INPUT_LEVEL,
            &scales,
            self.schedule.log_bsgs_ratio,
            // Mixed keeps CoeffToSlot's factors encoded, not these.
            match self.storage {
                DiagonalStorage::Mixed { .. } => DiagonalStorage::Compact,
                other => other,
            },
            self.hoisting,
        )?);
        let mut cache = self.stc.lock().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have encoded the same scale meanwhile.
        cache.retain(|(k, _)| *k != key);
        cache.insert(0, (key, Arc::clone(&encoded)));
        cache.truncate(STC_CACHE_CAPACITY);
        Ok(encoded)
    }

    fn check_input(&self, input: &Ciphertext) -> Result<()> {
        self.context
            .check_same(input.context())
            .map_err(Error::from)?;
        if input.slots() != self.schedule.slots() {
            return Err(Error::SlotMismatch {
                left: input.slots(),
                right: self.schedule.slots(),
            });
        }
        if input.level().get() < INPUT_LEVEL {
            return Err(Error::LevelTooLow {
                operation: "bootstrap",
                needed: INPUT_LEVEL,
                level: input.level().get(),
            });
        }
        Ok(())
    }

    /// Bootstraps a ciphertext of complex slot values.
    ///
    /// # Errors
    /// [`Error::LevelTooLow`] below level 3; [`Error::SlotMismatch`];
    /// context, device and key errors.
    pub fn bootstrap(&self, input: &Ciphertext) -> Result<Ciphertext> {
        self.run(input, false)
    }

    /// Bootstraps a ciphertext whose slot values are real: one EvalMod
    /// instead of two (the imaginary parts come out as noise and are dropped).
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`].
    pub fn bootstrap_real(&self, input: &Ciphertext) -> Result<Ciphertext> {
        self.run(input, true)
    }

    /// Bootstraps as [`Bootstrapper::bootstrap`] (or, with `real_only`,
    /// [`Bootstrapper::bootstrap_real`]) and hands every intermediate
    /// ciphertext to `observe` as it is made: for error breakdowns (decrypt
    /// each stage and compare it with its plaintext counterpart, as the
    /// `error_breakdown` example does) and for tracing.
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`].
    pub fn bootstrap_observed(
        &self,
        input: &Ciphertext,
        real_only: bool,
        observe: &mut dyn FnMut(Stage, &Ciphertext),
    ) -> Result<Ciphertext> {
        self.run_observed(input, real_only, observe)
    }

    fn run(&self, input: &Ciphertext, real_only: bool) -> Result<Ciphertext> {
        self.run_observed(input, real_only, &mut |_, _| {})
    }

    fn run_observed(
        &self,
        input: &Ciphertext,
        real_only: bool,
        observe: &mut dyn FnMut(Stage, &Ciphertext),
    ) -> Result<Ciphertext> {
        self.check_input(input)?;
        let _phase = self.phase(real_only, &[input.scale().get()]);
        let ops = CkksOps::new(&self.evaluator);

        // SlotToCoeff, levels 3 → 0.
        let stc = self.stc_for(input.scale().get())?;
        let coeffs = slot_to_coeff(&ops, input, &stc)?;
        observe(Stage::SlotToCoeff, &coeffs);
        let delta0 = coeffs.scale().get();

        let mut raised = self.mod_raise_all(vec![coeffs])?;
        let raised = raised.pop().ok_or(Error::InvalidParameter {
            name: "inputs",
            reason: "lost in ModRaise",
        })?;
        observe(Stage::ModRaise, &raised);
        let raised = if self.subsum.is_empty() {
            raised
        } else {
            let mut summed = self.subsum_all(vec![raised])?;
            let summed = summed.pop().ok_or(Error::InvalidParameter {
                name: "inputs",
                reason: "lost in SubSum",
            })?;
            observe(Stage::SubSum, &summed);
            summed
        };

        // CoeffToSlot, the split, EvalMod, recombination.
        let v = coeff_to_slot(&ops, &raised, &self.cts)?;
        observe(Stage::CoeffToSlot, &v);
        self.finish(&ops, &v, delta0, real_only, observe)
    }

    /// Bootstraps a batch of ciphertexts of complex slot values, stage by
    /// stage: each SlotToCoeff and CoeffToSlot factor, each SSE key and each
    /// SubSum rotation is applied to the whole batch before the next, so the
    /// keys and diagonals it needs serve all of it while they are on the
    /// device — under a small budget, their transfers are paid once per
    /// batch instead of once per ciphertext (issue 11). The outputs, in
    /// input order, are the very ciphertexts [`Bootstrapper::bootstrap`]
    /// gives one by one. Inputs at different scales are grouped by scale for
    /// SlotToCoeff (its diagonals absorb the input scale).
    ///
    /// A batch's ciphertexts and key-switch temporaries are on the device
    /// together, so a large batch may not fit a small budget beside one
    /// key (FVb at 2 GiB: four ciphertexts need 1.5 GB of temporaries).
    /// A batch the budget refuses is run again as two halves, and the
    /// bootstrapper remembers the size that fit
    /// ([`Bootstrapper::batch_limit`]): the results are the same, only the
    /// transfers are shared by fewer ciphertexts.
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`], for any input; `OverBudget` only when
    /// a single ciphertext does not fit.
    pub fn bootstrap_many(&self, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        self.run_many(inputs, false)
    }

    /// [`Bootstrapper::bootstrap_many`] for real slot values
    /// ([`Bootstrapper::bootstrap_real`]).
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`], for any input.
    pub fn bootstrap_real_many(&self, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        self.run_many(inputs, true)
    }

    /// The most ciphertexts [`Bootstrapper::bootstrap_many`] runs together
    /// on this bootstrapper's budget: `usize::MAX` until a batch was
    /// refused, then the size that fit.
    pub fn batch_limit(&self) -> usize {
        self.batch_limit.load(Ordering::Relaxed)
    }

    fn run_many(&self, inputs: &[Ciphertext], real_only: bool) -> Result<Vec<Ciphertext>> {
        for input in inputs {
            self.check_input(input)?;
        }
        in_sub_batches(inputs, &self.batch_limit, |batch| {
            self.run_batch(batch, real_only)
        })
    }

    /// One batch of [`Bootstrapper::run_many`], stage by stage.
    fn run_batch(&self, inputs: &[Ciphertext], real_only: bool) -> Result<Vec<Ciphertext>> {
        let scales: Vec<f64> = inputs.iter().map(|c| c.scale().get()).collect();
        let _phase = self.phase(real_only, &scales);
        let ops = CkksOps::new(&self.evaluator);
        // SlotToCoeff, one group of equal input scales at a time.
        let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let bits = input.scale().get().to_bits();
            match groups.iter_mut().find(|(b, _)| *b == bits) {
                Some((_, members)) => members.push(i),
                None => groups.push((bits, vec![i])),
            }
        }
        let mut coeffs: Vec<Option<Ciphertext>> = inputs.iter().map(|_| None).collect();
        for (bits, members) in &groups {
            let stc = self.stc_for(f64::from_bits(*bits))?;
            let batch: Vec<&Ciphertext> = members.iter().filter_map(|&i| inputs.get(i)).collect();
            for (&i, c) in members.iter().zip(slot_to_coeff_many(&ops, &batch, &stc)?) {
                if let Some(slot) = coeffs.get_mut(i) {
                    *slot = Some(c);
                }
            }
        }
        let coeffs =
            coeffs
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .ok_or(Error::InvalidParameter {
                    name: "inputs",
                    reason: "lost in SlotToCoeff",
                })?;
        let deltas: Vec<f64> = coeffs.iter().map(|c| c.scale().get()).collect();
        let raised = self.mod_raise_all(coeffs)?;
        let raised = if self.subsum.is_empty() {
            raised
        } else {
            self.subsum_all(raised)?
        };
        let vs = self
            .cts
            .evaluate_many(&ops, &raised.iter().collect::<Vec<_>>())?;
        vs.iter()
            .zip(deltas)
            .map(|(v, delta0)| self.finish(&ops, v, delta0, real_only, &mut |_, _| {}))
            .collect()
    }

    /// Opens the memory system's phase for one bootstrap of inputs at
    /// `scales` (one per ciphertext of a batch): the same kind of bootstrap
    /// touches the same keys and diagonals in the same order, which the
    /// `planned` policy records once and then fetches ahead of use.
    fn phase(&self, real_only: bool, scales: &[f64]) -> hemem_memory::PhaseGuard {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ("bootstrap", real_only, scales.len()).hash(&mut h);
        for s in scales {
            s.to_bits().hash(&mut h);
        }
        self.evaluator
            .context()
            .backend()
            .allocator()
            .phase(h.finish())
    }

    /// ModRaise of each of `coeffs` (under the ephemeral sparse secret with
    /// SSE, each SSE key applied to all before the next), read at `q0`.
    fn mod_raise_all(&self, coeffs: Vec<Ciphertext>) -> Result<Vec<Ciphertext>> {
        let eval = &self.evaluator;
        let low = match &self.sse {
            Some(k) => coeffs
                .iter()
                .map(|c| eval.switch_key(c, &k.to_sparse))
                .collect::<hemem_ckks::Result<Vec<_>>>()?,
            None => coeffs,
        };
        let raised = low
            .iter()
            .map(|c| eval.mod_raise(c, Level(self.schedule.top_level)))
            .collect::<hemem_ckks::Result<Vec<_>>>()?;
        let raised = match &self.sse {
            Some(k) => raised
                .iter()
                .map(|c| eval.switch_key(c, &k.to_dense))
                .collect::<hemem_ckks::Result<Vec<_>>>()?,
            None => raised,
        };
        let ops = CkksOps::new(eval);
        let q0 = ops.prime(0)? as f64;
        raised.iter().map(|c| ops.set_scale(c, q0)).collect()
    }

    /// SubSum of each of `raised`: the projection onto the subring of the
    /// slot count, each rotation applied to all before the next.
    fn subsum_all(&self, raised: Vec<Ciphertext>) -> Result<Vec<Ciphertext>> {
        let eval = &self.evaluator;
        let full = self.context.params().slots();
        let slots: Vec<usize> = raised.iter().map(Ciphertext::slots).collect();
        let mut xs = raised
            .iter()
            .map(|c| eval.set_slots(c, full))
            .collect::<hemem_ckks::Result<Vec<_>>>()?;
        for &step in &self.subsum {
            xs = xs
                .iter()
                .map(|x| eval.add(x, &eval.rotate(x, step)?))
                .collect::<hemem_ckks::Result<Vec<_>>>()?;
        }
        Ok(xs
            .iter()
            .zip(slots)
            .map(|(x, s)| eval.set_slots(x, s))
            .collect::<hemem_ckks::Result<Vec<_>>>()?)
    }

    /// The split, EvalMod and recombination of CoeffToSlot's output `v`
    /// (whose SlotToCoeff landed on `delta0`).
    fn finish(
        &self,
        ops: &CkksOps<'_>,
        v: &Ciphertext,
        delta0: f64,
        real_only: bool,
        observe: &mut dyn FnMut(Stage, &Ciphertext),
    ) -> Result<Ciphertext> {
        let (re, im) = split(ops, v, real_only)?;
        observe(Stage::RealPart, &re);
        if let Some(im) = &im {
            observe(Stage::ImaginaryPart, im);
        }
        let q0 = ops.prime(0)? as f64;
        let s_x = self.schedule.output_scale * q0 / delta0;
        let out = eval_mod_and_recombine(
            ops,
            &self.eval_mod,
            &re,
            im.as_ref(),
            s_x,
            self.schedule.post_level,
            self.schedule.output_scale,
        )?;
        Ok(out.clone_as(MemoryClass::Ciphertext)?)
    }
}

/// Runs `inputs` through `run` in batches of at most `limit`, halving
/// `limit` and running the batch again whenever the device budget refuses
/// one of more than one input; the outputs in input order.
fn in_sub_batches<T, U>(
    inputs: &[T],
    limit: &AtomicUsize,
    mut run: impl FnMut(&[T]) -> Result<Vec<U>>,
) -> Result<Vec<U>> {
    let mut outputs = Vec::with_capacity(inputs.len());
    let mut rest = inputs;
    while !rest.is_empty() {
        let take = rest.len().min(limit.load(Ordering::Relaxed).max(1));
        let (batch, after) = rest.split_at(take);
        match run(batch) {
            Ok(done) => {
                outputs.extend(done);
                rest = after;
            }
            Err(e) if take > 1 && is_over_budget(&e) => {
                limit.store(take / 2, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(outputs)
}

/// Whether `e` is the memory system's refusal to go over the device budget.
fn is_over_budget(e: &Error) -> bool {
    matches!(
        e,
        Error::Ckks(hemem_ckks::Error::Memory(
            hemem_memory::Error::OverBudget { .. }
        ))
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use hemem_ckks::backend::DeviceSelection;
    use hemem_ckks::params::{Preset, SecurityCheck};
    use hemem_ckks::testing::seed32;

    use super::*;
    use crate::schedule::{ScheduleChoice, recommended_choice};

    /// Key generation and diagonal encoding report their steps in order,
    /// ending at their totals: one per key (SSE's included), one per
    /// CoeffToSlot factor.
    #[test]
    fn a_refused_batch_is_halved_until_it_fits_and_keeps_the_input_order() {
        use hemem_memory::{Error as MemoryError, InUse};
        let over = || -> Error {
            hemem_ckks::Error::Memory(MemoryError::OverBudget {
                requested: 1 << 30,
                placing: None,
                budget: 2 << 30,
                in_use: Box::new(InUse::default()),
            })
            .into()
        };
        let inputs: Vec<u64> = (0..11).map(|i| 1000 + 37 * i).collect();
        for fits in [1usize, 2, 3, 8, 11] {
            let limit = AtomicUsize::new(usize::MAX);
            let mut sizes = Vec::new();
            let out = in_sub_batches(&inputs, &limit, |batch| {
                sizes.push(batch.len());
                if batch.len() > fits {
                    return Err(over());
                }
                Ok(batch.iter().map(|x| x * 3).collect())
            })
            .expect("a single input fits");
            assert_eq!(out, inputs.iter().map(|x| x * 3).collect::<Vec<_>>());
            let settled = limit.load(Ordering::Relaxed);
            if fits >= inputs.len() {
                assert_eq!((settled, sizes), (usize::MAX, vec![inputs.len()]));
            } else {
                // Halving from 11: 11, 5, 2, 1; the size that fit is kept.
                assert!(sizes.iter().skip(1).all(|&n| n <= 5), "{fits}: {sizes:?}");
                assert_eq!(
                    settled,
                    [5usize, 2, 1].into_iter().find(|&s| s <= fits).unwrap()
                );
            }
        }
        // Other errors, and a refusal of a single input, are returned.
        let limit = AtomicUsize::new(usize::MAX);
        let e = in_sub_batches(&inputs, &limit, |_| -> Result<Vec<u64>> { Err(over()) });
        assert!(e.is_err_and(|e| is_over_budget(&e)));
        assert_eq!(limit.load(Ordering::Relaxed), 1);
        let limit = AtomicUsize::new(usize::MAX);
        let e = in_sub_batches(&inputs, &limit, |_| -> Result<Vec<u64>> {
            Err(Error::NonFinite)
        });
        assert_eq!(e, Err(Error::NonFinite));
        assert_eq!(limit.load(Ordering::Relaxed), usize::MAX);
    }

    #[test]
    fn keygen_and_encoding_report_progress() {
        let preset = Preset::TestFGb;
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
        let keygen = KeyGenerator::with_seed(&context, seed32(6));
        let secret = keygen.secret_key().unwrap();
        let schedule =
            BootstrapSchedule::new(&params, recommended_choice(preset.shape_of()), Some(1 << 5))
                .unwrap();
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

    /// Each bootstrap key is made for the highest level the schedule uses
    /// it at, and a key set made for lower levels is refused when the
    /// bootstrapper is built (not halfway through a bootstrap).
    #[test]
    fn keys_are_made_and_checked_at_their_levels() {
        let preset = Preset::TestFGb;
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
        let keygen = KeyGenerator::with_seed(&context, seed32(5));
        let secret = keygen.secret_key().unwrap();
        let schedule =
            BootstrapSchedule::new(&params, recommended_choice(preset.shape_of()), Some(1 << 5))
                .unwrap();
        let request = key_request(&schedule, &params).unwrap();
        let n = params.degree().get();
        let top = params.max_level();
        // CoeffToSlot's rotations at the top, SlotToCoeff-only ones low.
        for &step in &request.rotations {
            let level = request.level_of(KeyKind::Rotation(GaloisElement::rotation(step, n)), top);
            assert!(level.0 >= 1 && level <= top, "step {step}: {level:?}");
        }
        let relin = request.level_of(KeyKind::Relinearization, top);
        assert_eq!(relin.0, schedule.eval_mod_level.max(params.enc_level().0));

        // The same request with every key one level too low is refused.
        let mut low = request.clone();
        for level in low.levels.values_mut() {
            *level = Level(level.0.saturating_sub(1));
        }
        low.levels.insert(KeyKind::Conjugation, Level(0));
        low.levels.insert(KeyKind::Relinearization, Level(0));
        let keys = BootstrapKeys {
            keys: Arc::new(keygen.key_set(&secret, &low).unwrap()),
            sse: None,
        };
        let schedule_no_sse = BootstrapSchedule::new(
            &params,
            ScheduleChoice {
                sse: false,
                ..recommended_choice(preset.shape_of())
            },
            Some(1 << 5),
        )
        .unwrap();
        let err = Bootstrapper::new(&context, schedule_no_sse, keys).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Ckks(hemem_ckks::Error::Key(
                    hemem_ckks::KeyError::KeyLevelTooLow { .. }
                ))
            ),
            "{err:?}"
        );
    }
}
