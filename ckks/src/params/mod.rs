//! Parameters: the HEaaN presets by name ([`Preset`]), custom descriptions
//! ([`ParametersSpec`]), and the resolved [`Parameters`] — primes, levels,
//! default scales, gadget layout and a security estimate.

mod level;
mod preset;
pub mod security;

pub use level::{Degree, Dnum, Level, Scale};
pub use preset::Preset;
pub use security::SecurityEstimate;

use num_bigint::BigUint;
use num_traits::One;

use crate::zq::Modulus;
use crate::zq::primes::PrimeGenerator;
use crate::{OperandError, ParametersError, Result};

/// The Gaussian error width σ.
pub const ERROR_STD_DEV: f64 = 3.2;

/// Whether parameters below 128-bit security (or test presets) are accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SecurityCheck {
    /// Refuse them (the default).
    #[default]
    Enforce,
    /// Accept them: for tests and experiments only.
    AllowInsecure,
}

impl SecurityCheck {
    /// The decision a preset's name already states: the insecure `test-*`
    /// presets say what they are, so they are allowed; every other preset
    /// is checked. For programs that take a preset by name (the CLI, the
    /// benchmarks) and must not make each user opt in twice.
    pub const fn for_preset(preset: Preset) -> Self {
        if preset.is_test() {
            Self::AllowInsecure
        } else {
            Self::Enforce
        }
    }
}

/// A description of a parameter set, from a [`Preset`] or written by hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParametersSpec {
    /// A name for reports.
    pub name: String,
    /// `log2 N`.
    pub log_n: u32,
    /// `log2` of the default slot count (at most `log_n − 1`).
    pub log_slots: u32,
    /// Bit sizes of the Q primes, level 0 first.
    pub q_bits: Vec<u32>,
    /// Bit sizes of the special primes P.
    pub p_bits: Vec<u32>,
    /// Gadget rank of key switching.
    pub dnum: usize,
    /// Level of a fresh ciphertext.
    pub enc_level: usize,
    /// Level after bootstrapping, if the parameters are bootstrappable.
    pub post_bootstrap_level: Option<usize>,
    /// How many Q primes (from level 0) belong to user computation; the rest
    /// are reserved for bootstrapping.
    pub user_primes: usize,
    /// Hamming weight of the secret key.
    pub hamming_weight: usize,
    /// Marks a test preset: insecure by construction, refused unless the
    /// caller opts in. (There is no field that claims a security level:
    /// hemem decides it, see [`security`].)
    pub insecure_test: bool,
    /// Rotation keys a full-slot bootstrap needs, where known.
    pub bootstrap_rotation_keys: Option<usize>,
}

impl ParametersSpec {
    /// The same description at another ring degree (slots follow: `N/2`).
    /// A smaller degree makes the parameters insecure.
    pub fn with_log_n(mut self, log_n: u32) -> Self {
        self.log_n = log_n;
        self.log_slots = log_n.saturating_sub(1);
        self.bootstrap_rotation_keys = None;
        self
    }
}

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
    pub fn q_indices(&self, level: Level) -> Vec<usize> {
        (0..=level.0).collect()
    }

    /// Global indices of the special primes.
    pub fn p_indices(&self) -> Vec<usize> {
        (self.q.len()..self.q.len() + self.p.len()).collect()
    }

    /// Global indices of `Q_level ∪ P`.
    pub fn qp_indices(&self, level: Level) -> Vec<usize> {
        let mut v = self.q_indices(level);
        v.extend(self.p_indices());
        v
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
        (self.digits_at(level) * halves * (level.primes() + self.p.len()) * self.degree().0 * 8)
            as u64
    }

    /// Rotation keys a full-slot bootstrap needs, where known.
    pub fn bootstrap_rotation_keys(&self) -> Option<usize> {
        self.spec.bootstrap_rotation_keys
    }

    /// Bytes of a full-slot bootstrapping key set: the rotation keys plus
    /// relinearisation and conjugation keys.
    pub fn bootstrap_key_set_bytes(&self) -> Option<u64> {
        self.bootstrap_rotation_keys()
            .map(|r| (r as u64 + 2) * self.switching_key_bytes())
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

    /// Checks that a rescale at `level` of a ciphertext with scale `scale`
    /// is allowed: the result scale `scale / q_l` must not exceed twice the
    /// dropped prime `q_l` (beyond that, scales grow with each
    /// multiplication instead of staying put, which is how FGa's 48-bit
    /// scale meets its 45-bit primes below level 4). Level 0 cannot be
    /// rescaled.
    ///
    /// # Errors
    /// [`OperandError::LevelTooLow`] at level 0, [`OperandError::ScaleOverflow`]
    /// as described.
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

fn validate(spec: &ParametersSpec) -> Result<()> {
    if !(4..=17).contains(&spec.log_n) {
        return Err(ParametersError::InvalidDegree { log_n: spec.log_n }.into());
    }
    if spec.log_slots > spec.log_n - 1 {
        return Err(ParametersError::InvalidSlots {
            log_slots: spec.log_slots,
            max: spec.log_n - 1,
        }
        .into());
    }
    if spec.q_bits.is_empty() || spec.p_bits.is_empty() {
        return Err(ParametersError::EmptyChain.into());
    }
    if let Some(&bits) = spec
        .q_bits
        .iter()
        .chain(&spec.p_bits)
        .find(|b| !(20..=61).contains(*b))
    {
        return Err(ParametersError::InvalidPrimeBits { bits }.into());
    }
    let primes = spec.q_bits.len();
    if spec.dnum == 0 || spec.dnum > primes {
        return Err(ParametersError::InvalidDnum {
            dnum: spec.dnum,
            primes,
        }
        .into());
    }
    let max = primes - 1;
    for level in [Some(spec.enc_level), spec.post_bootstrap_level]
        .into_iter()
        .flatten()
    {
        if level > max {
            return Err(ParametersError::LevelOutOfRange { level, max }.into());
        }
    }
    if spec.user_primes > primes {
        return Err(ParametersError::LevelOutOfRange {
            level: spec.user_primes,
            max,
        }
        .into());
    }
    let degree = 1usize << spec.log_n;
    if spec.hamming_weight == 0 || spec.hamming_weight > degree {
        return Err(ParametersError::InvalidHammingWeight {
            weight: spec.hamming_weight,
            degree,
        }
        .into());
    }
    Ok(())
}

fn default_scales(spec: &ParametersSpec, q: &[Modulus]) -> Vec<f64> {
    let mut scales = vec![0f64; q.len()];
    let enc = spec.enc_level;
    let bits = spec.q_bits.get(enc).copied().unwrap_or(40);
    if let Some(s) = scales.get_mut(enc) {
        *s = 2f64.powi(bits as i32);
    }
    for l in (1..=enc).rev() {
        if let (Some(&above), Some(m)) = (scales.get(l), q.get(l))
            && let Some(below) = scales.get_mut(l - 1)
        {
            *below = above * above / m.value() as f64;
        }
    }
    for l in enc + 1..q.len() {
        if let (Some(&below), Some(m)) = (scales.get(l - 1), q.get(l))
            && let Some(s) = scales.get_mut(l)
        {
            *s = (below * m.value() as f64).sqrt();
        }
    }
    scales
}

/// 64-bit FNV-1a (the `fnv` crate) over every field of the description and
/// every prime, each as little-endian 64-bit words: two parameter sets share
/// a fingerprint only if they agree on all of them. (Everything else
/// [`Parameters`] holds is derived from these.) Variable length fields are
/// preceded by their length, optional ones by a tag, so that no two
/// descriptions give the same sequence of words. The value is part of the
/// file format (every object's header carries it): the crate computes the
/// same FNV-1a the format has always used, so files keep loading.
fn fingerprint(spec: &ParametersSpec, q: &[Modulus], p: &[Modulus]) -> u64 {
    use std::hash::Hasher as _;
    let mut h = fnv::FnvHasher::default();
    let mut eat = |x: u64| h.write(&x.to_le_bytes());
    let option = |v: Option<usize>| v.map_or([0, 0], |v| [1, v as u64]);
    let ParametersSpec {
        name,
        log_n,
        log_slots,
        q_bits,
        p_bits,
        dnum,
        enc_level,
        post_bootstrap_level,
        user_primes,
        hamming_weight,
        insecure_test,
        bootstrap_rotation_keys,
    } = spec;
    eat(u64::from(*log_n));
    eat(*dnum as u64);
    eat(*hamming_weight as u64);
    eat(q.len() as u64);
    for m in q.iter().chain(p) {
        eat(m.value());
    }
    // Fields after the primes.
    eat(p.len() as u64);
    for &bits in q_bits.iter().chain(p_bits) {
        eat(u64::from(bits));
    }
    eat(u64::from(*log_slots));
    eat(*enc_level as u64);
    option(*post_bootstrap_level).into_iter().for_each(&mut eat);
    eat(*user_primes as u64);
    eat(u64::from(*insecure_test));
    option(*bootstrap_rotation_keys)
        .into_iter()
        .for_each(&mut eat);
    eat(name.len() as u64);
    for &byte in name.as_bytes() {
        eat(u64::from(byte));
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    /// `for_preset` lets exactly the test presets through: every test
    /// preset builds under it, and every HEaaN preset is enforced (so a
    /// HEaaN preset's spec made insecure by hand is still refused).
    #[test]
    fn security_for_a_preset_follows_its_name() {
        for preset in Preset::TEST {
            assert_eq!(
                SecurityCheck::for_preset(preset),
                SecurityCheck::AllowInsecure
            );
            assert!(
                Parameters::from_preset_with(preset, SecurityCheck::for_preset(preset)).is_ok()
            );
            assert!(Parameters::from_preset(preset).is_err(), "{preset}");
        }
        for preset in Preset::HEAAN {
            assert_eq!(SecurityCheck::for_preset(preset), SecurityCheck::Enforce);
            let spec = preset.spec().with_log_n(12);
            assert!(
                matches!(
                    Parameters::new(spec, SecurityCheck::for_preset(preset)),
                    Err(Error::Parameters(ParametersError::Insecure { .. }))
                ),
                "{preset}"
            );
        }
    }

    /// The `fnv` crate's hasher is the FNV-1a the format was written with
    /// (offset basis 0xcbf29ce484222325, prime 0x100000001b3, byte by byte),
    /// so the fingerprints in existing files are unchanged.
    #[test]
    fn fnv_crate_is_the_formats_fnv_1a() {
        use std::hash::Hasher as _;
        let bytes: Vec<u8> = (0..=255u8).chain(b"FGb".iter().copied()).collect();
        let mut reference: u64 = 0xcbf2_9ce4_8422_2325;
        for &byte in &bytes {
            reference ^= u64::from(byte);
            reference = reference.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut crate_hash = fnv::FnvHasher::default();
        crate_hash.write(&bytes);
        assert_eq!(crate_hash.finish(), reference);
    }

    /// Fingerprints pinned for two presets, so a change of hash (which would
    /// make every saved object unreadable) cannot pass unnoticed.
    #[test]
    fn fingerprints_are_pinned() {
        for (preset, expected) in [
            (Preset::FGb, 0x1c49_19e4_e815_55fe),
            (Preset::TestFTb, 0x46f2_9722_8264_76b4),
        ] {
            let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                params.fingerprint(),
                expected,
                "{preset}: {:#x}",
                params.fingerprint()
            );
        }
    }

    #[test]
    fn presets_have_heaan_structure() {
        let expected = [
            (Preset::FGa, 1555, 24, 4, 6, 9, 9, 192, 168),
            (Preset::FGb, 1555, 25, 5, 5, 12, 12, 192, 150),
            (Preset::FVa, 2070, 30, 10, 3, 29, 16, 64, 240),
            (Preset::FVb, 2292, 30, 10, 3, 14, 14, 128, 240),
            (Preset::FVc, 2341, 30, 10, 3, 13, 13, 128, 240),
            (Preset::FTa, 777, 20, 2, 10, 8, 8, 192, 110),
            (Preset::FTb, 771, 16, 1, 16, 4, 4, 192, 136),
        ];
        for (preset, log_qp, q, k, dnum, enc, post, h, key_mib) in expected {
            let p = Parameters::from_preset(preset).unwrap();
            assert_eq!(p.log_qp(), log_qp, "{preset}");
            assert_eq!(p.q_moduli().len(), q, "{preset}");
            assert_eq!(p.p_moduli().len(), k, "{preset}");
            assert_eq!(p.dnum().get(), dnum);
            assert_eq!(p.enc_level(), Level(enc));
            assert_eq!(p.post_bootstrap_level(), Some(Level(post)));
            assert_eq!(p.hamming_weight(), h);
            assert_eq!(p.alpha(), k, "{preset}: α equals K for every preset");
            assert_eq!(p.switching_key_bytes() >> 20, key_mib, "{preset}");
            assert_eq!(p.security().bits, 128);
            assert!(p.security().within_table, "{preset}");
            for (m, &bits) in p.q_moduli().iter().zip(&p.spec().q_bits) {
                assert_eq!(m.bits(), bits);
                assert_eq!(m.value() % (2 * p.degree().get() as u64), 1);
            }
        }
    }

    #[test]
    fn fgb_primes_match_heaan() {
        let p = Parameters::from_preset(Preset::FGb).unwrap();
        let q: Vec<u64> = p.q_moduli().iter().map(Modulus::value).collect();
        assert_eq!(q[0], 288_230_376_147_386_369);
        assert_eq!(q[1], 4_398_044_938_241);
        assert_eq!(q[12], 4_398_018_592_769);
        let specials: Vec<u64> = p.p_moduli().iter().map(Modulus::value).collect();
        assert_eq!(
            specials,
            [
                576_460_752_300_015_617,
                576_460_752_298_835_969,
                576_460_752_298_180_609,
                1_152_921_504_606_584_833,
                1_152_921_504_598_720_513
            ]
        );
    }

    #[test]
    fn default_scales_follow_the_chain() {
        for preset in Preset::HEAAN {
            let p = Parameters::from_preset(preset).unwrap();
            let enc = p.enc_level();
            let bits = p.spec().q_bits[enc.0];
            assert_eq!(p.default_scale(enc).unwrap().0, 2f64.powi(bits as i32));
            for l in 1..=p.max_level().0 {
                let above = p.default_scale(Level(l)).unwrap().0;
                let below = p.default_scale(Level(l - 1)).unwrap().0;
                let q = p.q_moduli()[l].value() as f64;
                if l <= enc.0 {
                    assert_eq!(below, above * above / q, "{preset} level {l}");
                } else {
                    let rel = (above * above / q - below).abs() / below;
                    assert!(rel < 1e-12, "{preset} level {l}");
                }
            }
        }
    }

    #[test]
    fn rescale_rule_matches_design() {
        // FGa: 48-bit scale reaches level 3 (45-bit prime) but not below.
        let p = Parameters::from_preset(Preset::FGa).unwrap();
        let s4 = p.default_scale(Level(4)).unwrap();
        let product = Scale(s4.0 * s4.0);
        let s3 = p.check_rescale(Level(4), product).unwrap();
        assert_eq!(s3, p.default_scale(Level(3)).unwrap());
        let product3 = Scale(s3.0 * s3.0);
        assert!(matches!(
            p.check_rescale(Level(3), product3),
            Err(Error::Operand(OperandError::ScaleOverflow { .. }))
        ));
        // FGb: every user level rescales.
        let p = Parameters::from_preset(Preset::FGb).unwrap();
        for l in 1..=12 {
            let s = p.default_scale(Level(l)).unwrap();
            assert!(
                p.check_rescale(Level(l), Scale(s.0 * s.0)).is_ok(),
                "level {l}"
            );
        }
        assert!(matches!(
            p.check_rescale(Level(0), Scale(1.0)),
            Err(Error::Operand(OperandError::LevelTooLow { .. }))
        ));
        // FTb: 36-bit scale reaches level 3 (33-bit prime) but not below.
        let p = Parameters::from_preset(Preset::FTb).unwrap();
        let s4 = p.default_scale(Level(4)).unwrap();
        let s3 = p.check_rescale(Level(4), Scale(s4.0 * s4.0)).unwrap();
        assert!(p.check_rescale(Level(3), Scale(s3.0 * s3.0)).is_err());
    }

    #[test]
    fn test_presets_need_opt_in_and_custom_parameters_are_checked() {
        for preset in Preset::TEST {
            assert!(matches!(
                Parameters::from_preset(preset),
                Err(Error::Parameters(ParametersError::Insecure { .. }))
            ));
            let p = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
            assert!(p.is_insecure());
            assert_eq!(p.spec().q_bits, preset.shape_of().spec().q_bits);
        }
        let mut spec = Preset::FGb.spec();
        spec.name = "not FGb".into();
        spec.enc_level = 3;
        let renamed = Parameters::new(spec.clone(), SecurityCheck::Enforce).unwrap();
        assert_eq!(renamed.security().preset, Some(Preset::FGb));
        spec.q_bits.extend([60; 4]);
        assert!(matches!(
            Parameters::new(spec.clone(), SecurityCheck::Enforce),
            Err(Error::Parameters(ParametersError::Insecure {
                log_n: 16,
                bound: Some(1747),
                ..
            }))
        ));
        let p = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
        assert_eq!(p.security().bits, 0);
        assert!("fgb".parse::<Preset>().is_ok());
        assert!(matches!(
            "FGz".parse::<Preset>(),
            Err(ParametersError::UnknownPreset { .. })
        ));
    }

    /// The largest log QP at 128-bit security for a uniform ternary secret,
    /// copied from the HE security guidelines (2024) and OpenFHE's extension,
    /// independently of `security.rs`.
    fn standard_bound(log_n: u32) -> Option<u32> {
        match log_n {
            10 => Some(26),
            11 => Some(53),
            12 => Some(106),
            13 => Some(214),
            14 => Some(430),
            15 => Some(868),
            16 => Some(1747),
            17 => Some(3523),
            _ => None,
        }
    }

    /// What the standard says of a hand-built spec: 128 bits when log QP is
    /// within the bound and the secret is at least as dense as a uniform
    /// ternary one (weight ≥ ⌈2N/3⌉), else nothing.
    fn standard_bits(p: &Parameters) -> u32 {
        let n = p.degree().get();
        let dense = 3 * p.hamming_weight() >= 2 * n;
        let within = standard_bound(p.degree().log2()).is_some_and(|b| p.log_qp() <= b);
        if dense && within { 128 } else { 0 }
    }

    /// A seed from the clock, printed with every failure.
    fn fresh_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }

    #[test]
    fn a_preset_claim_does_not_follow_its_spec_to_another_degree() {
        // FGb's exact description, moved to N = 2^11 by hand: log QP = 1555
        // against a bound of 53. Nothing the caller sets makes it 128-bit.
        let mut spec = Preset::FGb.spec();
        spec.log_n = 11;
        spec.log_slots = 10;
        assert!(matches!(
            Parameters::new(spec.clone(), SecurityCheck::Enforce),
            Err(Error::Parameters(ParametersError::Insecure {
                log_n: 11,
                bound: Some(53),
                ..
            }))
        ));
        let p = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
        assert_eq!(p.security().bits, 0);
        assert!(p.is_insecure());
    }

    #[test]
    fn a_preset_claim_holds_only_for_its_exact_structure() {
        use rand::{RngExt, SeedableRng};
        let seed = fresh_seed();
        println!("seed {seed}");
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        for case in 0..24 {
            let preset = [Preset::FTa, Preset::FTb, Preset::FGb][case % 3];
            let mut spec = preset.spec();
            let n = 1usize << spec.log_n;
            let what = match case / 3 % 4 {
                0 => {
                    let i = rng.random_range(0..spec.q_bits.len());
                    let old = spec.q_bits[i];
                    let new = loop {
                        let b = rng.random_range(30..=61);
                        if b != old {
                            break b;
                        }
                    };
                    spec.q_bits[i] = new;
                    "a Q prime's size"
                }
                1 => {
                    let old = spec.hamming_weight;
                    spec.hamming_weight = loop {
                        let h = rng.random_range(1..=n);
                        if h != old {
                            break h;
                        }
                    };
                    "the secret's weight"
                }
                2 => {
                    spec.p_bits.push(rng.random_range(30..=61));
                    "one more special prime"
                }
                _ => {
                    spec.log_n -= rng.random_range(1..=3);
                    spec.log_slots = spec.log_n - 1;
                    "the ring degree"
                }
            };
            let p = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
            let expected = standard_bits(&p);
            assert_eq!(
                p.security().bits,
                expected,
                "seed {seed}: {preset} with {what} changed"
            );
            let enforced = Parameters::new(spec, SecurityCheck::Enforce);
            if expected == 0 {
                assert!(
                    matches!(
                        enforced,
                        Err(Error::Parameters(
                            ParametersError::Insecure { .. } | ParametersError::SparseSecret { .. }
                        ))
                    ),
                    "seed {seed}: {preset} with {what} changed"
                );
                assert!(p.is_insecure());
            } else {
                assert!(
                    enforced.is_ok(),
                    "seed {seed}: {preset} with {what} changed"
                );
            }
        }
    }

    #[test]
    fn custom_parameters_follow_the_ternary_table() {
        use rand::{RngExt, SeedableRng};
        let seed = fresh_seed();
        println!("seed {seed}");
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        for _ in 0..16 {
            let log_n = rng.random_range(12..=14);
            let n = 1usize << log_n;
            let bound = standard_bound(log_n).unwrap();
            // A chain near the bound, on either side of it.
            let target = bound + rng.random_range(0..40) - 20;
            let mut q_bits = vec![25];
            let mut total = 25;
            while total + 25 <= target - 25 {
                let b = rng.random_range(25..=40.min(target - 25 - total));
                q_bits.push(b);
                total += b;
            }
            let hamming_weight = rng.random_range(1..=n);
            let spec = ParametersSpec {
                name: "custom".into(),
                log_n,
                log_slots: log_n - 1,
                dnum: q_bits.len(),
                enc_level: q_bits.len() - 1,
                user_primes: q_bits.len(),
                q_bits,
                p_bits: vec![25],
                post_bootstrap_level: None,
                hamming_weight,
                insecure_test: false,
                bootstrap_rotation_keys: None,
            };
            let p = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
            let expected = standard_bits(&p);
            assert_eq!(p.security().bits, expected, "seed {seed}: {spec:?}");
            let enforced = Parameters::new(spec.clone(), SecurityCheck::Enforce);
            match (expected, enforced) {
                (128, Ok(q)) => assert_eq!(q, p),
                (0, Err(Error::Parameters(ParametersError::Insecure { log_qp, .. }))) => {
                    assert!(log_qp > bound, "seed {seed}: {spec:?}");
                }
                (0, Err(Error::Parameters(ParametersError::SparseSecret { weight, min }))) => {
                    assert_eq!(weight, hamming_weight);
                    assert_eq!(min, (2 * n).div_ceil(3));
                    assert!(p.log_qp() <= bound);
                }
                (_, other) => panic!("seed {seed}: {spec:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn bad_descriptions_are_typed_errors() {
        let base = Preset::FTb.spec();
        type Mutation = Box<dyn Fn(&mut ParametersSpec)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|s| s.log_n = 3), "degree"),
            (Box::new(|s| s.log_slots = 15), "slots"),
            (Box::new(|s| s.q_bits.clear()), "chain"),
            (Box::new(|s| s.p_bits[0] = 63), "bits"),
            (Box::new(|s| s.dnum = 0), "dnum"),
            (Box::new(|s| s.enc_level = 99), "level"),
            (Box::new(|s| s.hamming_weight = 0), "weight"),
        ];
        for (mutate, what) in cases {
            let mut spec = base.clone();
            mutate(&mut spec);
            assert!(
                matches!(
                    Parameters::new(spec, SecurityCheck::AllowInsecure),
                    Err(Error::Parameters(_))
                ),
                "{what}"
            );
        }
    }
}
