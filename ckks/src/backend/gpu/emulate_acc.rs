//! The kernels' sum of products (`Acc128` in
//! `gpu-kernels/cuda/ckks_common.cuh`) on the CPU, word for word: a value
//! kept as `lo + mid·2^32 + hi·2^64` in three 64-bit words, each product
//! added as its four 32-bit partial products with the carries the PTX
//! takes (`add.cc` / `addc`), combined only when the sum is reduced.
//!
//! Every kernel that sums products (`mul_sum`, `tensor`, both key-switching
//! inner products, `base_convert` and the NTT's fused conversions) keeps
//! the sum's value below 2^128; the tests here check that the three words
//! then always hold that value exactly, at random and at the extremes. The
//! conversion emulation ([`super::emulate_convert`]) accumulates through
//! this model and compares it with the exact sum at every coefficient.

use rand_core::Rng;

use crate::testing::seeded_rng;

/// `Acc128`: the value is `lo + mid·2^32 + hi·2^64`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LazyAcc {
    lo: u64,
    mid: u64,
    hi: u64,
}

impl LazyAcc {
    /// `acc_mul`: `a0·b0` into `lo`, its carry and `a1·b1` into `hi`,
    /// `a0·b1` and `a1·b0` into `mid`, their carries into `hi`'s upper
    /// half (`addc.u32` on it: a carry out of `hi` is dropped, as on the
    /// GPU).
    pub(super) fn mul_add(&mut self, a: u64, b: u64) {
        let (a0, a1) = (a & 0xffff_ffff, a >> 32);
        let (b0, b1) = (b & 0xffff_ffff, b >> 32);
        let (lo, carry) = self.lo.overflowing_add(a0 * b0);
        self.lo = lo;
        self.hi = self.hi.wrapping_add(a1 * b1).wrapping_add(u64::from(carry));
        for t in [a0 * b1, a1 * b0] {
            let (mid, carry) = self.mid.overflowing_add(t);
            self.mid = mid;
            let h1 = ((self.hi >> 32) as u32).wrapping_add(u32::from(carry));
            self.hi = (u64::from(h1) << 32) | (self.hi & 0xffff_ffff);
        }
    }

    /// `acc_words`: the value as `hi·2^64 + lo`, wrapping as the kernel's
    /// 64-bit additions do.
    pub(super) fn value(self) -> u128 {
        let lo = self.lo.wrapping_add(self.mid << 32);
        let hi = self
            .hi
            .wrapping_add(self.mid >> 32)
            .wrapping_add(u64::from(lo < self.lo));
        (u128::from(hi) << 64) | u128::from(lo)
    }

    /// A sum that starts from one word (`mul_sum`'s addend, a folded sum).
    pub(super) fn from_word(w: u64) -> Self {
        Self {
            lo: w,
            ..Self::default()
        }
    }
}

/// Adds `products` to a lazy and an exact sum from `start`; returns both,
/// or `None` once the exact sum passes 2^128 (what every caller rules out).
fn both_sums(start: u64, products: &[(u64, u64)]) -> Option<(u128, u128)> {
    let mut lazy = LazyAcc::from_word(start);
    let mut exact = u128::from(start);
    for &(a, b) in products {
        lazy.mul_add(a, b);
        exact = exact.checked_add(u128::from(a) * u128::from(b))?;
    }
    Some((lazy.value(), exact))
}

#[test]
fn the_lazy_sum_holds_every_sum_below_2_128() {
    let mut rng = seeded_rng(0xacc);
    // The kernels' cases: 16 conversion products of words below 2^62 and
    // the correction v·(−Q mod p) (v <= 16); 8 inner-product terms after a
    // fold (a start below q); mul_sum's 8 terms over an addend.
    for _ in 0..20_000 {
        let bits = 30 + (rng.next_u32() % 33); // 30..=62-bit words
        let mask = (1u64 << bits) - 1;
        let terms = 1 + (rng.next_u32() % 16) as usize;
        let mut products: Vec<(u64, u64)> = (0..terms)
            .map(|_| (rng.next_u64() & mask, rng.next_u64() & mask))
            .collect();
        products.push((u64::from(rng.next_u32() % 17), rng.next_u64() & mask));
        let start = rng.next_u64() & mask;
        let (lazy, exact) = both_sums(start, &products).expect("below 2^128");
        assert_eq!(lazy, exact, "{products:?} from {start}");
    }
    // Every word at its largest, and sums up to just below 2^128: the
    // carries out of lo and mid in every combination.
    let max62 = (1u64 << 62) - 1;
    for (start, products) in [
        (u64::MAX, vec![(u64::MAX, u64::MAX)]),
        (0, vec![(u64::MAX, u64::MAX)]),
        (0, vec![(max62, max62); 16]),
        (max62, vec![(max62, max62); 16]),
        (u64::MAX, vec![(u64::MAX, 1); 3]),
        (0, vec![(0xffff_ffff, u64::MAX), (u64::MAX, 0xffff_ffff)]),
        (0, vec![(1 << 32, u64::MAX >> 1); 2]),
    ] {
        let (lazy, exact) = both_sums(start, &products).expect("below 2^128");
        assert_eq!(lazy, exact, "{products:?} from {start}");
    }
    // Random 64-bit words, as many terms as stay below 2^128.
    for _ in 0..20_000 {
        let mut products = Vec::new();
        let mut exact = 0u128;
        loop {
            let (a, b) = (rng.next_u64(), rng.next_u64() >> (rng.next_u32() % 64));
            match exact.checked_add(u128::from(a) * u128::from(b)) {
                Some(e) => {
                    exact = e;
                    products.push((a, b));
                }
                None => break,
            }
        }
        let (lazy, exact) = both_sums(0, &products).expect("below 2^128");
        assert_eq!(lazy, exact, "{products:?}");
    }
}

#[test]
fn the_lazy_sum_is_the_sum_mod_2_128() {
    // Past 2^128 the words keep the sum modulo 2^128, like a 128-bit
    // register: every carry lands on its own weight. So the callers'
    // bound (the value below 2^128) is all that exactness needs.
    let mut rng = seeded_rng(0xacc2);
    for _ in 0..2_000 {
        let mut lazy = LazyAcc::from_word(rng.next_u64());
        let mut wrapped = lazy.value();
        for _ in 0..1 + rng.next_u32() % 40 {
            let (a, b) = (rng.next_u64(), rng.next_u64());
            lazy.mul_add(a, b);
            wrapped = wrapped.wrapping_add(u128::from(a) * u128::from(b));
        }
        assert_eq!(lazy.value(), wrapped);
    }
    let mut lazy = LazyAcc::default();
    lazy.mul_add(u64::MAX, u64::MAX);
    lazy.mul_add(u64::MAX, u64::MAX);
    assert_eq!(
        lazy.value(),
        (u128::from(u64::MAX) * u128::from(u64::MAX)).wrapping_mul(2)
    );
}
