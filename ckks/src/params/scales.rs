//! The default scale of each level (DESIGN.md, "Levels and scales").

use super::ParametersSpec;
use crate::zq::Modulus;

/// Each level's default scale: `2^bits` of the encryption level's prime
/// there, `Δ_{l−1} = Δ_l² / q_l` below it (so `mult` + `rescale` of
/// default-scale ciphertexts lands on the next default) and
/// `Δ_{l+1} = √(Δ_l · q_{l+1})` above it.
pub(super) fn default_scales(spec: &ParametersSpec, q: &[Modulus]) -> Vec<f64> {
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
