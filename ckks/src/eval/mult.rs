//! Multiplication: tensor, relinearisation, rescaling, and products with
//! plaintexts, constants, integers and `i`.

use hemem_memory::MemoryClass;
use num_complex::Complex64;

use super::{Ciphertext, Evaluator, TensoredCiphertext};
use crate::backend::{BinaryOp, Device, PeriodicLimbs};
use crate::encoding::{Encoder, Plaintext};
use crate::params::{Level, Scale};
use crate::poly::{Coeff, Ntt, RnsPoly};
use crate::{OperandError, Result};

/// Each ciphertext part of `terms` with its plaintext as a factor of a sum
/// of products ([`RnsPoly::mul_sum_periodic`]): periodic plaintexts are
/// read in place.
type Factors<'t> = Vec<(&'t RnsPoly<Ntt>, PeriodicLimbs<'t>)>;

fn plain_factors<'t>(
    terms: &[(&'t Ciphertext, &'t Plaintext)],
) -> Result<(Factors<'t>, Factors<'t>)> {
    let mut c0 = Vec::with_capacity(terms.len());
    let mut c1 = Vec::with_capacity(terms.len());
    for &(a, p) in terms {
        let factor = p.factor()?;
        c0.push((&a.c0, factor));
        c1.push((&a.c1, factor));
    }
    Ok((c0, c1))
}

impl Evaluator {
    /// The tensor product `(a0·b0, a0·b1 + a1·b0, a1·b1)`, at the common
    /// level with scale `Δ_a·Δ_b` (scales may differ).
    ///
    /// # Errors
    /// Mismatched context, device, level or slots;
    /// [`OperandError::ScaleOutOfRange`] for a product scale of `Q_l` or
    /// more.
    pub fn tensor(&self, a: &Ciphertext, b: &Ciphertext) -> Result<TensoredCiphertext> {
        self.check_pair_any_scale(a, b)?;
        let scale = self.product_scale(a.level, a.scale, b.scale)?;
        let backend = a.c0.backend();
        let moduli = a.c0.moduli();
        let mut d0 = RnsPoly::<Ntt>::allocate(backend, moduli, MemoryClass::Temporary, false)?;
        let mut d1 = RnsPoly::<Ntt>::allocate(backend, moduli, MemoryClass::Temporary, false)?;
        let mut d2 = RnsPoly::<Ntt>::allocate(backend, moduli, MemoryClass::Temporary, false)?;
        backend.tensor(
            a.c0.limbs()?,
            a.c1.limbs()?,
            b.c0.limbs()?,
            b.c1.limbs()?,
            d0.limbs_mut()?,
            d1.limbs_mut()?,
            d2.limbs_mut()?,
        )?;
        Ok(TensoredCiphertext {
            context: self.context.clone(),
            d0,
            d1,
            d2,
            level: a.level,
            scale,
            slots: a.slots,
        })
    }

    /// The scale `Δ_a·Δ_b` of a product at `level` that is not rescaled
    /// where it is made, within `[1, Q_l)`
    /// ([`Parameters::check_scale`](crate::params::Parameters::check_scale)):
    /// past `Q_l` the product has wrapped and no rescale brings it back.
    fn product_scale(&self, level: Level, a: Scale, b: Scale) -> Result<Scale> {
        let product = Scale(a.0 * b.0);
        self.context.params().check_scale(level, product)?;
        Ok(product)
    }

    /// `a·b`: tensor, relinearise, rescale — the last two in one ModDown
    /// ([`Evaluator::relinearize_rescale_with`]). Two ciphertexts at the
    /// default scale of level `l` give one at the default scale of `l − 1`.
    ///
    /// # Errors
    /// Mismatched operands; [`OperandError::LevelTooLow`] at level 0;
    /// [`OperandError::ScaleOverflow`] when the rescale is not allowed;
    /// [`OperandError::ScaleOutOfRange`] for a product scale of `Q_l` or
    /// more (possible where `q_l` is large against `Q_{l−1}`); missing
    /// relinearisation key.
    pub fn mult(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check_pair_any_scale(a, b)?;
        self.context
            .params()
            .check_rescale(a.level, Scale(a.scale.0 * b.scale.0))?;
        self.relinearize_rescale_with(self.tensor(a, b)?, None)
    }

    /// `a²`, rescaled.
    ///
    /// # Errors
    /// As [`Evaluator::mult`].
    pub fn square(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.mult(a, a)
    }

    /// `a²`, not rescaled.
    ///
    /// # Errors
    /// As [`Evaluator::mult_without_rescale`].
    pub fn square_without_rescale(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.mult_without_rescale(a, a)
    }

    /// Divides by the top prime `q_l` with rounding: level `l − 1`, scale
    /// `Δ / q_l`.
    ///
    /// # Errors
    /// [`OperandError::LevelTooLow`] at level 0; [`OperandError::ScaleOverflow`]
    /// when the result scale would exceed twice `q_l` (see
    /// [`crate::params::Parameters::check_rescale`]).
    pub fn rescale(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let (level, scale) = self.rescaled(a.level, a.scale, true)?;
        let (c0, c1) = a.c0.rescale_pair(&a.c1, self.output_class)?;
        Ciphertext::from_parts(&self.context, c0, c1, level, scale, a.slots)
    }

    /// The level and scale that dividing something at `level` and `scale`
    /// by `q_level` gives: under the user rule of
    /// [`crate::params::Parameters::check_rescale`] when `checked`, else
    /// refusing only level 0 (as [`Evaluator::rescale_unchecked`]).
    pub(super) fn rescaled(
        &self,
        level: Level,
        scale: Scale,
        checked: bool,
    ) -> Result<(Level, Scale)> {
        let params = self.context.params();
        if checked {
            let scale = params.check_rescale(level, scale)?;
            return Ok((Level(level.0 - 1), scale));
        }
        let lower = level.0.checked_sub(1).ok_or(OperandError::LevelTooLow {
            operation: "rescale",
            level,
        })?;
        let q = params.q_modulus(level)?.value() as f64;
        Ok((Level(lower), Scale(scale.0 / q)))
    }

    /// Divides by `q_l` like [`Evaluator::rescale`] but without the scale
    /// rule: only level 0 is refused. Bootstrapping's SlotToCoeff uses it,
    /// whose schedules let the scale exceed the bottom primes on purpose;
    /// user code should call [`Evaluator::rescale`].
    ///
    /// # Errors
    /// [`OperandError::LevelTooLow`] at level 0.
    pub fn rescale_unchecked(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let (level, scale) = self.rescaled(a.level, a.scale, false)?;
        let (c0, c1) = a.c0.rescale_pair(&a.c1, self.output_class)?;
        Ciphertext::from_parts(&self.context, c0, c1, level, scale, a.slots)
    }

    /// `a·p` without rescaling: scale `Δ_a·Δ_p`.
    ///
    /// # Errors
    /// Mismatched context, device, level or slots;
    /// [`OperandError::ScaleOutOfRange`] for a product scale of `Q_l` or
    /// more.
    pub fn mult_plain_without_rescale(&self, a: &Ciphertext, p: &Plaintext) -> Result<Ciphertext> {
        self.check_plain_any_scale(a, p)?;
        if p.is_periodic() {
            return self.mult_plain_sum(&[(a, p)]);
        }
        let scale = self.product_scale(a.level, a.scale, p.scale)?;
        let mut out = self.map_parts(a, |x, class| x.mul(p.poly()?, class))?;
        out.scale = scale;
        Ok(out)
    }

    /// `acc += a·p` without a new ciphertext (the accumulation of a linear
    /// transform's terms): `acc`'s scale must be `a`'s times `p`'s.
    ///
    /// # Errors
    /// Mismatched contexts, devices, levels or slots; a scale of `acc` other
    /// than `a`'s times `p`'s.
    pub fn mult_plain_add_assign(
        &self,
        acc: &mut Ciphertext,
        a: &Ciphertext,
        p: &Plaintext,
    ) -> Result<()> {
        self.mult_plain_sum_add_assign(acc, &[(a, p)])
    }

    /// `Σ_t a_t·p_t` without rescaling: a linear transform's inner sum in
    /// one pass over its operands, where a product and then a
    /// [`Evaluator::mult_plain_add_assign`] per further term would read and
    /// write the sum once per term. Bit-identical to that sequence.
    ///
    /// # Errors
    /// No terms; mismatched contexts, devices, levels or slots; products at
    /// different scales.
    pub fn mult_plain_sum(&self, terms: &[(&Ciphertext, &Plaintext)]) -> Result<Ciphertext> {
        let (a, p) = self.check_plain_terms(terms)?;
        let (c0, c1) = plain_factors(terms)?;
        Ciphertext::from_parts(
            &self.context,
            RnsPoly::mul_sum_periodic(&c0, self.output_class)?,
            RnsPoly::mul_sum_periodic(&c1, self.output_class)?,
            a.level,
            Scale(a.scale.0 * p.scale.0),
            a.slots,
        )
    }

    /// `acc += Σ_t a_t·p_t` ([`Evaluator::mult_plain_sum`], accumulated):
    /// `acc`'s scale must be every `a_t`'s times its `p_t`'s.
    ///
    /// # Errors
    /// As [`Evaluator::mult_plain_sum`]; a mismatched `acc`.
    pub fn mult_plain_sum_add_assign(
        &self,
        acc: &mut Ciphertext,
        terms: &[(&Ciphertext, &Plaintext)],
    ) -> Result<()> {
        let (a, p) = self.check_plain_terms(terms)?;
        acc.check_matches(
            &a.context,
            a.level,
            Scale(a.scale.0 * p.scale.0),
            a.slots,
            a.device(),
        )?;
        let (c0, c1) = plain_factors(terms)?;
        acc.c0.mul_sum_periodic_assign(&c0)?;
        acc.c1.mul_sum_periodic_assign(&c1)
    }

    /// The first term of a sum of products, after checking that every term
    /// multiplies operands that agree and that all products agree.
    fn check_plain_terms<'t>(
        &self,
        terms: &[(&'t Ciphertext, &'t Plaintext)],
    ) -> Result<(&'t Ciphertext, &'t Plaintext)> {
        let &(a0, p0) = terms.first().ok_or(crate::Error::LengthMismatch {
            expected: 1,
            actual: 0,
        })?;
        let scale = self.product_scale(a0.level, a0.scale, p0.scale)?;
        for &(a, p) in terms {
            self.check_plain_any_scale(a, p)?;
            a0.check_matches(&a.context, a.level, a0.scale, a.slots, a.device())?;
            let product = Scale(a.scale.0 * p.scale.0);
            if !product.matches(scale) {
                return Err(OperandError::ScaleMismatch {
                    left_log2: scale.log2(),
                    right_log2: product.log2(),
                }
                .into());
            }
        }
        Ok((a0, p0))
    }

    /// `a·p`, rescaled.
    ///
    /// # Errors
    /// As [`Evaluator::mult_plain_without_rescale`] and [`Evaluator::rescale`].
    pub fn mult_plain(&self, a: &Ciphertext, p: &Plaintext) -> Result<Ciphertext> {
        self.check_plain_any_scale(a, p)?;
        self.context
            .params()
            .check_rescale(a.level, Scale(a.scale.0 * p.scale.0))?;
        self.rescale(&self.mult_plain_without_rescale(a, p)?)
    }

    /// `a` brought down to `level` and multiplied by the constant `c` as
    /// [`Evaluator::mult_const_without_rescale`] does, in one pass where
    /// `c` is real (the dropped primes are never read) — what a
    /// polynomial's baby steps do with every power of the basis.
    ///
    /// # Errors
    /// As [`Evaluator::level_down`] and
    /// [`Evaluator::mult_const_without_rescale`].
    pub fn mult_const_at_level(
        &self,
        a: &Ciphertext,
        c: Complex64,
        const_scale: Scale,
        level: Level,
    ) -> Result<Ciphertext> {
        self.check_level_down(a, level)?;
        check_constant(c, const_scale)?;
        let scale = self.product_scale(level, a.scale, const_scale)?;
        if level == a.level {
            return self.mult_const_without_rescale(a, c, const_scale);
        }
        if (c.im * const_scale.0).round() != 0.0 {
            return self.mult_const_without_rescale(&self.level_down(a, level)?, c, const_scale);
        }
        let scalars = self.residues_at(level, (c.re * const_scale.0).round())?;
        let count = level.primes();
        let [c0, c1] = [&a.c0, &a.c1]
            .map(|x| x.scalar_prefix(BinaryOp::Mul, &scalars, count, self.output_class));
        Ciphertext::from_parts(&self.context, c0?, c1?, level, scale, a.slots)
    }

    /// `a·c` for a complex constant encoded at `const_scale` (the constant
    /// becomes `round(Re c·const_scale) + round(Im c·const_scale)·X^{N/2}`),
    /// not rescaled: scale `Δ_a·const_scale`.
    ///
    /// # Errors
    /// A ciphertext of another context; a non-finite constant or scale;
    /// [`OperandError::ScaleOutOfRange`] for a product scale of `Q_l` or
    /// more.
    pub fn mult_const_without_rescale(
        &self,
        a: &Ciphertext,
        c: Complex64,
        const_scale: Scale,
    ) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        check_constant(c, const_scale)?;
        let scale = self.product_scale(a.level, a.scale, const_scale)?;
        let re = (c.re * const_scale.0).round();
        let im = (c.im * const_scale.0).round();
        let mut out = if im == 0.0 {
            let scalars = self.residues_of(a, re)?;
            self.map_parts(a, |x, class| x.scalar(BinaryOp::Mul, &scalars, class))?
        } else {
            let key = (a.c0.moduli().to_vec(), re.to_bits(), im.to_bits());
            let poly = self
                .constants
                .get_or_make(key, || self.monomial_pair(a, re, im))?;
            self.map_parts(a, |x, class| x.mul(&poly, class))?
        };
        out.scale = scale;
        Ok(out)
    }

    /// `a·c`, rescaled so that the result has the default scale of level
    /// `l − 1` (the constant is encoded at `Δ_{l−1}·q_l / Δ_a`, which is `Δ_l`
    /// for a default-scale input).
    ///
    /// # Errors
    /// [`OperandError::LevelTooLow`] at level 0, and as
    /// [`Evaluator::mult_const_without_rescale`] and [`Evaluator::rescale`].
    pub fn mult_const(&self, a: &Ciphertext, c: Complex64) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        if a.level.0 == 0 {
            return Err(OperandError::LevelTooLow {
                operation: "mult_const",
                level: a.level,
            }
            .into());
        }
        let params = self.context.params();
        let target = params.default_scale(Level(a.level.0 - 1))?;
        let q = params.q_modulus(a.level)?.value() as f64;
        let const_scale = Scale(target.0 * q / a.scale.0);
        self.rescale(&self.mult_const_without_rescale(a, c, const_scale)?)
    }

    /// `a·v` slot by slot, for plaintext slot values `v` (fewer values than
    /// slots are padded with zeros), rescaled so that the result lands on
    /// the default scale of level `l − 1`. The values are encoded at `a`'s
    /// level and slot count and at the scale `Δ_{l−1}·q_l / Δ_a` that makes
    /// this exact (`Δ_l` for a default-scale input), as
    /// [`Evaluator::mult_const`] does for one constant; the encoding lives
    /// only inside the call.
    ///
    /// # Errors
    /// [`OperandError::LevelTooLow`] at level 0;
    /// [`OperandError::TooManyValues`] for more values than `a`'s slots;
    /// [`OperandError::NonFiniteValue`] for a value that is not finite or
    /// does not fit the modulus at that scale; a ciphertext of another
    /// context; [`OperandError::ScaleOverflow`] as [`Evaluator::rescale`].
    pub fn mult_values(&self, a: &Ciphertext, values: &[Complex64]) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        if a.level.0 == 0 {
            return Err(OperandError::LevelTooLow {
                operation: "mult_values",
                level: a.level,
            }
            .into());
        }
        let params = self.context.params();
        let target = params.default_scale(Level(a.level.0 - 1))?;
        let q = params.q_modulus(a.level)?.value() as f64;
        let plain_scale = Scale(target.0 * q / a.scale.0);
        let plain = self.encode_for(a, values, plain_scale)?;
        self.mult_plain(a, &plain)
    }

    /// [`Evaluator::mult_values`] for real slot values.
    ///
    /// # Errors
    /// As [`Evaluator::mult_values`].
    pub fn mult_real_values(&self, a: &Ciphertext, values: &[f64]) -> Result<Ciphertext> {
        self.mult_values(a, &as_complex(values))
    }

    /// `a + v` slot by slot, for plaintext slot values `v` (padded with
    /// zeros), encoded at `a`'s level, scale and slot count: no level is
    /// used and the scale is kept.
    ///
    /// # Errors
    /// [`OperandError::TooManyValues`], [`OperandError::NonFiniteValue`]
    /// and a ciphertext of another context, as [`Evaluator::mult_values`].
    pub fn add_values(&self, a: &Ciphertext, values: &[Complex64]) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let plain = self.encode_for(a, values, a.scale)?;
        self.add_plain(a, &plain)
    }

    /// [`Evaluator::add_values`] for real slot values.
    ///
    /// # Errors
    /// As [`Evaluator::add_values`].
    pub fn add_real_values(&self, a: &Ciphertext, values: &[f64]) -> Result<Ciphertext> {
        self.add_values(a, &as_complex(values))
    }

    /// `values` encoded at `a`'s level and slot count and at `scale`, on
    /// `a`'s device, in `Temporary` memory (it lives only inside one call).
    fn encode_for(&self, a: &Ciphertext, values: &[Complex64], scale: Scale) -> Result<Plaintext> {
        if values.len() > a.slots {
            return Err(OperandError::TooManyValues {
                values: values.len(),
                slots: a.slots,
            }
            .into());
        }
        let plain = Encoder::new(&self.context).encode_at_class(
            values,
            a.level,
            scale,
            a.slots,
            MemoryClass::Temporary,
        )?;
        // Encoded on the context's device; `a` may have been moved to the host.
        if plain.device() == a.device() {
            Ok(plain)
        } else if a.device() == Device::Cpu {
            plain.to_host()
        } else {
            plain.to_device()
        }
    }

    /// `a·k` for an integer `k`: exact, scale and level unchanged.
    ///
    /// # Errors
    /// A ciphertext of another context.
    pub fn mult_integer(&self, a: &Ciphertext, k: i64) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let params = self.context.params();
        let scalars: Vec<u64> = params
            .q_moduli()
            .iter()
            .take(a.level.primes())
            .map(|m| m.reduce_i64(k))
            .collect();
        self.map_parts(a, |x, class| x.scalar(BinaryOp::Mul, &scalars, class))
    }

    /// `a·i`: multiplication by `X^{N/2}`, which is `i` in every slot; exact,
    /// scale and level unchanged.
    ///
    /// # Errors
    /// A ciphertext of another context.
    pub fn mult_by_i(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let poly = self.monomial_pair(a, 0.0, 1.0)?;
        self.map_parts(a, |x, class| x.mul(&poly, class))
    }

    /// The residues of the integer-valued `value` modulo `a`'s primes.
    fn residues_of(&self, a: &Ciphertext, value: f64) -> Result<Vec<u64>> {
        self.residues_at(a.level, value)
    }

    /// The residues of the integer-valued `value` modulo the primes of
    /// `level`.
    fn residues_at(&self, level: Level, value: f64) -> Result<Vec<u64>> {
        self.context.params().check_magnitude(level, [value])?;
        self.context
            .params()
            .q_moduli()
            .iter()
            .take(level.primes())
            .map(|m| {
                m.reduce_f64(value)
                    .ok_or_else(|| OperandError::NonFiniteValue.into())
            })
            .collect()
    }

    /// `re + im·X^{N/2}` (integer-valued) in NTT form over `a`'s moduli,
    /// in class `Constant`: the evaluator keeps it ([`ConstantCache`]) for
    /// the next product by the same constant.
    ///
    /// [`ConstantCache`]: super::evaluator::ConstantCache
    fn monomial_pair(&self, a: &Ciphertext, re: f64, im: f64) -> Result<RnsPoly<Ntt>> {
        let n = self.context.params().degree().get();
        let re = self.residues_of(a, re)?;
        let im = self.residues_of(a, im)?;
        let mut words = vec![0u64; re.len() * n];
        for ((limb, &r), &i) in words.chunks_exact_mut(n).zip(&re).zip(&im) {
            if let Some(w) = limb.first_mut() {
                *w = r;
            }
            if let Some(w) = limb.get_mut(n / 2) {
                *w = i;
            }
        }
        RnsPoly::<Coeff>::from_words(a.c0.backend(), a.c0.moduli(), MemoryClass::Constant, &words)?
            .into_ntt()
    }
}

/// Real values as complex ones with a zero imaginary part.
fn as_complex(values: &[f64]) -> Vec<Complex64> {
    values.iter().map(|&v| Complex64::new(v, 0.0)).collect()
}

/// A constant and its scale that can be encoded: both finite, the scale
/// positive.
fn check_constant(c: Complex64, const_scale: Scale) -> Result<()> {
    if !(const_scale.0.is_finite() && const_scale.0 > 0.0) {
        return Err(OperandError::InvalidScale.into());
    }
    if !(c.re.is_finite() && c.im.is_finite()) {
        return Err(OperandError::NonFiniteValue.into());
    }
    Ok(())
}
