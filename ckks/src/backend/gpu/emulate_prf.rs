//! The kernels of `gpu-kernels/cuda/ckks_prf.cu` run on the CPU, thread by
//! thread (the inner product's quads of threads in lockstep, their shuffles
//! as permutations of the four lanes), as a line-by-line transliteration of
//! the CUDA source (its block functions, retry path, index arithmetic, digit
//! loop with the reduction every eight terms, Barrett reductions from
//! `ckks_common.cuh`, and the launch geometry of `launch/ckks/prf.rs`). Checked against the CPU
//! generator and the CPU backend's inner product, and for coverage: every
//! output word is written exactly once.
//!
//! Runs in CI without a GPU; any change to the kernels must be mirrored here.

#![allow(
    clippy::needless_range_loop,
    clippy::too_many_arguments,
    reason = "a line-by-line transliteration of the CUDA loops"
)]

use std::sync::Arc;

use hemem_gpu_kernels::launch::ckks::ModConst;
use hemem_gpu_kernels::launch::ckks::prf::Seed;
use rand_core::Rng;

use super::args::launch_seed;
use super::emulate::galois_source;
use super::emulate_acc::LazyAcc;
use crate::backend::{Backend, CpuBackend, Limbs, LimbsMut};
use crate::ntt::GaloisElement;
use crate::sampling::{SeedPrf, UniformSeed};
use crate::testing::seeded_rng;
use crate::zq::Modulus;
use crate::zq::primes::{PrimeGenerator, is_prime};

/// `BLOCK` of `launch/ckks/mod.rs` and the grid of `limb_grid(n / 8, limbs)`.
const BLOCK: u32 = 256;

fn grid_x(n: u32) -> u32 {
    ((n / 8).div_ceil(BLOCK)).clamp(1, 65_535)
}

const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

fn rotl32(x: u32, r: u32) -> u32 {
    // __funnelshift_l(x, x, r): the high word of (x:x) << (r & 31).
    let wide = (u64::from(x) << 32) | u64::from(x);
    ((wide << (r & 31)) >> 32) as u32
}

fn quarter(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = rotl32(x[d] ^ x[a], 16);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = rotl32(x[b] ^ x[c], 12);
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = rotl32(x[d] ^ x[a], 8);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = rotl32(x[b] ^ x[c], 7);
}

fn chacha_words(seed: &Seed, counter: u64, stream: u64, out: &mut [u64; 8]) {
    let key = &seed.words;
    let c_lo = counter as u32;
    let c_hi = (counter >> 32) as u32;
    let s_lo = stream as u32;
    let s_hi = (stream >> 32) as u32;
    let mut x = [
        SIGMA[0], SIGMA[1], SIGMA[2], SIGMA[3], key[0], key[1], key[2], key[3], key[4], key[5],
        key[6], key[7], c_lo, c_hi, s_lo, s_hi,
    ];
    let init = x;
    for _ in 0..seed.double_rounds {
        quarter(&mut x, 0, 4, 8, 12);
        quarter(&mut x, 1, 5, 9, 13);
        quarter(&mut x, 2, 6, 10, 14);
        quarter(&mut x, 3, 7, 11, 15);
        quarter(&mut x, 0, 5, 10, 15);
        quarter(&mut x, 1, 6, 11, 12);
        quarter(&mut x, 2, 7, 8, 13);
        quarter(&mut x, 3, 4, 9, 14);
    }
    for i in 0..16 {
        x[i] = x[i].wrapping_add(init[i]);
    }
    for i in 0..8 {
        out[i] = u64::from(x[2 * i]) | (u64::from(x[2 * i + 1]) << 32);
    }
}

fn bit_mask(bits: u32) -> u64 {
    if bits >= 64 { !0 } else { (1u64 << bits) - 1 }
}

fn retry_coefficient(key: &Seed, base: u64, k: u64, q: u64, mask: u64) -> u64 {
    let mut attempt = 1u64;
    loop {
        let mut w = [0u64; 8];
        chacha_words(key, k >> 3, base | (attempt << 48), &mut w);
        let i = (k & 7) as u32;
        let mut x = w[0];
        for s in 1..8u32 {
            if i == s {
                x = w[s as usize];
            }
        }
        x &= mask;
        if x < q {
            return x;
        }
        attempt += 1;
    }
}

fn uniform_block(key: &Seed, base: u64, block: u64, q: u64, mask: u64, v: &mut [u64; 8]) {
    chacha_words(key, block, base, v);
    for i in 0..8 {
        let x = v[i] & mask;
        v[i] = if x < q {
            x
        } else {
            retry_coefficient(key, base, block * 8 + i as u64, q, mask)
        };
    }
}

/// `struct LimbMap` as the kernels read it.
struct Map<'a> {
    pos: &'a [usize],
    modulus: &'a [usize],
}

/// `uniform_from_seed`, every thread of every block.
fn uniform_from_seed(
    out: &mut [u64],
    writes: &mut [u32],
    map: &Map<'_>,
    seed: &Seed,
    digit: u32,
    consts: &[ModConst],
    n: u32,
) {
    let limbs = map.pos.len() as u32;
    for block_y in 0..limbs {
        for block_x in 0..grid_x(n) {
            for thread in 0..BLOCK {
                let limb = block_y as usize;
                let modulus = map.modulus[limb];
                let m = consts[modulus];
                let mask = bit_mask(m.bits);
                let base = (u64::from(digit) << 32) | modulus as u64;
                let o = map.pos[limb] * n as usize;
                let blocks = n >> 3;
                let mut w = block_x * BLOCK + thread;
                while w < blocks {
                    let mut v = [0u64; 8];
                    uniform_block(seed, base, u64::from(w), m.q, mask, &mut v);
                    for i in 0..8 {
                        out[o + w as usize * 8 + i] = v[i];
                        writes[o + w as usize * 8 + i] += 1;
                    }
                    w += grid_x(n) * BLOCK;
                }
            }
        }
    }
}

// ckks_common.cuh's reductions and accumulator.
fn umul64hi(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) >> 64) as u64
}

fn reduce_u128(hi: u64, lo: u64, m: &ModConst) -> u64 {
    let low = umul64hi(lo, m.ratio_lo);
    let a_lo = hi.wrapping_mul(m.ratio_lo);
    let a_hi = umul64hi(hi, m.ratio_lo);
    let b_lo = lo.wrapping_mul(m.ratio_hi);
    let b_hi = umul64hi(lo, m.ratio_hi);
    let s1 = a_lo.wrapping_add(b_lo);
    let c1 = u64::from(s1 < a_lo);
    let s2 = s1.wrapping_add(low);
    let c2 = u64::from(s2 < s1);
    let mid_hi = a_hi.wrapping_add(b_hi).wrapping_add(c1).wrapping_add(c2);
    let quotient = hi.wrapping_mul(m.ratio_hi).wrapping_add(mid_hi);
    let r = lo.wrapping_sub(quotient.wrapping_mul(m.q));
    if r >= m.q { r - m.q } else { r }
}

/// `acc_reduce`: the lazy sum's value reduced by `reduce_u128`.
fn acc_reduce(acc: LazyAcc, m: &ModConst) -> u64 {
    let v = acc.value();
    reduce_u128((v >> 64) as u64, v as u64, m)
}

const MAX_DIGITS: u32 = 16;

/// `quad_first`: the first of a quad lane's two words of the block.
fn quad_first(lane: u32) -> u32 {
    (lane >> 1) + 2 * (lane & 1)
}

/// `__shfl_sync(full, v, src, 4)` for the four lanes of a quad: lane `l`
/// reads lane `(l + offset) % 4`.
fn shfl(v: [u32; 4], offset: u32) -> [u32; 4] {
    std::array::from_fn(|l| v[(l + offset as usize) % 4])
}

/// One quarter round per lane on its own (a, b, c, d).
fn quarter_lanes(a: &mut [u32; 4], b: &mut [u32; 4], c: &mut [u32; 4], d: &mut [u32; 4]) {
    for l in 0..4 {
        let mut x = [a[l], b[l], c[l], d[l]];
        quarter_words(&mut x);
        [a[l], b[l], c[l], d[l]] = x;
    }
}

fn quarter_words(x: &mut [u32; 4]) {
    x[0] = x[0].wrapping_add(x[1]);
    x[3] = rotl32(x[3] ^ x[0], 16);
    x[2] = x[2].wrapping_add(x[3]);
    x[1] = rotl32(x[1] ^ x[2], 12);
    x[0] = x[0].wrapping_add(x[1]);
    x[3] = rotl32(x[3] ^ x[0], 8);
    x[2] = x[2].wrapping_add(x[3]);
    x[1] = rotl32(x[1] ^ x[2], 7);
}

/// `chacha_quad` for the four lanes of a quad in lockstep: each lane's
/// (first, second) words.
fn chacha_quad(
    double_rounds: u32,
    sigma: [u32; 4],
    kb: [u32; 4],
    kc: [u32; 4],
    d0: [u32; 4],
) -> [(u64, u64); 4] {
    let (mut a, mut b, mut c, mut d) = (sigma, kb, kc, d0);
    for _ in 0..double_rounds {
        quarter_lanes(&mut a, &mut b, &mut c, &mut d);
        b = shfl(b, 1);
        c = shfl(c, 2);
        d = shfl(d, 3);
        quarter_lanes(&mut a, &mut b, &mut c, &mut d);
        b = shfl(b, 3);
        c = shfl(c, 2);
        d = shfl(d, 1);
    }
    for l in 0..4 {
        a[l] = a[l].wrapping_add(sigma[l]);
        b[l] = b[l].wrapping_add(kb[l]);
        c[l] = c[l].wrapping_add(kc[l]);
        d[l] = d[l].wrapping_add(d0[l]);
    }
    // __shfl_xor_sync(full, odd ? a : b, 1, 4) and likewise for (c, d).
    let send1: [u32; 4] = std::array::from_fn(|l| if l & 1 == 1 { a[l] } else { b[l] });
    let send2: [u32; 4] = std::array::from_fn(|l| if l & 1 == 1 { c[l] } else { d[l] });
    std::array::from_fn(|l| {
        let (v1, v2) = (u64::from(send1[l ^ 1]), u64::from(send2[l ^ 1]));
        if l & 1 == 1 {
            (v1 | (u64::from(b[l]) << 32), v2 | (u64::from(d[l]) << 32))
        } else {
            (u64::from(a[l]) | (v1 << 32), u64::from(c[l]) | (v2 << 32))
        }
    })
}

/// `key_switch_inner_product_seeded`, every quad of every block, its four
/// lanes in lockstep (the shuffles of `chacha_quad` stay within a quad).
fn key_switch_inner_product_seeded(
    out: [&mut [u64]; 2],
    writes: &mut [u32],
    out_map: &Map<'_>,
    digits: &[&[u64]],
    digit_map: &Map<'_>,
    b: &[&[u64]],
    key_map: &Map<'_>,
    seed: &Seed,
    consts: &[ModConst],
    n: u32,
    galois: u64,
) {
    let [out0, out1] = out;
    let count = digits.len() as u32;
    let log_n = n.trailing_zeros();
    let limbs = out_map.pos.len() as u32;
    // limb_grid(n / 2, limbs): four threads per block of eight coefficients.
    let grid = ((n / 2).div_ceil(BLOCK)).clamp(1, 65_535);
    let k = &seed.words;
    let sigma = SIGMA;
    let kb = [k[0], k[1], k[2], k[3]];
    let kc = [k[4], k[5], k[6], k[7]];
    for block_y in 0..limbs {
        for block_x in 0..grid {
            for quad in 0..BLOCK / 4 {
                let limb = block_y as usize;
                let modulus = out_map.modulus[limb];
                let m = consts[modulus];
                let mask = bit_mask(m.bits);
                let o = out_map.pos[limb] * n as usize;
                let dp = digit_map.pos[limb] * n as usize;
                let kp = key_map.pos[limb] * n as usize;
                let rotate = galois != 1;
                let blocks = n >> 3;
                let step = (grid * BLOCK) >> 2;
                let mut w = (block_x * BLOCK + 4 * quad) >> 2;
                while w < blocks {
                    let cs: [(u32, u32); 4] = std::array::from_fn(|l| {
                        let c0 = w * 8 + quad_first(l as u32);
                        (c0, c0 + 4)
                    });
                    let mut s = [[LazyAcc::default(); 2]; 4];
                    let mut t = [[LazyAcc::default(); 2]; 4];
                    for j in 0..MAX_DIGITS {
                        if j < count {
                            let dj = &digits[j as usize][dp..];
                            let bj = &b[j as usize][kp..];
                            let read = |c: u32| {
                                if rotate {
                                    dj[galois_source(c, galois, log_n) as usize]
                                } else {
                                    dj[c as usize]
                                }
                            };
                            let d0 = [w, 0, modulus as u32, j];
                            let words = chacha_quad(seed.double_rounds, sigma, kb, kc, d0);
                            let base = (u64::from(j) << 32) | modulus as u64;
                            for l in 0..4 {
                                let (c0, c1) = cs[l];
                                let (dv0, dv1) = (read(c0), read(c1));
                                let (b0, b1) = (bj[c0 as usize], bj[c1 as usize]);
                                let (mut a0, mut a1) = (words[l].0 & mask, words[l].1 & mask);
                                if a0 >= m.q {
                                    a0 = retry_coefficient(seed, base, u64::from(c0), m.q, mask);
                                }
                                if a1 >= m.q {
                                    a1 = retry_coefficient(seed, base, u64::from(c1), m.q, mask);
                                }
                                s[l][0].mul_add(dv0, b0);
                                s[l][1].mul_add(dv1, b1);
                                t[l][0].mul_add(dv0, a0);
                                t[l][1].mul_add(dv1, a1);
                                if j & 7 == 7 {
                                    for acc in s[l].iter_mut().chain(t[l].iter_mut()) {
                                        *acc = LazyAcc::from_word(acc_reduce(*acc, &m));
                                    }
                                }
                            }
                        }
                    }
                    for l in 0..4 {
                        let (c0, c1) = cs[l];
                        for (i, c) in [c0, c1].into_iter().enumerate() {
                            let at = o + c as usize;
                            out0[at] = acc_reduce(s[l][i], &m);
                            out1[at] = acc_reduce(t[l][i], &m);
                            writes[at] += 1;
                        }
                    }
                    w += step;
                }
            }
        }
    }
}

fn views<'a>(list: &'a [hemem_memory::Buffer], all: &'a [usize]) -> Vec<Limbs<'a>> {
    list.iter().map(|x| Limbs::whole(x, all).unwrap()).collect()
}

/// Real primes: the largest of 42 and 61 bits and the smallest of 45 bits
/// (half its first candidates rejected).
fn moduli(n: usize) -> Vec<Modulus> {
    let two_n = 2 * n as u64;
    let mut low = (1u64 << 44) + 1;
    while !is_prime(low) {
        low += two_n;
    }
    [
        PrimeGenerator::new(42, two_n).next().unwrap_or(0),
        low,
        PrimeGenerator::new(61, two_n).next().unwrap_or(0),
    ]
    .into_iter()
    .map(|q| Modulus::new(q).unwrap())
    .collect()
}

#[test]
fn uniform_from_seed_kernel_matches_the_cpu_generator() {
    for log_n in [10u32, 12, 13] {
        let n = 1usize << log_n;
        let table = moduli(n);
        let consts: Vec<ModConst> = table.iter().map(|m| ModConst::new(m.value())).collect();
        let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new(n, &table).unwrap());
        let mut bytes = [0u8; 32];
        seeded_rng(u64::from(log_n)).fill_bytes(&mut bytes);
        // Positions reversed, moduli permuted: the stream follows the modulus.
        let positions = [2usize, 0, 1];
        let order = [1usize, 2, 0];
        for (digit, prf) in [(0u32, SeedPrf::ChaCha12), (3, SeedPrf::ChaCha20)] {
            let seed = UniformSeed::new(bytes, prf);
            let mut out = vec![0xDEAD_BEEFu64; 3 * n];
            let mut writes = vec![0u32; 3 * n];
            let map = Map {
                pos: &positions,
                modulus: &order,
            };
            uniform_from_seed(
                &mut out,
                &mut writes,
                &map,
                &launch_seed(&seed),
                digit,
                &consts,
                n as u32,
            );
            assert!(writes.iter().all(|&w| w == 1), "every word once");
            let mut buffer = cpu
                .allocate(hemem_memory::MemoryClass::Temporary, 3, false)
                .unwrap();
            cpu.uniform_from_seed(
                &seed,
                digit as usize,
                LimbsMut {
                    buffer: &mut buffer,
                    positions: &positions,
                    moduli: &order,
                },
            )
            .unwrap();
            assert_eq!(buffer.host_words().unwrap(), &out[..], "log n {log_n}");
        }
    }
}

#[test]
fn seeded_inner_product_kernel_matches_the_cpu_backend() {
    let log_n = 11u32;
    let n = 1usize << log_n;
    let table = moduli(n);
    let consts: Vec<ModConst> = table.iter().map(|m| ModConst::new(m.value())).collect();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new(n, &table).unwrap());
    let all = [0usize, 1, 2];
    let mut rng = seeded_rng(41);
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    let mut random = || -> Vec<u64> {
        table
            .iter()
            .flat_map(|m| {
                (0..n)
                    .map(|_| rng.next_u64() % m.value())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    for (count, prf) in [(2usize, SeedPrf::ChaCha20), (9, SeedPrf::ChaCha12)] {
        let seed = UniformSeed::new(bytes, prf);
        let digits: Vec<Vec<u64>> = (0..count).map(|_| random()).collect();
        let b: Vec<Vec<u64>> = (0..count).map(|_| random()).collect();
        for galois in [
            None,
            Some(GaloisElement(5)),
            Some(GaloisElement(2 * n as u64 - 1)),
        ] {
            let mut out0 = vec![0u64; 3 * n];
            let mut out1 = vec![0u64; 3 * n];
            let mut writes = vec![0u32; 3 * n];
            let d: Vec<&[u64]> = digits.iter().map(Vec::as_slice).collect();
            let k: Vec<&[u64]> = b.iter().map(Vec::as_slice).collect();
            let map = Map {
                pos: &all,
                modulus: &all,
            };
            key_switch_inner_product_seeded(
                [&mut out0, &mut out1],
                &mut writes,
                &map,
                &d,
                &map,
                &k,
                &map,
                &launch_seed(&seed),
                &consts,
                n as u32,
                galois.map_or(1, |g| g.0),
            );
            assert!(writes.iter().all(|&w| w == 1), "every word once");
            // The CPU backend: expansion, then its inner product.
            let upload = |words: &[u64]| {
                let mut buffer = cpu
                    .allocate(hemem_memory::MemoryClass::Temporary, 3, false)
                    .unwrap();
                cpu.write(LimbsMut::whole(&mut buffer, &all).unwrap(), words)
                    .unwrap();
                buffer
            };
            let db: Vec<_> = digits.iter().map(|x| upload(x)).collect();
            let bb: Vec<_> = b.iter().map(|x| upload(x)).collect();
            let mut c0 = upload(&vec![0; 3 * n]);
            let mut c1 = upload(&vec![0; 3 * n]);
            cpu.key_switch_inner_product_seeded(
                &views(&db, &all),
                galois,
                &views(&bb, &all),
                &seed,
                LimbsMut::whole(&mut c0, &all).unwrap(),
                LimbsMut::whole(&mut c1, &all).unwrap(),
            )
            .unwrap();
            assert_eq!(c0.host_words().unwrap(), &out0[..], "{count} {galois:?}");
            assert_eq!(c1.host_words().unwrap(), &out1[..], "{count} {galois:?}");
        }
    }
}
