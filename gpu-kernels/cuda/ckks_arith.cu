// Element-wise kernels over limb maps: add, sub, multiply, multiply-
// accumulate, negate, per-limb scalars, copies, the tensor product of two
// ciphertexts, the fused key-switching inner product, and automorphisms in
// the NTT domain. Grid: x covers the N coefficients, y the limbs.
#include "ckks_common.cuh"

#define OP_ADD 0u
#define OP_SUB 1u
#define OP_MUL 2u

// Two coefficients per thread through 16-byte accesses (limbs are N words,
// N even, and buffers 256-byte aligned).
__device__ __forceinline__ ulonglong2 load2(const u64* p, u32 c) {
    return *reinterpret_cast<const ulonglong2*>(p + c);
}
__device__ __forceinline__ void store2(u64* p, u32 c, u64 x, u64 y) {
    *reinterpret_cast<ulonglong2*>(p + c) = make_ulonglong2(x, y);
}
#define FOR_PAIRS(c, n) for (u32 c = 2 * (blockIdx.x * blockDim.x + threadIdx.x); c < (n); c += 2 * gridDim.x * blockDim.x)

__device__ __forceinline__ u64 apply_op(u32 op, u64 a, u64 b, const ModConst& m) {
    if (op == OP_ADD) return add_mod(a, b, m.q);
    if (op == OP_SUB) return sub_mod(a, b, m.q);
    return mul_mod(a, b, m);
}

// out = a op b (out may alias a or b limb for limb).
extern "C" __global__ void binary_op(u64 out, LimbMap out_map, u64 a, LimbMap a_map, u64 b, LimbMap b_map,
                                     const ModConst* __restrict__ consts, u32 n, u32 op) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const ModConst m = consts[out_map.mod[limb]];
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* x = limb_ptr(a, a_map.pos[limb], n);
    const u64* y = limb_ptr(b, b_map.pos[limb], n);
    FOR_PAIRS(c, n) {
        const ulonglong2 u = load2(x, c), v = load2(y, c);
        store2(o, c, apply_op(op, u.x, v.x, m), apply_op(op, u.y, v.y, m));
    }
}

// acc += a * b.
extern "C" __global__ void mul_add(u64 acc, LimbMap acc_map, u64 a, LimbMap a_map, u64 b, LimbMap b_map,
                                   const ModConst* __restrict__ consts, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const ModConst m = consts[acc_map.mod[limb]];
    u64* o = limb_ptr(acc, acc_map.pos[limb], n);
    const u64* x = limb_ptr(a, a_map.pos[limb], n);
    const u64* y = limb_ptr(b, b_map.pos[limb], n);
    FOR_PAIRS(c, n) {
        const ulonglong2 s = load2(o, c), u = load2(x, c), v = load2(y, c);
        store2(o, c, add_mod(s.x, mul_mod(u.x, v.x, m), m.q), add_mod(s.y, mul_mod(u.y, v.y, m), m.q));
    }
}

// out = [out +] sum over t < terms of a_t * b_t: a linear transform's inner
// sum for one giant step, every operand read once and out written once (a
// mul_add per term reads and writes the sum once per term). The products
// (each below q^2 < 2^124) and the old sum are added exactly in 128 bits and
// reduced once: at most HEMEM_MAX_SUM_TERMS = 8 terms keep the sum below
// 9 * 2^124 < 2^128, and the result is the sequential modular sum's.
//
// A second operand b_t with gaps.log[t] = g > 0 is periodic: the NTT form of
// a polynomial in X^(2^g) (a plaintext whose slots repeat,
// ckks/src/encoding/periodic.rs), kept as its N >> g distinct values a limb
// (limb at position p: the words from p * (N >> g)); coefficient c reads
// word c >> g, so a pair (c even) reads one word.
#define HEMEM_MAX_SUM_TERMS 8
struct SumGaps {
    u32 log[HEMEM_MAX_SUM_TERMS];
};
extern "C" __global__ void mul_sum(u64 out, LimbMap out_map, PtrArray a, LimbMap a_map, PtrArray b,
                                   LimbMap b_map, SumGaps gaps, u32 terms, u32 accumulate,
                                   const ModConst* __restrict__ consts, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const ModConst m = consts[out_map.mod[limb]];
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u32 count = min(terms, (u32)HEMEM_MAX_SUM_TERMS);
    FOR_PAIRS(c, n) {
        Acc128 s0 = acc_zero(), s1 = acc_zero();
        if (accumulate) {
            const ulonglong2 v = load2(o, c);
            s0.lo = v.x;
            s1.lo = v.y;
        }
        for (u32 t = 0; t < count; ++t) {
            const ulonglong2 u = load2(limb_ptr(a.ptr[t], a_map.pos[limb], n), c);
            const u32 g = gaps.log[t];
            ulonglong2 v;
            if (g == 0) {
                v = load2(limb_ptr(b.ptr[t], b_map.pos[limb], n), c);
            } else {
                const u64 w = __ldg(limb_ptr(b.ptr[t], b_map.pos[limb], n >> g) + (c >> g));
                v = make_ulonglong2(w, w);
            }
            acc_mul(s0, u.x, v.x);
            acc_mul(s1, u.y, v.y);
        }
        store2(o, c, acc_reduce(s0, m), acc_reduce(s1, m));
    }
}

// x = -x.
extern "C" __global__ void negate(u64 data, LimbMap map, const ModConst* __restrict__ consts, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const u64 q = consts[map.mod[limb]].q;
    u64* o = limb_ptr(data, map.pos[limb], n);
    FOR_PAIRS(c, n) {
        const ulonglong2 v = load2(o, c);
        store2(o, c, v.x == 0 ? 0 : q - v.x, v.y == 0 ? 0 : q - v.y);
    }
}

struct Scalars {
    u64 value[HEMEM_MAX_LIMBS];
    u64 shoup[HEMEM_MAX_LIMBS];
};

__device__ __forceinline__ u64 apply_scalar(u32 op, u64 v, u64 s, u64 ss, u64 q) {
    if (op == OP_ADD) return add_mod(v, s, q);
    if (op == OP_SUB) return sub_mod(v, s, q);
    return mul_shoup(v, s, ss, q);
}

// out = src op s_limb (s reduced; multiplication by Shoup); in place when
// out and src are the same limbs.
extern "C" __global__ void scalar_op(u64 out, LimbMap out_map, u64 src, LimbMap src_map, Scalars scalars,
                                     const ModConst* __restrict__ consts, u32 n, u32 op) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const u64 q = consts[out_map.mod[limb]].q;
    const u64 s = scalars.value[limb], ss = scalars.shoup[limb];
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* x = limb_ptr(src, src_map.pos[limb], n);
    FOR_PAIRS(c, n) {
        const ulonglong2 v = load2(x, c);
        store2(o, c, apply_scalar(op, v.x, s, ss, q), apply_scalar(op, v.y, s, ss, q));
    }
}

// acc += x * s_limb (s reduced; multiplication by Shoup): relinearisation's
// P*(d0, d1) onto the inner product's Q limbs in one pass, where a
// scalar_op then a binary_op wrote x and read it back.
extern "C" __global__ void scalar_mul_add(u64 acc, LimbMap acc_map, u64 x, LimbMap x_map, Scalars scalars,
                                          const ModConst* __restrict__ consts, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const u64 q = consts[acc_map.mod[limb]].q;
    const u64 s = scalars.value[limb], ss = scalars.shoup[limb];
    u64* o = limb_ptr(acc, acc_map.pos[limb], n);
    const u64* a = limb_ptr(x, x_map.pos[limb], n);
    FOR_PAIRS(c, n) {
        const ulonglong2 u = load2(o, c), v = load2(a, c);
        store2(o, c, add_mod(u.x, mul_shoup(v.x, s, ss, q), q), add_mod(u.y, mul_shoup(v.y, s, ss, q), q));
    }
}

// out = (x - y) * s_limb: the last step of ModDown and of rescaling (kept
// for callers that do not fuse it into the forward NTT).
extern "C" __global__ void sub_then_scale(u64 out, LimbMap out_map, u64 x, LimbMap x_map, u64 y, LimbMap y_map,
                                          Scalars scalars, const ModConst* __restrict__ consts, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const u64 q = consts[out_map.mod[limb]].q;
    const u64 s = scalars.value[limb], ss = scalars.shoup[limb];
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* a = limb_ptr(x, x_map.pos[limb], n);
    const u64* b = limb_ptr(y, y_map.pos[limb], n);
    FOR_PAIRS(c, n) {
        const ulonglong2 u = load2(a, c), v = load2(b, c);
        store2(o, c, mul_shoup(sub_mod(u.x, v.x, q), s, ss, q), mul_shoup(sub_mod(u.y, v.y, q), s, ss, q));
    }
}

// dst = src, limb by limb.
extern "C" __global__ void copy_limbs(u64 dst, LimbMap dst_map, u64 src, LimbMap src_map, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    u64* o = limb_ptr(dst, dst_map.pos[limb], n);
    const u64* i = limb_ptr(src, src_map.pos[limb], n);
    FOR_PAIRS(c, n) {
        const ulonglong2 v = load2(i, c);
        store2(o, c, v.x, v.y);
    }
}

// (d0, d1, d2) = (a0 b0, a0 b1 + a1 b0, a1 b1); all seven polynomials share
// one limb map.
__device__ __forceinline__ void tensor1(u64 u0, u64 u1, u64 v0, u64 v1, const ModConst& m, u64& e0, u64& e1,
                                        u64& e2) {
    e0 = mul_mod(u0, v0, m);
    Acc128 acc = acc_zero();
    acc_mul(acc, u0, v1);
    acc_mul(acc, u1, v0);
    e1 = acc_reduce(acc, m);
    e2 = mul_mod(u1, v1, m);
}

extern "C" __global__ void tensor(u64 d0, u64 d1, u64 d2, u64 a0, u64 a1, u64 b0, u64 b1, LimbMap map,
                                  const ModConst* __restrict__ consts, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const ModConst m = consts[map.mod[limb]];
    const u32 p = map.pos[limb];
    u64 *o0 = limb_ptr(d0, p, n), *o1 = limb_ptr(d1, p, n), *o2 = limb_ptr(d2, p, n);
    const u64 *x0 = limb_ptr(a0, p, n), *x1 = limb_ptr(a1, p, n), *y0 = limb_ptr(b0, p, n), *y1 = limb_ptr(b1, p, n);
    FOR_PAIRS(c, n) {
        const ulonglong2 u0 = load2(x0, c), u1 = load2(x1, c), v0 = load2(y0, c), v1 = load2(y1, c);
        u64 e0, e1, e2, f0, f1, f2;
        tensor1(u0.x, u1.x, v0.x, v1.x, m, e0, e1, e2);
        tensor1(u0.y, u1.y, v0.y, v1.y, m, f0, f1, f2);
        store2(o0, c, e0, f0);
        store2(o1, c, e1, f1);
        store2(o2, c, e2, f2);
    }
}

// The key-switching inner product in one pass:
// out0 = sum_j digit_j * b_j, out1 = sum_j digit_j * a_j, or, with
// galois != 1, the same over the digits after X -> X^galois (hoisted
// rotations): the digits are gathered through the permutation as they are
// read, so the rotated digits are never written.
// Digits are read through digit_map, key parts through key_map, outputs
// through out_map; every map lists the same moduli. The digit loop is
// unrolled to HEMEM_MAX_DIGITS so the pointer arrays are read from the
// parameter bank with constant offsets (no local-memory copy).
extern "C" __global__ void key_switch_inner_product(u64 out0, u64 out1, LimbMap out_map, PtrArray digits,
                                                   LimbMap digit_map, PtrArray b, PtrArray a, LimbMap key_map,
                                                   u32 count, const ModConst* __restrict__ consts, u32 n,
                                                   u64 galois, u32 log_n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const ModConst m = consts[out_map.mod[limb]];
    u64* o0 = limb_ptr(out0, out_map.pos[limb], n);
    u64* o1 = limb_ptr(out1, out_map.pos[limb], n);
    const size_t dp = (size_t)digit_map.pos[limb] * n, kp = (size_t)key_map.pos[limb] * n;
    const bool rotate = galois != 1;
    FOR_PAIRS(c, n) {
        const u32 src0 = rotate ? galois_source(c, galois, log_n) : c;
        const u32 src1 = rotate ? galois_source(c + 1, galois, log_n) : c + 1;
        Acc128 s0 = acc_zero(), s1 = acc_zero(), t0 = acc_zero(), t1 = acc_zero();
#pragma unroll
        for (u32 j = 0; j < HEMEM_MAX_DIGITS; ++j) {
            if (j < count) {
                const u64* dj = reinterpret_cast<const u64*>(digits.ptr[j]) + dp;
                u64 dx, dy;
                if (rotate) {
                    dx = dj[src0];
                    dy = dj[src1];
                } else {
                    const ulonglong2 d = load2(dj, c);
                    dx = d.x;
                    dy = d.y;
                }
                const ulonglong2 bj = load2(reinterpret_cast<const u64*>(b.ptr[j]) + kp, c);
                const ulonglong2 aj = load2(reinterpret_cast<const u64*>(a.ptr[j]) + kp, c);
                acc_mul(s0, dx, bj.x);
                acc_mul(s1, dx, aj.x);
                acc_mul(t0, dy, bj.y);
                acc_mul(t1, dy, aj.y);
                // Keep the sums below 2^128: reduce every 8 terms.
                if ((j & 7u) == 7u) {
                    acc_fold(s0, m);
                    acc_fold(s1, m);
                    acc_fold(t0, m);
                    acc_fold(t1, m);
                }
            }
        }
        store2(o0, c, acc_reduce(s0, m), acc_reduce(t0, m));
        store2(o1, c, acc_reduce(s1, m), acc_reduce(t1, m));
    }
}

// X -> X^g in the NTT domain: out[j] = in[perm(j)], where evaluation j sits
// at psi^(2 bitrev(j) + 1).
extern "C" __global__ void automorphism(u64 out, LimbMap out_map, u64 in, LimbMap in_map, u64 galois, u32 log_n) {
    grid_dependency_sync();
    const u32 n = 1u << log_n;
    const u32 limb = blockIdx.y;
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* x = limb_ptr(in, in_map.pos[limb], n);
    for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        o[j] = x[galois_source(j, galois, log_n)];
    }
}
