//! Helpers shared by tests (behind the `test-utils` feature): seeded RNGs and
//! proptest strategies.

pub mod fuzz;

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// A ChaCha20 RNG from a 64-bit seed (printed by tests on failure).
pub fn seeded_rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// A 32-byte seed from a 64-bit one, for [`crate::sampling::Sampler::from_seed`].
pub fn seed32(seed: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(
            &(seed
                .wrapping_add(i as u64)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .to_le_bytes(),
        );
    }
    out
}

/// `count` complex values uniform in the unit disk.
pub fn unit_disk(rng: &mut ChaCha20Rng, count: usize) -> Vec<num_complex::Complex64> {
    use rand_core::Rng;
    let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (0..count)
        .map(|_| {
            let r = uniform().sqrt();
            let t = 2.0 * std::f64::consts::PI * uniform();
            num_complex::Complex64::from_polar(r, t)
        })
        .collect()
}

/// `count` reals uniform in `[−1, 1]`.
pub fn unit_interval(rng: &mut ChaCha20Rng, count: usize) -> Vec<f64> {
    use rand_core::Rng;
    (0..count)
        .map(|_| 2.0 * ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) - 1.0)
        .collect()
}

/// Residues uniform below each of `moduli` (global indices into `params`'
/// table), `N` words a limb, limb after limb: random limbs for tests of the
/// backends.
///
/// # Errors
/// [`crate::Error::LengthMismatch`] for an index past the table.
pub fn random_residues(
    params: &crate::params::Parameters,
    moduli: &[usize],
    rng: &mut ChaCha20Rng,
) -> crate::Result<Vec<u64>> {
    use rand_core::Rng;
    let n = params.degree().get();
    let table = params.all_moduli();
    let mut words = Vec::with_capacity(moduli.len() * n);
    for &m in moduli {
        let q = table
            .get(m)
            .ok_or(crate::Error::LengthMismatch {
                expected: table.len(),
                actual: m.saturating_add(1),
            })?
            .value();
        words.extend((0..n).map(|_| rng.next_u64() % q));
    }
    Ok(words)
}

/// The largest absolute difference between two complex vectors.
pub fn max_abs_error(a: &[num_complex::Complex64], b: &[num_complex::Complex64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}
