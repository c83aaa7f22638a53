//! A description of a parameter set ([`ParametersSpec`]) and its checks.

use crate::{ParametersError, Result};

/// A description of a parameter set, from a [`Preset`](super::Preset) or written by hand.
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
    /// hemem decides it, see [`security`](super::security).)
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

/// The ring degrees hemem supports, `log2 N` (`ParametersSpec::log_n`).
pub const LOG_N_RANGE: std::ops::RangeInclusive<u32> = 4..=17;

/// The most slots any parameters have: `N/2` at the largest ring.
pub const MAX_SLOTS: usize = 1 << (*LOG_N_RANGE.end() - 1);

/// The longest name and the most primes of each kind a parameter file
/// holds (`Parameters::load` refuses more).
pub(crate) const MAX_FILE_FIELD: usize = 256;

/// The largest rotation count a parameter file holds: a 32-bit field
/// whose all-ones value means "unknown".
const MAX_ROTATION_COUNT: usize = u32::MAX as usize - 1;

/// Checks a description's fields against each other and the supported
/// ranges, before any prime is generated.
pub(super) fn validate(spec: &ParametersSpec) -> Result<()> {
    if !LOG_N_RANGE.contains(&spec.log_n) {
        return Err(ParametersError::InvalidDegree { log_n: spec.log_n }.into());
    }
    // What a parameter file holds (serialize/objects/params.rs): larger
    // fields would save and then fail to load.
    for (field, max, found) in [
        ("name (bytes)", MAX_FILE_FIELD, spec.name.len()),
        ("q_bits (primes)", MAX_FILE_FIELD, spec.q_bits.len()),
        ("p_bits (primes)", MAX_FILE_FIELD, spec.p_bits.len()),
        (
            "bootstrap_rotation_keys",
            MAX_ROTATION_COUNT,
            spec.bootstrap_rotation_keys.unwrap_or(0),
        ),
    ] {
        if found > max {
            return Err(ParametersError::FieldTooLarge { field, max, found }.into());
        }
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
    // Hybrid key switching (Han–Ki, CT-RSA 2020): the digits are runs of
    // ⌈(L+1)/dnum⌉ consecutive Q primes, and ModDown by P must absorb the
    // largest digit times the key's error, so P must be at least that
    // digit (every HEaaN preset's is, by 4 to 20 bits).
    let alpha = primes.div_ceil(spec.dnum);
    let p_bits: u32 = spec.p_bits.iter().sum();
    let digit_bits = spec
        .q_bits
        .chunks(alpha)
        .map(|digit| digit.iter().sum::<u32>())
        .max()
        .unwrap_or(0);
    if p_bits < digit_bits {
        return Err(ParametersError::SpecialModulusTooSmall { p_bits, digit_bits }.into());
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
