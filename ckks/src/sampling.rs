//! Randomness: a ChaCha20 stream seeded from the operating system (or from a
//! given seed, for reproducible tests), and the distributions CKKS draws from.
//!
//! Everything random is drawn on the host from one stream and uploaded, so
//! the CPU and GPU backends see the same integers (DESIGN.md, "The seam"),
//! except switching keys' public uniform halves: [`SeededUniform`] expands
//! them from a seed by a counter-based generator that both backends run.

mod seeded;

pub use seeded::{SeededUniform, WORDS_PER_BLOCK, stream_id};

use rand::rngs::SysRng;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};
use zeroize::Zeroizing;

use crate::{Error, Result};

/// A cryptographically secure sampler.
#[derive(Debug)]
pub struct Sampler {
    rng: ChaCha20Rng,
}

impl Sampler {
    /// A sampler seeded from the operating system's entropy source.
    ///
    /// # Errors
    /// [`Error::Entropy`] if the OS source fails.
    pub fn from_os() -> Result<Self> {
        let rng = ChaCha20Rng::try_from_rng(&mut SysRng).map_err(|_| Error::Entropy)?;
        Ok(Self { rng })
    }

    /// A sampler with a fixed seed: reproducible, for tests and for
    /// regenerating a key's uniform half from its seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            rng: ChaCha20Rng::from_seed(seed),
        }
    }

    /// A sampler for sub-stream `stream` of `seed`: independent streams of
    /// one seed, so that each limb of a key's uniform half can be regenerated
    /// on its own.
    pub fn from_seed_stream(seed: [u8; 32], stream: u64) -> Self {
        let mut rng = ChaCha20Rng::from_seed(seed);
        rng.set_stream(stream);
        Self { rng }
    }

    /// A fresh 32-byte seed from this stream.
    pub fn seed(&mut self) -> Zeroizing<[u8; 32]> {
        let mut seed = Zeroizing::new([0u8; 32]);
        self.rng.fill_bytes(seed.as_mut());
        seed
    }

    /// A uniform 64-bit word.
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// A uniform residue modulo `q` (rejection sampling on the bit length).
    pub fn uniform_mod(&mut self, q: u64) -> u64 {
        let bits = 64 - q.leading_zeros();
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        loop {
            let x = self.rng.next_u64() & mask;
            if x < q {
                return x;
            }
        }
    }

    /// Fills `out` with uniform residues modulo `q`.
    pub fn fill_uniform(&mut self, q: u64, out: &mut [u64]) {
        for x in out {
            *x = self.uniform_mod(q);
        }
    }

    /// A uniform `f64` in `[0, 1)` with 53 random bits.
    pub fn uniform_f64(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform index in `0..bound` (no modulo bias).
    pub fn uniform_below(&mut self, bound: usize) -> usize {
        let bound = bound as u64;
        if bound <= 1 {
            return 0;
        }
        let zone = u64::MAX - (u64::MAX - bound + 1) % bound;
        loop {
            let x = self.rng.next_u64();
            if x <= zone {
                return (x % bound) as usize;
            }
        }
    }

    /// A ternary vector of length `n` with exactly `h` nonzero entries, each
    /// `±1` with equal probability, at uniformly random positions (partial
    /// Fisher–Yates).
    pub fn ternary_with_weight(&mut self, n: usize, h: usize) -> Zeroizing<Vec<i64>> {
        let mut positions: Zeroizing<Vec<usize>> = Zeroizing::new((0..n).collect());
        let h = h.min(n);
        for i in 0..h {
            let j = i + self.uniform_below(n - i);
            positions.swap(i, j);
        }
        let mut s = Zeroizing::new(vec![0i64; n]);
        for &p in positions.iter().take(h) {
            if let Some(c) = s.get_mut(p) {
                *c = if self.rng.next_u32() & 1 == 0 { 1 } else { -1 };
            }
        }
        s
    }

    /// `ZO(1/2)`: each entry 0 with probability 1/2, ±1 with 1/4 each — the
    /// distribution of the ephemeral `v` in public-key encryption.
    pub fn zero_one(&mut self, n: usize) -> Zeroizing<Vec<i64>> {
        let mut out = Zeroizing::new(Vec::with_capacity(n));
        let mut bits = 0u64;
        for i in 0..n {
            if i % 32 == 0 {
                bits = self.rng.next_u64();
            }
            let two = bits & 3;
            bits >>= 2;
            out.push(match two {
                0 => 1,
                1 => -1,
                _ => 0,
            });
        }
        out
    }

    /// Rounded Gaussian of width `sigma`, truncated at 6σ (resampled beyond).
    pub fn gaussian(&mut self, n: usize, sigma: f64) -> Zeroizing<Vec<i64>> {
        let bound = 6.0 * sigma;
        let mut out = Zeroizing::new(Vec::with_capacity(n));
        while out.len() < n {
            // Box–Muller: two independent normals per pair of uniforms.
            let u1 = 1.0 - self.uniform_f64();
            let u2 = self.uniform_f64();
            let r = (-2.0 * u1.ln()).sqrt() * sigma;
            let theta = 2.0 * std::f64::consts::PI * u2;
            for z in [r * theta.cos(), r * theta.sin()] {
                if out.len() < n && z.abs() <= bound {
                    out.push(z.round() as i64);
                }
            }
        }
        out
    }

    /// A continuous Gaussian sample of width `sigma`, rounded to an integer
    /// in `f64` (for noise flooding, whose width exceeds `i64`'s precision).
    pub fn gaussian_f64(&mut self, sigma: f64) -> f64 {
        let u1 = 1.0 - self.uniform_f64();
        let u2 = self.uniform_f64();
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos() * sigma).round()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_have_the_right_shape() {
        let mut s = Sampler::from_seed([9; 32]);
        let t = s.ternary_with_weight(4096, 192);
        assert_eq!(t.iter().filter(|&&x| x != 0).count(), 192);
        assert!(t.iter().all(|&x| (-1..=1).contains(&x)));
        let plus = t.iter().filter(|&&x| x == 1).count();
        assert!((60..=132).contains(&plus), "{plus}");

        let g = s.gaussian(1 << 16, 3.2);
        let mean = g.iter().sum::<i64>() as f64 / g.len() as f64;
        let var = g.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / g.len() as f64;
        assert!(mean.abs() < 0.05, "{mean}");
        // Rounding adds 1/12 to the variance.
        assert!((var - (3.2f64 * 3.2 + 1.0 / 12.0)).abs() < 0.3, "{var}");
        assert!(g.iter().all(|&x| x.abs() <= 20));

        let z = s.zero_one(1 << 14);
        let zeros = z.iter().filter(|&&x| x == 0).count() as f64 / z.len() as f64;
        assert!((zeros - 0.5).abs() < 0.02);

        let q = (1u64 << 50) - 27;
        let mut u = vec![0u64; 1000];
        s.fill_uniform(q, &mut u);
        assert!(u.iter().all(|&x| x < q));
        assert!(u.iter().any(|&x| x > q / 2) && u.iter().any(|&x| x < q / 2));
    }

    #[test]
    fn seeds_reproduce_and_os_seeding_works() {
        let a = Sampler::from_seed([1; 32]).next_u64();
        let b = Sampler::from_seed([1; 32]).next_u64();
        assert_eq!(a, b);
        let mut os = Sampler::from_os().unwrap();
        assert_ne!(os.next_u64(), os.next_u64());
    }
}
