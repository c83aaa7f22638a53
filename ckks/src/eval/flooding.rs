//! [`NoiseFlooding`]: how much fresh noise a shared decryption needs.

use crate::params::Scale;

/// What noise flooding must protect against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FloodingGoal {
    /// Key recovery from decrypted results (the Li–Micciancio attack). Key
    /// recovery is a *search* problem, for which a Rényi divergence of order
    /// 2 bounded by `e` loses at most a square and a factor `e` in the
    /// attacker's success probability (Bai, Langlois, Lepoint, Stehlé,
    /// Steinfeld, ePrint 2015/483): the flooded results leave key recovery as
    /// hard as the parameters' RLWE problem, i.e. 128-bit for the presets.
    /// Width `σ = √q · E` with `E` the result's error bound in coefficient
    /// units and `q` the number of decryptions an adversary sees; costs about
    /// `log2 √N + 2` bits of precision.
    KeyRecovery,
    /// IND-CPA^D security with `statistical_bits` of statistical security
    /// (Li, Micciancio, Schultz, Sorrell, CRYPTO 2022, ePrint 2022/816):
    /// `σ = √(24·N·q) · 2^(s/2) · E`. Costs about `s/2 + log2 √(24N)` bits of
    /// precision — at `s = 128`, more than any preset's scale holds, so
    /// practical choices are `s = 30…40` (OpenFHE's default is 30).
    Indistinguishability {
        /// Statistical security parameter `s`.
        statistical_bits: u32,
    },
}

/// Noise flooding for decrypted results that leave the secret-key holder.
///
/// The width is computed from the result's known precision: a result whose
/// slot error is below `2^−precision_bits` has coefficient errors below
/// `E = Δ · 2^−precision_bits` (the inverse canonical embedding does not
/// increase the maximum), and `‖e‖₂ ≤ E` in coefficient units, which is what
/// the Rényi divergence of the flood depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoiseFlooding {
    /// The protection wanted.
    pub goal: FloodingGoal,
    /// How many decryptions of related ciphertexts an adversary may see.
    pub queries: u64,
    /// Bits of precision the result is known to have (its slot error is
    /// below `2^−precision_bits`); measure it for your circuit.
    pub precision_bits: f64,
    /// An explicit width in coefficient units, overriding the computation.
    pub sigma: Option<f64>,
}

impl Default for NoiseFlooding {
    /// Key-recovery protection for one decryption of a result known to 20
    /// bits (typical after a bootstrap).
    fn default() -> Self {
        Self {
            goal: FloodingGoal::KeyRecovery,
            queries: 1,
            precision_bits: 20.0,
            sigma: None,
        }
    }
}

impl NoiseFlooding {
    /// The flooding width (standard deviation, coefficient units) for a
    /// result at `scale` in a ring of degree `n`.
    pub fn sigma(&self, n: usize, scale: Scale) -> f64 {
        if let Some(sigma) = self.sigma {
            return sigma;
        }
        let bound = scale.0 * (-self.precision_bits).exp2();
        let queries = self.queries.max(1) as f64;
        match self.goal {
            FloodingGoal::KeyRecovery => queries.sqrt() * bound,
            FloodingGoal::Indistinguishability { statistical_bits } => {
                (24.0 * n as f64 * queries).sqrt()
                    * (f64::from(statistical_bits) / 2.0).exp2()
                    * bound
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_follow_the_formulas() {
        let scale = Scale(2f64.powi(42));
        let kr = NoiseFlooding::default();
        assert_eq!(kr.sigma(1 << 16, scale), 2f64.powi(22));
        let four = NoiseFlooding { queries: 4, ..kr };
        assert_eq!(four.sigma(1 << 16, scale), 2f64.powi(23));
        let ind = NoiseFlooding {
            goal: FloodingGoal::Indistinguishability {
                statistical_bits: 30,
            },
            ..kr
        };
        let expected = (24.0f64 * 65536.0).sqrt() * 2f64.powi(15) * 2f64.powi(22);
        assert!((ind.sigma(1 << 16, scale) / expected - 1.0).abs() < 1e-12);
        let explicit = NoiseFlooding {
            sigma: Some(3.0),
            ..kr
        };
        assert_eq!(explicit.sigma(1 << 16, scale), 3.0);
    }
}
