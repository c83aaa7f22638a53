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
// The generator: one thread per ChaCha block = 8 consecutive coefficients of
// one limb. The inner product: one quad of threads per block (chacha_quad).
// Grid: x covers a limb's blocks (grid-stride), y the limbs.
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
    grid_dependency_sync();
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

// ChaCha's block function computed by a quad of threads (lanes 4k .. 4k+3 of
// a warp, `lane` = the thread's index in its quad): lane l holds column l of
// the state (words l, 4+l, 8+l, 12+l), runs the column rounds on its own
// words and the diagonal rounds after rotating b, c, d across the quad by
// shuffles. `sigma`, `kb`, `kc`, `d0` are the lane's initial words. The
// block's eight 64-bit words (word k = state words 2k, 2k+1) end up two per
// lane: words `quad_first(lane)` and `quad_first(lane) + 4`, in `first` and
// `second`. Bit for bit chacha_words' block, a quarter of its state per
// thread: the inner product holds two 128-bit sums per coefficient it owns,
// and with one thread per block (eight coefficients) it needed 196
// registers and ran one block of 256 threads per SM (latency-bound); with a
// quad per block it needs 80 and runs three.
__device__ __forceinline__ u32 quad_first(u32 lane) { return (lane >> 1) + 2 * (lane & 1); }

__device__ __forceinline__ void chacha_quad(u32 double_rounds, u32 lane, u32 sigma, u32 kb, u32 kc, u32 d0,
                                            u64& first, u64& second) {
    const u32 full = 0xffffffffu;
    u32 a = sigma, b = kb, c = kc, d = d0;
#pragma unroll 1
    for (u32 r = 0; r < double_rounds; ++r) {
        QUARTER(a, b, c, d);
        // Diagonal round: lane l takes (a_l, b_{l+1}, c_{l+2}, d_{l+3}).
        b = __shfl_sync(full, b, lane + 1, 4);
        c = __shfl_sync(full, c, lane + 2, 4);
        d = __shfl_sync(full, d, lane + 3, 4);
        QUARTER(a, b, c, d);
        b = __shfl_sync(full, b, lane + 3, 4);
        c = __shfl_sync(full, c, lane + 2, 4);
        d = __shfl_sync(full, d, lane + 1, 4);
    }
    a += sigma;
    b += kb;
    c += kc;
    d += d0;
    // Lanes 2m and 2m+1 hold the low and high halves of four words: the
    // even lane keeps the words of rows a and c, the odd one those of b, d.
    const bool odd = (lane & 1) != 0;
    const u32 v1 = __shfl_xor_sync(full, odd ? a : b, 1, 4);
    const u32 v2 = __shfl_xor_sync(full, odd ? c : d, 1, 4);
    first = odd ? ((u64)v1 | ((u64)b << 32)) : ((u64)a | ((u64)v1 << 32));
    second = odd ? ((u64)v2 | ((u64)d << 32)) : ((u64)c | ((u64)v2 << 32));
}

// Word `i` (0..3) of a four-word array without a dynamic index (which would
// put the array in local memory).
__device__ __forceinline__ u32 pick4(u32 i, u32 w0, u32 w1, u32 w2, u32 w3) {
    return i == 0 ? w0 : i == 1 ? w1 : i == 2 ? w2 : w3;
}

// The key-switching inner product with a compressed key:
// out0 = sum_j digit_j * b_j, out1 = sum_j digit_j * a_j, where a_j (digit j
// of the key with `seed`, over the limb's global modulus index) is generated
// here and never stored; with galois != 1, over the digits after
// X -> X^galois (hoisted rotations), gathered as they are read.
// Digits are read through digit_map, b_j through key_map, outputs through
// out_map; every map lists the same moduli. A quad of threads owns one
// ChaCha block (8 consecutive coefficients), each thread two of them
// (quad_first(lane) and quad_first(lane) + 4), so a warp's loads still
// cover whole 32-byte sectors. The digit loop is unrolled to
// HEMEM_MAX_DIGITS so the pointer arrays are read from the parameter bank
// with constant offsets. n is a multiple of 64 (whole warps share the loop's
// exit, as the shuffles need). Three blocks per SM (80 registers, no
// spill): with acc_mul's lazy words the compiler otherwise takes 104 and
// fits only two.
extern "C" __global__ void __launch_bounds__(256, 3)
    key_switch_inner_product_seeded(u64 out0, u64 out1, LimbMap out_map, PtrArray digits, LimbMap digit_map,
                                    PtrArray b, LimbMap key_map, Seed seed, u32 count,
                                    const ModConst* __restrict__ consts, u32 n, u64 galois, u32 log_n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const u32 modulus = out_map.mod[limb];
    const ModConst m = consts[modulus];
    const u64 mask = bit_mask(m.bits);
    u64* o0 = limb_ptr(out0, out_map.pos[limb], n);
    u64* o1 = limb_ptr(out1, out_map.pos[limb], n);
    const size_t dp = (size_t)digit_map.pos[limb] * n, kp = (size_t)key_map.pos[limb] * n;
    const bool rotate = galois != 1;
    const u32 lane = threadIdx.x & 3;
    const u32 sigma = pick4(lane, SIGMA0, SIGMA1, SIGMA2, SIGMA3);
    const u32 kb = pick4(lane, seed.w[0], seed.w[1], seed.w[2], seed.w[3]);
    const u32 kc = pick4(lane, seed.w[4], seed.w[5], seed.w[6], seed.w[7]);
    const u32 first = quad_first(lane);
    const u32 blocks = n >> 3;
    const u32 step = (gridDim.x * blockDim.x) >> 2;
    for (u32 w = (blockIdx.x * blockDim.x + threadIdx.x) >> 2; w < blocks; w += step) {
        const u32 c0 = w * 8 + first, c1 = c0 + 4;
        Acc128 s0 = acc_zero(), s1 = acc_zero(), t0 = acc_zero(), t1 = acc_zero();
#pragma unroll
        for (u32 j = 0; j < HEMEM_MAX_DIGITS; ++j) {
            if (j < count) {
                // Loads first: their latency hides behind the block function.
                const u64* dj = reinterpret_cast<const u64*>(digits.ptr[j]) + dp;
                const u64* bj = reinterpret_cast<const u64*>(b.ptr[j]) + kp;
                const u64 d0 = rotate ? dj[galois_source(c0, galois, log_n)] : dj[c0];
                const u64 d1 = rotate ? dj[galois_source(c1, galois, log_n)] : dj[c1];
                const u64 b0 = bj[c0], b1 = bj[c1];
                // Stream digit << 32 | modulus, counter w: state word 12 + lane.
                const u32 dl = pick4(lane, w, 0u, modulus, j);
                u64 a0, a1;
                chacha_quad(seed.double_rounds, lane, sigma, kb, kc, dl, a0, a1);
                const u64 base = ((u64)j << 32) | (u64)modulus;
                a0 &= mask;
                a1 &= mask;
                if (a0 >= m.q) a0 = retry_coefficient(seed, base, c0, m.q, mask);
                if (a1 >= m.q) a1 = retry_coefficient(seed, base, c1, m.q, mask);
                acc_mul(s0, d0, b0);
                acc_mul(s1, d1, b1);
                acc_mul(t0, d0, a0);
                acc_mul(t1, d1, a1);
                // Keep the sums below 2^128: reduce every 8 terms.
                if ((j & 7u) == 7u) {
                    acc_fold(s0, m);
                    acc_fold(s1, m);
                    acc_fold(t0, m);
                    acc_fold(t1, m);
                }
            }
        }
        o0[c0] = acc_reduce(s0, m);
        o0[c1] = acc_reduce(s1, m);
        o1[c0] = acc_reduce(t0, m);
        o1[c1] = acc_reduce(t1, m);
    }
}
