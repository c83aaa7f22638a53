// Fast base conversion (ModUp, ModDown) and the centred spread of the last
// limb used by rescaling.
//
// Table layout for a conversion from k source moduli to m targets
// (u64 words): q_hat_inv[k], q_hat_inv_shoup[k], inv_q[k] (f64 bits),
// q_mod[m], q_hat[m][k].
#include "ckks_common.cuh"

// out_j = sum_i y_i * q_hat[j][i] with y_i = x_i * q_hat_inv_i mod q_i; with
// `exact`, minus v*Q where v = round(sum_i y_i / q_i) in f64, summed in source
// order with no fused multiply-add (as on the CPU).
extern "C" __global__ void base_convert(u64 out, LimbMap out_map, u64 in, LimbMap in_map,
                                        const u64* __restrict__ table, const ModConst* __restrict__ consts, u32 n,
                                        u32 exact) {
    const u32 k = in_map.count, mcount = out_map.count;
    const u64* qhi = table;
    const u64* qhis = table + k;
    const u64* inv_q = table + 2 * k;
    const u64* q_mod = table + 3 * k;
    const u64* q_hat = table + 3 * k + mcount;
    for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        u64 y[HEMEM_MAX_SOURCES];
        double sum = 0.0;
        for (u32 i = 0; i < k; ++i) {
            const u64 q = consts[in_map.mod[i]].q;
            u64 x = limb_ptr(in, in_map.pos[i], n)[c];
            y[i] = mul_shoup(x, qhi[i], qhis[i], q);
            if (exact) sum = __dadd_rn(sum, __dmul_rn(__ull2double_rn(y[i]), __longlong_as_double((long long)inv_q[i])));
        }
        const u64 v = exact ? (u64)__dadd_rn(sum, 0.5) : 0;
        for (u32 j = 0; j < mcount; ++j) {
            const ModConst m = consts[out_map.mod[j]];
            Acc128 acc = {0, 0};
            const u64* row = q_hat + (size_t)j * k;
            for (u32 i = 0; i < k; ++i) acc_mul(acc, y[i], row[i]);
            u64 r = reduce_wide(acc.hi, acc.lo, m);
            if (exact) r = sub_mod(r, mul_mod(reduce_u128(0, v, m), q_mod[j], m), m.q);
            limb_ptr(out, out_map.pos[j], n)[c] = r;
        }
    }
}

// For each target limb i: out_i = [centred(src)] mod q_i, with `src` one limb
// modulo `src_mod` (the dropped prime of a rescale).
extern "C" __global__ void spread_centered(u64 out, LimbMap out_map, u64 src, u32 src_mod,
                                           const ModConst* __restrict__ consts, u32 n) {
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
