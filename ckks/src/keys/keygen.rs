//! [`KeyGenerator`].

use std::sync::{Mutex, MutexGuard, PoisonError};

use hemem_memory::MemoryClass;

use super::switching::regenerate_uniform;
use super::{KeyKind, KeySet, KeySetRequest, PublicKey, SecretKey, SwitchingKey};
use crate::Result;
use crate::backend::{BinaryOp, Limbs, LimbsMut, contiguous};
use crate::context::Context;
use crate::ntt::GaloisElement;
use crate::params::{ERROR_STD_DEV, Level};
use crate::poly::{Coeff, Ntt, RnsPoly};
use crate::progress::{NoProgress, Progress};
use crate::sampling::{Sampler, SeedPrf, UniformSeed};

/// Makes keys for a context, drawing randomness from a ChaCha20 stream seeded
/// from the operating system (or, with the `test-utils` feature, from a fixed
/// seed for reproducible tests). Sampling is not constant time (see
/// [`crate::sampling`], "Timing").
///
/// Every buffer derived from the secret key — `s²`, `σ_g(s)`, each `a·s`,
/// the gadget multiples of the key being switched from — is allocated
/// sensitive and released explicitly when the key is made, so a failure to
/// zero one is returned by the generating call (as
/// [`hemem_memory::Error::ZeroingFailed`]).
#[derive(Debug)]
pub struct KeyGenerator {
    context: Context,
    sampler: Mutex<Sampler>,
    uniform_prf: SeedPrf,
}

impl KeyGenerator {
    /// A key generator seeded from the operating system.
    ///
    /// # Errors
    /// [`crate::Error::Entropy`] if the OS source fails.
    pub fn new(context: &Context) -> Result<Self> {
        Ok(Self {
            context: context.clone(),
            sampler: Mutex::new(Sampler::from_os()?),
            uniform_prf: SeedPrf::default(),
        })
    }

    /// The generator whose switching keys expand their seeds with `prf`
    /// instead of the default ([`SeedPrf::ChaCha12`]): ChaCha20 makes keys
    /// that builds before ChaCha12 can read, and that regenerate their
    /// uniform halves more slowly. Both are pseudorandom functions the
    /// library accepts (`docs/SECURITY.md`).
    #[must_use]
    pub fn with_uniform_prf(mut self, prf: SeedPrf) -> Self {
        self.uniform_prf = prf;
        self
    }

    /// A key generator with a fixed seed: reproducible, for tests and
    /// benchmarks only (behind the `test-utils` feature).
    ///
    /// # Security
    ///
    /// Everything it draws is a function of `seed`: whoever knows or guesses
    /// the seed recomputes every secret key it makes (and every error), and
    /// two key generators given the same seed make the same secret key. Real
    /// use wants [`Self::new`], seeded from the operating system.
    #[cfg(any(test, feature = "test-utils"))]
    pub fn with_seed(context: &Context, seed: [u8; 32]) -> Self {
        Self {
            context: context.clone(),
            sampler: Mutex::new(Sampler::from_seed(seed)),
            uniform_prf: SeedPrf::default(),
        }
    }

    pub(crate) fn sampler(&self) -> MutexGuard<'_, Sampler> {
        self.sampler.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// A fresh secret key with exactly the preset's Hamming weight.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn secret_key(&self) -> Result<SecretKey> {
        self.secret_key_with_weight(self.context.params().hamming_weight())
    }

    /// A fresh secret key with exactly `weight` nonzero coefficients (for
    /// bootstrapping's sparse-secret encapsulation, whose ephemeral key has
    /// weight 32; ordinary use wants [`KeyGenerator::secret_key`]).
    ///
    /// # Errors
    /// [`crate::ParametersError::InvalidHammingWeight`] outside `1..=N`;
    /// allocation errors.
    pub fn secret_key_with_weight(&self, weight: usize) -> Result<SecretKey> {
        let degree = self.context.params().degree().get();
        if weight == 0 || weight > degree {
            return Err(crate::ParametersError::InvalidHammingWeight { weight, degree }.into());
        }
        let coefficients = self.sampler().ternary_with_weight(degree, weight);
        SecretKey::from_coefficients(&self.context, coefficients)
    }

    /// An RLWE pair `(−a·s + e, a)` over the moduli `moduli` (global indices,
    /// a subset of the secret key's), with `a` uniform and `e` Gaussian.
    pub(crate) fn rlwe_sample(
        &self,
        secret: &SecretKey,
        moduli: &[usize],
        class: MemoryClass,
        sampler: &mut Sampler,
    ) -> Result<(RnsPoly<Ntt>, RnsPoly<Ntt>)> {
        self.context.check_same(&secret.context)?;
        let backend = self.context.backend();
        let n = self.context.params().degree().get();
        let a = RnsPoly::<Ntt>::uniform(backend, moduli, class, sampler)?;
        let e = sampler.gaussian(n, ERROR_STD_DEV)?;
        let mut b = RnsPoly::<Coeff>::from_signed(backend, moduli, class, &e, false)?.into_ntt()?;
        let mut s_moduli = Vec::new();
        let s = secret.poly.select(moduli, &mut s_moduli)?;
        let mut a_s =
            RnsPoly::<Ntt>::allocate(backend, moduli, MemoryClass::Temporary, s.is_sensitive())?;
        backend.binary(
            crate::backend::BinaryOp::Mul,
            a.limbs()?,
            s,
            a_s.limbs_mut()?,
        )?;
        b.sub_assign(&a_s)?;
        a_s.release()?;
        Ok((b, a))
    }

    /// The public key for `secret`, over `Q_L ∪ P`.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`]; allocation errors.
    pub fn public_key(&self, secret: &SecretKey) -> Result<PublicKey> {
        let moduli: Vec<usize> = self
            .context
            .params()
            .qp_indices(self.context.params().max_level())?;
        let mut sampler = self.sampler();
        let (b, a) = self.rlwe_sample(secret, &moduli, MemoryClass::EvaluationKey, &mut sampler)?;
        Ok(PublicKey {
            context: self.context.clone(),
            b,
            a,
        })
    }

    /// A switching key from `from` (NTT form over every modulus, global
    /// layout) to `to`, serving levels up to `level`, as [`SwitchingKey`]
    /// describes. The randomness drawn does not depend on `level` beyond the
    /// number of digits, so a lower-level key from the same stream is the
    /// restriction of the top-level one.
    fn switching_key_from(
        &self,
        from: &RnsPoly<Ntt>,
        to: &SecretKey,
        kind: KeyKind,
        level: Level,
    ) -> Result<SwitchingKey> {
        self.context.check_same(&to.context)?;
        let params = self.context.params();
        params.q_modulus(level)?;
        let backend = self.context.backend();
        let n = params.degree().get();
        let moduli = params.qp_indices(level)?;
        let alpha = params.alpha();
        let digits = params.digits_at(level);
        // P mod q_i, the gadget factor on digit j's own primes.
        let p_mod_q = params.p_mod_q(params.max_level());
        let mut s_moduli = Vec::new();
        let s = to.poly.select(&moduli, &mut s_moduli)?;
        let mut sampler = self.sampler();
        let seed = UniformSeed::new(*sampler.seed(), self.uniform_prf);
        let mut b = Vec::with_capacity(digits);
        for j in 0..digits {
            let e = sampler.gaussian(n, ERROR_STD_DEV)?;
            let mut b_j = RnsPoly::<Coeff>::from_signed(
                backend,
                &moduli,
                MemoryClass::EvaluationKey,
                &e,
                false,
            )?
            .into_ntt()?;
            {
                // a_j·s lives only in this scope: a temporary derived from
                // the secret, zeroed on release (sensitive).
                let a_j = regenerate_uniform(backend, seed, j, &moduli, MemoryClass::Temporary)?;
                let mut a_s =
                    RnsPoly::<Ntt>::allocate(backend, &moduli, MemoryClass::Temporary, true)?;
                backend.binary(BinaryOp::Mul, a_j.limbs()?, s, a_s.limbs_mut()?)?;
                b_j.sub_assign(&a_s)?;
                a_s.release()?;
            }

            // Digit j's primes at this level; q_i sits at position i.
            let start = j * alpha;
            let end = (start + alpha).min(level.primes());
            let digit = contiguous(start, end - start)?;
            let digit_moduli = moduli.get(start..end).ok_or(crate::Error::EmptyBasis)?;
            let mut gadget =
                RnsPoly::<Ntt>::allocate(backend, digit_moduli, MemoryClass::Temporary, true)?;
            backend.copy(
                Limbs {
                    buffer: from.buffer(),
                    positions: digit,
                    moduli: digit_moduli,
                },
                gadget.limbs_mut()?,
            )?;
            gadget.scalar_assign(
                BinaryOp::Mul,
                p_mod_q.get(start..end).ok_or(crate::Error::EmptyBasis)?,
            )?;
            backend.binary_assign(
                BinaryOp::Add,
                LimbsMut {
                    buffer: b_j.buffer_mut(),
                    positions: digit,
                    moduli: digit_moduli,
                },
                gadget.limbs()?,
            )?;
            gadget.release()?;
            b.push(b_j);
        }
        SwitchingKey {
            context: self.context.clone(),
            kind,
            level,
            seed,
            b,
            a: None,
        }
        .sealed()
    }

    /// A key switching ciphertexts under `from` to ciphertexts under `to`.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`]; allocation errors.
    pub fn switching_key(&self, from: &SecretKey, to: &SecretKey) -> Result<SwitchingKey> {
        self.switching_key_at(from, to, self.context.params().max_level())
    }

    /// [`KeyGenerator::switching_key`] for key switches at levels up to
    /// `level` only (a smaller key).
    ///
    /// # Errors
    /// As [`KeyGenerator::switching_key`]; a level beyond the chain.
    pub fn switching_key_at(
        &self,
        from: &SecretKey,
        to: &SecretKey,
        level: Level,
    ) -> Result<SwitchingKey> {
        self.context.check_same(&from.context)?;
        self.switching_key_from(&from.poly, to, KeyKind::Generic, level)
    }

    /// The relinearisation key: switches `s²` to `s`.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`]; allocation errors.
    pub fn relinearization_key(&self, secret: &SecretKey) -> Result<SwitchingKey> {
        self.relinearization_key_at(secret, self.context.params().max_level())
    }

    /// The relinearisation key for levels up to `level` only.
    ///
    /// # Errors
    /// As [`KeyGenerator::relinearization_key`]; a level beyond the chain.
    pub fn relinearization_key_at(&self, secret: &SecretKey, level: Level) -> Result<SwitchingKey> {
        self.context.check_same(&secret.context)?;
        // Sensitive: computed from the secret.
        let square = secret.poly.mul(&secret.poly, MemoryClass::Temporary)?;
        let key = self.switching_key_from(&square, secret, KeyKind::Relinearization, level)?;
        square.release()?;
        Ok(key)
    }

    /// The key for the automorphism with Galois element `g` (taken modulo
    /// `2N`): switches `σ_g(s)` to `s`.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`];
    /// [`KeyError::InvalidGaloisElement`](crate::KeyError::InvalidGaloisElement)
    /// for an even element; allocation errors.
    pub fn galois_key(&self, secret: &SecretKey, g: GaloisElement) -> Result<SwitchingKey> {
        self.galois_key_at(secret, g, self.context.params().max_level())
    }

    /// The key for the automorphism `g` for levels up to `level` only.
    ///
    /// # Errors
    /// As [`KeyGenerator::galois_key`]; a level beyond the chain.
    pub fn galois_key_at(
        &self,
        secret: &SecretKey,
        g: GaloisElement,
        level: Level,
    ) -> Result<SwitchingKey> {
        self.context.check_same(&secret.context)?;
        let n = self.context.params().degree().get();
        // Elements are taken modulo 2N (so that a key is filed under the
        // element lookups ask for), and must be odd.
        let g = g.reduced(n)?;
        let kind = if g == GaloisElement::conjugation(n) {
            KeyKind::Conjugation
        } else {
            KeyKind::Rotation(g)
        };
        // Sensitive: computed from the secret.
        let rotated = secret.poly.automorphism(g, MemoryClass::Temporary)?;
        let key = self.switching_key_from(&rotated, secret, kind, level)?;
        rotated.release()?;
        Ok(key)
    }

    /// The key for a left rotation of the slots by `steps` (negative: right).
    ///
    /// # Errors
    /// As [`KeyGenerator::galois_key`].
    pub fn rotation_key(&self, secret: &SecretKey, steps: i64) -> Result<SwitchingKey> {
        let n = self.context.params().degree().get();
        self.galois_key(secret, GaloisElement::rotation(steps, n))
    }

    /// The key for complex conjugation of the slots.
    ///
    /// # Errors
    /// As [`KeyGenerator::galois_key`].
    pub fn conjugation_key(&self, secret: &SecretKey) -> Result<SwitchingKey> {
        let n = self.context.params().degree().get();
        self.galois_key(secret, GaloisElement::conjugation(n))
    }

    /// Every key `request` names (rotations deduplicated by Galois element),
    /// each for the level `request.levels` gives it (the top level where
    /// none is given).
    ///
    /// # Errors
    /// As the individual generators.
    pub fn key_set(&self, secret: &SecretKey, request: &KeySetRequest) -> Result<KeySet> {
        self.key_set_with_progress(secret, request, &NoProgress)
    }

    /// As [`KeyGenerator::key_set`], reporting each key made to `progress`
    /// (a full bootstrapping key set takes seconds to minutes). The total
    /// counts every key `request` names, duplicates included (they count as
    /// done when skipped).
    ///
    /// # Errors
    /// As [`KeyGenerator::key_set`].
    pub fn key_set_with_progress(
        &self,
        secret: &SecretKey,
        request: &KeySetRequest,
        progress: &dyn Progress,
    ) -> Result<KeySet> {
        let params = self.context.params();
        let n = params.degree().get();
        let level = |kind: KeyKind| request.level_of(kind, params.max_level());
        let total = u64::from(request.relinearization)
            + u64::from(request.conjugation)
            + request.rotations.len() as u64;
        let mut done = 0;
        progress.update(done, total);
        let mut step = || {
            done += 1;
            progress.update(done, total);
        };
        let mut set = KeySet::new();
        if request.relinearization {
            set.insert(self.relinearization_key_at(secret, level(KeyKind::Relinearization))?)?;
            step();
        }
        if request.conjugation {
            let g = GaloisElement::conjugation(n);
            set.insert(self.galois_key_at(secret, g, level(KeyKind::Conjugation))?)?;
            step();
        }
        for &steps in &request.rotations {
            let g = GaloisElement::rotation(steps, n);
            if g.0 != 1 && set.rotation_key(g).is_none() {
                set.insert(self.galois_key_at(secret, g, level(KeyKind::Rotation(g)))?)?;
            }
            step();
        }
        Ok(set)
    }
}
