// Expansion of compact plaintexts: the rounded f64 coefficients the encoder
// keeps (one word per nonzero coefficient) spread into RNS limbs.
#include "ckks_common.cuh"

// Part z (grid z) reads the compact words at src.ptr[z] and writes the limbs
// of `map` in the buffer dst.ptr[z] (grid y: the limb), coefficient form:
// coefficient c is word c >> log_gap when c is a multiple of 2^log_gap,
// zero otherwise. Two coefficients per thread (16-byte stores).
extern "C" __global__ void expand_compact(PtrArray dst, PtrArray src, LimbMap map,
                                          const ModConst* __restrict__ consts, u32 n, u32 log_gap) {
    grid_dependency_sync();
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
