// Element-wise kernels over limb maps: add, sub, multiply, multiply-
// accumulate, negate, per-limb scalars, copies, the tensor product of two
// ciphertexts, the fused key-switching inner product, and automorphisms in
// the NTT domain. Grid: x covers the N coefficients, y the limbs.
#include "ckks_common.cuh"

#define OP_ADD 0u
#define OP_SUB 1u
#define OP_MUL 2u

__device__ __forceinline__ u64 apply_op(u32 op, u64 a, u64 b, const ModConst& m) {
    if (op == OP_ADD) return add_mod(a, b, m.q);
    if (op == OP_SUB) return sub_mod(a, b, m.q);
    return mul_mod(a, b, m);
}

// out = a op b (out may alias a or b limb for limb).
extern "C" __global__ void binary_op(u64 out, LimbMap out_map, u64 a, LimbMap a_map, u64 b, LimbMap b_map,
                                     const ModConst* __restrict__ consts, u32 n, u32 op) {
    const u32 limb = blockIdx.y;
    const ModConst m = consts[out_map.mod[limb]];
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* x = limb_ptr(a, a_map.pos[limb], n);
    const u64* y = limb_ptr(b, b_map.pos[limb], n);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        o[c] = apply_op(op, x[c], y[c], m);
    }
}

// acc += a * b.
extern "C" __global__ void mul_add(u64 acc, LimbMap acc_map, u64 a, LimbMap a_map, u64 b, LimbMap b_map,
                                   const ModConst* __restrict__ consts, u32 n) {
    const u32 limb = blockIdx.y;
    const ModConst m = consts[acc_map.mod[limb]];
    u64* o = limb_ptr(acc, acc_map.pos[limb], n);
    const u64* x = limb_ptr(a, a_map.pos[limb], n);
    const u64* y = limb_ptr(b, b_map.pos[limb], n);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        o[c] = add_mod(o[c], mul_mod(x[c], y[c], m), m.q);
    }
}

// x = -x.
extern "C" __global__ void negate(u64 data, LimbMap map, const ModConst* __restrict__ consts, u32 n) {
    const u32 limb = blockIdx.y;
    const u64 q = consts[map.mod[limb]].q;
    u64* o = limb_ptr(data, map.pos[limb], n);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        u64 v = o[c];
        o[c] = v == 0 ? 0 : q - v;
    }
}

struct Scalars {
    u64 value[HEMEM_MAX_LIMBS];
    u64 shoup[HEMEM_MAX_LIMBS];
};

// x = x op s_limb (s reduced; multiplication by Shoup).
extern "C" __global__ void scalar_op(u64 data, LimbMap map, Scalars scalars, const ModConst* __restrict__ consts,
                                     u32 n, u32 op) {
    const u32 limb = blockIdx.y;
    const u64 q = consts[map.mod[limb]].q;
    const u64 s = scalars.value[limb], ss = scalars.shoup[limb];
    u64* o = limb_ptr(data, map.pos[limb], n);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        u64 v = o[c];
        if (op == OP_ADD) {
            o[c] = add_mod(v, s, q);
        } else if (op == OP_SUB) {
            o[c] = sub_mod(v, s, q);
        } else {
            o[c] = mul_shoup(v, s, ss, q);
        }
    }
}

// out = (x - y) * s_limb: the last step of ModDown and of rescaling.
extern "C" __global__ void sub_then_scale(u64 out, LimbMap out_map, u64 x, LimbMap x_map, u64 y, LimbMap y_map,
                                          Scalars scalars, const ModConst* __restrict__ consts, u32 n) {
    const u32 limb = blockIdx.y;
    const u64 q = consts[out_map.mod[limb]].q;
    const u64 s = scalars.value[limb], ss = scalars.shoup[limb];
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* a = limb_ptr(x, x_map.pos[limb], n);
    const u64* b = limb_ptr(y, y_map.pos[limb], n);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        o[c] = mul_shoup(sub_mod(a[c], b[c], q), s, ss, q);
    }
}

// dst = src, limb by limb.
extern "C" __global__ void copy_limbs(u64 dst, LimbMap dst_map, u64 src, LimbMap src_map, u32 n) {
    const u32 limb = blockIdx.y;
    u64* o = limb_ptr(dst, dst_map.pos[limb], n);
    const u64* i = limb_ptr(src, src_map.pos[limb], n);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) o[c] = i[c];
}

// (d0, d1, d2) = (a0 b0, a0 b1 + a1 b0, a1 b1); all seven polynomials share
// one limb map.
extern "C" __global__ void tensor(u64 d0, u64 d1, u64 d2, u64 a0, u64 a1, u64 b0, u64 b1, LimbMap map,
                                  const ModConst* __restrict__ consts, u32 n) {
    const u32 limb = blockIdx.y;
    const ModConst m = consts[map.mod[limb]];
    const u32 p = map.pos[limb];
    u64 *o0 = limb_ptr(d0, p, n), *o1 = limb_ptr(d1, p, n), *o2 = limb_ptr(d2, p, n);
    const u64 *x0 = limb_ptr(a0, p, n), *x1 = limb_ptr(a1, p, n), *y0 = limb_ptr(b0, p, n), *y1 = limb_ptr(b1, p, n);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        u64 u0 = x0[c], u1 = x1[c], v0 = y0[c], v1 = y1[c];
        o0[c] = mul_mod(u0, v0, m);
        Acc128 acc = {0, 0};
        acc_mul(acc, u0, v1);
        acc_mul(acc, u1, v0);
        o1[c] = reduce_wide(acc.hi, acc.lo, m);
        o2[c] = mul_mod(u1, v1, m);
    }
}

// The key-switching inner product in one pass:
// out0 = sum_j digit_j * b_j, out1 = sum_j digit_j * a_j.
// Digits are read through digit_map, key parts through key_map, outputs
// through out_map; every map lists the same moduli.
extern "C" __global__ void key_switch_inner_product(u64 out0, u64 out1, LimbMap out_map, PtrArray digits,
                                                   LimbMap digit_map, PtrArray b, PtrArray a, LimbMap key_map,
                                                   u32 count, const ModConst* __restrict__ consts, u32 n) {
    const u32 limb = blockIdx.y;
    const ModConst m = consts[out_map.mod[limb]];
    u64* o0 = limb_ptr(out0, out_map.pos[limb], n);
    u64* o1 = limb_ptr(out1, out_map.pos[limb], n);
    const u32 dp = digit_map.pos[limb], kp = key_map.pos[limb];
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        Acc128 acc0 = {0, 0}, acc1 = {0, 0};
        for (u32 j = 0; j < count; ++j) {
            u64 d = limb_ptr(digits.ptr[j], dp, n)[c];
            acc_mul(acc0, d, limb_ptr(b.ptr[j], kp, n)[c]);
            acc_mul(acc1, d, limb_ptr(a.ptr[j], kp, n)[c]);
            // Keep the sums below 2^128: reduce every 8 terms.
            if ((j & 7u) == 7u) {
                acc0.lo = reduce_wide(acc0.hi, acc0.lo, m);
                acc0.hi = 0;
                acc1.lo = reduce_wide(acc1.hi, acc1.lo, m);
                acc1.hi = 0;
            }
        }
        o0[c] = reduce_wide(acc0.hi, acc0.lo, m);
        o1[c] = reduce_wide(acc1.hi, acc1.lo, m);
    }
}

// X -> X^g in the NTT domain: out[j] = in[perm(j)], where evaluation j sits
// at psi^(2 bitrev(j) + 1).
extern "C" __global__ void automorphism(u64 out, LimbMap out_map, u64 in, LimbMap in_map, u64 galois, u32 log_n) {
    const u32 n = 1u << log_n;
    const u32 limb = blockIdx.y;
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* x = limb_ptr(in, in_map.pos[limb], n);
    const u64 mask = 2ull * n - 1;
    for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        u64 rev = __brev(j) >> (32 - log_n);
        u64 e = (galois * (2 * rev + 1)) & mask;
        u32 k = (u32)((e - 1) >> 1);
        u32 src = __brev(k) >> (32 - log_n);
        o[j] = x[src];
    }
}
