//! [`Encoder`]: slot vectors ↔ plaintext polynomials.

use hemem_memory::MemoryClass;
use num_complex::Complex64;
use rayon::prelude::*;

use super::{CompactPlaintext, Form, Plaintext};
use crate::context::Context;
use crate::params::{Level, Scale};
use crate::poly::{Coeff, RnsPoly};
use crate::{OperandError, Result};

/// Encodes complex (or real) slot vectors into plaintexts and decodes them,
/// through the canonical embedding (CKKS, Cheon–Kim–Kim–Song 2017, §3.2).
///
/// A message of `n` slots (`n` a power of two up to `N/2`) occupies the
/// coefficients of `X^{k·N/(2n)}`; fewer values than slots are padded with
/// zeros.
#[derive(Clone, Debug)]
pub struct Encoder {
    context: Context,
}

impl Encoder {
    /// An encoder for `context`.
    pub fn new(context: &Context) -> Self {
        Self {
            context: context.clone(),
        }
    }

    /// Encodes at the encryption level, its default scale and the context's
    /// slot count.
    ///
    /// # Errors
    /// As [`Encoder::encode_at`].
    pub fn encode(&self, values: &[Complex64]) -> Result<Plaintext> {
        let params = self.context.params();
        let level = params.enc_level();
        self.encode_at(values, level, params.default_scale(level)?, params.slots())
    }

    /// Encodes real values at the encryption level and default scale.
    ///
    /// # Errors
    /// As [`Encoder::encode_at`].
    pub fn encode_real(&self, values: &[f64]) -> Result<Plaintext> {
        let complex: Vec<Complex64> = values.iter().map(|&x| Complex64::new(x, 0.0)).collect();
        self.encode(&complex)
    }

    /// Encodes `values` into `slots` slots at `level` and `scale`.
    ///
    /// # Errors
    /// [`OperandError::InvalidSlots`], [`OperandError::TooManyValues`],
    /// [`OperandError::LevelOutOfRange`], [`OperandError::InvalidScale`],
    /// [`OperandError::NonFiniteValue`] (NaN, infinity, or a value whose
    /// scaled coefficients would not fit the modulus at `level`).
    pub fn encode_at(
        &self,
        values: &[Complex64],
        level: Level,
        scale: Scale,
        slots: usize,
    ) -> Result<Plaintext> {
        self.encode_at_class(values, level, scale, slots, MemoryClass::Plaintext)
    }

    /// As [`Encoder::encode_at`], into a buffer of `class` — for the
    /// encoded diagonals of linear transforms, which bootstrapping keeps as
    /// `BootstrapConstant` memory.
    ///
    /// # Errors
    /// As [`Encoder::encode_at`].
    pub fn encode_at_class(
        &self,
        values: &[Complex64],
        level: Level,
        scale: Scale,
        slots: usize,
        class: MemoryClass,
    ) -> Result<Plaintext> {
        self.encode_over(values, level, scale, slots, class, false)
    }

    /// As [`Encoder::encode_at_class`], with the residues modulo the special
    /// primes `P` as well: a plaintext over `Q_level ∪ P`
    /// ([`Plaintext::is_extended`]) that multiplies the extended ciphertexts
    /// of double hoisting ([`crate::eval::ExtendedCiphertext`]). Its `Q`
    /// limbs are those [`Encoder::encode_at_class`] makes.
    ///
    /// # Errors
    /// As [`Encoder::encode_at`].
    pub fn encode_extended_at_class(
        &self,
        values: &[Complex64],
        level: Level,
        scale: Scale,
        slots: usize,
        class: MemoryClass,
    ) -> Result<Plaintext> {
        self.encode_over(values, level, scale, slots, class, true)
    }

    /// Encodes over `Q_level`, or `Q_level ∪ P` when `extended`.
    fn encode_over(
        &self,
        values: &[Complex64],
        level: Level,
        scale: Scale,
        slots: usize,
        class: MemoryClass,
        extended: bool,
    ) -> Result<Plaintext> {
        let rounded = self.rounded_coefficients(values, level, scale, slots)?;
        let gap = self.context.params().degree().get() / (2 * slots);
        // (coefficient index, scaled value) for the 2·slots nonzero positions.
        let coefficients: Vec<(usize, f64)> = rounded
            .iter()
            .enumerate()
            .map(|(j, &v)| (j * gap, v))
            .collect();
        self.encode_coefficients_with(&coefficients, level, scale, slots, class, extended)
    }

    /// Encodes `values` as [`Encoder::encode_at_class`] would, but keeps only
    /// the `2·slots` rounded coefficients (one word each) in a buffer of
    /// `class`: a [`CompactPlaintext`] whose [`CompactPlaintext::expand`] is
    /// bit-identical to the encoded plaintext, at `1/(level+1)` of its bytes
    /// for full slots.
    ///
    /// # Errors
    /// As [`Encoder::encode_at`].
    pub fn encode_compact_at_class(
        &self,
        values: &[Complex64],
        level: Level,
        scale: Scale,
        slots: usize,
        class: MemoryClass,
    ) -> Result<CompactPlaintext> {
        let rounded = self.rounded_coefficients(values, level, scale, slots)?;
        let words: Vec<u64> = rounded.iter().map(|v| v.to_bits()).collect();
        CompactPlaintext::from_words(&self.context, &words, level, scale, slots, class)
    }

    /// The `2·slots` coefficients of the encoding of `values`, rounded at
    /// `scale` (real parts, then imaginary parts): coefficient `j·N/(2·slots)`
    /// of the plaintext is entry `j`. Every check of [`Encoder::encode_at`]
    /// happens here, the modulus bound included.
    fn rounded_coefficients(
        &self,
        values: &[Complex64],
        level: Level,
        scale: Scale,
        slots: usize,
    ) -> Result<Vec<f64>> {
        let params = self.context.params();
        let fft = self.context.fft(slots)?;
        if values.len() > slots {
            return Err(OperandError::TooManyValues {
                values: values.len(),
                slots,
            }
            .into());
        }
        params.check_scale(level, scale)?;
        if values
            .iter()
            .any(|v| !v.re.is_finite() || !v.im.is_finite())
        {
            return Err(OperandError::NonFiniteValue.into());
        }
        let u = fft.inverse(values);
        let rounded: Vec<f64> = u
            .iter()
            .map(|c| (c.re * scale.0).round())
            .chain(u.iter().map(|c| (c.im * scale.0).round()))
            .collect();
        params.check_magnitude(level, rounded.iter().copied())?;
        Ok(rounded)
    }

    /// Checks that every compact plaintext belongs to this encoder's
    /// context.
    fn check_contexts(&self, compact: &[&CompactPlaintext]) -> Result<()> {
        compact
            .iter()
            .try_for_each(|c| self.context.check_same(c.context()))
    }

    /// Expands compact plaintexts (see [`CompactPlaintext::expand_all`]).
    ///
    /// # Errors
    /// As [`CompactPlaintext::expand_all`].
    pub fn expand(
        &self,
        compact: &[&CompactPlaintext],
        class: MemoryClass,
    ) -> Result<Vec<Plaintext>> {
        self.check_contexts(compact)?;
        CompactPlaintext::expand_all(compact, class)
    }

    /// Expands compact plaintexts, keeping those whose message repeats a
    /// short period periodic (see
    /// [`CompactPlaintext::expand_all_periodic`]); over `Q_level ∪ P` when
    /// `extended`.
    ///
    /// # Errors
    /// As [`CompactPlaintext::expand_all`].
    pub fn expand_periodic(
        &self,
        compact: &[&CompactPlaintext],
        class: MemoryClass,
        extended: bool,
    ) -> Result<Vec<Plaintext>> {
        self.check_contexts(compact)?;
        CompactPlaintext::expand_all_periodic(compact, class, extended)
    }

    /// Expands compact plaintexts over `Q_level ∪ P` (see
    /// [`CompactPlaintext::expand_all_extended`]).
    ///
    /// # Errors
    /// As [`CompactPlaintext::expand_all`].
    pub fn expand_extended(
        &self,
        compact: &[&CompactPlaintext],
        class: MemoryClass,
    ) -> Result<Vec<Plaintext>> {
        self.check_contexts(compact)?;
        CompactPlaintext::expand_all_extended(compact, class)
    }

    /// Builds a plaintext whose coefficient `i` is the integer `value` for each
    /// `(i, value)` (all others zero), tagged with `scale` and `slots`: the
    /// coefficient encoding bootstrapping tests use.
    ///
    /// # Errors
    /// As [`Encoder::encode_at`].
    pub fn encode_integer_coefficients(
        &self,
        coefficients: &[(usize, f64)],
        level: Level,
        scale: Scale,
        slots: usize,
    ) -> Result<Plaintext> {
        self.context.params().check_scale(level, scale)?;
        self.encode_coefficients_with(
            coefficients,
            level,
            scale,
            slots,
            MemoryClass::Plaintext,
            false,
        )
    }

    fn encode_coefficients_with(
        &self,
        coefficients: &[(usize, f64)],
        level: Level,
        scale: Scale,
        slots: usize,
        class: MemoryClass,
        extended: bool,
    ) -> Result<Plaintext> {
        // The slot count the plaintext is tagged with must be one the
        // context has (0 slots divided a rotation by zero).
        self.context.check_slots(slots)?;
        let params = self.context.params();
        let n = params.degree().get();
        let q_moduli = params
            .q_moduli()
            .get(..=level.0)
            .ok_or(OperandError::LevelOutOfRange {
                level,
                max: params.max_level(),
            })?;
        let p_moduli = if extended { params.p_moduli() } else { &[] };
        let moduli: Vec<_> = q_moduli.iter().chain(p_moduli).collect();
        params.check_magnitude(level, coefficients.iter().map(|&(_, v)| v))?;
        let mut words = vec![0u64; moduli.len() * n];
        words
            .par_chunks_mut(n)
            .zip(moduli)
            .try_for_each(|(limb, m)| {
                for &(i, v) in coefficients {
                    let slot = limb.get_mut(i).ok_or(crate::Error::LengthMismatch {
                        expected: n,
                        actual: i.saturating_add(1),
                    })?;
                    *slot = m.reduce_f64(v).ok_or(OperandError::NonFiniteValue)?;
                }
                Ok::<(), crate::Error>(())
            })?;
        let indices = if extended {
            params.qp_indices(level)?
        } else {
            params.q_indices(level)?
        };
        let poly = RnsPoly::<Coeff>::from_words(self.context.backend(), &indices, class, &words)?;
        let poly = poly.into_ntt()?;
        if class.is_read_only() {
            poly.seal()?;
        }
        Ok(Plaintext {
            context: self.context.clone(),
            form: Form::Full(poly),
            level,
            scale,
            slots,
        })
    }

    /// A plaintext's words in coefficient form, on the host. A decrypted
    /// plaintext is sensitive: the host copy is zeroed when dropped, as the
    /// temporary device copy is when released.
    fn coefficient_words(plaintext: &Plaintext) -> Result<zeroize::Zeroizing<Vec<u64>>> {
        Ok(zeroize::Zeroizing::new(
            plaintext
                .poly()?
                .clone_as(MemoryClass::Temporary)?
                .into_coeff()?
                .to_words()?,
        ))
    }

    /// The centred coefficients of a plaintext divided by its scale, as `f64`
    /// (all `N` of them).
    ///
    /// # Errors
    /// [`OperandError::ContextMismatch`], transfer errors.
    pub fn coefficients(&self, plaintext: &Plaintext) -> Result<Vec<f64>> {
        self.context.check_same(&plaintext.context)?;
        let n = self.context.params().degree().get();
        let words = Self::coefficient_words(plaintext)?;
        let crt = self.context.crt(plaintext.level)?;
        let inv_scale = 1.0 / plaintext.scale.0;
        Ok((0..n)
            .into_par_iter()
            .map_init(Vec::new, |digits, i| {
                crt.reconstruct(words.iter().skip(i).step_by(n).copied(), digits) * inv_scale
            })
            .collect())
    }

    /// Decodes a plaintext to its slot values.
    ///
    /// # Errors
    /// [`OperandError::ContextMismatch`], transfer errors.
    pub fn decode(&self, plaintext: &Plaintext) -> Result<Vec<Complex64>> {
        self.context.check_same(&plaintext.context)?;
        let slots = plaintext.slots;
        let fft = self.context.fft(slots)?;
        let n = self.context.params().degree().get();
        let gap = n / (2 * slots);
        let words = Self::coefficient_words(plaintext)?;
        let crt = self.context.crt(plaintext.level)?;
        let inv_scale = 1.0 / plaintext.scale.0;
        let coefficients: Vec<f64> = (0..2 * slots)
            .into_par_iter()
            .map_init(Vec::new, |digits, k| {
                let i = k * gap;
                crt.reconstruct(words.iter().skip(i).step_by(n).copied(), digits) * inv_scale
            })
            .collect();
        let (re, im) = coefficients.split_at(slots);
        let u: Vec<Complex64> = re
            .iter()
            .zip(im)
            .map(|(&a, &b)| Complex64::new(a, b))
            .collect();
        Ok(fft.forward(&u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::DeviceSelection;
    use crate::params::{Parameters, Preset, SecurityCheck};
    use crate::testing::{max_abs_error, seeded_rng, unit_disk};

    fn context(preset: Preset) -> Context {
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        Context::new(params, DeviceSelection::Cpu).unwrap()
    }

    #[test]
    fn round_trip_at_every_slot_count_and_level() {
        let ctx = context(Preset::TestFGb);
        let encoder = Encoder::new(&ctx);
        let mut rng = seeded_rng(11);
        for log_slots in [0u32, 1, 5, 11] {
            let slots = 1usize << log_slots;
            for level in [0usize, 3, 12, 24] {
                let values = unit_disk(&mut rng, slots);
                let scale = ctx.params().default_scale(Level(level)).unwrap();
                let pt = encoder
                    .encode_at(&values, Level(level), scale, slots)
                    .unwrap();
                let back = encoder.decode(&pt).unwrap();
                let err = max_abs_error(&values, &back);
                // Rounding to integers costs about √N / Δ.
                assert!(err < 1e-9, "slots {slots} level {level}: {err}");
            }
        }
    }

    #[test]
    fn rejects_bad_input() {
        let ctx = context(Preset::TestFTb);
        let encoder = Encoder::new(&ctx);
        let slots = ctx.params().slots();
        let scale = Scale(2f64.powi(30));
        let too_many = vec![Complex64::new(0.5, 0.0); slots + 1];
        let err = |r: Result<Plaintext>| r.map(|_| ()).unwrap_err();
        assert!(matches!(
            err(encoder.encode(&too_many)),
            crate::Error::Operand(OperandError::TooManyValues { .. })
        ));
        assert!(matches!(
            err(encoder.encode_at(&[Complex64::new(1.0, 0.0)], Level(0), scale, 3)),
            crate::Error::Operand(OperandError::InvalidSlots { .. })
        ));
        assert!(matches!(
            err(encoder.encode_at(&[Complex64::new(1.0, 0.0)], Level(0), scale, 2 * slots)),
            crate::Error::Operand(OperandError::InvalidSlots { .. })
        ));
        assert!(matches!(
            err(encoder.encode_at(&[Complex64::new(f64::NAN, 0.0)], Level(0), scale, 4)),
            crate::Error::Operand(OperandError::NonFiniteValue)
        ));
        assert!(matches!(
            err(encoder.encode_at(&[Complex64::new(1.0, 0.0)], Level(99), scale, 4)),
            crate::Error::Operand(OperandError::LevelOutOfRange { .. })
        ));
        assert!(matches!(
            err(encoder.encode_at(&[Complex64::new(1e30, 0.0)], Level(0), scale, 4)),
            crate::Error::Operand(OperandError::NonFiniteValue)
        ));
        assert!(matches!(
            err(encoder.encode_at(&[Complex64::new(1.0, 0.0)], Level(0), Scale(-1.0), 4)),
            crate::Error::Operand(OperandError::InvalidScale)
        ));
        let other = context(Preset::TestFTb);
        let pt = Encoder::new(&other)
            .encode(&[Complex64::new(0.1, 0.0)])
            .unwrap();
        assert!(matches!(
            encoder.decode(&pt),
            Err(crate::Error::Operand(OperandError::ContextMismatch))
        ));
    }
}
