//! NTT-friendly primes: `p < 2^b`, `p ≡ 1 (mod 2N)`, found deterministically
//! from the top of the range downward.

use super::Modulus;

/// Deterministic Miller–Rabin for all 64-bit integers (the first twelve prime
/// bases suffice below 3.3 · 10^24).
pub fn is_prime(n: u64) -> bool {
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    for p in BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let (s, d) = {
        let m = n - 1;
        let s = m.trailing_zeros();
        (s, m >> s)
    };
    let mul = |a: u64, b: u64| ((u128::from(a) * u128::from(b)) % u128::from(n)) as u64;
    let pow = |mut a: u64, mut e: u64| {
        let mut acc = 1u64;
        while e > 0 {
            if e & 1 == 1 {
                acc = mul(acc, a);
            }
            a = mul(a, a);
            e >>= 1;
        }
        acc
    };
    'witness: for a in BASES {
        let mut x = pow(a, d);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul(x, x);
            if x == n - 1 {
                continue 'witness;
            }
        }
        return false;
    }
    true
}

/// Primes `p < 2^bits` with `p ≡ 1 (mod 2N)`, largest first, never below
/// `2^(bits−1)` (so each has exactly `bits` bits).
#[derive(Clone, Debug)]
pub struct PrimeGenerator {
    step: u64,
    next: u64,
    floor: u64,
}

impl PrimeGenerator {
    /// A generator for `bits`-bit primes congruent to 1 modulo `two_n`
    /// (a power of two). `bits` must be in `2..=62`; others yield nothing.
    pub fn new(bits: u32, two_n: u64) -> Self {
        if !(2..=62).contains(&bits) || two_n == 0 {
            return Self {
                step: 1,
                next: 0,
                floor: 1,
            };
        }
        let top = 1u64 << bits;
        // Largest k·2N + 1 below 2^bits.
        let next = ((top - 2) / two_n) * two_n + 1;
        Self {
            step: two_n,
            next,
            floor: 1u64 << (bits - 1),
        }
    }
}

impl Iterator for PrimeGenerator {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        while self.next > self.floor {
            let candidate = self.next;
            self.next = self.next.saturating_sub(self.step);
            if is_prime(candidate) {
                return Some(candidate);
            }
        }
        None
    }
}

/// A primitive `order`-th root of unity modulo the prime `modulus`, for a
/// power-of-two `order` dividing `p − 1`: the smallest `x^((p−1)/order)` whose
/// `order/2`-th power is `−1`.
pub fn primitive_root(modulus: &Modulus, order: u64) -> Option<u64> {
    let p = modulus.value();
    if order < 2 || !order.is_power_of_two() || !(p - 1).is_multiple_of(order) || !is_prime(p) {
        return None;
    }
    (2..p)
        .map(|x| modulus.pow(x, (p - 1) / order))
        .find(|&w| modulus.pow(w, order / 2) == p - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miller_rabin_agrees_with_trial_division() {
        let slow = |n: u64| {
            n >= 2
                && (2..)
                    .take_while(|d| d * d <= n)
                    .all(|d| !n.is_multiple_of(d))
        };
        for n in 0..5000u64 {
            assert_eq!(is_prime(n), slow(n), "{n}");
        }
        for n in (1u64 << 40)..(1 << 40) + 2000 {
            assert_eq!(is_prime(n), slow(n), "{n}");
        }
        // Strong pseudoprimes to several bases.
        assert!(!is_prime(3_215_031_751));
        assert!(!is_prime(3_825_123_056_546_413_051));
        assert!(is_prime((1u64 << 61) - 1));
    }

    #[test]
    fn reproduces_the_fgb_primes() {
        // DESIGN.md: FGb's 42-bit primes run from 4398044938241 down to
        // 4398018592769, its base prime is 288230376147386369.
        let two_n = 1u64 << 17;
        let q42: Vec<u64> = PrimeGenerator::new(42, two_n).take(12).collect();
        assert_eq!(q42.first(), Some(&4_398_044_938_241));
        assert_eq!(q42.last(), Some(&4_398_018_592_769));
        assert_eq!(
            PrimeGenerator::new(58, two_n).next(),
            Some(288_230_376_147_386_369)
        );
        let p59: Vec<u64> = PrimeGenerator::new(59, two_n).take(3).collect();
        assert_eq!(
            p59,
            [
                576_460_752_300_015_617,
                576_460_752_298_835_969,
                576_460_752_298_180_609
            ]
        );
        let p60: Vec<u64> = PrimeGenerator::new(60, two_n).take(2).collect();
        assert_eq!(p60, [1_152_921_504_606_584_833, 1_152_921_504_598_720_513]);
        for p in q42 {
            assert_eq!(p % two_n, 1);
        }
    }

    #[test]
    fn primitive_roots_have_exact_order() {
        let p = PrimeGenerator::new(40, 1 << 12).next().unwrap();
        let m = Modulus::new(p).unwrap();
        let w = primitive_root(&m, 1 << 12).unwrap();
        assert_eq!(m.pow(w, 1 << 12), 1);
        assert_eq!(m.pow(w, 1 << 11), p - 1);
        assert_eq!(primitive_root(&m, 1 << 50), None);
        assert_eq!(primitive_root(&m, 3 << 4), None);
    }
}
