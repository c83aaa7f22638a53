// Fast base conversion (ModUp, ModDown) and the centred spread of the last
// limb used by rescaling.
//
// Table layout for a conversion from k source moduli to m targets
// (u64 words): q_hat_inv[k], q_hat_inv_shoup[k], inv_q[k] (f64 bits),
// neg_q_mod[m] (-Q mod p_j), q_hat[m][k], p_inv_neg[m] (-p_j^-1 mod 2^64
// where the sources' primes sum below 2^64 and the two factors before it
// are in Montgomery form, else 0).
#include "ckks_common.cuh"

// out_j = sum_i y_i * q_hat[j][i] with y_i = x_i * q_hat_inv_i mod q_i; with
// `exact`, minus v*Q where v = round(sum_i y_i / q_i) in f64, summed in source
// order with no fused multiply-add (as on the CPU). The correction is folded
// into the 128-bit sum as v * (-Q mod p_j), as the CPU does, and the sum
// reduced once: it is below p_j·(Σ_i (q_i - 1) + v) with v <= k, so below
// 2^128 for the at most HEMEM_MAX_SOURCES (16) sources the launcher accepts.
//
// Grid: x over coefficients (two per thread), y over the m targets, then
// `copy_map.count` rows that copy limbs of `copy_src` into `out` (ModUp's
// own limbs, already in NTT form: one launch instead of two). Each target
// row recomputes the y_i of its coefficients (k Shoup products), which
// buys m-fold parallelism and keeps nothing in local memory.
extern "C" __global__ void base_convert(u64 out, LimbMap out_map, u64 in, LimbMap in_map,
                                        const u64* __restrict__ table, const ModConst* __restrict__ consts, u32 n,
                                        u32 exact, u64 copy_src, LimbMap copy_src_map, LimbMap copy_map) {
    grid_dependency_sync();
    const u32 k = in_map.count, mcount = out_map.count;
    const u32 row = blockIdx.y;
    const u32 step = 2 * gridDim.x * blockDim.x;
    const u32 first = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (row >= mcount) {
        const u32 i = row - mcount;
        u64* o = limb_ptr(out, copy_map.pos[i], n);
        const u64* s = limb_ptr(copy_src, copy_src_map.pos[i], n);
        for (u32 c = first; c < n; c += step) {
            *reinterpret_cast<ulonglong2*>(o + c) = *reinterpret_cast<const ulonglong2*>(s + c);
        }
        return;
    }
    const u64* qhi = table;
    const u64* qhis = table + k;
    const u64* inv_q = table + 2 * k;
    const u64* neg_q_mod = table + 3 * k;
    const u64* q_hat = table + 3 * k + mcount + (size_t)row * k;
    const u64 p_inv_neg = table[3 * k + mcount + (size_t)mcount * k + row];
    const ModConst m = consts[out_map.mod[row]];
    u64* o = limb_ptr(out, out_map.pos[row], n);
    for (u32 c = first; c < n; c += step) {
        Acc128 acc0 = acc_zero(), acc1 = acc_zero();
        double sum0 = 0.0, sum1 = 0.0;
        for (u32 i = 0; i < k; ++i) {
            const u64 q = consts[in_map.mod[i]].q;
            const ulonglong2 x = *reinterpret_cast<const ulonglong2*>(limb_ptr(in, in_map.pos[i], n) + c);
            const u64 y0 = mul_shoup(x.x, qhi[i], qhis[i], q);
            const u64 y1 = mul_shoup(x.y, qhi[i], qhis[i], q);
            if (exact) {
                const double iq = __longlong_as_double((long long)inv_q[i]);
                sum0 = __dadd_rn(sum0, __dmul_rn(__ull2double_rn(y0), iq));
                sum1 = __dadd_rn(sum1, __dmul_rn(__ull2double_rn(y1), iq));
            }
            acc_mul(acc0, y0, q_hat[i]);
            acc_mul(acc1, y1, q_hat[i]);
        }
        if (exact) {
            const u64 v0 = (u64)__dadd_rn(sum0, 0.5), v1 = (u64)__dadd_rn(sum1, 0.5);
            acc_mul(acc0, v0, neg_q_mod[row]);
            acc_mul(acc1, v1, neg_q_mod[row]);
        }
        const u64 r0 = reduce_sum(acc0, m, p_inv_neg);
        const u64 r1 = reduce_sum(acc1, m, p_inv_neg);
        *reinterpret_cast<ulonglong2*>(o + c) = make_ulonglong2(r0, r1);
    }
}

// For each target limb i: out_i = [centred(src)] mod q_i, with `src` one limb
// modulo `src_mod` (the dropped prime of a rescale).
extern "C" __global__ void spread_centered(u64 out, LimbMap out_map, u64 src, u32 src_mod,
                                           const ModConst* __restrict__ consts, u32 n) {
    grid_dependency_sync();
    const u32 limb = blockIdx.y;
    const ModConst m = consts[out_map.mod[limb]];
    const u64 p = consts[src_mod].q;
    u64* o = limb_ptr(out, out_map.pos[limb], n);
    const u64* s = reinterpret_cast<const u64*>(src);
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        u64 v = s[c];
        // Centre in (-p/2, p/2], then reduce modulo q.
        if (v > p / 2) {
            u64 neg = reduce_u128(0, p - v, m);
            o[c] = neg == 0 ? 0 : m.q - neg;
        } else {
            o[c] = reduce_u128(0, v, m);
        }
    }
}
