// The counter-based generator of switching keys' uniform halves a_j, bit for
// bit the CPU's (ckks/src/sampling/seeded.rs states the spec), and the
// key-switching inner product that generates a_j as it reads b_j, so a_j
// never touches device memory.
//
// ChaCha (RFC 8439's block function) with the key's double rounds (6 for
// ChaCha12, the default, or 10 for ChaCha20) keyed by its 32-byte seed; state words
// 12-13 hold the 64-bit block counter, 14-15 the 64-bit stream id
// (attempt << 48) | (digit << 32) | modulus, low words first. Word k of a
// stream is block k/8's u32 words 2(k%8) (low) and 2(k%8)+1 (high).
// Coefficient k of a limb modulo q (b bits) is word k of attempt 0 masked to
// b bits when below q, else word k of attempts 1, 2, ... masked alike, the
// first below q (rare for hemem's primes, which sit just below 2^b).
//
// One thread per ChaCha block = 8 consecutive coefficients of one limb.
// Grid: x covers the N/8 blocks of a limb (grid-stride), y the limbs.
#include "ckks_common.cuh"

// The seed as eight little-endian words and the double rounds of its ChaCha
// (struct Seed in launch/ckks/prf.rs).
struct Seed {
    u32 w[8];
    u32 double_rounds;
};

#define SIGMA0 0x61707865u
#define SIGMA1 0x3320646eu
#define SIGMA2 0x79622d32u
#define SIGMA3 0x6b206574u

#define ROTL32(x, r) __funnelshift_l((x), (x), (r))

#define QUARTER(a, b, c, d)       \
    a += b;                       \
    d = ROTL32(d ^ a, 16);        \
    c += d;                       \
    b = ROTL32(b ^ c, 12);        \
    a += b;                       \
    d = ROTL32(d ^ a, 8);         \
    c += d;                       \
    b = ROTL32(b ^ c, 7);

// The eight 64-bit words of ChaCha block `counter` of `stream`.
__device__ __forceinline__ void chacha_words(const Seed& key, u64 counter, u64 stream, u64 out[8]) {
    const u32 c_lo = (u32)counter, c_hi = (u32)(counter >> 32);
    const u32 s_lo = (u32)stream, s_hi = (u32)(stream >> 32);
    u32 x0 = SIGMA0, x1 = SIGMA1, x2 = SIGMA2, x3 = SIGMA3;
    u32 x4 = key.w[0], x5 = key.w[1], x6 = key.w[2], x7 = key.w[3];
    u32 x8 = key.w[4], x9 = key.w[5], x10 = key.w[6], x11 = key.w[7];
    u32 x12 = c_lo, x13 = c_hi, x14 = s_lo, x15 = s_hi;
    // The double rounds, kept rolled: one iteration is ~100 instructions, so
    // the loop costs ~1% and the fused kernel's 16-fold digit unrolling
    // stays small.
#pragma unroll 1
    for (u32 r = 0; r < key.double_rounds; ++r) {
        QUARTER(x0, x4, x8, x12);
        QUARTER(x1, x5, x9, x13);
        QUARTER(x2, x6, x10, x14);
        QUARTER(x3, x7, x11, x15);
        QUARTER(x0, x5, x10, x15);
        QUARTER(x1, x6, x11, x12);
        QUARTER(x2, x7, x8, x13);
        QUARTER(x3, x4, x9, x14);
    }
    x0 += SIGMA0;
    x1 += SIGMA1;
    x2 += SIGMA2;
    x3 += SIGMA3;
    x4 += key.w[0];
    x5 += key.w[1];
    x6 += key.w[2];
    x7 += key.w[3];
    x8 += key.w[4];
    x9 += key.w[5];
    x10 += key.w[6];
    x11 += key.w[7];
    x12 += c_lo;
    x13 += c_hi;
    x14 += s_lo;
    x15 += s_hi;
    out[0] = (u64)x0 | ((u64)x1 << 32);
    out[1] = (u64)x2 | ((u64)x3 << 32);
    out[2] = (u64)x4 | ((u64)x5 << 32);
    out[3] = (u64)x6 | ((u64)x7 << 32);
    out[4] = (u64)x8 | ((u64)x9 << 32);
    out[5] = (u64)x10 | ((u64)x11 << 32);
    out[6] = (u64)x12 | ((u64)x13 << 32);
    out[7] = (u64)x14 | ((u64)x15 << 32);
}

// The mask of q's bit length b (b <= 62 for hemem's moduli).
__device__ __forceinline__ u64 bit_mask(u32 bits) { return bits >= 64 ? ~0ull : ((1ull << bits) - 1); }

// Coefficient k after its attempt-0 candidate was rejected: word k of
// streams base | (t << 48), t = 1, 2, ..., masked, the first below q. Out of
// line: it runs for about one coefficient in 2^20 with hemem's primes.
__device__ __noinline__ u64 retry_coefficient(Seed key, u64 base, u64 k, u64 q, u64 mask) {
    for (u64 attempt = 1;; ++attempt) {
        u64 w[8];
        chacha_words(key, k >> 3, base | (attempt << 48), w);
        const u32 i = (u32)(k & 7);
        u64 x = w[0];
#pragma unroll
        for (u32 s = 1; s < 8; ++s) {
            if (i == s) x = w[s];
        }
        x &= mask;
        if (x < q) return x;
    }
}

// Coefficients 8 block .. 8 block + 7 of the limb (stream base = digit << 32 |
// modulus), in place of v.
__device__ __forceinline__ void uniform_block(const Seed& key, u64 base, u64 block, u64 q, u64 mask, u64 v[8]) {
    chacha_words(key, block, base, v);
#pragma unroll
    for (u32 i = 0; i < 8; ++i) {
        const u64 x = v[i] & mask;
        v[i] = x < q ? x : retry_coefficient(key, base, block * 8 + i, q, mask);
    }
}

// Writes a_digit over the limbs of `map`: limb i of the view is limb pos[i] of
// `out`, modulo the prime with global index mod[i] (also the stream's
// modulus field). n is a multiple of 8.
extern "C" __global__ void uniform_from_seed(u64 out, LimbMap map, Seed seed, u32 digit,
                                             const ModConst* __restrict__ consts, u32 n) {
    const u32 limb = blockIdx.y;
    const u32 modulus = map.mod[limb];
    const ModConst m = consts[modulus];
    const u64 mask = bit_mask(m.bits);
    const u64 base = ((u64)digit << 32) | (u64)modulus;
    u64* o = limb_ptr(out, map.pos[limb], n);
    const u32 blocks = n >> 3;
    for (u32 w = blockIdx.x * blockDim.x + threadIdx.x; w < blocks; w += gridDim.x * blockDim.x) {
        u64 v[8];
        uniform_block(seed, base, (u64)w, m.q, mask, v);
        ulonglong2* p = reinterpret_cast<ulonglong2*>(o + (size_t)w * 8);
        p[0] = make_ulonglong2(v[0], v[1]);
        p[1] = make_ulonglong2(v[2], v[3]);
        p[2] = make_ulonglong2(v[4], v[5]);
        p[3] = make_ulonglong2(v[6], v[7]);
    }
}

// The key-switching inner product with a compressed key:
// out0 = sum_j digit_j * b_j, out1 = sum_j digit_j * a_j, where a_j (digit j
// of the key with `seed`, over the limb's global modulus index) is generated
// here and never stored; with galois != 1, over the digits after
// X -> X^galois (hoisted rotations), gathered as they are read.
// Digits are read through digit_map, b_j through key_map, outputs through
// out_map; every map lists the same moduli. Each thread owns 8 consecutive
// coefficients (one ChaCha block per digit). The digit loop is unrolled to
// HEMEM_MAX_DIGITS so the pointer arrays are read from the parameter bank
// with constant offsets.
extern "C" __global__ void __launch_bounds__(256)
    key_switch_inner_product_seeded(u64 out0, u64 out1, LimbMap out_map, PtrArray digits, LimbMap digit_map,
                                    PtrArray b, LimbMap key_map, Seed seed, u32 count,
                                    const ModConst* __restrict__ consts, u32 n, u64 galois, u32 log_n) {
    const u32 limb = blockIdx.y;
    const u32 modulus = out_map.mod[limb];
    const ModConst m = consts[modulus];
    const u64 mask = bit_mask(m.bits);
    u64* o0 = limb_ptr(out0, out_map.pos[limb], n);
    u64* o1 = limb_ptr(out1, out_map.pos[limb], n);
    const size_t dp = (size_t)digit_map.pos[limb] * n, kp = (size_t)key_map.pos[limb] * n;
    const bool rotate = galois != 1;
    const u32 blocks = n >> 3;
    for (u32 w = blockIdx.x * blockDim.x + threadIdx.x; w < blocks; w += gridDim.x * blockDim.x) {
        const u32 c0 = w * 8;
        Acc128 s[8], t[8];
#pragma unroll
        for (u32 i = 0; i < 8; ++i) {
            s[i].lo = 0;
            s[i].hi = 0;
            t[i].lo = 0;
            t[i].hi = 0;
        }
#pragma unroll
        for (u32 j = 0; j < HEMEM_MAX_DIGITS; ++j) {
            if (j < count) {
                // Loads first: their latency hides behind the block function.
                const u64* dj = reinterpret_cast<const u64*>(digits.ptr[j]) + dp;
                const u64* bj = reinterpret_cast<const u64*>(b.ptr[j]) + kp;
                u64 d[8], bv[8];
                if (rotate) {
#pragma unroll
                    for (u32 i = 0; i < 8; ++i) d[i] = dj[galois_source(c0 + i, galois, log_n)];
                } else {
#pragma unroll
                    for (u32 i = 0; i < 8; i += 2) {
                        const ulonglong2 x = *reinterpret_cast<const ulonglong2*>(dj + c0 + i);
                        d[i] = x.x;
                        d[i + 1] = x.y;
                    }
                }
#pragma unroll
                for (u32 i = 0; i < 8; i += 2) {
                    const ulonglong2 x = *reinterpret_cast<const ulonglong2*>(bj + c0 + i);
                    bv[i] = x.x;
                    bv[i + 1] = x.y;
                }
                u64 a[8];
                uniform_block(seed, ((u64)j << 32) | (u64)modulus, (u64)w, m.q, mask, a);
#pragma unroll
                for (u32 i = 0; i < 8; ++i) {
                    acc_mul(s[i], d[i], bv[i]);
                    acc_mul(t[i], d[i], a[i]);
                }
                // Keep the sums below 2^128: reduce every 8 terms.
                if ((j & 7u) == 7u) {
#pragma unroll
                    for (u32 i = 0; i < 8; ++i) {
                        s[i].lo = reduce_wide(s[i].hi, s[i].lo, m);
                        s[i].hi = 0;
                        t[i].lo = reduce_wide(t[i].hi, t[i].lo, m);
                        t[i].hi = 0;
                    }
                }
            }
        }
        ulonglong2* p0 = reinterpret_cast<ulonglong2*>(o0 + c0);
        ulonglong2* p1 = reinterpret_cast<ulonglong2*>(o1 + c0);
#pragma unroll
        for (u32 i = 0; i < 4; ++i) {
            p0[i] = make_ulonglong2(reduce_wide(s[2 * i].hi, s[2 * i].lo, m),
                                    reduce_wide(s[2 * i + 1].hi, s[2 * i + 1].lo, m));
            p1[i] = make_ulonglong2(reduce_wide(t[2 * i].hi, t[2 * i].lo, m),
                                    reduce_wide(t[2 * i + 1].hi, t[2 * i + 1].lo, m));
        }
    }
}
