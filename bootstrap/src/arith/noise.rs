//! [`NoiseModel`]: the noise [`PlainSimulator`](super::PlainSimulator)
//! injects, per operation, from the parameters (BOOTSTRAP-NOTES §3.3).

use hemem_ckks::params::Parameters;

/// Noise the simulator injects, as standard deviations per polynomial
/// coefficient (before division by the scale).
///
/// A coefficient-domain error with i.i.d. entries of deviation `σ` becomes,
/// through the (scaled unitary) canonical embedding, i.i.d. complex Gaussian
/// slot errors whose real and imaginary parts have deviation `σ·√n` for `n`
/// slots; the simulator adds exactly that, divided by the scale.
#[derive(Clone, Debug, PartialEq)]
pub struct NoiseModel {
    /// Rounding error of a rescale: `√((h+1)/12)` for a secret of Hamming
    /// weight `h` (the rounding of `c0` and `c1·s`).
    pub rescale: f64,
    /// Error of one key switch (rotation, conjugation, relinearisation) at
    /// each level (index = level): ModDown rounding `√((h+1)/12)` plus the
    /// gadget term `Σ_j N·σ²·Q_j²/(12·P²)` over the digits present.
    pub key_switch: Vec<f64>,
    /// Error of a fresh encryption (public key in `QP`, then ModDown):
    /// `√((h+1)/12)`.
    pub fresh: f64,
}

impl NoiseModel {
    /// No noise at all: the simulator then models only the roundings of
    /// constants and encoded plaintexts.
    pub fn none() -> Self {
        Self {
            rescale: 0.0,
            key_switch: Vec::new(),
            fresh: 0.0,
        }
    }

    /// The noise of hemem's operations for `params` (BOOTSTRAP-NOTES §3.3):
    /// rescale and ModDown rounding `√((h+1)/12)`; key switching adds the
    /// hybrid gadget term, digit by digit (`α` primes per digit).
    pub fn for_parameters(params: &Parameters) -> Self {
        let h = params.hamming_weight() as f64;
        let rounding = (h + 1.0) / 12.0;
        let n = params.degree().get() as f64;
        let sigma = hemem_ckks::params::ERROR_STD_DEV;
        let log_p: f64 = params
            .p_moduli()
            .iter()
            .map(|m| (m.value() as f64).log2())
            .sum();
        let alpha = params.alpha().max(1);
        let log_q: Vec<f64> = params
            .q_moduli()
            .iter()
            .map(|m| (m.value() as f64).log2())
            .collect();
        let key_switch = (0..log_q.len())
            .map(|level| {
                let present = log_q.get(..=level).unwrap_or(&[]);
                let gadget: f64 = present
                    .chunks(alpha)
                    .map(|digit| {
                        let log_qj: f64 = digit.iter().sum();
                        n * sigma * sigma / 12.0 * 2f64.powf(2.0 * (log_qj - log_p))
                    })
                    .sum();
                (rounding + gadget).sqrt()
            })
            .collect();
        Self {
            rescale: rounding.sqrt(),
            key_switch,
            fresh: rounding.sqrt(),
        }
    }

    /// The key-switch deviation at `level` (0 beyond the table).
    pub fn key_switch_at(&self, level: usize) -> f64 {
        self.key_switch.get(level).copied().unwrap_or(0.0)
    }

    /// Whether this model injects nothing.
    pub fn is_none(&self) -> bool {
        self.rescale == 0.0 && self.fresh == 0.0 && self.key_switch.iter().all(|&s| s == 0.0)
    }
}
