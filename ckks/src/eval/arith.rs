//! Homomorphic arithmetic that needs no keys: addition, subtraction,
//! negation, plaintext and constant operands, `level_down`.

use hemem_memory::MemoryClass;
use num_complex::Complex64;

use super::{Ciphertext, Evaluator};
use crate::backend::BinaryOp;
use crate::encoding::Plaintext;
use crate::params::{Level, Scale};
use crate::poly::{Coeff, RnsPoly};
use crate::{OperandError, Result};

impl Evaluator {
    /// `a + b`.
    ///
    /// # Errors
    /// Mismatched context, device, level, scale or slots.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check_pair(a, b)?;
        let c0 = a.c0.add(&b.c0, self.output_class)?;
        let c1 = a.c1.add(&b.c1, self.output_class)?;
        Ciphertext::from_parts(&self.context, c0, c1, a.level, a.scale, a.slots)
    }

    /// `a += b`.
    ///
    /// # Errors
    /// As [`Evaluator::add`].
    pub fn add_assign(&self, a: &mut Ciphertext, b: &Ciphertext) -> Result<()> {
        self.check_pair(a, b)?;
        a.c0.add_assign(&b.c0)?;
        a.c1.add_assign(&b.c1)
    }

    /// `a − b`.
    ///
    /// # Errors
    /// As [`Evaluator::add`].
    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check_pair(a, b)?;
        let c0 = a.c0.sub(&b.c0, self.output_class)?;
        let c1 = a.c1.sub(&b.c1, self.output_class)?;
        Ciphertext::from_parts(&self.context, c0, c1, a.level, a.scale, a.slots)
    }

    /// `a −= b`.
    ///
    /// # Errors
    /// As [`Evaluator::add`].
    pub fn sub_assign(&self, a: &mut Ciphertext, b: &Ciphertext) -> Result<()> {
        self.check_pair(a, b)?;
        a.c0.sub_assign(&b.c0)?;
        a.c1.sub_assign(&b.c1)
    }

    /// `−a`.
    ///
    /// # Errors
    /// A ciphertext of another context; allocation errors.
    pub fn negate(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let mut out = self.copy_of(a)?;
        out.c0.negate()?;
        out.c1.negate()?;
        Ok(out)
    }

    /// `a + p` for a plaintext at the same level and scale.
    ///
    /// # Errors
    /// Mismatched context, device, level, scale or slots.
    pub fn add_plain(&self, a: &Ciphertext, p: &Plaintext) -> Result<Ciphertext> {
        self.check_plain(a, p)?;
        let c0 = a.c0.add(p.poly()?, self.output_class)?;
        let c1 = a.c1.clone_as(self.output_class)?;
        Ciphertext::from_parts(&self.context, c0, c1, a.level, a.scale, a.slots)
    }

    /// `a − p` for a plaintext at the same level and scale.
    ///
    /// # Errors
    /// As [`Evaluator::add_plain`].
    pub fn sub_plain(&self, a: &Ciphertext, p: &Plaintext) -> Result<Ciphertext> {
        self.check_plain(a, p)?;
        let c0 = a.c0.sub(p.poly()?, self.output_class)?;
        let c1 = a.c1.clone_as(self.output_class)?;
        Ciphertext::from_parts(&self.context, c0, c1, a.level, a.scale, a.slots)
    }

    /// `a + c` in every slot. A real `c` is one scalar per limb; an imaginary
    /// part adds `Im(c)·Δ·X^{N/2}` (`X^{N/2}` is `i` in every slot).
    ///
    /// # Errors
    /// A ciphertext of another context; [`OperandError::NonFiniteValue`]
    /// for a constant that is not finite or whose `|c|·Δ` reaches `Q_l / 2`
    /// (it would wrap around the modulus, as the encoder refuses).
    pub fn add_const(&self, a: &Ciphertext, c: Complex64) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        if !(c.re.is_finite() && c.im.is_finite()) {
            return Err(OperandError::NonFiniteValue.into());
        }
        let params = self.context.params();
        let re = (c.re * a.scale.0).round();
        params.check_magnitude(a.level, [re, (c.im * a.scale.0).round()])?;
        let moduli =
            params
                .q_moduli()
                .get(..a.level.primes())
                .ok_or(OperandError::LevelOutOfRange {
                    level: a.level,
                    max: params.max_level(),
                })?;
        let scalars = moduli
            .iter()
            .map(|m| m.reduce_f64(re).ok_or(OperandError::NonFiniteValue.into()))
            .collect::<Result<Vec<u64>>>()?;
        let mut c0 = a.c0.scalar(BinaryOp::Add, &scalars, self.output_class)?;
        let c1 = a.c1.clone_as(self.output_class)?;
        if c.im != 0.0 {
            let n = params.degree().get();
            let im = (c.im * a.scale.0).round();
            let mut words = vec![0u64; moduli.len() * n];
            for (limb, m) in words.chunks_exact_mut(n).zip(moduli) {
                if let Some(w) = limb.get_mut(n / 2) {
                    *w = m.reduce_f64(im).ok_or(OperandError::NonFiniteValue)?;
                }
            }
            let poly = RnsPoly::<Coeff>::from_words(
                a.c0.backend(),
                a.c0.moduli(),
                MemoryClass::Temporary,
                &words,
            )?
            .into_ntt()?;
            c0.add_assign(&poly)?;
        }
        Ciphertext::from_parts(&self.context, c0, c1, a.level, a.scale, a.slots)
    }

    /// `a − c` in every slot.
    ///
    /// # Errors
    /// As [`Evaluator::add_const`].
    pub fn sub_const(&self, a: &Ciphertext, c: Complex64) -> Result<Ciphertext> {
        self.add_const(a, -c)
    }

    /// Checks that `a`, of this context, can be brought down to `level`.
    pub(crate) fn check_level_down(&self, a: &Ciphertext, level: Level) -> Result<()> {
        self.context.check_same(&a.context)?;
        if level > a.level {
            return Err(OperandError::LevelOutOfRange {
                level,
                max: a.level,
            }
            .into());
        }
        Ok(())
    }

    /// Drops the primes above `level`, keeping the scale exactly (no noise
    /// is added).
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] if `level` is above the ciphertext's;
    /// [`OperandError::ScaleOutOfRange`] if the scale reaches `Q_level`
    /// (the message would no longer fit the smaller modulus).
    pub fn level_down(&self, a: &Ciphertext, level: Level) -> Result<Ciphertext> {
        self.check_level_down(a, level)?;
        self.context.params().check_scale(level, a.scale)?;
        let count = level.primes();
        Ciphertext::from_parts(
            &self.context,
            a.c0.truncated(count, self.output_class)?,
            a.c1.truncated(count, self.output_class)?,
            level,
            a.scale,
            a.slots,
        )
    }

    /// Relabels the scale of `a` without touching its polynomials: every
    /// slot value is multiplied by `old / new`. Bootstrapping reads the
    /// ModRaised plaintext at scale `q_0` this way.
    ///
    /// # Errors
    /// [`OperandError::InvalidScale`] for a non-positive or non-finite
    /// scale, [`OperandError::ScaleOutOfRange`] outside `[1, Q_l)`
    /// ([`Parameters::check_scale`](crate::params::Parameters::check_scale)).
    pub fn set_scale(&self, a: &Ciphertext, scale: Scale) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        self.context.params().check_scale(a.level, scale)?;
        let mut out = self.copy_of(a)?;
        out.scale = scale;
        Ok(out)
    }

    /// Reinterprets `a` as holding `slots` slots (a power of two up to N/2)
    /// without touching its polynomials. After ModRaise a sparse ciphertext
    /// is no longer confined to the subring of its slot count, and
    /// bootstrapping's SubSum treats it as full-slot; this is how.
    ///
    /// # Errors
    /// [`OperandError::InvalidSlots`].
    pub fn set_slots(&self, a: &Ciphertext, slots: usize) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        self.context.check_slots(slots)?;
        let mut out = self.copy_of(a)?;
        out.slots = slots;
        Ok(out)
    }

    /// ModRaise: lifts a level-0 ciphertext to `level` by reading each of its
    /// polynomials modulo `q_0` as centred integers. The result decrypts to
    /// `t = Δ·m + e + q_0·I` for a small integer polynomial `I` (of size about
    /// `√(h+1)/2`): the input of bootstrapping's CoeffToSlot. The scale is
    /// kept.
    ///
    /// # Errors
    /// An input above level 0; a target level beyond the chain.
    pub fn mod_raise(&self, a: &Ciphertext, level: Level) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        if a.level.0 != 0 {
            return Err(OperandError::LevelOutOfRange {
                level: a.level,
                max: Level(0),
            }
            .into());
        }
        let params = self.context.params();
        params.q_modulus(level)?;
        let moduli = params.q_indices(level)?;
        let raise = |p: &RnsPoly<crate::poly::Ntt>| -> Result<RnsPoly<crate::poly::Ntt>> {
            let coeff = p.clone_as(MemoryClass::Temporary)?.into_coeff()?;
            let mut out =
                RnsPoly::<Coeff>::allocate(p.backend(), &moduli, self.output_class, false)?;
            p.backend()
                .spread_centered(coeff.limbs()?, out.limbs_mut()?)?;
            out.into_ntt()
        };
        Ciphertext::from_parts(
            &self.context,
            raise(&a.c0)?,
            raise(&a.c1)?,
            level,
            a.scale,
            a.slots,
        )
    }
}
