//! [`SeededUniform`]: the counter-based generator of switching keys' uniform
//! halves `a_j`, which the CPU and the GPU (`gpu-kernels/cuda/ckks_prf.cu`)
//! compute bit for bit alike, and [`UniformSeed`], what a key stores to
//! regenerate them.
//!
//! # The generator
//!
//! * **Block function:** ChaCha (RFC 8439's block function) with the rounds
//!   of the key's [`SeedPrf`] — 12 for keys made now, 20 for keys made
//!   before — keyed by the key's 32-byte seed (eight little-endian `u32`
//!   words). State words 12–13 hold a 64-bit block counter (low word first),
//!   words 14–15 a 64-bit stream id (low word first): the layout of
//!   `rand_chacha`'s `ChaCha12Rng` and `ChaCha20Rng` after `set_stream`.
//!   The 64-bit output word `w` of a stream is made of the
//!   keystream's `u32` words `2w` (low half) and `2w + 1` (high half), that
//!   is, words of block `w / 8`.
//! * **Streams:** digit `j`, global modulus index `i` and attempt `t` use the
//!   stream id `(t << 48) | (j << 32) | i` (`j < 2^16`, `i < 2^32`).
//! * **Coefficients:** coefficient `k` (NTT-domain position `k`) of the limb
//!   modulo `q`, of bit length `b`, is word `k` of stream `(j, i, 0)` masked
//!   to its low `b` bits when that is below `q`; otherwise word `k` of
//!   streams `(j, i, 1)`, `(j, i, 2)`, … masked alike, the first below `q`.
//!   Each candidate is uniform on `[0, 2^b)`, so the accepted value is exactly
//!   uniform modulo `q`; a candidate is rejected with probability
//!   `(2^b − q)/2^b < 1/2` (about `2^−20` or less for hemem's NTT primes,
//!   which sit just below `2^b`). Attempts past `2^16` would wrap the attempt
//!   field; reaching one has probability below `2^−65536`.
//!
//! The generator is counter-based: any coefficient is computable on its own
//! (one block, plus one block per rejection), so a GPU thread generates its
//! eight coefficients without a sequential stream and a fused key-switch
//! kernel can generate `a_j` where it reads `b_j`.
//!
//! # Security
//!
//! The seed is public, stored and moved with the key, as in every seeded-LWE
//! scheme: `a_j` is public anyway. Under the standard assumption that
//! ChaCha with 12 (or 20) rounds is a pseudorandom function of its key, the
//! `a_j` it expands to are indistinguishable from uniform, which is all
//! RLWE asks of them. Rejection depends on public data only, so its
//! variable time leaks nothing. See `docs/SECURITY.md`, which also says why
//! 12 rounds.
//!
//! The block function is written here rather than taken from `rand_chacha`
//! because the GPU kernel must mirror it line for line and the generator
//! needs random access to single blocks of many streams; the unit tests pin
//! it to RFC 8439's test vector and to `rand_chacha`.

use rand_chacha::{ChaCha12Rng, ChaCha20Rng};
use rand_core::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::zq::Modulus;
use crate::{Error, Result};

/// 64-bit words (coefficients) per ChaCha block.
pub const WORDS_PER_BLOCK: usize = 8;

/// The pseudorandom function that expands a key's seed into its uniform
/// halves: the ChaCha block function with this many rounds.
///
/// Keys are made with [`SeedPrf::ChaCha12`] (the default): 12 rounds keep
/// five rounds of margin over the best published attack (7 rounds), as
/// `rand`'s `StdRng` and Adiantum chose, and cost 60 % of ChaCha20's
/// integer work, which is most of a seeded key switch on the GPU.
/// [`SeedPrf::ChaCha20`] reads keys made before (and stays available to
/// [`crate::keys::KeyGenerator::with_uniform_prf`]). A key's file records
/// which one it uses. See `docs/SECURITY.md`, "Seeded switching keys".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SeedPrf {
    /// ChaCha20 (RFC 8439): 20 rounds. Keys made before 12 rounds were
    /// chosen use it.
    ChaCha20,
    /// ChaCha12: 12 rounds.
    #[default]
    ChaCha12,
}

impl SeedPrf {
    /// Double rounds (a column round and a diagonal round) of the block
    /// function.
    pub const fn double_rounds(self) -> u32 {
        match self {
            Self::ChaCha20 => 10,
            Self::ChaCha12 => 6,
        }
    }

    /// Its number in key files.
    pub(crate) const fn id(self) -> u8 {
        match self {
            Self::ChaCha20 => 0,
            Self::ChaCha12 => 1,
        }
    }

    /// The PRF numbered `id` in key files.
    pub(crate) const fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Self::ChaCha20),
            1 => Some(Self::ChaCha12),
            _ => None,
        }
    }

    /// A name for reports: `"ChaCha12"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ChaCha20 => "ChaCha20",
            Self::ChaCha12 => "ChaCha12",
        }
    }
}

/// What a switching key stores to regenerate its uniform halves: a 32-byte
/// seed (public) and the [`SeedPrf`] that expands it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UniformSeed {
    /// The seed.
    pub bytes: [u8; 32],
    /// The function that expands it.
    pub prf: SeedPrf,
}

impl UniformSeed {
    /// `bytes` expanded by `prf`.
    pub const fn new(bytes: [u8; 32], prf: SeedPrf) -> Self {
        Self { bytes, prf }
    }
}

/// `"expand 32-byte k"` as four little-endian words (RFC 8439 §2.3).
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Coefficients one rayon task generates (a multiple of [`WORDS_PER_BLOCK`]).
const CHUNK: usize = 4096;

/// The stream id of digit `digit`, global modulus index `modulus`, attempt
/// `attempt`: `(attempt << 48) | (digit << 32) | modulus`.
pub fn stream_id(digit: usize, modulus: usize, attempt: u64) -> u64 {
    debug_assert!(digit < 1 << 16 && (modulus as u64) < 1 << 32);
    (attempt << 48) | ((digit as u64) << 32) | modulus as u64
}

/// The mask of `q`'s bit length.
fn mask_of(q: u64) -> u64 {
    let bits = 64 - q.leading_zeros();
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[inline(always)]
fn quarter(a: &mut u32, b: &mut u32, c: &mut u32, d: &mut u32) {
    *a = a.wrapping_add(*b);
    *d = (*d ^ *a).rotate_left(16);
    *c = c.wrapping_add(*d);
    *b = (*b ^ *c).rotate_left(12);
    *a = a.wrapping_add(*b);
    *d = (*d ^ *a).rotate_left(8);
    *c = c.wrapping_add(*d);
    *b = (*b ^ *c).rotate_left(7);
}

/// The uniform-half generator of one seed (see the module documentation).
#[derive(Clone, Copy)]
pub struct SeededUniform {
    key: [u32; 8],
    seed: UniformSeed,
}

impl std::fmt::Debug for SeededUniform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeededUniform").finish_non_exhaustive()
    }
}

impl SeededUniform {
    /// The generator of `seed`.
    pub fn new(seed: &UniformSeed) -> Self {
        let mut key = [0u32; 8];
        for (k, bytes) in key.iter_mut().zip(seed.bytes.chunks_exact(4)) {
            if let [a, b, c, d] = *bytes {
                *k = u32::from_le_bytes([a, b, c, d]);
            }
        }
        Self { key, seed: *seed }
    }

    /// The ChaCha block `counter` of stream `stream` (the seed's rounds):
    /// sixteen keystream words, in order.
    pub fn block(&self, counter: u64, stream: u64) -> [u32; 16] {
        let [k0, k1, k2, k3, k4, k5, k6, k7] = self.key;
        let [c0, c1, c2, c3] = SIGMA;
        let state = [
            c0,
            c1,
            c2,
            c3,
            k0,
            k1,
            k2,
            k3,
            k4,
            k5,
            k6,
            k7,
            counter as u32,
            (counter >> 32) as u32,
            stream as u32,
            (stream >> 32) as u32,
        ];
        let [
            mut x0,
            mut x1,
            mut x2,
            mut x3,
            mut x4,
            mut x5,
            mut x6,
            mut x7,
            mut x8,
            mut x9,
            mut x10,
            mut x11,
            mut x12,
            mut x13,
            mut x14,
            mut x15,
        ] = state;
        for _ in 0..self.seed.prf.double_rounds() {
            // Column round.
            quarter(&mut x0, &mut x4, &mut x8, &mut x12);
            quarter(&mut x1, &mut x5, &mut x9, &mut x13);
            quarter(&mut x2, &mut x6, &mut x10, &mut x14);
            quarter(&mut x3, &mut x7, &mut x11, &mut x15);
            // Diagonal round.
            quarter(&mut x0, &mut x5, &mut x10, &mut x15);
            quarter(&mut x1, &mut x6, &mut x11, &mut x12);
            quarter(&mut x2, &mut x7, &mut x8, &mut x13);
            quarter(&mut x3, &mut x4, &mut x9, &mut x14);
        }
        let mut out = [
            x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15,
        ];
        for (o, s) in out.iter_mut().zip(state) {
            *o = o.wrapping_add(s);
        }
        out
    }

    /// The eight 64-bit words of block `counter` of `stream` (words
    /// `8·counter … 8·counter + 7` of the stream).
    pub fn block_words(&self, counter: u64, stream: u64) -> [u64; WORDS_PER_BLOCK] {
        let block = self.block(counter, stream);
        let mut out = [0u64; WORDS_PER_BLOCK];
        for (o, pair) in out.iter_mut().zip(block.chunks_exact(2)) {
            if let [lo, hi] = *pair {
                *o = u64::from(lo) | (u64::from(hi) << 32);
            }
        }
        out
    }

    /// The 64-bit word `index` of `stream`.
    pub fn word(&self, stream: u64, index: u64) -> u64 {
        let words = self.block_words(index / WORDS_PER_BLOCK as u64, stream);
        words
            .get((index % WORDS_PER_BLOCK as u64) as usize)
            .copied()
            .unwrap_or_default()
    }

    /// Coefficient `k` of digit `digit`'s limb modulo `q` (global modulus
    /// index `modulus`), computed on its own.
    pub fn coefficient(&self, digit: usize, modulus: usize, q: u64, k: u64) -> u64 {
        let mask = mask_of(q);
        let first = self.word(stream_id(digit, modulus, 0), k) & mask;
        if first < q {
            first
        } else {
            self.retry(digit, modulus, q, mask, k)
        }
    }

    /// Attempts 1, 2, … for coefficient `k` (the first was rejected).
    #[cold]
    fn retry(&self, digit: usize, modulus: usize, q: u64, mask: u64, k: u64) -> u64 {
        let mut attempt = 1u64;
        loop {
            let x = self.word(stream_id(digit, modulus, attempt), k) & mask;
            if x < q {
                return x;
            }
            attempt = attempt.wrapping_add(1);
        }
    }

    /// Fills `out` with coefficients `0 … out.len() − 1` of digit `digit`'s
    /// limb modulo `q` (global modulus index `modulus`), in parallel.
    ///
    /// The first attempts are read sequentially from `rand_chacha`'s
    /// `ChaCha12Rng` or `ChaCha20Rng` positioned at the chunk's first word
    /// (the same keystream as [`SeededUniform::block`], checked by the
    /// tests): its SIMD block function makes a key switch with a compressed
    /// key on the CPU about three times cheaper than the scalar one.
    pub fn fill_limb(&self, digit: usize, modulus: usize, q: u64, out: &mut [u64]) {
        let stream = stream_id(digit, modulus, 0);
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(chunk, words)| {
                let first = (chunk * CHUNK) as u64;
                // The word position counts 32-bit words.
                let position = u128::from(first) * 2;
                match self.seed.prf {
                    SeedPrf::ChaCha20 => {
                        let mut rng = ChaCha20Rng::from_seed(self.seed.bytes);
                        rng.set_stream(stream);
                        rng.set_word_pos(position);
                        self.fill_from(&mut rng, (digit, modulus, q), first, words);
                    }
                    SeedPrf::ChaCha12 => {
                        let mut rng = ChaCha12Rng::from_seed(self.seed.bytes);
                        rng.set_stream(stream);
                        rng.set_word_pos(position);
                        self.fill_from(&mut rng, (digit, modulus, q), first, words);
                    }
                }
            });
    }

    /// Coefficients `first …` of the limb from `rng`, positioned at word
    /// `first` of the limb's attempt-0 stream.
    fn fill_from<R: Rng>(
        &self,
        rng: &mut R,
        (digit, modulus, q): (usize, usize, u64),
        first: u64,
        words: &mut [u64],
    ) {
        let mask = mask_of(q);
        for (i, x) in words.iter_mut().enumerate() {
            let v = rng.next_u64() & mask;
            *x = if v < q {
                v
            } else {
                self.retry(digit, modulus, q, mask, first + i as u64)
            };
        }
    }

    /// Fills each limb of `limbs` (N words each) for digit `digit`: limb `l`
    /// is reduced modulo `table[moduli[l]]` and generated under that global
    /// index. Limbs fill in parallel.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] for a limb count other than `moduli`'s or an
    /// index beyond `table`.
    pub fn fill_limbs(
        &self,
        digit: usize,
        table: &[Modulus],
        moduli: &[usize],
        limbs: Vec<&mut [u64]>,
    ) -> Result<()> {
        if limbs.len() != moduli.len() {
            return Err(Error::LengthMismatch {
                expected: moduli.len(),
                actual: limbs.len(),
            });
        }
        let qs = moduli
            .iter()
            .map(|&i| {
                table
                    .get(i)
                    .map(Modulus::value)
                    .ok_or(Error::LengthMismatch {
                        expected: table.len(),
                        actual: i + 1,
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        limbs
            .into_par_iter()
            .zip(moduli.par_iter().zip(qs))
            .for_each(|(limb, (&i, q))| self.fill_limb(digit, i, q, limb));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand_chacha::{ChaCha12Rng, ChaCha20Rng};
    use rand_core::{Rng, SeedableRng};

    use super::*;
    use crate::testing::{seed32, seeded_rng};
    use crate::zq::primes::{PrimeGenerator, is_prime};

    #[test]
    fn block_matches_rfc_8439_test_vector() {
        // RFC 8439 §2.3.2: key 00 01 … 1f, block count 1, nonce
        // 00:00:00:09:00:00:00:4a:00:00:00:00. In the 64-bit layout the
        // nonce's first word is the counter's high word.
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let g = SeededUniform::new(&UniformSeed::new(key, SeedPrf::ChaCha20));
        let counter = 1u64 | (0x0900_0000u64 << 32);
        let stream = 0x4a00_0000u64;
        let expected: [u32; 16] = [
            0xe4e7_f110,
            0x1559_3bd1,
            0x1fdd_0f50,
            0xc471_20a3,
            0xc7f4_d1c7,
            0x0368_c033,
            0x9aaa_2204,
            0x4e6c_d4c3,
            0x4664_82d2,
            0x09aa_9f07,
            0x05d7_c214,
            0xa202_8bd9,
            0xd19c_12b5,
            0xb94e_16de,
            0xe883_d0cb,
            0x4e3c_50a2,
        ];
        assert_eq!(g.block(counter, stream), expected);
    }

    /// `rand_chacha`'s generator of `seed`'s rounds, at 32-bit word
    /// `position` of `stream`.
    fn rand_chacha_at(seed: UniformSeed, stream: u64, position: u128) -> Box<dyn Rng> {
        match seed.prf {
            SeedPrf::ChaCha20 => {
                let mut rng = ChaCha20Rng::from_seed(seed.bytes);
                rng.set_stream(stream);
                rng.set_word_pos(position);
                Box::new(rng)
            }
            SeedPrf::ChaCha12 => {
                let mut rng = ChaCha12Rng::from_seed(seed.bytes);
                rng.set_stream(stream);
                rng.set_word_pos(position);
                Box::new(rng)
            }
        }
    }

    const PRFS: [SeedPrf; 2] = [SeedPrf::ChaCha20, SeedPrf::ChaCha12];

    #[test]
    fn words_match_rand_chacha_with_stream_and_word_position() {
        for prf in PRFS {
            let seed = UniformSeed::new(seed32(0x5eed), prf);
            let g = SeededUniform::new(&seed);
            let mut rng = seeded_rng(17);
            for _ in 0..64 {
                let stream = rng.next_u64();
                let index = rng.next_u64() >> 20;
                let mut reference = rand_chacha_at(seed, stream, u128::from(index) * 2);
                let lo = reference.next_u32();
                let hi = reference.next_u32();
                assert_eq!(
                    g.word(stream, index),
                    u64::from(lo) | (u64::from(hi) << 32),
                    "{prf:?} stream {stream:#x} word {index}"
                );
                let mut reference = rand_chacha_at(seed, stream, u128::from(index) * 2);
                assert_eq!(g.word(stream, index), reference.next_u64());
            }
            // A whole block against the sequential stream.
            let mut reference = rand_chacha_at(seed, stream_id(3, 29, 0), 16 * 5);
            let block = g.block_words(5, stream_id(3, 29, 0));
            for w in block {
                assert_eq!(w, reference.next_u64());
            }
        }
    }

    #[test]
    fn the_rounds_change_every_word() {
        let bytes = seed32(0x12);
        let g20 = SeededUniform::new(&UniformSeed::new(bytes, SeedPrf::ChaCha20));
        let g12 = SeededUniform::new(&UniformSeed::new(bytes, SeedPrf::ChaCha12));
        for counter in [0u64, 1, 977] {
            let (a, b) = (g20.block(counter, 5), g12.block(counter, 5));
            assert!(a.iter().zip(&b).all(|(x, y)| x != y), "{a:x?} {b:x?}");
        }
        assert_eq!(SeedPrf::default(), SeedPrf::ChaCha12);
        for prf in PRFS {
            assert_eq!(SeedPrf::from_id(prf.id()), Some(prf));
        }
        assert_eq!(SeedPrf::from_id(2), None);
    }

    /// The smallest `bits`-bit prime ≡ 1 (mod 2N): about half the candidates
    /// are rejected.
    fn low_prime(bits: u32, two_n: u64) -> u64 {
        let mut p = (1u64 << (bits - 1)) + 1;
        while !is_prime(p) {
            p += two_n;
        }
        p
    }

    /// A reference of the spec by `rand_chacha`'s sequential stream, one
    /// coefficient at a time.
    fn reference(seed: UniformSeed, digit: usize, modulus: usize, q: u64, k: u64) -> u64 {
        let mask = mask_of(q);
        for attempt in 0.. {
            let mut rng =
                rand_chacha_at(seed, stream_id(digit, modulus, attempt), u128::from(k) * 2);
            let x = rng.next_u64() & mask;
            if x < q {
                return x;
            }
        }
        unreachable!()
    }

    #[test]
    fn limbs_match_the_spec_with_and_without_rejections() {
        for prf in PRFS {
            limbs_match_the_spec(UniformSeed::new(seed32(99), prf));
        }
    }

    fn limbs_match_the_spec(seed: UniformSeed) {
        let n = 1usize << 12;
        let g = SeededUniform::new(&seed);
        let high = PrimeGenerator::new(61, 2 * n as u64).next().unwrap();
        let low = low_prime(42, 2 * n as u64);
        let odd = low_prime(55, 2 * n as u64);
        for (digit, modulus, q) in [(0, 0, high), (2, 7, low), (4, 33, odd)] {
            let mut limb = vec![u64::MAX; n];
            g.fill_limb(digit, modulus, q, &mut limb);
            assert!(limb.iter().all(|&x| x < q));
            let mut rejected = 0;
            for (k, &x) in limb.iter().enumerate() {
                let k = k as u64;
                assert_eq!(x, g.coefficient(digit, modulus, q, k), "k = {k}");
                if g.word(stream_id(digit, modulus, 0), k) & mask_of(q) >= q {
                    rejected += 1;
                }
            }
            for k in [0u64, 1, 7, 8, 1000, n as u64 - 1] {
                assert_eq!(
                    limb[k as usize],
                    reference(seed, digit, modulus, q, k),
                    "k = {k}"
                );
            }
            if q != high {
                // Low primes reject about half the first candidates.
                assert!(rejected > n / 4, "{rejected}");
                for k in (0..n as u64).step_by(97) {
                    assert_eq!(limb[k as usize], reference(seed, digit, modulus, q, k));
                }
            }
        }
        // Different digits, limbs and seeds give different limbs.
        let mut a = vec![0u64; 64];
        let mut b = vec![0u64; 64];
        g.fill_limb(0, 1, high, &mut a);
        g.fill_limb(1, 1, high, &mut b);
        assert_ne!(a, b);
        g.fill_limb(0, 2, high, &mut b);
        assert_ne!(a, b);
        SeededUniform::new(&UniformSeed::new(seed32(100), seed.prf)).fill_limb(0, 1, high, &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn fill_limbs_checks_shapes_and_uses_global_indices() {
        let n = 256usize;
        let q = PrimeGenerator::new(50, 2 * n as u64).next().unwrap();
        let table = [Modulus::new(q).unwrap(), Modulus::new(q).unwrap()];
        let g = SeededUniform::new(&UniformSeed::new(seed32(3), SeedPrf::default()));
        let mut words = vec![0u64; 2 * n];
        let limbs: Vec<&mut [u64]> = words.chunks_mut(n).collect();
        g.fill_limbs(1, &table, &[1, 0], limbs).unwrap();
        let mut one = vec![0u64; n];
        g.fill_limb(1, 1, q, &mut one);
        assert_eq!(&words[..n], &one[..]);
        let limbs: Vec<&mut [u64]> = words.chunks_mut(n).collect();
        assert!(g.fill_limbs(1, &table, &[0], limbs).is_err());
        let limbs: Vec<&mut [u64]> = words.chunks_mut(n).collect();
        assert!(g.fill_limbs(1, &table, &[0, 2], limbs).is_err());
    }
}
