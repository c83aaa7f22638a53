//! Automorphisms `X ↦ X^g` of `Z_q[X]/(X^N + 1)` for odd `g`: rotations
//! (`g = 5^k mod 2N`) and conjugation (`g = 2N − 1`). In the NTT domain they
//! are permutations of the evaluations.

/// An odd Galois element `g` modulo `2N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GaloisElement(pub u64);

impl GaloisElement {
    /// The element for a left rotation of the slots by `steps` (negative:
    /// right), `5^steps mod 2N`.
    pub fn rotation(steps: i64, n: usize) -> Self {
        let two_n = 2 * n as u64;
        // 5 has order N/2 modulo 2N.
        let order = (n / 2) as i64;
        let e = steps.rem_euclid(order.max(1)) as u64;
        let mut g = 1u64;
        let mut base = 5 % two_n;
        let mut e = e;
        while e > 0 {
            if e & 1 == 1 {
                g = g * base % two_n;
            }
            base = base * base % two_n;
            e >>= 1;
        }
        Self(g)
    }

    /// The element for complex conjugation of the slots, `2N − 1`.
    pub fn conjugation(n: usize) -> Self {
        Self(2 * n as u64 - 1)
    }

    /// This element modulo `2N` for the ring of degree `n`, checked to be
    /// an automorphism (odd): what every operation that applies one takes,
    /// so that an element given as `g + 2N` is the same automorphism and an
    /// even one is refused rather than applied as a non-invertible map.
    ///
    /// # Errors
    /// [`KeyError::InvalidGaloisElement`](crate::KeyError::InvalidGaloisElement)
    /// for an even element.
    pub fn reduced(self, n: usize) -> crate::Result<Self> {
        let two_n = 2 * n as u64;
        let g = Self(self.0 % two_n.max(1));
        if g.0.is_multiple_of(2) {
            return Err(crate::KeyError::InvalidGaloisElement {
                element: g.0,
                two_n,
            }
            .into());
        }
        Ok(g)
    }
}

/// Reverses the low `bits` bits of `x`.
#[inline]
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// The permutation of NTT-domain evaluations (bit-reversed order) that applies
/// `X ↦ X^g`: `out[j] = in[perm[j]]`, for an odd `g` (as
/// [`GaloisElement::reduced`] checks; the backends call it first).
///
/// Evaluation `j` sits at `ψ^(2·bitrev(j)+1)`; the automorphism's value there is
/// the input's value at `ψ^(g·(2·bitrev(j)+1))`.
pub fn automorphism_permutation(n: usize, g: GaloisElement) -> Vec<usize> {
    let bits = n.trailing_zeros();
    let mask = 2 * n as u64 - 1;
    (0..n)
        .map(|j| {
            // Wrapping: 2N divides 2^64, so the product modulo 2N is exact.
            let e = g.0.wrapping_mul(2 * bit_reverse(j, bits) as u64 + 1) & mask;
            bit_reverse(((e - 1) / 2) as usize, bits)
        })
        .collect()
}

/// `X ↦ X^g` on coefficients modulo `q` (the reference the NTT-domain
/// permutation is tested against).
pub fn apply_automorphism_coeff(a: &[u64], g: GaloisElement, q: u64) -> Vec<u64> {
    let n = a.len();
    let mask = 2 * n as u64 - 1;
    let mut out = vec![0u64; n];
    for (i, &c) in a.iter().enumerate() {
        let e = (i as u64).wrapping_mul(g.0) & mask;
        let (idx, negate) = if e >= n as u64 {
            (e as usize - n, true)
        } else {
            (e as usize, false)
        };
        if let Some(slot) = out.get_mut(idx) {
            *slot = if negate && c != 0 { q - c } else { c };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ntt::NttPlan;
    use crate::testing::seeded_rng;
    use crate::zq::Modulus;
    use crate::zq::primes::PrimeGenerator;
    use rand_core::Rng;

    #[test]
    fn ntt_permutation_matches_coefficient_automorphism() {
        let n = 1usize << 9;
        let q = PrimeGenerator::new(45, 2 * n as u64).next().unwrap();
        let plan = NttPlan::new(n, Modulus::new(q).unwrap()).unwrap();
        let mut rng = seeded_rng(3);
        let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % q).collect();
        let mut fa = a.clone();
        plan.forward(&mut fa).unwrap();
        for g in [
            GaloisElement::rotation(1, n),
            GaloisElement::rotation(-7, n),
            GaloisElement::rotation(100, n),
            GaloisElement::conjugation(n),
        ] {
            let mut expected = apply_automorphism_coeff(&a, g, q);
            plan.forward(&mut expected).unwrap();
            let perm = automorphism_permutation(n, g);
            let got: Vec<u64> = perm.iter().map(|&i| fa[i]).collect();
            assert_eq!(got, expected, "g = {}", g.0);
        }
    }

    #[test]
    fn rotation_elements() {
        let n = 1 << 10;
        assert_eq!(GaloisElement::rotation(0, n).0, 1);
        assert_eq!(GaloisElement::rotation(1, n).0, 5);
        let left = GaloisElement::rotation(3, n).0;
        let right = GaloisElement::rotation(-3, n).0;
        assert_eq!(left * right % (2 * n as u64), 1);
        assert_eq!(bit_reverse(1, 4), 8);
        assert_eq!(bit_reverse(0b0110, 4), 0b0110);
    }
}
