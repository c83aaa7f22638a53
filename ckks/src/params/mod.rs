//! Parameters: the HEaaN presets by name ([`Preset`]), custom descriptions
//! ([`ParametersSpec`]), and the resolved [`Parameters`] — primes, levels,
//! default scales, gadget layout and a security estimate.

mod fingerprint;
mod level;
mod preset;
mod scales;
pub mod security;
mod spec;
#[cfg(test)]
mod tests;

pub use level::{Degree, Dnum, Level, Scale};
pub use preset::Preset;
pub use security::{SecurityCheck, SecurityEstimate};
pub(crate) use spec::MAX_FILE_FIELD;
pub use spec::{LOG_N_RANGE, MAX_SLOTS, ParametersSpec};

use self::fingerprint::fingerprint;
use self::scales::default_scales;
use self::spec::validate;

use num_bigint::BigUint;
use num_traits::One;

use crate::zq::Modulus;
use crate::zq::primes::PrimeGenerator;
use crate::{OperandError, ParametersError, Result};

/// The Gaussian error width σ.
pub const ERROR_STD_DEV: f64 = 3.2;

/// Resolved CKKS parameters: the moduli, levels, default scales, gadget
/// layout and security estimate. Cheap to clone.
///
/// Moduli have global indices: `0 ..= L` are the Q primes (level order),
/// `L+1 ..= L+K` the special primes.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameters {
    spec: ParametersSpec,
    q: Vec<Modulus>,
    p: Vec<Modulus>,
    scales: Vec<f64>,
    alpha: usize,
    log_qp: u32,
    security: SecurityEstimate,
    fingerprint: u64,
}

impl Parameters {
    /// The parameters of a secure preset.
    ///
    /// # Errors
    /// [`ParametersError::Insecure`] for test presets (use
    /// [`Parameters::from_preset_with`] and opt in).
    pub fn from_preset(preset: Preset) -> Result<Self> {
        Self::new(preset.spec(), SecurityCheck::Enforce)
    }

    /// The parameters of a preset, with an explicit security decision.
    ///
    /// # Errors
    /// As [`Parameters::new`].
    pub fn from_preset_with(preset: Preset, check: SecurityCheck) -> Result<Self> {
        Self::new(preset.spec(), check)
    }

    /// Builds parameters from a description: generates the primes (for each
    /// bit size, primes `p < 2^b`, `p ≡ 1 mod 2N`, largest first, Q primes by
    /// level then special primes), the default scale of every level, and the
    /// security estimate.
    ///
    /// The security level is hemem's decision, never the caller's: a HEaaN
    /// preset's 128-bit claim holds for a description with that preset's
    /// exact structure ([`Preset::matching`]); any other description is
    /// judged by the HE standard's table for a uniform ternary secret
    /// ([`security`]).
    ///
    /// # Errors
    /// A [`ParametersError`] for inconsistent descriptions. Unless `check`
    /// allows them: [`ParametersError::Insecure`] for test presets and for
    /// parameters above the table's 128-bit bound, and
    /// [`ParametersError::SparseSecret`] for custom parameters whose secret is
    /// sparser than the table covers.
    pub fn new(spec: ParametersSpec, check: SecurityCheck) -> Result<Self> {
        validate(&spec)?;
        let two_n = 2u64 << spec.log_n;
        let mut generators: Vec<(u32, PrimeGenerator)> = Vec::new();
        let mut next_prime = |bits: u32| -> Result<Modulus> {
            let generator = match generators.iter_mut().find(|(b, _)| *b == bits) {
                Some((_, g)) => g,
                None => {
                    generators.push((bits, PrimeGenerator::new(bits, two_n)));
                    let last = generators.len() - 1;
                    match generators.get_mut(last) {
                        Some((_, g)) => g,
                        None => return Err(ParametersError::NotEnoughPrimes { bits }.into()),
                    }
                }
            };
            let p = generator
                .next()
                .ok_or(ParametersError::NotEnoughPrimes { bits })?;
            Modulus::new(p)
        };
        let q = spec
            .q_bits
            .iter()
            .map(|&b| next_prime(b))
            .collect::<Result<Vec<_>>>()?;
        let p = spec
            .p_bits
            .iter()
            .map(|&b| next_prime(b))
            .collect::<Result<Vec<_>>>()?;

        let product = q
            .iter()
            .chain(&p)
            .fold(BigUint::one(), |acc, m| acc * m.value());
        let log_qp = u32::try_from(product.bits()).unwrap_or(u32::MAX);
        let security = security::assess(&spec, log_qp);
        if check == SecurityCheck::Enforce {
            if spec.insecure_test || !security.within_table {
                return Err(ParametersError::Insecure {
                    log_n: spec.log_n,
                    log_qp,
                    bound: security.table_bound,
                    test: spec.insecure_test,
                }
                .into());
            }
            if security.bits < 128 {
                return Err(ParametersError::SparseSecret {
                    weight: spec.hamming_weight,
                    min: security::min_table_weight(spec.log_n),
                }
                .into());
            }
        }

        let scales = default_scales(&spec, &q);
        let alpha = q.len().div_ceil(spec.dnum);
        let fingerprint = fingerprint(&spec, &q, &p);
        Ok(Self {
            spec,
            q,
            p,
            scales,
            alpha,
            log_qp,
            security,
            fingerprint,
        })
    }

    /// The description these parameters were built from.
    pub fn spec(&self) -> &ParametersSpec {
        &self.spec
    }

    /// The name (preset name or the custom description's).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The ring degree N.
    pub fn degree(&self) -> Degree {
        Degree(1 << self.spec.log_n)
    }

    /// `log2` of the default (maximum) slot count.
    pub fn log_slots(&self) -> u32 {
        self.spec.log_slots
    }

    /// The default (maximum) slot count.
    pub fn slots(&self) -> usize {
        1 << self.spec.log_slots
    }

    /// The top level L.
    pub fn max_level(&self) -> Level {
        Level(self.q.len() - 1)
    }

    /// The Q primes, level 0 first.
    pub fn q_moduli(&self) -> &[Modulus] {
        &self.q
    }

    /// The special primes P.
    pub fn p_moduli(&self) -> &[Modulus] {
        &self.p
    }

    /// `P mod q_i` for each Q prime at `level` (`P` the product of the
    /// special primes): what multiplies a polynomial over `Q_l` by `P`.
    pub fn p_mod_q(&self, level: Level) -> Vec<u64> {
        self.q
            .iter()
            .take(level.primes())
            .map(|q| {
                self.p
                    .iter()
                    .fold(1u64, |acc, p| q.mul(acc, q.reduce(p.value())))
            })
            .collect()
    }

    /// Every modulus in global-index order: Q then P.
    pub fn all_moduli(&self) -> Vec<Modulus> {
        self.q.iter().chain(&self.p).copied().collect()
    }

    /// Global indices of the Q primes present at `level`.
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] beyond the top level.
    pub fn q_indices(&self, level: Level) -> Result<Vec<usize>> {
        self.q_modulus(level)?;
        Ok((0..=level.0).collect())
    }

    /// Global indices of the special primes.
    pub fn p_indices(&self) -> Vec<usize> {
        (self.q.len()..self.q.len() + self.p.len()).collect()
    }

    /// Global indices of `Q_level ∪ P`.
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] beyond the top level.
    pub fn qp_indices(&self, level: Level) -> Result<Vec<usize>> {
        let mut v = self.q_indices(level)?;
        v.extend(self.p_indices());
        Ok(v)
    }

    /// The Q prime `q_level`.
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] beyond the top level.
    pub fn q_modulus(&self, level: Level) -> Result<Modulus> {
        self.q.get(level.0).copied().ok_or_else(|| {
            OperandError::LevelOutOfRange {
                level,
                max: self.max_level(),
            }
            .into()
        })
    }

    /// The default scale Δ_l of `level`: `2^(bits of q_enc)` at the
    /// encryption level, `Δ_{l−1} = Δ_l² / q_l` below it, and the inverse
    /// step `Δ_{l+1} = sqrt(Δ_l · q_{l+1})` above it, so that `mult` +
    /// `rescale` of two default-scale ciphertexts lands exactly on the next
    /// level's default scale everywhere on the chain.
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] beyond the top level.
    pub fn default_scale(&self, level: Level) -> Result<Scale> {
        self.scales.get(level.0).map(|&s| Scale(s)).ok_or_else(|| {
            OperandError::LevelOutOfRange {
                level,
                max: self.max_level(),
            }
            .into()
        })
    }

    /// Level of a fresh ciphertext.
    pub fn enc_level(&self) -> Level {
        Level(self.spec.enc_level)
    }

    /// Level after bootstrapping, for bootstrappable parameters.
    pub fn post_bootstrap_level(&self) -> Option<Level> {
        self.spec.post_bootstrap_level.map(Level)
    }

    /// The lowest level user computation reaches: 3 for bootstrappable
    /// parameters (levels 0–2 belong to SlotToCoeff), else 0.
    pub fn min_user_level(&self) -> Level {
        if self.spec.post_bootstrap_level.is_some() {
            Level(3)
        } else {
            Level(0)
        }
    }

    /// Hamming weight of the secret key.
    pub fn hamming_weight(&self) -> usize {
        self.spec.hamming_weight
    }

    /// Gadget rank of key switching.
    pub fn dnum(&self) -> Dnum {
        Dnum(self.spec.dnum)
    }

    /// Primes per gadget digit, `α = ⌈(L+1)/dnum⌉`.
    pub fn alpha(&self) -> usize {
        self.alpha
    }

    /// Number of gadget digits at `level`, `⌈(l+1)/α⌉`.
    pub fn digits_at(&self, level: Level) -> usize {
        level.primes().div_ceil(self.alpha)
    }

    /// `log2(QP)`, the bit length of the product of all primes.
    pub fn log_qp(&self) -> u32 {
        self.log_qp
    }

    /// What is known about the security of these parameters.
    pub fn security(&self) -> &SecurityEstimate {
        &self.security
    }

    /// Whether these parameters were accepted only by opting in.
    pub fn is_insecure(&self) -> bool {
        self.spec.insecure_test || self.security.bits < 128
    }

    /// Bytes of one switching key at the top level:
    /// `dnum × 2 × (L+1+K) × N × 8`.
    pub fn switching_key_bytes(&self) -> u64 {
        (self.spec.dnum * 2 * (self.q.len() + self.p.len()) * self.degree().0 * 8) as u64
    }

    /// Bytes one switching key made for `level` holds: `digits_at(level)`
    /// digits of `(level+1+K)` limbs of `N` words, once (`b` only, the
    /// uniform halves regenerated from the seed) or twice when expanded.
    pub fn switching_key_bytes_at(&self, level: Level, expanded: bool) -> u64 {
        let halves = if expanded { 2 } else { 1 };
        // Saturating: a level past the chain is no key of these parameters,
        // and must not overflow (usize::MAX did in debug builds).
        [
            self.digits_at(level) as u64,
            halves,
            (level.primes() as u64).saturating_add(self.p.len() as u64),
            self.degree().0 as u64,
            8,
        ]
        .into_iter()
        .fold(1u64, u64::saturating_mul)
    }

    /// Rotation keys a full-slot bootstrap needs, where known.
    pub fn bootstrap_rotation_keys(&self) -> Option<usize> {
        self.spec.bootstrap_rotation_keys
    }

    /// Bytes of a full-slot bootstrapping key set: the rotation keys plus
    /// relinearisation and conjugation keys.
    pub fn bootstrap_key_set_bytes(&self) -> Option<u64> {
        self.bootstrap_rotation_keys()
            .map(|r| (r as u64 + 2).saturating_mul(self.switching_key_bytes()))
    }

    /// A 64-bit fingerprint of every field of the description and every
    /// prime (name, degree, slots, prime sizes and primes, gadget rank,
    /// levels, user primes, secret weight, test flag, rotation count), used
    /// to tag serialized objects: an object loads only into a context whose
    /// parameters agree with its own on all of them. A checksum of
    /// compatibility, not a keyed hash: it authenticates nothing.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// `log2 Q_l`: the bits of the product of the Q primes up to `level`.
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] beyond the chain.
    pub fn log_q(&self, level: Level) -> Result<f64> {
        let moduli = self
            .q
            .get(..=level.0)
            .ok_or(OperandError::LevelOutOfRange {
                level,
                max: self.max_level(),
            })?;
        Ok(moduli.iter().map(|q| (q.value() as f64).log2()).sum())
    }

    /// Checks that integer-valued coefficients can be held at `level`:
    /// each finite and of magnitude below `Q_l / 2`. Reduced modulo the
    /// primes, a larger one would wrap and read as another value. The
    /// encoder's coefficients and the evaluator's constants both keep to
    /// it.
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] beyond the chain,
    /// [`OperandError::NonFiniteValue`].
    pub fn check_magnitude(
        &self,
        level: Level,
        values: impl IntoIterator<Item = f64>,
    ) -> Result<()> {
        let log_q = self.log_q(level)?;
        let mut max = 0f64;
        for v in values {
            if !v.is_finite() {
                return Err(OperandError::NonFiniteValue.into());
            }
            max = max.max(v.abs());
        }
        if max > 0.0 && max.log2() >= log_q - 1.0 {
            return Err(OperandError::NonFiniteValue.into());
        }
        Ok(())
    }

    /// Checks that `scale` can label an object at `level`: at least 1 and
    /// below `Q_l` ([`OperandError::ScaleOutOfRange`] says why), the range
    /// the loaders accept. Encoding, [`set_scale`], `level_down`, the
    /// checked rescale and the products that are not rescaled keep to it,
    /// so that what the evaluator's checked operations make can be
    /// decrypted and saved. Two kinds of operation are left unchecked on
    /// purpose: `rescale_unchecked` (bootstrapping's SlotToCoeff relabels
    /// with it, as its name says) and the extended-basis products of double
    /// hoisting, intermediate values over `Q_l ∪ P` that are never saved.
    /// (A default scale can lie outside too: FGa's at level 0 is 2^69 over
    /// a 60-bit `q_0`, a level only bootstrapping's chain reaches.)
    ///
    /// [`set_scale`]: crate::eval::Evaluator::set_scale
    ///
    /// # Errors
    /// [`OperandError::LevelOutOfRange`] beyond the chain,
    /// [`OperandError::InvalidScale`] for a non-finite or non-positive
    /// scale, [`OperandError::ScaleOutOfRange`].
    pub fn check_scale(&self, level: Level, scale: Scale) -> Result<()> {
        let modulus_log2 = self.log_q(level)?;
        if !(scale.0.is_finite() && scale.0 > 0.0) {
            return Err(OperandError::InvalidScale.into());
        }
        let scale_log2 = scale.0.log2();
        if scale.0 >= 1.0 && scale_log2 < modulus_log2 {
            Ok(())
        } else {
            Err(OperandError::ScaleOutOfRange {
                level,
                scale_log2,
                modulus_log2,
            }
            .into())
        }
    }

    /// Checks that a rescale at `level` of a ciphertext with scale `scale`
    /// is allowed: the result scale `scale / q_l` must not exceed twice the
    /// dropped prime `q_l` (beyond that, scales grow with each
    /// multiplication instead of staying put, which is how FGa's 48-bit
    /// scale meets its 45-bit primes below level 4), nor fall below 1
    /// ([`Parameters::check_scale`]'s range). Level 0 cannot be rescaled.
    ///
    /// # Errors
    /// [`OperandError::LevelTooLow`] at level 0, [`OperandError::ScaleOverflow`]
    /// as described, [`OperandError::ScaleOutOfRange`] below 1.
    pub fn check_rescale(&self, level: Level, scale: Scale) -> Result<Scale> {
        if level.0 == 0 {
            return Err(OperandError::LevelTooLow {
                operation: "rescale",
                level,
            }
            .into());
        }
        let q = self.q_modulus(level)?;
        let result = scale.0 / q.value() as f64;
        if result.is_nan() || result < 1.0 {
            // Below 1 the rounding outweighs a unit of the message.
            return Err(OperandError::ScaleOutOfRange {
                level: Level(level.0 - 1),
                scale_log2: result.log2(),
                modulus_log2: self.log_q(Level(level.0 - 1))?,
            }
            .into());
        }
        if result > 2.0 * q.value() as f64 {
            return Err(OperandError::ScaleOverflow {
                level,
                result_log2: result.log2(),
                prime_bits: q.bits(),
            }
            .into());
        }
        Ok(Scale(result))
    }
}
