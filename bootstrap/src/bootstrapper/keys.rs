//! The keys a bootstrap needs ([`BootstrapKeys`]): what a schedule asks
//! for, at which levels, generated, merged with a workload's own, and
//! checked when a bootstrapper is built.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hemem_ckks::encoding::Encoder;
use hemem_ckks::eval::{Ciphertext, Decryptor, Encryptor, Evaluator};
use hemem_ckks::keys::{
    KeyGenerator, KeyKind, KeySet, KeySetRequest, PublicKey, SecretKey, SwitchingKey,
};
use hemem_ckks::ntt::GaloisElement;
use hemem_ckks::params::{Level, Parameters};
use hemem_ckks::progress::{NoProgress, Progress};
use hemem_ckks::sampling::Sampler;
use hemem_ckks::{Context, KeyError};
use num_complex::Complex64;

use crate::dft::HomomorphicDft;
use crate::schedule::{BootstrapSchedule, INPUT_LEVEL, SSE_HAMMING_WEIGHT};
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
        // The request checks the schedule before its levels are used.
        let request = key_request(schedule, params)?;
        let sse = if schedule.choice.sse {
            params.switching_key_bytes_at(Level(0), false)
                + params.switching_key_bytes_at(Level(schedule.top_level), false)
        } else {
            0
        };
        Ok(request.key_bytes(params) + sse)
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
        self.keys.size_bytes() + self.sse.as_ref().map_or(0, SseKeys::size_bytes)
    }

    /// The slot counts these keys bootstrap under the recommended schedule
    /// ([`BootstrapSchedule::recommended_for_slots`]) with some BSGS ratio
    /// up to [`MAX_LOG_BSGS_RATIO`](super::MAX_LOG_BSGS_RATIO) (the
    /// recommended 0, or what
    /// [`Bootstrapper::fit_schedule`](super::Bootstrapper::fit_schedule)
    /// made them for), largest first; [`Self::log_bsgs_ratios`] tells which
    /// ratios. A key
    /// set does not record the slot count it was made for, and the keys
    /// for one count lack rotations (or levels, or the sparse-secret keys)
    /// that another needs: a caller with keys from a file asks this
    /// before choosing a schedule, instead of meeting a missing rotation
    /// key.
    pub fn slot_counts(&self, params: &Parameters) -> Vec<usize> {
        let max = params.slots();
        std::iter::successors(Some(max), |&s| (s > 1).then_some(s / 2))
            .filter(|&slots| {
                BootstrapSchedule::recommended_for_slots(params, slots)
                    .is_ok_and(|schedule| !self.log_bsgs_ratios(&schedule, params).is_empty())
            })
            .collect()
    }

    /// Whether these keys hold every key `schedule` needs, at the levels it
    /// needs them (the check [`Bootstrapper::new`](super::Bootstrapper::new)
    /// makes): for a caller with keys from a file choosing between
    /// schedules, such as the BSGS ratio they were made for.
    pub fn serve(&self, schedule: &BootstrapSchedule, params: &Parameters) -> bool {
        key_request(schedule, params).is_ok_and(|request| self.hold(schedule, &request, params))
    }

    /// The BSGS ratios `0..=`[`MAX_LOG_BSGS_RATIO`](super::MAX_LOG_BSGS_RATIO)
    /// with which these keys [`serve`](Self::serve) `schedule`, rising,
    /// each the smallest of those that ask for the same keys (FGb's ratio
    /// 1 splits as 0 does, so keys of ratio 0 give `[0]`); empty
    /// where they serve none, or the schedule does not fit `params`. The
    /// DFTs are built once for all the ratios.
    pub fn log_bsgs_ratios(&self, schedule: &BootstrapSchedule, params: &Parameters) -> Vec<i32> {
        let dfts = schedule
            .check_for(params)
            .and_then(|()| Ok((schedule.cts_dft()?, schedule.stc_dft()?)));
        let Ok((cts, stc)) = dfts else {
            return Vec::new();
        };
        let mut served = Vec::new();
        let mut below: Option<KeySetRequest> = None;
        for log_bsgs_ratio in 0..=super::MAX_LOG_BSGS_RATIO {
            let at = BootstrapSchedule {
                log_bsgs_ratio,
                ..schedule.clone()
            };
            let request = request_from(&at, params, &cts, &stc);
            if below.as_ref() != Some(&request) && self.hold(&at, &request, params) {
                served.push(log_bsgs_ratio);
            }
            below = Some(request);
        }
        served
    }

    /// Whether these keys hold `request`, made for `schedule` (whose
    /// sparse-secret keys they must then have too).
    fn hold(
        &self,
        schedule: &BootstrapSchedule,
        request: &KeySetRequest,
        params: &Parameters,
    ) -> bool {
        (!schedule.choice.sse || self.sse.is_some())
            && check_keys(&self.keys, request, params).is_ok()
    }

    /// Checks that these keys, `secret` and `public` belong together: an
    /// encryption of random values under `public` decrypts with `secret`,
    /// and its square, relinearised with these keys' relinearisation key,
    /// decrypts to the values' squares. Key files are saved apart (the
    /// secret key on its own, owner-only); files of different key
    /// generations parse and pass every format check, but bootstrap to
    /// noise, so whoever puts them together should check. Costs one
    /// encryption and one multiplication at the encryption level.
    ///
    /// # Errors
    /// [`KeyError::KeysDoNotMatch`] naming the public key or the bootstrap
    /// keys; [`KeyError::MissingRelinearizationKey`]; the encryption's and
    /// multiplication's errors (another context, say).
    pub fn check_match(
        &self,
        context: &Context,
        secret: &SecretKey,
        public: &PublicKey,
    ) -> Result<()> {
        let slots = context.params().slots();
        let mut sampler = Sampler::from_os()?;
        let values: Vec<Complex64> = (0..slots)
            .map(|_| Complex64::new(2.0 * sampler.uniform_f64() - 1.0, 0.0))
            .collect();
        let encoder = Encoder::new(context);
        let decryptor = Decryptor::new(context);
        let ct = Encryptor::new(context)?.encrypt(&encoder.encode(&values)?, public)?;
        let fits = |ct: &Ciphertext, want: &dyn Fn(Complex64) -> Complex64| -> Result<bool> {
            let got = encoder.decode(&decryptor.decrypt(ct, secret)?)?;
            Ok(got
                .iter()
                .zip(&values)
                .all(|(g, &v)| (g - want(v)).norm() < MATCH_TOLERANCE))
        };
        if !fits(&ct, &|v| v)? {
            return Err(
                hemem_ckks::Error::from(KeyError::KeysDoNotMatch { what: "public key" }).into(),
            );
        }
        let square = Evaluator::with_keys(context, Arc::clone(&self.keys)).mult(&ct, &ct)?;
        if !fits(&square, &|v| v * v)? {
            return Err(hemem_ckks::Error::from(KeyError::KeysDoNotMatch {
                what: "bootstrap key set",
            })
            .into());
        }
        Ok(())
    }
}

/// The largest slot error [`BootstrapKeys::check_match`] accepts: keys
/// that match give errors near 2^-20 and less (every preset), keys that do
/// not give noise of the modulus' size.
const MATCH_TOLERANCE: f64 = 1.0 / 256.0;

impl SseKeys {
    /// Bytes of both keys as held.
    pub(crate) fn size_bytes(&self) -> usize {
        self.to_sparse.size_bytes() + self.to_dense.size_bytes()
    }
}

/// The rotation steps of SubSum for `slots` of `max_slots`: `slots·2^i`
/// (full-slot rotations) while below `max_slots`.
pub(super) fn subsum_steps(slots: usize, max_slots: usize) -> Vec<i64> {
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
/// [`BootstrapSchedule::check_for`]'s, for a schedule that does not fit
/// `params` (so the keys of a schedule the bootstrapper would refuse are
/// never generated or sized).
pub fn key_request(schedule: &BootstrapSchedule, params: &Parameters) -> Result<KeySetRequest> {
    schedule.check_for(params)?;
    Ok(request_from(
        schedule,
        params,
        &schedule.cts_dft()?,
        &schedule.stc_dft()?,
    ))
}

/// [`key_request`] of a checked `schedule` whose DFTs are `cts` and `stc`
/// (built once where several BSGS ratios are asked about).
fn request_from(
    schedule: &BootstrapSchedule,
    params: &Parameters,
    cts: &HomomorphicDft,
    stc: &HomomorphicDft,
) -> KeySetRequest {
    let n = params.degree().get();
    let mut levels: BTreeMap<KeyKind, Level> = BTreeMap::new();
    let mut need = |kind: KeyKind, level: usize| {
        let entry = levels.entry(kind).or_insert(Level(level));
        *entry = (*entry).max(Level(level));
    };
    let mut rotations = BTreeSet::new();
    for (dft, start) in [(cts, schedule.top_level), (stc, INPUT_LEVEL)] {
        for (i, factor) in dft
            .factor_rotations(schedule.log_bsgs_ratio)
            .into_iter()
            .enumerate()
        {
            for step in factor {
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
    KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: rotations.into_iter().collect(),
        levels,
    }
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
pub(super) fn check_keys(
    keys: &KeySet,
    request: &KeySetRequest,
    params: &Parameters,
) -> Result<()> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use hemem_ckks::Context;
    use hemem_ckks::backend::DeviceSelection;
    use hemem_ckks::params::{Preset, SecurityCheck};
    use hemem_ckks::testing::seed32;

    use super::*;
    use crate::Bootstrapper;
    use crate::schedule::{ScheduleChoice, recommended_choice};

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
        let schedule = BootstrapSchedule::recommended_for_slots(&params, 1 << 5).unwrap();
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
        // The lower-level path on purpose: the recommended choice without
        // SSE, so that the key set alone is what the bootstrapper checks.
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
