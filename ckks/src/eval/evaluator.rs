//! [`Evaluator`]: the homomorphic evaluator of a context, with or without keys.

use std::sync::{Arc, Mutex, PoisonError};

use super::Ciphertext;
use crate::context::Context;
use crate::encoding::Plaintext;
use crate::poly::{Ntt, RnsPoly};
use hemem_memory::MemoryClass;

use crate::keys::KeySet;
use crate::{KeyError, Result};

/// Hoisted rotations whose ModDowns run together by default
/// ([`Evaluator::with_mod_down_batch`]): on the GPU one launch per kernel
/// for all eight parts, where one rotation's ModDown pair is a few launches
/// of ten limbs that leave most of the GPU idle.
pub const DEFAULT_MOD_DOWN_BATCH: usize = 4;

/// How many complex constants an evaluator keeps encoded (see
/// [`ConstantCache`]).
const CONSTANT_CACHE: usize = 4;

/// The polynomials `re + im·X^{N/2}` (NTT form) that
/// [`Evaluator::mult_const_without_rescale`] multiplied by last, by their
/// primes and integer coefficients, shared by an evaluator's clones. A
/// complex bootstrap multiplies by ∓i twice each time; building the
/// polynomial uploads all its limbs (9 MB at FGb's level 17), which on the
/// H100 waited on the compute stream and left the device idle 1.6–2.0 ms
/// around each product (CUPTI's kernel records, docs/BENCHMARKS.md,
/// "Eighth session").
#[derive(Debug, Default)]
pub(crate) struct ConstantCache {
    entries: Mutex<Vec<(ConstantKey, Arc<RnsPoly<Ntt>>)>>,
}

/// A cached constant: its primes (indices in the context's chain), and
/// the bits of its two integer coefficients.
type ConstantKey = (Vec<usize>, u64, u64);

impl ConstantCache {
    /// The polynomial for `key`, made by `make` unless it is kept; the
    /// least recently used leaves when the cache is full.
    pub(crate) fn get_or_make(
        &self,
        key: ConstantKey,
        make: impl FnOnce() -> Result<RnsPoly<Ntt>>,
    ) -> Result<Arc<RnsPoly<Ntt>>> {
        {
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(i) = entries.iter().position(|(k, _)| *k == key) {
                let entry = entries.remove(i);
                let poly = Arc::clone(&entry.1);
                entries.insert(0, entry);
                return Ok(poly);
            }
        }
        let poly = Arc::new(make()?);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.insert(0, (key, Arc::clone(&poly)));
        entries.truncate(CONSTANT_CACHE);
        Ok(poly)
    }

    /// How many constants are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Evaluates homomorphic operations. Each operation runs where its operands
/// live and checks that they agree in context, device, level, scale and slot
/// count, returning a typed error that names the mismatch (and the
/// `level_down`/`rescale` call that fixes it).
///
/// Operations that switch keys (multiplication, rotation, conjugation) need
/// an evaluator made with [`Evaluator::with_keys`].
#[derive(Clone, Debug)]
pub struct Evaluator {
    pub(crate) context: Context,
    pub(crate) keys: Option<Arc<KeySet>>,
    pub(crate) output_class: MemoryClass,
    /// Rotations whose ModDowns [`Evaluator::rotate_hoisted`] runs together.
    pub(crate) mod_down_batch: usize,
    /// Complex constants kept encoded.
    pub(crate) constants: Arc<ConstantCache>,
}

impl Evaluator {
    /// An evaluator without keys: additions, plaintext and constant
    /// operations, rescaling and `level_down`.
    pub fn new(context: &Context) -> Self {
        Self {
            context: context.clone(),
            keys: None,
            output_class: MemoryClass::Ciphertext,
            mod_down_batch: DEFAULT_MOD_DOWN_BATCH,
            constants: Arc::default(),
        }
    }

    /// An evaluator with evaluation keys.
    pub fn with_keys(context: &Context, keys: Arc<KeySet>) -> Self {
        Self {
            context: context.clone(),
            keys: Some(keys),
            output_class: MemoryClass::Ciphertext,
            mod_down_batch: DEFAULT_MOD_DOWN_BATCH,
            constants: Arc::default(),
        }
    }

    /// The same evaluator, allocating its results in `class` memory
    /// (`Ciphertext` by default). Bootstrapping uses `Temporary` for the
    /// intermediates that live only inside one bootstrap.
    pub fn with_output_class(mut self, class: MemoryClass) -> Self {
        self.output_class = class;
        self
    }

    /// The same evaluator, running the ModDowns of up to `rotations`
    /// hoisted rotations together ([`Evaluator::rotate_hoisted`]; at least
    /// 1, [`DEFAULT_MOD_DOWN_BATCH`] by default). Larger batches use the
    /// GPU better and hold more temporaries: each rotation waiting for its
    /// ModDown keeps its inner product over `Q ∪ P` (about 31 MB at FGb's
    /// top level; `c0` is read through the automorphism by the ModDown,
    /// not copied). The results are the same.
    pub fn with_mod_down_batch(mut self, rotations: usize) -> Self {
        self.mod_down_batch = rotations.max(1);
        self
    }

    /// The memory class of the ciphertexts this evaluator returns.
    pub fn output_class(&self) -> MemoryClass {
        self.output_class
    }

    /// A copy of `a` in this evaluator's output class.
    pub(crate) fn copy_of(&self, a: &Ciphertext) -> Result<Ciphertext> {
        a.clone_as(self.output_class)
    }

    /// `a` with each polynomial replaced by `f` of it, computed out of place
    /// into this evaluator's output class (the level, scale and slots are
    /// `a`'s): one kernel per polynomial where a copy followed by an
    /// in-place operation would run two and move the polynomial twice more.
    pub(crate) fn map_parts(
        &self,
        a: &Ciphertext,
        mut f: impl FnMut(&RnsPoly<Ntt>, MemoryClass) -> Result<RnsPoly<Ntt>>,
    ) -> Result<Ciphertext> {
        let c0 = f(&a.c0, self.output_class)?;
        let c1 = f(&a.c1, self.output_class)?;
        Ciphertext::from_parts(&self.context, c0, c1, a.level, a.scale, a.slots)
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The evaluation keys.
    ///
    /// # Errors
    /// [`KeyError::NoKeys`] for an evaluator made without keys;
    /// [`crate::OperandError::ContextMismatch`] for keys of another context (their
    /// key switches would return noise).
    pub fn keys(&self) -> Result<&KeySet> {
        let keys = self.keys.as_deref().ok_or(KeyError::NoKeys)?;
        if let Some(context) = keys.context() {
            self.context.check_same(context)?;
        }
        Ok(keys)
    }

    pub(crate) fn check_pair(&self, a: &Ciphertext, b: &Ciphertext) -> Result<()> {
        self.context.check_same(&a.context)?;
        a.check_matches(&b.context, b.level, b.scale, b.slots, b.device())
    }

    /// As `check_pair`, but the scales may differ (multiplication).
    pub(crate) fn check_pair_any_scale(&self, a: &Ciphertext, b: &Ciphertext) -> Result<()> {
        self.context.check_same(&a.context)?;
        a.check_matches(&b.context, b.level, a.scale, b.slots, b.device())
    }

    pub(crate) fn check_plain(&self, a: &Ciphertext, p: &Plaintext) -> Result<()> {
        self.context.check_same(&a.context)?;
        a.check_matches(&p.context, p.level, p.scale, p.slots, p.device())
    }

    pub(crate) fn check_plain_any_scale(&self, a: &Ciphertext, p: &Plaintext) -> Result<()> {
        self.context.check_same(&a.context)?;
        a.check_matches(&p.context, p.level, a.scale, p.slots, p.device())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::DeviceSelection;
    use crate::context::Context;
    use crate::params::{Parameters, Preset, SecurityCheck};

    #[test]
    fn the_constant_cache_keeps_the_most_recent_and_makes_the_rest() {
        let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)
            .expect("preset");
        let context = Context::new(params, DeviceSelection::Cpu).expect("context");
        let poly = |v: u64| {
            let n = context.params().degree().get();
            RnsPoly::<crate::poly::Coeff>::from_words(
                context.backend(),
                &[0],
                MemoryClass::Constant,
                &vec![v % 97; n],
            )?
            .into_ntt()
        };
        let cache = ConstantCache::default();
        let made = std::cell::Cell::new(0);
        let get = |key: u64| {
            cache
                .get_or_make((vec![0], key, 0), || {
                    made.set(made.get() + 1);
                    poly(key)
                })
                .expect("made")
        };
        let first = get(1);
        assert!(Arc::ptr_eq(&first, &get(1)), "kept");
        for key in 2..=CONSTANT_CACHE as u64 {
            get(key);
        }
        // Key 1 was used most recently of all but the three after it: it
        // stays when a fifth arrives, key 2 leaves.
        get(1);
        get(99);
        assert!(Arc::ptr_eq(&first, &get(1)));
        let before = made.get();
        get(2);
        assert_eq!(made.get(), before + 1, "key 2 was made again");
        get(2);
        assert_eq!(made.get(), before + 1, "and kept");
        assert_eq!(cache.len(), CONSTANT_CACHE);
    }
}
