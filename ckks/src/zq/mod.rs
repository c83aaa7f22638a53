//! Arithmetic modulo a word-sized prime: [`Modulus`] with Barrett reduction,
//! Shoup multiplication by fixed operands ([`ShoupConstant`]), and prime
//! generation ([`primes`]).
//!
//! Every modulus is below 2^62, so sums of two residues never overflow a
//! word and products fit the Barrett bound `x < q · 2^64`.

pub mod primes;

use crate::{Error, Result};

/// Largest modulus accepted: `2^62`, exclusive.
pub const MAX_MODULUS_BITS: u32 = 62;

/// A modulus `q < 2^62` with its Barrett constant `floor(2^128 / q)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Modulus {
    q: u64,
    ratio_lo: u64,
    ratio_hi: u64,
}

/// A fixed multiplicand `w` with its Shoup quotient `floor(w · 2^64 / q)`,
/// for multiplications by the same `w` many times (twiddles, base-conversion
/// factors). Built by [`Modulus::shoup`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ShoupConstant {
    value: u64,
    quotient: u64,
}

impl ShoupConstant {
    /// The multiplicand `w`.
    pub const fn value(&self) -> u64 {
        self.value
    }

    /// `floor(w · 2^64 / q)`.
    pub const fn quotient(&self) -> u64 {
        self.quotient
    }
}

impl Modulus {
    /// A modulus `q` with `2 ≤ q < 2^62`.
    ///
    /// # Errors
    /// [`Error::InvalidModulus`] outside that range.
    pub fn new(q: u64) -> Result<Self> {
        if !(2..(1u64 << MAX_MODULUS_BITS)).contains(&q) {
            return Err(Error::InvalidModulus { modulus: q });
        }
        let ratio = u128::MAX / u128::from(q);
        // u128::MAX / q equals floor(2^128 / q) unless q divides 2^128, i.e.
        // q is a power of two; then floor(2^128/q) = u128::MAX/q + 1.
        let ratio = if q.is_power_of_two() {
            ratio + 1
        } else {
            ratio
        };
        Ok(Self {
            q,
            ratio_lo: ratio as u64,
            ratio_hi: (ratio >> 64) as u64,
        })
    }

    /// The modulus.
    #[inline]
    pub const fn value(&self) -> u64 {
        self.q
    }

    /// Bit length of the modulus.
    #[inline]
    pub const fn bits(&self) -> u32 {
        64 - self.q.leading_zeros()
    }

    /// `a + b mod q` for `a, b < q`.
    #[inline]
    pub const fn add(&self, a: u64, b: u64) -> u64 {
        let s = a + b;
        if s >= self.q { s - self.q } else { s }
    }

    /// `a − b mod q` for `a, b < q`.
    #[inline]
    pub const fn sub(&self, a: u64, b: u64) -> u64 {
        if a >= b { a - b } else { a + self.q - b }
    }

    /// `−a mod q` for `a < q`.
    #[inline]
    pub const fn neg(&self, a: u64) -> u64 {
        if a == 0 { 0 } else { self.q - a }
    }

    /// `x mod q` for any 128-bit `x`, by one Barrett step with the two-word
    /// constant `ratio = ⌊2^128/q⌋ = 2^128/q − δ`, `0 ≤ δ < 1`.
    ///
    /// The partial products give `e = ⌊x·ratio / 2^128⌋` exactly (the low
    /// word's carry is `⌊x0·ratio_lo / 2^64⌋`, and `⌊(A + ⌊B⌋)/2^64⌋ =
    /// ⌊(A + B)/2^64⌋`), computed modulo 2^64 (the middle sum is added
    /// modulo 2^128, so that no input can overflow it: a wrap would only
    /// drop a multiple of 2^64 from `e`). Since
    /// `x·δ/2^128 < 1`, `e` is `⌊x/q⌋` or one less, so `x − e·q` lies in
    /// `[0, 2q)`: below 2^63 for `q < 2^62`, hence exact modulo 2^64, and
    /// one conditional subtraction makes it canonical. (Five
    /// multiplications; `reduce_wide` once took two such steps.)
    #[inline]
    pub const fn reduce_u128(&self, x: u128) -> u64 {
        let x0 = x as u64;
        let x1 = (x >> 64) as u64;
        let low = ((x0 as u128) * (self.ratio_lo as u128)) >> 64;
        let mid = ((x1 as u128) * (self.ratio_lo as u128))
            .wrapping_add((x0 as u128) * (self.ratio_hi as u128))
            .wrapping_add(low);
        let quotient = x1
            .wrapping_mul(self.ratio_hi)
            .wrapping_add((mid >> 64) as u64);
        let r = x0.wrapping_sub(quotient.wrapping_mul(self.q));
        if r >= self.q { r - self.q } else { r }
    }

    /// `x mod q` for any 128-bit `x`: [`Modulus::reduce_u128`], which
    /// covers the whole range.
    #[inline]
    pub const fn reduce_wide(&self, x: u128) -> u64 {
        self.reduce_u128(x)
    }

    /// `x mod q` for any word `x`.
    #[inline]
    pub const fn reduce(&self, x: u64) -> u64 {
        self.reduce_u128(x as u128)
    }

    /// `a · b mod q` for `a, b < q`.
    #[inline]
    pub const fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce_u128((a as u128) * (b as u128))
    }

    /// Precomputes `w` (reduced mod q) for Shoup multiplication.
    pub const fn shoup(&self, w: u64) -> ShoupConstant {
        let value = self.reduce(w);
        let quotient = (((value as u128) << 64) / (self.q as u128)) as u64;
        ShoupConstant { value, quotient }
    }

    /// `a · w mod q` by Shoup's method, in `[0, 2q)` (lazy) for any word `a`.
    #[inline]
    pub const fn mul_shoup_lazy(&self, a: u64, w: &ShoupConstant) -> u64 {
        let estimate = (((a as u128) * (w.quotient as u128)) >> 64) as u64;
        a.wrapping_mul(w.value)
            .wrapping_sub(estimate.wrapping_mul(self.q))
    }

    /// `a · w mod q` by Shoup's method, fully reduced, for any word `a`.
    #[inline]
    pub const fn mul_shoup(&self, a: u64, w: &ShoupConstant) -> u64 {
        let r = self.mul_shoup_lazy(a, w);
        if r >= self.q { r - self.q } else { r }
    }

    /// `a^e mod q`.
    pub const fn pow(&self, a: u64, mut e: u64) -> u64 {
        let mut base = self.reduce(a);
        let mut acc = if self.q == 1 { 0 } else { 1 };
        while e > 0 {
            if e & 1 == 1 {
                acc = self.mul(acc, base);
            }
            base = self.mul(base, base);
            e >>= 1;
        }
        acc
    }

    /// The inverse of `a` modulo `q`, if it exists (extended Euclid, so it
    /// works for composite moduli too).
    pub fn inv(&self, a: u64) -> Option<u64> {
        let (mut r0, mut r1) = (i128::from(self.q), i128::from(self.reduce(a)));
        let (mut t0, mut t1) = (0i128, 1i128);
        while r1 != 0 {
            let quotient = r0 / r1;
            (r0, r1) = (r1, r0 - quotient * r1);
            (t0, t1) = (t1, t0 - quotient * t1);
        }
        if r0 != 1 {
            return None;
        }
        let t = t0.rem_euclid(i128::from(self.q));
        u64::try_from(t).ok()
    }

    /// The representative of `a < q` in `(−q/2, q/2]`.
    #[inline]
    pub const fn center(&self, a: u64) -> i64 {
        if a > self.q / 2 {
            a as i64 - self.q as i64
        } else {
            a as i64
        }
    }

    /// `x mod q` for a signed word.
    #[inline]
    pub const fn reduce_i64(&self, x: i64) -> u64 {
        let r = self.reduce(x.unsigned_abs());
        if x < 0 { self.neg(r) } else { r }
    }

    /// `x mod q` for a signed 128-bit value.
    #[inline]
    pub const fn reduce_i128(&self, x: i128) -> u64 {
        let r = self.reduce_wide(x.unsigned_abs());
        if x < 0 { self.neg(r) } else { r }
    }

    /// `x mod q` for an integer-valued `f64` of any magnitude (the value is
    /// split into mantissa and power of two, so nothing is lost). Non-finite
    /// input gives `None`.
    pub fn reduce_f64(&self, x: f64) -> Option<u64> {
        if !x.is_finite() {
            return None;
        }
        if x.abs() < 9.2e18 {
            return Some(self.reduce_i64(x as i64));
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as i64 - 1075;
        let mantissa = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
        // |x| ≥ 2^63 here, so exponent ≥ 11 and x = ±mantissa · 2^exponent exactly.
        let shift = u64::try_from(exponent).ok()?;
        let r = self.mul(self.reduce(mantissa), self.pow(2, shift));
        Some(if x < 0.0 { self.neg(r) } else { r })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn moduli() -> impl Strategy<Value = u64> {
        prop_oneof![
            2u64..1 << 20,
            (1u64 << 40)..(1 << 62),
            Just((1u64 << 62) - 57)
        ]
    }

    proptest! {
        #[test]
        fn arithmetic_matches_u128(q in moduli(), a in any::<u64>(), b in any::<u64>()) {
            let m = Modulus::new(q).unwrap();
            let (a, b) = (a % q, b % q);
            let (wa, wb, wq) = (u128::from(a), u128::from(b), u128::from(q));
            prop_assert_eq!(u128::from(m.add(a, b)), (wa + wb) % wq);
            prop_assert_eq!(u128::from(m.sub(a, b)), (wa + wq - wb) % wq);
            prop_assert_eq!(u128::from(m.mul(a, b)), wa * wb % wq);
            prop_assert_eq!(u128::from(m.neg(a)), (wq - wa) % wq);
            let w = m.shoup(b);
            prop_assert_eq!(u128::from(m.mul_shoup(a, &w)), wa * wb % wq);
            prop_assert!(m.mul_shoup_lazy(u64::MAX - a, &w) < 2 * q);
        }

        #[test]
        fn reductions_match_u128(q in moduli(), x in any::<u128>(), y in any::<i64>()) {
            let m = Modulus::new(q).unwrap();
            prop_assert_eq!(u128::from(m.reduce_wide(x)), x % u128::from(q));
            prop_assert_eq!(u128::from(m.reduce_u128(x)), x % u128::from(q));
            let bounded = x % (u128::from(q) << 64);
            prop_assert_eq!(u128::from(m.reduce_u128(bounded)), bounded % u128::from(q));
            prop_assert_eq!(i128::from(m.reduce_i64(y)), i128::from(y).rem_euclid(i128::from(q)));
            let z = i128::from(y) * i128::from(y >> 3);
            prop_assert_eq!(i128::from(m.reduce_i128(z)), z.rem_euclid(i128::from(q)));
        }

        #[test]
        fn inverse_and_power(q in (1u64 << 30)..(1 << 62), a in 1u64..u64::MAX) {
            let m = Modulus::new(q).unwrap();
            if let Some(inv) = m.inv(a) {
                prop_assert_eq!(m.mul(inv, m.reduce(a)), 1);
            }
            let a = a % q;
            prop_assert_eq!(m.pow(a, 3), m.mul(a, m.mul(a, a)));
        }

        #[test]
        fn reduce_f64_is_exact(q in (1u64 << 30)..(1 << 62), mantissa in 1u64..(1 << 53), shift in 0i32..200, negative in any::<bool>()) {
            let m = Modulus::new(q).unwrap();
            let x = (mantissa as f64) * 2f64.powi(shift) * if negative { -1.0 } else { 1.0 };
            let big = num_bigint::BigInt::from(mantissa) << (shift as usize);
            let big = if negative { -big } else { big };
            let expected: num_bigint::BigInt = ((big % q) + q) % q;
            prop_assert_eq!(num_bigint::BigInt::from(m.reduce_f64(x).unwrap()), expected);
        }
    }

    /// One Barrett step over the whole 128-bit range, far past `q·2^64`
    /// where the quotient estimate may be one short: the largest inputs, multiples of `q` and their neighbours, and every
    /// `x = a·2^64 + b` with `a, b` near `0`, `q` and `2^64`, for the
    /// smallest, power-of-two, mid-sized and largest moduli.
    #[test]
    fn one_barrett_step_reduces_every_128_bit_value() {
        let moduli = [
            2u64,
            3,
            1 << 20,
            (1 << 20) + 7,
            (1 << 52) - 3,
            1152921504606584833, // FGb's largest special prime, 2^60 − …
            (1 << 61) - 1,
            (1 << 62) - 57,
            (1 << 62) - 1,
        ];
        for q in moduli {
            let m = Modulus::new(q).unwrap();
            let wq = u128::from(q);
            let words = [
                0,
                1,
                2,
                q - 1,
                q,
                q + 1,
                u64::MAX / 2,
                u64::MAX - q,
                u64::MAX - 1,
                u64::MAX,
            ];
            let mut cases: Vec<u128> = vec![
                u128::MAX,
                u128::MAX - 1,
                u128::MAX / wq * wq,
                u128::MAX / wq * wq - 1,
            ];
            for a in words {
                for b in words {
                    cases.push(u128::from(a) << 64 | u128::from(b));
                }
            }
            for k in [1u128, 2, 3, 8, 9, 1 << 20, u128::MAX / wq] {
                let x = k.saturating_mul(wq);
                cases.extend([x.saturating_sub(1), x, x.saturating_add(1)]);
            }
            for x in cases {
                assert_eq!(u128::from(m.reduce_u128(x)), x % wq, "{x} mod {q}");
                assert_eq!(u128::from(m.reduce_wide(x)), x % wq, "{x} mod {q}");
            }
        }
    }

    #[test]
    fn rejects_out_of_range_moduli() {
        assert!(Modulus::new(0).is_err());
        assert!(Modulus::new(1).is_err());
        assert!(Modulus::new(1 << 62).is_err());
        assert!(Modulus::new(1 << 40).is_ok());
        let m = Modulus::new(97).unwrap();
        assert_eq!(m.center(96), -1);
        assert_eq!(m.center(48), 48);
        assert_eq!(m.center(49), -48);
        assert_eq!(m.reduce_f64(f64::NAN), None);
    }
}
