//! Rotations and conjugation: automorphisms of the slots followed by key
//! switching, single or hoisted (one decomposition shared by many rotations).

use hemem_memory::MemoryClass;

use super::keyswitch::{Decomposition, apply_key, decompose, inner_product};
use super::{Ciphertext, Evaluator};
use crate::backend::Addend;
use crate::keys::SwitchingKey;
use crate::ntt::GaloisElement;
use crate::poly::{Ntt, RnsPoly};
use crate::{KeyError, Result};

impl Evaluator {
    /// The key rotating `slots` slots left by `k` (`0 < k < slots`), if one
    /// was generated: `5^k` or, equivalently on `slots` slots, `5^(k−slots)`.
    pub(crate) fn direct_rotation_key(
        &self,
        k: usize,
        slots: usize,
    ) -> Result<Option<(GaloisElement, &SwitchingKey)>> {
        let keys = self.keys()?;
        let n = self.context.params().degree().get();
        for steps in [k as i64, k as i64 - slots as i64] {
            let g = GaloisElement::rotation(steps, n);
            if let Some(key) = keys.rotation_key(g) {
                return Ok(Some((g, key)));
            }
        }
        Ok(None)
    }

    /// Applies the automorphism `g` and switches back to `s` with `key`.
    /// `c1` is rotated before its decomposition (one pass over its limbs,
    /// where reading every digit through `σ_g` would permute all the
    /// digits' limbs on the CPU), `c0` is read through `σ_g` by the ModDown
    /// as it adds it.
    fn apply_galois(
        &self,
        a: &Ciphertext,
        g: GaloisElement,
        key: &SwitchingKey,
    ) -> Result<Ciphertext> {
        let params = self.context.params();
        let c1 = a.c1.automorphism(g, MemoryClass::Temporary)?;
        let decomposition = decompose(params, &c1, a.level)?;
        drop(c1);
        self.switch_rotated(a, &decomposition, None, g, key)
    }

    /// `σ_g(a)` switched back with `key`, from a decomposition of `σ_g(c1)`
    /// (`digits_galois` `None`) or of `c1` (`Some(g)`: the inner product
    /// reads its digits through `σ_g`, as hoisted rotations do); `c0` is
    /// read through `σ_g` by the ModDown.
    fn switch_rotated(
        &self,
        a: &Ciphertext,
        decomposition: &Decomposition,
        digits_galois: Option<GaloisElement>,
        g: GaloisElement,
        key: &SwitchingKey,
    ) -> Result<Ciphertext> {
        let (k0, k1) = apply_key(
            self.context.params(),
            decomposition,
            key,
            digits_galois,
            self.output_class,
            [Some(&a.c0), None],
            Some(g),
        )?;
        Ciphertext::from_parts(&self.context, k0, k1, a.level, a.scale, a.slots)
    }

    /// Rotates the slots left by `steps` (negative: right), modulo the slot
    /// count. Uses a direct key when one exists, otherwise composes
    /// power-of-two rotations.
    ///
    /// # Errors
    /// [`KeyError::NoKeys`]; [`KeyError::MissingRotationKey`] when neither a
    /// direct key nor the needed power-of-two keys exist.
    pub fn rotate(&self, a: &Ciphertext, steps: i64) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let slots = a.slots;
        let k = steps.rem_euclid(slots as i64) as usize;
        if k == 0 {
            return self.copy_of(a);
        }
        if let Some((g, key)) = self.direct_rotation_key(k, slots)? {
            return self.apply_galois(a, g, key);
        }
        // Compose from the binary expansion of k.
        let mut plan = Vec::new();
        let mut bit = 1usize;
        while bit < slots {
            if k & bit != 0 {
                let found = self
                    .direct_rotation_key(bit, slots)?
                    .ok_or(KeyError::MissingRotationKey { step: steps })?;
                plan.push(found);
            }
            bit <<= 1;
        }
        let mut out: Option<Ciphertext> = None;
        for (g, key) in plan {
            let next = self.apply_galois(out.as_ref().unwrap_or(a), g, key)?;
            out = Some(next);
        }
        out.ok_or_else(|| KeyError::MissingRotationKey { step: steps }.into())
    }

    /// Switches `a` (encrypted under the key `key` switches *from*) to the
    /// secret key `key` switches *to*. Needs no key set.
    ///
    /// # Errors
    /// A ciphertext or key of another context.
    pub fn switch_key(&self, a: &Ciphertext, key: &SwitchingKey) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        self.context.check_same(&key.context)?;
        let params = self.context.params();
        let decomposition = decompose(params, &a.c1, a.level)?;
        let (k0, k1) = apply_key(
            params,
            &decomposition,
            key,
            None,
            self.output_class,
            [Some(&a.c0), None],
            None,
        )?;
        Ciphertext::from_parts(&self.context, k0, k1, a.level, a.scale, a.slots)
    }

    /// Conjugates every slot.
    ///
    /// # Errors
    /// [`KeyError::NoKeys`] or [`KeyError::MissingConjugationKey`].
    pub fn conjugate(&self, a: &Ciphertext) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let key = self.keys()?.conjugation_key()?;
        let g = GaloisElement::conjugation(self.context.params().degree().get());
        self.apply_galois(a, g, key)
    }

    /// The gadget decomposition of `a`'s second part, for hoisted rotations.
    ///
    /// # Errors
    /// A ciphertext of another context; allocation errors.
    pub fn decompose(&self, a: &Ciphertext) -> Result<Decomposition> {
        self.context.check_same(&a.context)?;
        decompose(self.context.params(), &a.c1, a.level)
    }

    /// Checks that `decomposition` can be `a`'s: same context, same level.
    fn check_decomposition(&self, a: &Ciphertext, decomposition: &Decomposition) -> Result<()> {
        self.context.check_same(&a.context)?;
        if decomposition.level != a.level {
            return Err(crate::OperandError::LevelMismatch {
                left: a.level,
                right: decomposition.level,
            }
            .into());
        }
        Ok(())
    }

    /// Rotates `a` by `steps` using its precomputed decomposition (which must
    /// come from [`Evaluator::decompose`] on `a`). Needs a direct key.
    ///
    /// # Errors
    /// [`KeyError::MissingRotationKey`] without a direct key; a
    /// decomposition of another level.
    pub fn rotate_decomposed(
        &self,
        a: &Ciphertext,
        decomposition: &Decomposition,
        steps: i64,
    ) -> Result<Ciphertext> {
        self.check_decomposition(a, decomposition)?;
        let k = steps.rem_euclid(a.slots as i64) as usize;
        if k == 0 {
            return self.copy_of(a);
        }
        let (g, key) = self
            .direct_rotation_key(k, a.slots)?
            .ok_or(KeyError::MissingRotationKey { step: steps })?;
        self.switch_rotated(a, decomposition, Some(g), g, key)
    }

    /// Rotations of `a` by each of `steps`, sharing one decomposition
    /// (hoisting): one ModUp instead of one per rotation. Each step needs a
    /// direct key. The ModDowns of up to [`Evaluator::with_mod_down_batch`]
    /// rotations run together.
    ///
    /// # Errors
    /// As [`Evaluator::rotate_decomposed`].
    pub fn rotate_hoisted(&self, a: &Ciphertext, steps: &[i64]) -> Result<Vec<Ciphertext>> {
        let decomposition = self.decompose(a)?;
        let mut rotated = Vec::with_capacity(steps.len());
        for batch in steps.chunks(self.mod_down_batch.max(1)) {
            rotated.extend(self.rotate_decomposed_batch(a, &decomposition, batch)?);
        }
        Ok(rotated)
    }

    /// [`Evaluator::rotate_decomposed`] for each of `steps`, their ModDowns
    /// in one [`crate::backend::Backend::mod_down_many`]: the same
    /// arithmetic, so the same limbs.
    fn rotate_decomposed_batch(
        &self,
        a: &Ciphertext,
        decomposition: &Decomposition,
        steps: &[i64],
    ) -> Result<Vec<Ciphertext>> {
        self.check_decomposition(a, decomposition)?;
        let params = self.context.params();
        // Each rotation's element and inner product; `None` for a step of
        // 0. Its σ(c0) is added by the ModDown, read through σ.
        let mut switched = Vec::with_capacity(steps.len());
        for &s in steps {
            let k = s.rem_euclid(a.slots as i64) as usize;
            if k == 0 {
                switched.push(None);
                continue;
            }
            let (g, key) = self
                .direct_rotation_key(k, a.slots)?
                .ok_or(KeyError::MissingRotationKey { step: s })?;
            let (acc0, acc1) = inner_product(params, decomposition, key, Some(g))?;
            switched.push(Some((g, acc0, acc1)));
        }
        let q = params.q_indices(decomposition.level)?;
        let backend = a.c0.backend();
        let mut parts: Vec<RnsPoly<Ntt>> = Vec::with_capacity(2 * steps.len());
        for _ in switched.iter().flatten() {
            for _ in 0..2 {
                parts.push(RnsPoly::allocate(backend, &q, self.output_class, false)?);
            }
        }
        {
            let mut x = Vec::with_capacity(parts.len());
            let mut addend = Vec::with_capacity(parts.len());
            for &(g, ref acc0, ref acc1) in switched.iter().flatten() {
                x.extend([acc0.limbs()?, acc1.limbs()?]);
                addend.extend([Some(Addend::rotated(a.c0.limbs()?, g)), None]);
            }
            let mut out = parts
                .iter_mut()
                .map(RnsPoly::limbs_mut)
                .collect::<Result<Vec<_>>>()?;
            backend.mod_down_many(&x, params.p_moduli().len(), &addend, &mut out)?;
        }
        let mut parts = parts.into_iter();
        let mut rotated = Vec::with_capacity(steps.len());
        for s in &switched {
            rotated.push(match s {
                None => self.copy_of(a)?,
                Some(_) => match (parts.next(), parts.next()) {
                    (Some(k0), Some(k1)) => {
                        Ciphertext::from_parts(&self.context, k0, k1, a.level, a.scale, a.slots)?
                    }
                    _ => {
                        return Err(crate::Error::LengthMismatch {
                            expected: 2 * steps.len(),
                            actual: 0,
                        });
                    }
                },
            });
        }
        Ok(rotated)
    }

    /// Sums all slots: every slot of the result holds `Σ_j a_j`, by
    /// `log2(slots)` rotations by powers of two.
    ///
    /// # Errors
    /// Missing power-of-two rotation keys.
    pub fn rotate_sum(&self, a: &Ciphertext) -> Result<Ciphertext> {
        let mut acc = self.copy_of(a)?;
        let mut k = 1usize;
        while k < a.slots {
            let rotated = self.rotate(&acc, k as i64)?;
            self.add_assign(&mut acc, &rotated)?;
            k <<= 1;
        }
        Ok(acc)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backend::DeviceSelection;
    use crate::context::Context;
    use crate::encoding::Encoder;
    use crate::eval::Encryptor;
    use crate::keys::{KeyGenerator, KeySetRequest};
    use crate::params::{Parameters, Preset, SecurityCheck};
    use crate::testing::{seed32, seeded_rng, unit_disk};

    /// A rotation with `c0` read through `σ_g` by the ModDown gives the
    /// limbs of the construction it replaced, `σ_g(c0)` rotated into a
    /// temporary and added as it is: for single rotations (`c1` rotated
    /// first), hoisted ones (digits read through `σ_g`) and conjugation.
    #[test]
    fn c0_read_through_the_automorphism_equals_c0_rotated_first() {
        let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)
            .expect("preset");
        let context = Context::new(params, DeviceSelection::Cpu).expect("context");
        let keygen = KeyGenerator::with_seed(&context, seed32(151));
        let secret = keygen.secret_key().expect("secret");
        let public = keygen.public_key(&secret).expect("public");
        let steps = [3i64, -5];
        let keys = keygen
            .key_set(
                &secret,
                &KeySetRequest {
                    rotations: steps.to_vec(),
                    conjugation: true,
                    ..Default::default()
                },
            )
            .expect("keys");
        let eval = Evaluator::with_keys(&context, Arc::new(keys));
        let slots = context.params().slots();
        let message = Encoder::new(&context)
            .encode(&unit_disk(&mut seeded_rng(152), slots))
            .expect("encode");
        let ct = Encryptor::with_seed(&context, seed32(153))
            .encrypt(&message, &public)
            .expect("encrypt");
        let params = context.params();
        let n = params.degree().get();
        let words = |c: &Ciphertext| (c.c0.to_words().expect("c0"), c.c1.to_words().expect("c1"));
        // The replaced construction: both parts rotated, c0 added as it is.
        let reference = |g: GaloisElement, key: &SwitchingKey, hoisted: bool| {
            let c0 = ct
                .c0
                .automorphism(g, MemoryClass::Temporary)
                .expect("σ(c0)");
            let (decomposition, galois) = if hoisted {
                (
                    decompose(params, &ct.c1, ct.level).expect("digits"),
                    Some(g),
                )
            } else {
                let c1 = ct
                    .c1
                    .automorphism(g, MemoryClass::Temporary)
                    .expect("σ(c1)");
                (decompose(params, &c1, ct.level).expect("digits"), None)
            };
            let (k0, k1) = apply_key(
                params,
                &decomposition,
                key,
                galois,
                MemoryClass::Ciphertext,
                [Some(&c0), None],
                None,
            )
            .expect("switch");
            (k0.to_words().expect("k0"), k1.to_words().expect("k1"))
        };
        let hoisted = eval.rotate_hoisted(&ct, &steps).expect("hoisted");
        for (&k, rotated) in steps.iter().zip(&hoisted) {
            let (g, key) = eval
                .direct_rotation_key(k.rem_euclid(slots as i64) as usize, slots)
                .expect("keys")
                .expect("a key");
            let single = eval.rotate(&ct, k).expect("rotate");
            assert_eq!(words(&single), reference(g, key, false), "rotation {k}");
            assert_eq!(words(rotated), reference(g, key, true), "hoisted {k}");
        }
        let g = GaloisElement::conjugation(n);
        let key = eval.keys().expect("keys").conjugation_key().expect("key");
        let conjugated = eval.conjugate(&ct).expect("conjugate");
        assert_eq!(words(&conjugated), reference(g, key, false), "conjugation");
    }
}
