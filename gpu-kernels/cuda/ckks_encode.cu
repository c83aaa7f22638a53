// Expansion of compact plaintexts: the rounded f64 coefficients the encoder
// keeps (one word per nonzero coefficient) spread into RNS limbs.
#include "ckks_common.cuh"

// x mod q for the bits of an integer-valued double, exactly (as the CPU's
// Modulus::reduce_f64): below 2^63 the value converts to a word without
// loss; above, it is mantissa · 2^shift, reduced 62 bits of shift at a time
// (r · 2^s < q · 2^64, what reduce_u128 accepts). A non-finite word (which
// the encoder never stores) gives 0.
__device__ __forceinline__ u64 reduce_f64_bits(u64 bits, const ModConst& m) {
    const u64 magnitude = bits & 0x7fffffffffffffffull;
    const u32 biased = (u32)(magnitude >> 52);
    if (biased == 0x7ff) return 0;
    u64 r;
    if (biased < 1023 + 63) {
        const u64 v = __double2ull_rz(__longlong_as_double((long long)magnitude));
        r = reduce_u128(0, v, m);
    } else {
        const u64 mantissa = (magnitude & ((1ull << 52) - 1)) | (1ull << 52);
        u32 shift = biased - 1075;
        r = reduce_u128(0, mantissa, m);
        while (shift > 0) {
            const u32 s = shift < 62u ? shift : 62u;
            r = reduce_u128(r >> (64 - s), r << s, m);
            shift -= s;
        }
    }
    if ((bits >> 63) != 0 && r != 0) r = m.q - r;
    return r;
}

// Part z (grid z) reads the compact words at src.ptr[z] and writes the limbs
// of `map` in the buffer dst.ptr[z] (grid y: the limb), coefficient form:
// coefficient c is word c >> log_gap when c is a multiple of 2^log_gap,
// zero otherwise. Two coefficients per thread (16-byte stores).
extern "C" __global__ void expand_compact(PtrArray dst, PtrArray src, LimbMap map,
                                          const ModConst* __restrict__ consts, u32 n, u32 log_gap) {
    const u32 limb = blockIdx.y;
    const u32 part = blockIdx.z;
    const ModConst m = consts[map.mod[limb]];
    u64* o = limb_ptr(dst.ptr[part], map.pos[limb], n);
    const u64* s = reinterpret_cast<const u64*>(src.ptr[part]);
    const u32 mask = (1u << log_gap) - 1;
    const u32 step = 2 * gridDim.x * blockDim.x;
    for (u32 c = 2 * (blockIdx.x * blockDim.x + threadIdx.x); c < n; c += step) {
        const u64 r0 = (c & mask) == 0 ? reduce_f64_bits(s[c >> log_gap], m) : 0ull;
        const u64 r1 = ((c + 1) & mask) == 0 ? reduce_f64_bits(s[(c + 1) >> log_gap], m) : 0ull;
        *reinterpret_cast<ulonglong2*>(o + c) = make_ulonglong2(r0, r1);
    }
}
