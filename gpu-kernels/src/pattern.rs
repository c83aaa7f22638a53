//! Host mirrors of what the kernels compute, for checking their results.

/// SplitMix64's output function (Steele, Lea, Flood 2014), as `touch.cu`.
const fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Word `index` of the test pattern with `seed`: what `touch_fill` writes.
pub const fn pattern_word(seed: u64, index: u64) -> u64 {
    splitmix64(seed.wrapping_add(index))
}

/// A permutation of `0..n` from `seed` (Fisher–Yates with SplitMix64), for
/// the micro-benchmark's chunk order.
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = seed;
    for i in (1..n).rev() {
        state = state.wrapping_add(1);
        let r = splitmix64(state);
        let j = (r % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_splitmix64_and_permutations_are_permutations() {
        // SplitMix64 of 0 (the reference implementation's first output for
        // seed 0 is splitmix64(0x9E3779B97F4A7C15 - 0x9E3779B97F4A7C15)...).
        assert_eq!(pattern_word(0, 0), 0xE220_A839_7B1D_CDAF);
        assert_ne!(pattern_word(1, 0), pattern_word(0, 1).wrapping_add(1));
        let p = permutation(1000, 7);
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(p, (0..1000).collect::<Vec<_>>());
        assert_eq!(permutation(1000, 7), p);
        assert!(permutation(0, 1).is_empty());
    }
}
