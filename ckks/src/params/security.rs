//! The security check against the lattice-estimator tables of the
//! Homomorphic Encryption Standard.
//!
//! The bound is the largest `log2(QP)` giving 128-bit classical security
//! for a **uniform ternary** secret and error σ ≈ 3.2, per ring degree. We use
//! the 2024 *Security Guidelines for Implementing Homomorphic Encryption*
//! (ePrint 2024/463), which tightened the 2018 standard's values (881 → 868
//! at N = 2^15, 438 → 430 at 2^14); N = 2^16 and 2^17 come from OpenFHE's
//! extension of the table (`stdlatticeparms.cpp`), 1747 and 3523.
//!
//! The table assumes a uniform ternary secret, whose Hamming weight
//! concentrates around `2N/3`; hemem's secrets have an exact weight `h`, so
//! the table covers a custom parameter set only when `h ≥ ⌈2N/3⌉`.
//!
//! The HEaaN presets use **sparse** secrets (Hamming weight 64 to 192), which
//! the uniform-ternary table does not cover: sparse secrets admit hybrid
//! attacks that cost some security. hemem reports the presets' claimed level
//! (128 bits, as CryptoLab documents for HEaaN's parameter presets) only for
//! a description whose structure it *matches* to a preset
//! ([`Preset::matching`]): nobody can assert it, neither a caller nor a file.
//! Everything else is judged by the table alone.

use super::{ParametersSpec, Preset};

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

/// `(log N, largest log QP at 128-bit classical security)`.
const TABLE_128: [(u32, u32); 8] = [
    (10, 26),
    (11, 53),
    (12, 106),
    (13, 214),
    (14, 430),
    (15, 868),
    (16, 1747),
    (17, 3523),
];

/// The largest `log2(QP)` at 128-bit security for ring degree `2^log_n`, if
/// the table covers that degree.
pub fn max_log_qp_128(log_n: u32) -> Option<u32> {
    TABLE_128.iter().find(|(l, _)| *l == log_n).map(|(_, b)| *b)
}

/// The least Hamming weight of a secret the table covers at degree
/// `2^log_n`: `⌈2N/3⌉`, the mean weight of a uniform ternary secret.
pub fn min_table_weight(log_n: u32) -> usize {
    (2usize << log_n).div_ceil(3)
}

/// What hemem decided about the security of a parameter set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityEstimate {
    /// The security level hemem reports: 128 for a description that matches
    /// a HEaaN preset's structure (the preset's claim), 128 for custom
    /// parameters within the table's bound with a dense enough secret, and
    /// 0 otherwise.
    pub bits: u32,
    /// Where `bits` comes from.
    pub source: &'static str,
    /// `log2(QP)` of the parameters.
    pub log_qp: u32,
    /// The table's bound for this degree (`None` if the table has no row).
    pub table_bound: Option<u32>,
    /// Whether `log_qp` is within the table's 128-bit bound.
    pub within_table: bool,
    /// Whether the secret is at least as dense as the table assumes
    /// (`h ≥ ⌈2N/3⌉`, [`min_table_weight`]).
    pub dense_secret: bool,
    /// The HEaaN preset whose exact structure the parameters have, if any:
    /// `bits` is then that preset's claim.
    pub preset: Option<Preset>,
}

const PRESET_SOURCE: &str = "HEaaN preset claim, for this preset's exact structure (sparse secret; not covered by the uniform-ternary table)";
const TABLE_SOURCE: &str = "HE security guidelines 2024 table, uniform ternary secret";
const SPARSE_SOURCE: &str =
    "none: the HE security guidelines table does not cover a secret this sparse";

/// Judges a description whose primes multiply to `log_qp` bits: a preset's
/// claim if the description has that preset's exact structure, the table's
/// verdict otherwise. Nothing in `spec` states a level.
pub(crate) fn assess(spec: &ParametersSpec, log_qp: u32) -> SecurityEstimate {
    let table_bound = max_log_qp_128(spec.log_n);
    let within_table = table_bound.is_some_and(|b| log_qp <= b);
    let dense_secret = spec.hamming_weight >= min_table_weight(spec.log_n);
    let preset = Preset::matching(spec).filter(|_| within_table);
    let (bits, source) = match preset {
        Some(_) => (128, PRESET_SOURCE),
        None if !dense_secret => (0, SPARSE_SOURCE),
        None if within_table => (128, TABLE_SOURCE),
        None => (0, TABLE_SOURCE),
    };
    SecurityEstimate {
        bits,
        source,
        log_qp,
        table_bound,
        within_table,
        dense_secret,
        preset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_bounds() {
        assert_eq!(max_log_qp_128(15), Some(868));
        assert_eq!(max_log_qp_128(16), Some(1747));
        assert_eq!(max_log_qp_128(17), Some(3523));
        assert_eq!(max_log_qp_128(9), None);
        assert_eq!(min_table_weight(11), 1366);
        assert_eq!(min_table_weight(16), 43_691);
        for preset in Preset::HEAAN {
            let spec = preset.spec();
            let e = assess(&spec, max_log_qp_128(spec.log_n).unwrap());
            assert_eq!((e.bits, e.preset), (128, Some(preset)));
            assert!(!e.dense_secret, "{preset}: HEaaN secrets are sparse");
            // Above the bound, even a preset's structure claims nothing.
            let e = assess(&spec, max_log_qp_128(spec.log_n).unwrap() + 1);
            assert_eq!((e.bits, e.preset), (0, None));
        }
        let mut dense = Preset::FGb.spec();
        dense.hamming_weight = min_table_weight(16);
        let e = assess(&dense, 1555);
        assert_eq!((e.bits, e.preset, e.source), (128, None, TABLE_SOURCE));
        assert_eq!(assess(&dense, 1800).bits, 0);
        dense.hamming_weight -= 1;
        assert_eq!(assess(&dense, 1555).bits, 0);
    }
}
