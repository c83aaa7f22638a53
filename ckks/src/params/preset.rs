//! The HEaaN parameter presets, by name, with exactly HEaaN's structure
//! (DESIGN.md, "Parameter presets"), and small insecure test variants of the
//! same shape.

use std::fmt;
use std::str::FromStr;

use super::ParametersSpec;
use crate::ParametersError;

/// A named parameter set.
///
/// The seven HEaaN presets claim 128-bit security (with sparse secrets), a
/// claim hemem reports only for a description that has a preset's exact
/// structure ([`Preset::matching`]). The
/// `Test*` variants keep a preset's prime sizes, gadget rank and level layout
/// at a small ring degree so that CI runs in seconds; they are insecure and
/// refused unless the caller opts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Preset {
    /// N = 2^17, h = 64, depth 29, bootstraps to level 16.
    FVa,
    /// N = 2^17, h = 128, encryption and post-bootstrap level 14.
    FVb,
    /// N = 2^17, h = 128, encryption and post-bootstrap level 13.
    FVc,
    /// N = 2^16, h = 192, 48-bit user scale, level 9.
    FGa,
    /// N = 2^16, h = 192, 42-bit user scale, level 12.
    FGb,
    /// N = 2^15, h = 192, 28-bit user scale, level 8.
    FTa,
    /// N = 2^15, h = 192, 36-bit user scale, level 4.
    FTb,
    /// FVa's shape at N = 2^13 (insecure, for tests).
    TestFVa,
    /// FVb's shape at N = 2^13 (insecure, for tests).
    TestFVb,
    /// FVc's shape at N = 2^13 (insecure, for tests).
    TestFVc,
    /// FGa's shape at N = 2^12 (insecure, for tests).
    TestFGa,
    /// FGb's shape at N = 2^12 (insecure, for tests).
    TestFGb,
    /// FTa's shape at N = 2^11 (insecure, for tests).
    TestFTa,
    /// FTb's shape at N = 2^11 (insecure, for tests).
    TestFTb,
}

/// One row of the preset table: prime sizes as `(bits, count)` runs.
struct Shape {
    q_user: &'static [(u32, usize)],
    q_bootstrap: &'static [(u32, usize)],
    p: &'static [(u32, usize)],
    dnum: usize,
    enc_level: usize,
    post_bootstrap_level: usize,
    hamming_weight: usize,
    bootstrap_rotations: usize,
}

const FVA: Shape = Shape {
    q_user: &[(61, 1), (51, 29)],
    q_bootstrap: &[],
    p: &[(53, 10)],
    dnum: 3,
    enc_level: 29,
    post_bootstrap_level: 16,
    hamming_weight: 64,
    bootstrap_rotations: 42,
};
const FVB: Shape = Shape {
    q_user: &[(61, 1), (55, 1), (51, 13)],
    q_bootstrap: &[(61, 12), (57, 3)],
    p: &[(61, 10)],
    dnum: 3,
    enc_level: 14,
    post_bootstrap_level: 14,
    hamming_weight: 128,
    bootstrap_rotations: 42,
};
const FVC: Shape = Shape {
    q_user: &[(61, 1), (58, 1), (54, 12)],
    q_bootstrap: &[(61, 13), (57, 3)],
    p: &[(61, 10)],
    dnum: 3,
    enc_level: 13,
    post_bootstrap_level: 13,
    hamming_weight: 128,
    bootstrap_rotations: 42,
};
const FGA: Shape = Shape {
    q_user: &[(60, 1), (45, 3), (48, 6)],
    q_bootstrap: &[(60, 11), (56, 3)],
    p: &[(61, 4)],
    dnum: 6,
    enc_level: 9,
    post_bootstrap_level: 9,
    hamming_weight: 192,
    bootstrap_rotations: 38,
};
const FGB: Shape = Shape {
    q_user: &[(58, 1), (42, 12)],
    q_bootstrap: &[(58, 12)],
    p: &[(59, 3), (60, 2)],
    dnum: 5,
    enc_level: 12,
    post_bootstrap_level: 12,
    hamming_weight: 192,
    bootstrap_rotations: 38,
};
const FTA: Shape = Shape {
    q_user: &[(38, 1), (32, 1), (28, 7)],
    q_bootstrap: &[(38, 8), (41, 3)],
    p: &[(42, 2)],
    dnum: 10,
    enc_level: 8,
    post_bootstrap_level: 8,
    hamming_weight: 192,
    bootstrap_rotations: 34,
};
const FTB: Shape = Shape {
    q_user: &[(49, 1), (33, 3), (36, 1)],
    q_bootstrap: &[(49, 8), (47, 3)],
    p: &[(54, 1)],
    dnum: 16,
    enc_level: 4,
    post_bootstrap_level: 4,
    hamming_weight: 192,
    bootstrap_rotations: 34,
};

impl Preset {
    /// The seven HEaaN presets.
    pub const HEAAN: [Self; 7] = [
        Self::FGa,
        Self::FGb,
        Self::FVa,
        Self::FVb,
        Self::FVc,
        Self::FTa,
        Self::FTb,
    ];

    /// The insecure test variants, in the same order as [`Preset::HEAAN`].
    pub const TEST: [Self; 7] = [
        Self::TestFGa,
        Self::TestFGb,
        Self::TestFVa,
        Self::TestFVb,
        Self::TestFVc,
        Self::TestFTa,
        Self::TestFTb,
    ];

    /// The preset's name (`FGb`, `test-FGb`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Self::FVa => "FVa",
            Self::FVb => "FVb",
            Self::FVc => "FVc",
            Self::FGa => "FGa",
            Self::FGb => "FGb",
            Self::FTa => "FTa",
            Self::FTb => "FTb",
            Self::TestFVa => "test-FVa",
            Self::TestFVb => "test-FVb",
            Self::TestFVc => "test-FVc",
            Self::TestFGa => "test-FGa",
            Self::TestFGb => "test-FGb",
            Self::TestFTa => "test-FTa",
            Self::TestFTb => "test-FTb",
        }
    }

    /// Whether this is an insecure test variant.
    pub const fn is_test(self) -> bool {
        !matches!(
            self,
            Self::FVa | Self::FVb | Self::FVc | Self::FGa | Self::FGb | Self::FTa | Self::FTb
        )
    }

    /// The HEaaN preset whose shape this one has (itself for HEaaN presets).
    pub const fn shape_of(self) -> Self {
        match self {
            Self::TestFVa => Self::FVa,
            Self::TestFVb => Self::FVb,
            Self::TestFVc => Self::FVc,
            Self::TestFGa => Self::FGa,
            Self::TestFGb => Self::FGb,
            Self::TestFTa => Self::FTa,
            Self::TestFTb => Self::FTb,
            other => other,
        }
    }

    fn shape(self) -> &'static Shape {
        match self.shape_of() {
            Self::FVa => &FVA,
            Self::FVb => &FVB,
            Self::FVc => &FVC,
            Self::FGa => &FGA,
            Self::FGb => &FGB,
            Self::FTa => &FTA,
            _ => &FTB,
        }
    }

    /// `log2 N` of this preset (test variants: 12 for FG, 13 for FV, 11 for FT).
    pub const fn log_n(self) -> u32 {
        match self {
            Self::TestFVa | Self::TestFVb | Self::TestFVc => 13,
            Self::TestFGa | Self::TestFGb => 12,
            Self::TestFTa | Self::TestFTb => 11,
            Self::FVa | Self::FVb | Self::FVc => 17,
            Self::FGa | Self::FGb => 16,
            Self::FTa | Self::FTb => 15,
        }
    }

    /// The HEaaN preset whose structure `spec` has exactly, if any: the same
    /// ring degree, the same prime sizes in the same order (hence the same
    /// primes, which are generated deterministically from them) and the same
    /// secret weight — everything that defines the lattice problem. The name
    /// and the other fields (levels, slots, gadget rank) do not count. A spec
    /// marked as a test is never matched.
    pub fn matching(spec: &ParametersSpec) -> Option<Self> {
        if spec.insecure_test {
            return None;
        }
        Self::HEAAN.into_iter().find(|preset| {
            let own = preset.spec();
            own.log_n == spec.log_n
                && own.hamming_weight == spec.hamming_weight
                && own.q_bits == spec.q_bits
                && own.p_bits == spec.p_bits
        })
    }

    /// The full description of this preset.
    pub fn spec(self) -> ParametersSpec {
        let shape = self.shape();
        let expand = |runs: &[(u32, usize)]| -> Vec<u32> {
            runs.iter()
                .flat_map(|&(bits, count)| std::iter::repeat_n(bits, count))
                .collect()
        };
        let q_user = expand(shape.q_user);
        let user_primes = q_user.len();
        let mut q_bits = q_user;
        q_bits.extend(expand(shape.q_bootstrap));
        let log_n = self.log_n();
        ParametersSpec {
            name: self.name().to_owned(),
            log_n,
            log_slots: log_n - 1,
            q_bits,
            p_bits: expand(shape.p),
            dnum: shape.dnum,
            enc_level: shape.enc_level,
            post_bootstrap_level: Some(shape.post_bootstrap_level),
            user_primes,
            hamming_weight: shape.hamming_weight,
            insecure_test: self.is_test(),
            bootstrap_rotation_keys: (!self.is_test()).then_some(shape.bootstrap_rotations),
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = ParametersError;

    /// Parses a preset name, ignoring ASCII case (`FGb`, `fgb`, `test-FGb`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::HEAAN
            .into_iter()
            .chain(Self::TEST)
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParametersError::UnknownPreset { name: s.to_owned() })
    }
}
