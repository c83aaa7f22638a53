//! [`CkksOps`]: [`SlotArithmetic`] on real ciphertexts — the bridge that lets
//! the slot-level algorithms of this crate (DFTs, polynomial evaluation,
//! EvalMod) run homomorphically, on whichever backend the ciphertexts live.

use hemem_ckks::encoding::{CompactPlaintext, Encoder, Plaintext, is_short_period, least_period};
use hemem_ckks::eval::{Ciphertext, Evaluator, TensoredCiphertext};
use hemem_ckks::params::{Level, Scale};
use hemem_memory::MemoryClass;
use num_complex::Complex64;

use crate::Result;
use crate::arith::SlotArithmetic;

/// Slot arithmetic with an [`Evaluator`] (which must hold the relinearisation,
/// conjugation and rotation keys the algorithm uses).
///
/// Rescaling does not apply the user-level scale rule
/// ([`hemem_ckks::params::Parameters::check_rescale`]): bootstrapping's
/// schedules let the scale exceed the bottom primes on purpose. Encoded
/// plaintexts (linear-transform diagonals), compact or not, go to
/// `constant_class` memory; their expansions to `Temporary` memory. A
/// vector whose values repeat is encoded as one period and read as the
/// whole ([`hemem_ckks::encoding::least_period`]).
#[derive(Debug, Clone)]
pub struct CkksOps<'a> {
    evaluator: &'a Evaluator,
    encoder: Encoder,
    constant_class: MemoryClass,
}

impl<'a> CkksOps<'a> {
    /// Slot arithmetic through `evaluator`, encoding plaintexts as
    /// `BootstrapConstant` memory.
    pub fn new(evaluator: &'a Evaluator) -> Self {
        Self {
            evaluator,
            encoder: Encoder::new(evaluator.context()),
            constant_class: MemoryClass::BootstrapConstant,
        }
    }

    /// The same, encoding plaintexts in `class` memory.
    pub fn with_constant_class(mut self, class: MemoryClass) -> Self {
        self.constant_class = class;
        self
    }

    /// The evaluator.
    pub fn evaluator(&self) -> &Evaluator {
        self.evaluator
    }

    /// The encoder of the evaluator's context.
    pub(crate) fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    /// The memory class of encoded plaintexts.
    pub(crate) fn constant_class(&self) -> MemoryClass {
        self.constant_class
    }

    /// `values` encoded compact at `level` and `scale` in `class` memory,
    /// as one period read as the whole ([`one_period`]).
    fn compact_at_class(
        &self,
        values: &[Complex64],
        level: usize,
        scale: f64,
        class: MemoryClass,
    ) -> Result<CompactPlaintext> {
        let (first, period) = one_period(values);
        Ok(self
            .encoder
            .encode_compact_at_class(first, Level(level), Scale(scale), period, class)?
            .repeat_slots(values.len())?)
    }

    /// `values` encoded at `level` and `scale` (over `Q_l ∪ P` when
    /// `extended`) and kept periodic, when they repeat a period short
    /// enough ([`is_short_period`]): one period encoded
    /// compact, then transformed at `2·period` points into
    /// `constant_class` memory. The limbs are the ones the full encoding
    /// holds, each kept once instead of `N/2·period` times. A vector of
    /// sparse slots that does not repeat is such a message too (period
    /// `values.len()` below `N/2`). `None` for a period too long.
    pub(crate) fn encode_repeating(
        &self,
        values: &[Complex64],
        level: usize,
        scale: f64,
        extended: bool,
    ) -> Result<Option<Plaintext>> {
        let (_, period) = one_period(values);
        let n = self.evaluator.context().params().degree().get();
        if !is_short_period(n, period) {
            return Ok(None);
        }
        let compact = self.compact_at_class(values, level, scale, MemoryClass::Temporary)?;
        Ok(self
            .encoder
            .expand_periodic(&[&compact], self.constant_class, extended)?
            .pop())
    }
}

/// The first period of `values` ([`least_period`]) and its length: what
/// the encoders below encode, as `period` slots read as `values.len()`
/// ([`Plaintext::repeat_slots`]). The message is the same; its compact form
/// is `2·period` words instead of `2·values.len()`, and it expands by a
/// transform of `2·period` points ([`hemem_ckks::ntt::forward_subring`]).
/// Two of the three factors of each of FGb's DFTs have diagonals of period
/// 1024 and 32 ([`crate::dft`]). Encoding one period rounds the same
/// coefficients in exact arithmetic, and in floating point differs from
/// encoding the whole only by the special FFT's rounding.
pub(crate) fn one_period(values: &[Complex64]) -> (&[Complex64], usize) {
    let period = least_period(values).max(1);
    (values.get(..period).unwrap_or(values), period)
}

impl SlotArithmetic for CkksOps<'_> {
    type Value = Ciphertext;
    type Plain = Plaintext;
    type Tensored = TensoredCiphertext;
    type Compact = CompactPlaintext;

    fn limb_bytes(&self) -> u64 {
        8 * self.evaluator.context().params().degree().get() as u64
    }

    fn slots(&self, x: &Ciphertext) -> usize {
        x.slots()
    }

    fn level(&self, x: &Ciphertext) -> usize {
        x.level().get()
    }

    fn scale(&self, x: &Ciphertext) -> f64 {
        x.scale().get()
    }

    fn prime(&self, level: usize) -> Result<u64> {
        Ok(self
            .evaluator
            .context()
            .params()
            .q_modulus(Level(level))?
            .value())
    }

    fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        Ok(self.evaluator.add(a, b)?)
    }

    fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        Ok(self.evaluator.sub(a, b)?)
    }

    fn mul_relin(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        Ok(self.evaluator.mult_without_rescale(a, b)?)
    }

    fn tensor_add(
        &self,
        acc: &mut Option<TensoredCiphertext>,
        a: &Ciphertext,
        b: &Ciphertext,
    ) -> Result<()> {
        let t = self.evaluator.tensor(a, b)?;
        match acc.as_mut() {
            None => *acc = Some(t),
            Some(sum) => self.evaluator.add_tensored_assign(sum, &t)?,
        }
        Ok(())
    }

    fn relinearize_sum(
        &self,
        sum: TensoredCiphertext,
        addend: Option<&Ciphertext>,
    ) -> Result<Ciphertext> {
        Ok(self.evaluator.relinearize_with(sum, addend)?)
    }

    fn relinearize_sum_rescale(
        &self,
        sum: TensoredCiphertext,
        addend: Option<&Ciphertext>,
    ) -> Result<Ciphertext> {
        Ok(self
            .evaluator
            .relinearize_rescale_unchecked_with(sum, addend)?)
    }

    fn rescale(&self, a: &Ciphertext) -> Result<Ciphertext> {
        Ok(self.evaluator.rescale_unchecked(a)?)
    }

    fn mul_const(&self, a: &Ciphertext, c: Complex64, const_scale: f64) -> Result<Ciphertext> {
        Ok(self
            .evaluator
            .mult_const_without_rescale(a, c, Scale(const_scale))?)
    }

    fn mul_const_at_level(
        &self,
        a: &Ciphertext,
        c: Complex64,
        const_scale: f64,
        level: usize,
    ) -> Result<Ciphertext> {
        Ok(self
            .evaluator
            .mult_const_at_level(a, c, Scale(const_scale), Level(level))?)
    }

    fn add_const(&self, a: &Ciphertext, c: Complex64) -> Result<Ciphertext> {
        Ok(self.evaluator.add_const(a, c)?)
    }

    fn mul_integer(&self, a: &Ciphertext, k: i64) -> Result<Ciphertext> {
        Ok(self.evaluator.mult_integer(a, k)?)
    }

    fn level_down(&self, a: &Ciphertext, level: usize) -> Result<Ciphertext> {
        Ok(self.evaluator.level_down(a, Level(level))?)
    }

    fn encode(&self, values: &[Complex64], level: usize, scale: f64) -> Result<Plaintext> {
        if let Some(periodic) = self.encode_repeating(values, level, scale, false)? {
            return Ok(periodic);
        }
        let (first, period) = one_period(values);
        Ok(self
            .encoder
            .encode_at_class(
                first,
                Level(level),
                Scale(scale),
                period,
                self.constant_class,
            )?
            .repeat_slots(values.len())?)
    }

    fn encode_compact(
        &self,
        values: &[Complex64],
        level: usize,
        scale: f64,
    ) -> Result<CompactPlaintext> {
        self.compact_at_class(values, level, scale, self.constant_class)
    }

    /// Expands into `Temporary` memory, all at once (one batched launch
    /// pair on the GPU for each run of one level); diagonals that repeat a
    /// short period are kept periodic
    /// ([`hemem_ckks::encoding::Encoder::expand_periodic`]).
    fn expand(&self, compact: &[&CompactPlaintext]) -> Result<Vec<Plaintext>> {
        Ok(self
            .encoder
            .expand_periodic(compact, MemoryClass::Temporary, false)?)
    }

    fn mul_plain(&self, a: &Ciphertext, p: &Plaintext) -> Result<Ciphertext> {
        Ok(self.evaluator.mult_plain_without_rescale(a, p)?)
    }

    fn add_assign(&self, acc: &mut Ciphertext, b: &Ciphertext) -> Result<()> {
        Ok(self.evaluator.add_assign(acc, b)?)
    }

    fn mul_plain_add_assign(
        &self,
        acc: &mut Ciphertext,
        a: &Ciphertext,
        p: &Plaintext,
    ) -> Result<()> {
        Ok(self.evaluator.mult_plain_add_assign(acc, a, p)?)
    }

    fn mul_plain_sum(
        &self,
        acc: &mut Option<Ciphertext>,
        terms: &[(&Ciphertext, &Plaintext)],
    ) -> Result<()> {
        match acc.as_mut() {
            None => *acc = Some(self.evaluator.mult_plain_sum(terms)?),
            Some(sum) => self.evaluator.mult_plain_sum_add_assign(sum, terms)?,
        }
        Ok(())
    }

    fn rotate(&self, a: &Ciphertext, steps: i64) -> Result<Ciphertext> {
        Ok(self.evaluator.rotate(a, steps)?)
    }

    fn rotate_hoisted(&self, a: &Ciphertext, steps: &[i64]) -> Result<Vec<Ciphertext>> {
        Ok(self.evaluator.rotate_hoisted(a, steps)?)
    }

    fn conjugate(&self, a: &Ciphertext) -> Result<Ciphertext> {
        Ok(self.evaluator.conjugate(a)?)
    }

    fn set_scale(&self, a: &Ciphertext, scale: f64) -> Result<Ciphertext> {
        Ok(self.evaluator.set_scale(a, Scale(scale))?)
    }
}
