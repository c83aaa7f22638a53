//! Double hoisting for BSGS linear transforms: [`Hoisting`] (which
//! evaluation a transform uses) and [`ExtendedArithmetic`], the slot
//! arithmetic of ciphertexts kept in the extended basis `Q_l ∪ P`
//! (Bossuat, Mouchet, Troncoso-Pastoriza, Hubaux, "Efficient Bootstrapping
//! for Approximate Homomorphic Encryption with Non-Sparse Keys", Eurocrypt
//! 2021, §3.2 and Algorithm 6; Lattigo's `MultiplyByDiagMatrixBSGS`).
//!
//! With **single** hoisting the baby-step rotations share one key-switch
//! decomposition (one ModUp), but each still ends in a ModDown pair, and
//! each giant-step rotation is a full key switch. With **double** hoisting
//! the baby-step rotations stay in `Q_l ∪ P` (their inner products are not
//! divided by `P`), the diagonals multiply them there (so the diagonals
//! need their residues modulo the special primes: compact diagonals are
//! expanded to `Q_l ∪ P` when used, encoded ones are stored so), each
//! giant-step rotation divides only the second part by `P` (it must be
//! decomposed) and keeps the rest in `Q_l ∪ P`, and the transform ends in
//! **one** ModDown pair. At FGb's CoeffToSlot (radix 32, 38 rotations in
//! its three factors) that takes the ModDowns from 76 to 27; the price is
//! the special primes' limbs in the expansions and products (`K/(l+1)`
//! more), so the limb NTTs drop only 6 % there, and rise at low levels
//! ([`Hoisting::Auto`] picks per transform).
//!
//! Single hoisting is the default. On the H100, `Auto` saves ~1.3 % of an
//! unconstrained FGb bootstrap (57.7–58.0 against 58.7–58.8 ms), but under a
//! 2 GiB budget its extended-basis temporaries take the streamed keys' room
//! (FGb 74–80 against 68–73 ms, FVb `OverBudget`), and the two evaluations
//! round differently, so choosing by the budget would make the budget change
//! results (docs/BENCHMARKS.md).
//!
//! [`crate::arith::PlainSimulator`] implements the trait (with the noise of
//! each step and a cost model: ModDowns and limb NTTs in
//! [`crate::arith::OpCounts`]), and so does [`crate::CkksOps`] through
//! [`hemem_ckks::eval::ExtendedCiphertext`].

use hemem_ckks::encoding::{CompactPlaintext, Plaintext};
use hemem_ckks::eval::ExtendedCiphertext;
use hemem_ckks::params::{Level, Scale};
use hemem_memory::MemoryClass;
use num_complex::Complex64;

use crate::arith::{PlainSimulator, SimPlain, SimValue, SlotArithmetic};
use crate::{CkksOps, Error, Result};

/// How a BSGS linear transform is evaluated (see the [module
/// documentation](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Hoisting {
    /// One shared decomposition for the baby steps; every rotation ends in
    /// its own ModDown pair (the default: double hoisting saves ~1.3 % of
    /// an unconstrained FGb bootstrap on the H100, but its extended-basis
    /// temporaries cost 7–9 % under a 2 GiB budget and make FVb at 2 GiB
    /// `OverBudget`; and since single and double round differently, the
    /// choice cannot follow the budget without the budget changing results).
    #[default]
    Single,
    /// Baby steps, inner sums and giant steps in `Q_l ∪ P`; one ModDown of
    /// one part per giant step and one pair per transform.
    Double,
    /// Per transform, whichever of the two runs fewer limb NTTs
    /// ([`Hoisting::resolve`]): double hoisting where the ModDowns it saves
    /// outweigh the special primes' limbs it adds to the expansions of
    /// compact diagonals — at FGb, CoeffToSlot (levels 24–22: 30 limbs per
    /// ModDown, 5 more per diagonal) but not SlotToCoeff (levels 3–1: 9,
    /// 8 and 7 limbs per ModDown against 5 more per diagonal).
    Auto,
}

impl Hoisting {
    /// `"single"`, `"double"` or `"auto"` (as in JSON reports).
    pub fn name(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Double => "double",
            Self::Auto => "auto",
        }
    }

    /// The hoisting a transform at `level` uses: [`Hoisting::Auto`]
    /// compares the limb NTTs of the two evaluations, which differ by
    ///
    /// `single − double = (2·B + G − 2)·(K + l + 1) − D·K`
    ///
    /// for `B` nonzero baby steps, `G` giant-step rotations, `D` diagonals
    /// expanded from compact form and `K` special primes (a ModDown at
    /// level `l` is `K + l + 1` limb NTTs; the decompositions are the
    /// same). Ties go to single hoisting (less memory).
    pub fn resolve(
        self,
        level: usize,
        special_primes: usize,
        baby_rotations: usize,
        giant_rotations: usize,
        compact_diagonals: usize,
    ) -> Self {
        match self {
            Self::Auto => {
                let saved = (2 * baby_rotations + giant_rotations).saturating_sub(2)
                    * (special_primes + level + 1);
                if saved > compact_diagonals * special_primes {
                    Self::Double
                } else {
                    Self::Single
                }
            }
            other => other,
        }
    }
}

impl std::str::FromStr for Hoisting {
    type Err = Error;

    /// Parses `single`, `double` or `auto`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "single" => Ok(Self::Single),
            "double" => Ok(Self::Double),
            "auto" => Ok(Self::Auto),
            _ => Err(Error::InvalidParameter {
                name: "hoisting",
                reason: "expected single, double or auto",
            }),
        }
    }
}

/// Slot arithmetic in the extended basis `Q_l ∪ P`: what double hoisting
/// needs beyond [`SlotArithmetic`]. An `Extended` value holds `P` times its
/// message until [`ExtendedArithmetic::mod_down`]; plaintexts that multiply
/// it are extended too ([`ExtendedArithmetic::encode_extended`],
/// [`ExtendedArithmetic::expand_extended`]).
pub trait ExtendedArithmetic: SlotArithmetic {
    /// A ciphertext over `Q_l ∪ P` (or its simulation).
    type Extended;

    /// The number `K` of special primes (the limbs of `P`).
    fn special_primes(&self) -> usize;

    /// The rotations of `a` by each of `steps` in the extended basis, from
    /// one decomposition and with no ModDown (a step of 0 gives `P·a`).
    ///
    /// # Errors
    /// A missing rotation key.
    fn rotate_hoisted_extended(
        &self,
        a: &Self::Value,
        steps: &[i64],
    ) -> Result<Vec<Self::Extended>>;
    /// Encodes `values` as [`SlotArithmetic::encode`] does, over `Q_l ∪ P`.
    ///
    /// # Errors
    /// As [`SlotArithmetic::encode`].
    fn encode_extended(
        &self,
        values: &[Complex64],
        level: usize,
        scale: f64,
    ) -> Result<Self::Plain>;
    /// Expands compact encodings as [`SlotArithmetic::expand`] does, over
    /// `Q_l ∪ P`.
    ///
    /// # Errors
    /// Backend and allocation errors.
    fn expand_extended(&self, compact: &[&Self::Compact]) -> Result<Vec<Self::Plain>>;
    /// `a·p` in the extended basis (`p` extended), no rescale.
    ///
    /// # Errors
    /// Mismatched level or slots; a plaintext that is not extended.
    fn mul_plain_extended(&self, a: &Self::Extended, p: &Self::Plain) -> Result<Self::Extended>;
    /// `acc += a·p` in the extended basis, in place.
    ///
    /// # Errors
    /// As [`ExtendedArithmetic::mul_plain_extended`]; a mismatched `acc`.
    fn mul_plain_extended_add_assign(
        &self,
        acc: &mut Self::Extended,
        a: &Self::Extended,
        p: &Self::Plain,
    ) -> Result<()>;
    /// `acc += b` in the extended basis.
    ///
    /// # Errors
    /// Mismatched level, slots or scale.
    fn add_extended_assign(&self, acc: &mut Self::Extended, b: &Self::Extended) -> Result<()>;
    /// Rotates in the extended basis: ModDown of the second part only, its
    /// key switch without ModDown, the automorphism of the first part.
    ///
    /// # Errors
    /// A missing rotation key.
    fn rotate_extended(&self, a: &Self::Extended, steps: i64) -> Result<Self::Extended>;
    /// Divides by `P` (ModDown of both parts): the ordinary value.
    ///
    /// # Errors
    /// Backend errors.
    fn mod_down(&self, a: &Self::Extended) -> Result<Self::Value>;
}

/// A simulated [`ExtendedArithmetic::Extended`]: the message it carries
/// (its factor `P` is implicit) and the key-switch noise so far.
#[derive(Clone, Debug, PartialEq)]
pub struct SimExtended {
    value: SimValue,
}

impl SimExtended {
    /// The simulated message.
    pub fn value(&self) -> &SimValue {
        &self.value
    }
}

impl PlainSimulator {
    fn extended_plain(p: &SimPlain) -> Result<&SimPlain> {
        if p.extended {
            Ok(p)
        } else {
            Err(Error::InvalidParameter {
                name: "plaintext",
                reason: "double hoisting needs a plaintext over Q ∪ P",
            })
        }
    }
}

impl ExtendedArithmetic for PlainSimulator {
    type Extended = SimExtended;

    fn special_primes(&self) -> usize {
        self.params.p_moduli().len()
    }

    /// The rotations with the key-switch gadget noise only: the ModDown
    /// rounding comes once, in [`ExtendedArithmetic::mod_down`].
    fn rotate_hoisted_extended(&self, a: &SimValue, steps: &[i64]) -> Result<Vec<SimExtended>> {
        let n = a.slots.len() as i64;
        let rotations = steps.iter().filter(|s| s.rem_euclid(n) != 0).count();
        {
            let mut c = self.counts.borrow_mut();
            c.hoisted_groups += 1;
            c.rotations += rotations;
        }
        if rotations > 0 {
            self.count_decomposition(a.level);
        }
        steps
            .iter()
            .map(|&k| {
                let mut value = Self::rotated(a, k);
                if k.rem_euclid(n) != 0 {
                    self.add_coefficient_noise(&mut value, self.gadget_noise(a.level));
                }
                Ok(SimExtended { value })
            })
            .collect()
    }

    fn encode_extended(&self, values: &[Complex64], level: usize, scale: f64) -> Result<SimPlain> {
        let mut p = self.encode(values, level, scale)?;
        p.extended = true;
        Ok(p)
    }

    fn expand_extended(&self, compact: &[&SimPlain]) -> Result<Vec<SimPlain>> {
        let k = self.params.p_moduli().len();
        compact
            .iter()
            .map(|&p| {
                self.counts.borrow_mut().ntt_limbs += p.level + 1 + k;
                let mut p = p.clone();
                p.extended = true;
                Ok(p)
            })
            .collect()
    }

    fn mul_plain_extended(&self, a: &SimExtended, p: &SimPlain) -> Result<SimExtended> {
        let p = Self::extended_plain(p)?;
        let mut plain = p.clone();
        plain.extended = false;
        Ok(SimExtended {
            value: self.mul_plain(&a.value, &plain)?,
        })
    }

    fn mul_plain_extended_add_assign(
        &self,
        acc: &mut SimExtended,
        a: &SimExtended,
        p: &SimPlain,
    ) -> Result<()> {
        let term = self.mul_plain_extended(a, p)?;
        self.add_extended_assign(acc, &term)
    }

    fn add_extended_assign(&self, acc: &mut SimExtended, b: &SimExtended) -> Result<()> {
        self.add_assign(&mut acc.value, &b.value)
    }

    /// The rotation with the ModDown rounding of the second part (before
    /// its decomposition) and the gadget noise of the key switch.
    fn rotate_extended(&self, a: &SimExtended, steps: i64) -> Result<SimExtended> {
        let mut value = Self::rotated(&a.value, steps);
        if steps.rem_euclid(a.value.slots.len() as i64) != 0 {
            self.counts.borrow_mut().rotations += 1;
            self.count_mod_downs(a.value.level, 1);
            self.count_decomposition(a.value.level);
            self.add_coefficient_noise(&mut value, self.noise.rescale);
            self.add_coefficient_noise(&mut value, self.gadget_noise(a.value.level));
        }
        Ok(SimExtended { value })
    }

    fn mod_down(&self, a: &SimExtended) -> Result<SimValue> {
        self.count_mod_downs(a.value.level, 2);
        let mut value = a.value.clone();
        self.add_coefficient_noise(&mut value, self.noise.rescale);
        Ok(value)
    }
}

impl ExtendedArithmetic for CkksOps<'_> {
    type Extended = ExtendedCiphertext;

    fn special_primes(&self) -> usize {
        self.evaluator().context().params().p_moduli().len()
    }

    fn rotate_hoisted_extended(
        &self,
        a: &hemem_ckks::eval::Ciphertext,
        steps: &[i64],
    ) -> Result<Vec<ExtendedCiphertext>> {
        Ok(self.evaluator().rotate_hoisted_extended(a, steps)?)
    }

    fn encode_extended(&self, values: &[Complex64], level: usize, scale: f64) -> Result<Plaintext> {
        if let Some(periodic) = self.encode_repeating(values, level, scale, true)? {
            return Ok(periodic);
        }
        let (first, period) = crate::ckks_ops::one_period(values);
        Ok(self
            .encoder()
            .encode_extended_at_class(
                first,
                Level(level),
                Scale(scale),
                period,
                self.constant_class(),
            )?
            .repeat_slots(values.len())?)
    }

    /// Expands into `Temporary` memory (one batched launch pair on the GPU
    /// for each run of one level), over `Q_l ∪ P`; diagonals that repeat a
    /// short period are kept periodic.
    fn expand_extended(&self, compact: &[&CompactPlaintext]) -> Result<Vec<Plaintext>> {
        Ok(self
            .encoder()
            .expand_periodic(compact, MemoryClass::Temporary, true)?)
    }

    fn mul_plain_extended(
        &self,
        a: &ExtendedCiphertext,
        p: &Plaintext,
    ) -> Result<ExtendedCiphertext> {
        Ok(self.evaluator().mult_plain_extended(a, p)?)
    }

    fn mul_plain_extended_add_assign(
        &self,
        acc: &mut ExtendedCiphertext,
        a: &ExtendedCiphertext,
        p: &Plaintext,
    ) -> Result<()> {
        Ok(self.evaluator().mult_plain_extended_add_assign(acc, a, p)?)
    }

    fn add_extended_assign(
        &self,
        acc: &mut ExtendedCiphertext,
        b: &ExtendedCiphertext,
    ) -> Result<()> {
        Ok(self.evaluator().add_extended_assign(acc, b)?)
    }

    fn rotate_extended(&self, a: &ExtendedCiphertext, steps: i64) -> Result<ExtendedCiphertext> {
        Ok(self.evaluator().rotate_extended(a, steps)?)
    }

    fn mod_down(&self, a: &ExtendedCiphertext) -> Result<hemem_ckks::eval::Ciphertext> {
        Ok(self.evaluator().mod_down_extended(a)?)
    }
}
