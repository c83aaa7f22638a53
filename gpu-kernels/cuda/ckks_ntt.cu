// Negacyclic NTT over many limbs, as two kernels per direction: the first
// log2(R) stages on the R = 2^log_r rows of each column ("columns" phase),
// the other log2(C) stages on contiguous rows of C = N/R words ("rows"
// phase). Each phase is a set of independent sub-transforms of M points
// (M = R or C); each thread keeps 8 points of one sub-transform in
// registers and runs up to 3 butterfly stages on them (a radix-8 group; the
// last group of a phase may have 2 or 1 stages), exchanging points with the
// other threads of its sub-transform through shared memory between groups.
// Global memory is read once and written once per phase, straight from and
// to registers. Shoup twiddles, Harvey's lazy reduction.
//
// Forward (natural -> bit-reversed): stage s has 2^s groups of stride
// t = N/2^(s+1); group i uses W = psi^bitrev(2^s + i):
// (X, Y) -> (X + W*Y, X - W*Y), values kept in [0, 4q).
// Inverse (bit-reversed -> natural): stages run backwards with
// W = psi^-bitrev(2^s + i): (X, Y) -> (X + Y, (X - Y)*W), values in [0, 2q),
// then multiplication by N^-1.
//
// In a phase, local stage sigma of sub-transform u uses the twiddle at index
// (U << sigma) + i, with U = 1 for the columns (all columns share the first
// stages' twiddles) and U = R + r for row r: the same W as the staged
// transform (ckks/src/ntt/tables.rs), so every butterfly sees the same
// inputs and twiddle as on the CPU and the results are bit-identical.
//
// Twiddle table layout, per global modulus index m (4N words at tw + 4N*m):
// N forward pairs (W, W_shoup), then N inverse pairs.
// n_inv: per modulus, (N^-1, N^-1 shoup).
//
// Block shape: S sub-transforms of M/8 threads each (S*M/8 threads, 2*S*M
// words of dynamic shared memory, double-buffered so one barrier per
// exchange suffices). Columns: thread -> (sub = tid % S, j = tid / S), so a
// warp reads S adjacent columns; rows: (j = tid % (M/8), sub = tid / (M/8)).
// Shared-memory positions are XOR-swizzled so that every exchange is free of
// bank conflicts (checked by ckks/tests/ntt_kernel_emulation.rs, which runs
// this file's index logic on the CPU).
#include "ckks_common.cuh"

// Epilogues of the forward rows phase.
#define NTT_STORE 0u         // out = v (fully reduced)
#define NTT_SUB_SCALE 1u     // out = (aux - v) * s_limb (+ add): ModDown's and rescaling's last step

typedef ulonglong2 Twiddle;  // (W, W_shoup)

__device__ __forceinline__ void fwd_bfly(u64& x, u64& y, Twiddle w, u64 q, u64 two_q) {
    const u64 a = x >= two_q ? x - two_q : x;
    const u64 v = mul_shoup_lazy(y, w.x, w.y, q);
    x = a + v;
    y = a + two_q - v;
}

__device__ __forceinline__ void inv_bfly(u64& x, u64& y, Twiddle w, u64 q, u64 two_q) {
    u64 s = x + y;
    s = s >= two_q ? s - two_q : s;
    const u64 d = mul_shoup_lazy(x + two_q - y, w.x, w.y, q);
    x = s;
    y = d;
}

// The groups of a phase of LOG_M stages: group gi covers local stages
// 3*gi .. 3*gi + h - 1.
template <int LOG_M>
struct Groups {
    static constexpr int count = (LOG_M + 2) / 3;
    static __device__ __forceinline__ constexpr int sigma(int gi) { return 3 * gi; }
    static __device__ __forceinline__ constexpr int height(int gi) {
        return 3 * gi + 3 <= LOG_M ? 3 : LOG_M - 3 * gi;
    }
};

// Point k of thread j in group gi: for a full radix-8 group at stage sigma
// (t = M >> (sigma+1)): g*2t + j' + k*t/4 with g = j / (t/4), j' = j % (t/4);
// for a shorter (last) group: 8j + k.
template <int LOG_M>
__device__ __forceinline__ u32 point_base(int gi, u32 j) {
    const int sigma = Groups<LOG_M>::sigma(gi);
    if (Groups<LOG_M>::height(gi) == 3) {
        const int log_q = LOG_M - sigma - 3;  // log2(t/4)
        const u32 g = j >> log_q, jp = j & ((1u << log_q) - 1);
        return (g << (log_q + 3)) + jp;
    }
    return j << 3;
}

template <int LOG_M>
__device__ __forceinline__ u32 point_stride(int gi) {
    return Groups<LOG_M>::height(gi) == 3 ? 1u << (LOG_M - Groups<LOG_M>::sigma(gi) - 3) : 1u;
}

// The group index g of thread j at the group's first stage (full groups),
// or j itself (shorter groups, which index their twiddles from it).
template <int LOG_M>
__device__ __forceinline__ u32 group_of(int gi, u32 j) {
    if (Groups<LOG_M>::height(gi) == 3) return j >> (LOG_M - Groups<LOG_M>::sigma(gi) - 3);
    return j;
}

// Loads the 7 (or 6, or 4) twiddles of thread j's group gi.
template <int LOG_M>
__device__ __forceinline__ void load_twiddles(Twiddle (&w)[7], const Twiddle* __restrict__ tw, u32 u, int gi,
                                              u32 j) {
    const int sigma = Groups<LOG_M>::sigma(gi);
    const int h = Groups<LOG_M>::height(gi);
    const u32 g = group_of<LOG_M>(gi, j);
    if (h == 3) {
        w[0] = __ldg(tw + (u << sigma) + g);
        w[1] = __ldg(tw + (u << (sigma + 1)) + 2 * g);
        w[2] = __ldg(tw + (u << (sigma + 1)) + 2 * g + 1);
#pragma unroll
        for (int k = 0; k < 4; ++k) w[3 + k] = __ldg(tw + (u << (sigma + 2)) + 4 * g + k);
    } else if (h == 2) {
        // Two radix-4 sets (2j, 2j+1): stage sigma groups 2j, 2j+1; stage
        // sigma+1 groups 4j .. 4j+3.
        w[0] = __ldg(tw + (u << sigma) + 2 * g);
        w[1] = __ldg(tw + (u << sigma) + 2 * g + 1);
#pragma unroll
        for (int k = 0; k < 4; ++k) w[2 + k] = __ldg(tw + (u << (sigma + 1)) + 4 * g + k);
    } else {
        // Four pairs: groups 4j .. 4j+3 of stage sigma.
#pragma unroll
        for (int k = 0; k < 4; ++k) w[k] = __ldg(tw + (u << sigma) + 4 * g + k);
    }
}

template <int LOG_M>
__device__ __forceinline__ void fwd_group(u64 (&x)[8], const Twiddle (&w)[7], int gi, u64 q, u64 two_q) {
    const int h = Groups<LOG_M>::height(gi);
    if (h == 3) {
#pragma unroll
        for (int k = 0; k < 4; ++k) fwd_bfly(x[k], x[k + 4], w[0], q, two_q);
        fwd_bfly(x[0], x[2], w[1], q, two_q);
        fwd_bfly(x[1], x[3], w[1], q, two_q);
        fwd_bfly(x[4], x[6], w[2], q, two_q);
        fwd_bfly(x[5], x[7], w[2], q, two_q);
#pragma unroll
        for (int k = 0; k < 4; ++k) fwd_bfly(x[2 * k], x[2 * k + 1], w[3 + k], q, two_q);
    } else if (h == 2) {
        fwd_bfly(x[0], x[2], w[0], q, two_q);
        fwd_bfly(x[1], x[3], w[0], q, two_q);
        fwd_bfly(x[4], x[6], w[1], q, two_q);
        fwd_bfly(x[5], x[7], w[1], q, two_q);
#pragma unroll
        for (int k = 0; k < 4; ++k) fwd_bfly(x[2 * k], x[2 * k + 1], w[2 + k], q, two_q);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) fwd_bfly(x[2 * k], x[2 * k + 1], w[k], q, two_q);
    }
}

template <int LOG_M>
__device__ __forceinline__ void inv_group(u64 (&x)[8], const Twiddle (&w)[7], int gi, u64 q, u64 two_q) {
    const int h = Groups<LOG_M>::height(gi);
    if (h == 3) {
#pragma unroll
        for (int k = 0; k < 4; ++k) inv_bfly(x[2 * k], x[2 * k + 1], w[3 + k], q, two_q);
        inv_bfly(x[0], x[2], w[1], q, two_q);
        inv_bfly(x[1], x[3], w[1], q, two_q);
        inv_bfly(x[4], x[6], w[2], q, two_q);
        inv_bfly(x[5], x[7], w[2], q, two_q);
#pragma unroll
        for (int k = 0; k < 4; ++k) inv_bfly(x[k], x[k + 4], w[0], q, two_q);
    } else if (h == 2) {
#pragma unroll
        for (int k = 0; k < 4; ++k) inv_bfly(x[2 * k], x[2 * k + 1], w[2 + k], q, two_q);
        inv_bfly(x[0], x[2], w[0], q, two_q);
        inv_bfly(x[1], x[3], w[0], q, two_q);
        inv_bfly(x[4], x[6], w[1], q, two_q);
        inv_bfly(x[5], x[7], w[1], q, two_q);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) inv_bfly(x[2 * k], x[2 * k + 1], w[k], q, two_q);
    }
}

// Shared-memory word of point p of sub-transform `sub` (S per block).
// Columns: point-major, p ^ p3 in bit 0. Rows: sub-major, the low 4 bits of
// p XORed with bits 3..6 of p and, for short rows, with the row.
template <int LOG_M, bool COLS>
__device__ __forceinline__ u32 smem_index(u32 p, u32 sub, u32 log_s) {
    if (COLS) return ((p ^ ((p >> 3) & 1u)) << log_s) + sub;
    return (sub << LOG_M) + (p ^ (((p >> 3) ^ (sub << (LOG_M - 4))) & 15u));
}

// The thread's sub-transform and index within it.
template <int LOG_M, bool COLS>
__device__ __forceinline__ void thread_coords(u32 log_s, u32& sub, u32& j) {
    const u32 tid = threadIdx.x;
    if (COLS) {
        sub = tid & ((1u << log_s) - 1);
        j = tid >> log_s;
    } else {
        j = tid & ((1u << (LOG_M - 3)) - 1);
        sub = tid >> (LOG_M - 3);
    }
}

// Writes the registers of group gi to buffer `buf`, waits, and reads those
// of group gi + 1.
template <int LOG_M, bool COLS>
__device__ __forceinline__ void exchange(u64 (&x)[8], u64* s, int from, int to, u32 sub, u32 j, u32 log_s) {
    const u32 b0 = point_base<LOG_M>(from, j), d0 = point_stride<LOG_M>(from);
#pragma unroll
    for (int k = 0; k < 8; ++k) s[smem_index<LOG_M, COLS>(b0 + k * d0, sub, log_s)] = x[k];
    __syncthreads();
    const u32 b1 = point_base<LOG_M>(to, j), d1 = point_stride<LOG_M>(to);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = s[smem_index<LOG_M, COLS>(b1 + k * d1, sub, log_s)];
}

// One forward phase of LOG_M stages on sub-transform `sub` of the block,
// whose points the caller has put in x (positions point_base/stride of
// group 0): runs every group, leaves the points of the last group in x.
template <int LOG_M, bool COLS>
__device__ __forceinline__ void forward_phase(u64 (&x)[8], const Twiddle* tw, u32 u, u64 q, u32 sub, u32 j,
                                              u32 log_s) {
    extern __shared__ u64 smem[];
    const u64 two_q = 2 * q;
    const u32 elems = 1u << (LOG_M + log_s);
#pragma unroll
    for (int gi = 0; gi < Groups<LOG_M>::count; ++gi) {
        Twiddle w[7];
        load_twiddles<LOG_M>(w, tw, u, gi, j);
        if (gi > 0) exchange<LOG_M, COLS>(x, smem + (gi & 1) * elems, gi - 1, gi, sub, j, log_s);
        fwd_group<LOG_M>(x, w, gi, q, two_q);
    }
}

// One inverse phase: groups in reverse order (the shorter group first).
template <int LOG_M, bool COLS>
__device__ __forceinline__ void inverse_phase(u64 (&x)[8], const u64* in, u32 stride, const Twiddle* tw, u32 u,
                                              u64 q, u32 sub, u32 j, u32 log_s) {
    extern __shared__ u64 smem[];
    const u64 two_q = 2 * q;
    const u32 elems = 1u << (LOG_M + log_s);
    constexpr int last = Groups<LOG_M>::count - 1;
    {
        const u32 b = point_base<LOG_M>(last, j), d = point_stride<LOG_M>(last);
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = in[(size_t)(b + k * d) * stride];
    }
#pragma unroll
    for (int gi = last; gi >= 0; --gi) {
        Twiddle w[7];
        load_twiddles<LOG_M>(w, tw, u, gi, j);
        if (gi < last) exchange<LOG_M, COLS>(x, smem + (gi & 1) * elems, gi + 1, gi, sub, j, log_s);
        inv_group<LOG_M>(x, w, gi, q, two_q);
    }
}

__device__ __forceinline__ const Twiddle* twiddles_of(const u64* tw, u32 mod, u32 n, bool inverse) {
    return reinterpret_cast<const Twiddle*>(tw + (size_t)mod * 4 * n) + (inverse ? n : 0);
}

// Constants of one source of a fused base conversion, staged in shared
// memory: its limb's address, q, q_hat_inv and its Shoup quotient, 1/q (f64
// bits), and q_hat mod the block's target prime.
struct ConvSource {
    const u64* limb;
    u64 q, qhi, qhis, inv_q, q_hat;
};

// What the forward columns phase reads (mode & 3), and a flag.
#define NTT_LOAD 0u            // x = limb of aux[z] (src_map)
#define NTT_CONVERT 1u         // x = approximate base conversion of conv_in
#define NTT_CONVERT_EXACT 2u   // x = exact (HPS, centred) base conversion of conv_in
#define NTT_SPREAD 3u          // x = centred lift of one limb of conv_in (rescale)
#define NTT_PRESCALED 4u       // conversions: conv_in holds y_i = x_i q_hat_inv_i already
#define NTT_COMPACT 8u         // x = compact words of aux[z] (mode >> 8: log gap), reduced

// The output-list entry of limb t of part z in the rows phase: with skip,
// the part's own entries (copied by the columns phase) are passed over.
__device__ __forceinline__ u32 rows_entry(const Parts& parts, u32 z, u32 t) {
    if (parts.skip && t >= part_start(parts, z)) return t + part_span(parts, z);
    return t;
}

// Forward, columns phase (stages 0 .. log_r-1, LOG_M = log_r), part z =
// blockIdx.z, output entry blockIdx.y of dst_map, written to parts.dst[z].
// NTT_LOAD reads the entry's limb of parts.aux[z] (src_map; the output
// itself for an in-place transform). The conversions compute the input of
// the entry's limb as the block loads its points (the converted limbs are
// never written): from part z's sources (conv_map entries
// [z*per, z*per + span), coefficient form, or y_i with NTT_PRESCALED) with
// part z's table (parts.extra[z], ckks_convert.cu's layout, targets in
// dst_map order less the part's own entries when parts.skip). With skip,
// the part's own entries copy the limb of parts.aux[z] (src_map: the
// digit's NTT form) instead. NTT_SPREAD lifts conv_map entry z (centred)
// into the entry's prime. NTT_COMPACT reads part z's compact plaintext at
// parts.aux[z] (coefficient i is word i >> log_gap where i is a multiple of
// 2^log_gap, zero elsewhere) reduced into the entry's prime. Same
// arithmetic as base_convert, spread_centered and expand_compact.
template <int LOG_M>
__device__ __forceinline__ void fwd_columns(const Parts& parts, const LimbMap& dst_map, const LimbMap& src_map,
                                            const ModConst* __restrict__ consts, const u64* __restrict__ tw,
                                            u32 log_c, u32 log_s, u64 conv_in, const LimbMap& conv_map, u32 mode) {
    __shared__ ConvSource sources[HEMEM_MAX_SOURCES];
    // The target's -p^-1 mod 2^64 (0: a wide sum, reduced by Barrett),
    // staged with the sources: read from the table in the epilogue it
    // spilled at 64 registers.
    __shared__ u64 conv_p_inv_neg;
    extern __shared__ u64 smem[];
    u32 sub, j;
    thread_coords<LOG_M, true>(log_s, sub, j);
    const u32 z = blockIdx.z;
    const u32 entry = blockIdx.y;
    const u32 mod = dst_map.mod[entry];
    const u32 n = 1u << (LOG_M + log_c);
    const ModConst m = consts[mod];
    const u32 c = (blockIdx.x << log_s) + sub;
    u64* out = limb_ptr(parts.dst[z], dst_map.pos[entry], n) + c;
    const u32 b0 = point_base<LOG_M>(0, j), d0 = point_stride<LOG_M>(0);
    const u32 kind = mode & 3u;
    const u32 first = part_start(parts, z), ks = part_span(parts, z);
    const bool own = parts.skip && entry >= first && entry < first + ks;
    u64 x[8];
    if (mode & NTT_COMPACT) {
        const u64* words = reinterpret_cast<const u64*>(parts.aux[z]);
        const u32 log_gap = mode >> 8;
        const u32 mask = (1u << log_gap) - 1;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const u32 i = ((b0 + k * d0) << log_c) + c;
            x[k] = (i & mask) == 0 ? reduce_f64_bits(words[i >> log_gap], m) : 0ull;
        }
    } else if (kind == NTT_LOAD || own) {
        const u64* in = limb_ptr(parts.aux[z], src_map.pos[entry], n) + c;
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = in[(size_t)(b0 + k * d0) << log_c];
        if (own) {
            // ModUp's own limb: already in NTT form, copied.
#pragma unroll
            for (int k = 0; k < 8; ++k) out[(size_t)(b0 + k * d0) << log_c] = x[k];
            return;
        }
    } else if (kind == NTT_SPREAD) {
        const u64* in = limb_ptr(conv_in, conv_map.pos[first], n) + c;
        const u64 p = consts[conv_map.mod[first]].q;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const u64 v = in[(size_t)(b0 + k * d0) << log_c];
            // Centre in (-p/2, p/2], then reduce modulo q.
            if (v > p / 2) {
                const u64 neg = reduce_u128(0, p - v, m);
                x[k] = neg == 0 ? 0 : m.q - neg;
            } else {
                x[k] = reduce_u128(0, v, m);
            }
        }
    } else {
        const u64* table = reinterpret_cast<const u64*>(parts.extra[z]);
        const u32 targets = dst_map.count - (parts.skip ? ks : 0u);
        const u32 row = parts.skip && entry >= first ? entry - ks : entry;
        if (threadIdx.x < ks) {
            const u32 i = threadIdx.x;
            sources[i].limb = limb_ptr(conv_in, conv_map.pos[first + i], n);
            sources[i].q = consts[conv_map.mod[first + i]].q;
            sources[i].qhi = table[i];
            sources[i].qhis = table[ks + i];
            sources[i].inv_q = table[2 * ks + i];
            sources[i].q_hat = table[3 * ks + targets + (size_t)row * ks + i];
            if (i == 0) conv_p_inv_neg = table[3 * ks + targets + (size_t)targets * ks + row];
        }
        __syncthreads();
        const bool exact = kind == NTT_CONVERT_EXACT;
        const bool prescaled = (mode & NTT_PRESCALED) != 0;
        // Four points at a time, their loads issued together; converted
        // points go through this thread's own slots of the second exchange
        // buffer (first used after a barrier every thread passes later), so
        // the point loop need not be unrolled around the source loop.
#pragma unroll 1
        for (int k0 = 0; k0 < 8; k0 += 4) {
            Acc128 acc[4];
            double sum[4];
            // Word offsets of the four points in a limb (n <= 2^17): one
            // register each, and one IMAD.WIDE per load where 64-bit byte
            // offsets took two registers and two additions.
            u32 at[4];
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                acc[kk] = acc_zero();
                sum[kk] = 0.0;
                at[kk] = ((b0 + (k0 + kk) * d0) << log_c) + c;
            }
#pragma unroll 1
            for (u32 i = 0; i < ks; ++i) {
                const ConvSource& s = sources[i];
                u64 y[4];
                // The sources are another launch's output, read-only here.
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) y[kk] = __ldg(s.limb + at[kk]);
                if (!prescaled) {
                    const u64 q = s.q, qhi = s.qhi, qhis = s.qhis;
#pragma unroll
                    for (int kk = 0; kk < 4; ++kk) y[kk] = mul_shoup(y[kk], qhi, qhis, q);
                }
                if (exact) {
                    const double inv_q = __longlong_as_double((long long)s.inv_q);
#pragma unroll
                    for (int kk = 0; kk < 4; ++kk)
                        sum[kk] = __dadd_rn(sum[kk], __dmul_rn(__ull2double_rn(y[kk]), inv_q));
                }
                const u64 q_hat = s.q_hat;
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) acc_mul(acc[kk], y[kk], q_hat);
            }
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                // The exact conversion's correction v·(-Q mod p_j) is folded
                // into the 128-bit sum, as on the CPU: the sum is below
                // p·(Σ_i (q_i - 1) + v) with v <= ks <= 16 and every prime
                // below 2^62, so below 2^128, and one reduction finishes it.
                // (-Q mod p_j is loaded here, not held across the source
                // loop: held, it spilled at 64 registers.)
                // With the table's factors in Montgomery form (p_inv_neg
                // != 0: a narrow sum) one Montgomery reduction finishes it.
                if (exact) acc_mul(acc[kk], (u64)__dadd_rn(sum[kk], 0.5), table[3 * ks + row]);
                const u64 r = reduce_sum(acc[kk], m, conv_p_inv_neg);
                smem[smem_index<LOG_M, true>(b0 + (k0 + kk) * d0, sub, log_s)] = r;
            }
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = smem[smem_index<LOG_M, true>(b0 + k * d0, sub, log_s)];
    }
    forward_phase<LOG_M, true>(x, twiddles_of(tw, mod, n, false), 1u, m.q, sub, j, log_s);
    constexpr int last = Groups<LOG_M>::count - 1;
    const u32 b = point_base<LOG_M>(last, j), d = point_stride<LOG_M>(last);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[(size_t)(b + k * d) << log_c] = x[k];
}

// Forward, rows phase (stages log_r .. log_n-1, LOG_M = log_c), part z =
// blockIdx.z, limb blockIdx.y of the part (rows_entry: with parts.skip the
// part's own entries are passed over): transforms the entry's limb of
// parts.dst[z] in place, fully reduced; with NTT_SUB_SCALE,
// dst = (aux - v) * scale[entry] instead (aux: parts.aux[z] through
// aux_map, scale = (s, s_shoup) per entry), plus the entry's limb of
// parts.extra[z] (add_map, reduced) where that is not 0, read through the
// automorphism add_galois.g[z] where that is above 1 (add_addend).
template <int LOG_M>
__device__ __forceinline__ void fwd_rows(const Parts& parts, const LimbMap& map, const ModConst* __restrict__ consts,
                                         const u64* __restrict__ tw, u32 log_r, u32 log_s, const LimbMap& aux_map,
                                         const Twiddle* __restrict__ scale, u32 mode, const LimbMap& add_map,
                                         const PartGalois& add_galois) {
    u32 sub, j;
    thread_coords<LOG_M, false>(log_s, sub, j);
    const u32 z = blockIdx.z;
    const u32 entry = rows_entry(parts, z, blockIdx.y);
    if (entry >= map.count) return;
    const u32 mod = map.mod[entry];
    const u32 n = 1u << (LOG_M + log_r);
    const u64 q = consts[mod].q;
    const u64 two_q = 2 * q;
    const u32 r = (blockIdx.x << log_s) + sub;
    u64* row = limb_ptr(parts.dst[z], map.pos[entry], n) + ((size_t)r << LOG_M);
    u64 x[8];
    {
        const u32 b = point_base<LOG_M>(0, j), d = point_stride<LOG_M>(0);
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = row[b + k * d];
    }
    forward_phase<LOG_M, false>(x, twiddles_of(tw, mod, n, false), (1u << log_r) + r, q, sub, j, log_s);
    // The last group's points are 8j .. 8j+7: four 16-byte stores.
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        u64 v = x[k];
        v = v >= two_q ? v - two_q : v;
        x[k] = v >= q ? v - q : v;
    }
    u64* out = row + 8 * j;
    if (mode == NTT_SUB_SCALE) {
        const Twiddle s = scale[entry];
        const u64* a = limb_ptr(parts.aux[z], aux_map.pos[entry], n) + ((size_t)r << LOG_M) + 8 * j;
#pragma unroll
        for (int k = 0; k < 8; k += 2) {
            const ulonglong2 av = *reinterpret_cast<const ulonglong2*>(a + k);
            x[k] = mul_shoup(sub_mod(av.x, x[k], q), s.x, s.y, q);
            x[k + 1] = mul_shoup(sub_mod(av.y, x[k + 1], q), s.x, s.y, q);
        }
        const u64 add = parts.extra[z];
        if (add != 0) {
            add_addend<8>(x, limb_ptr(add, add_map.pos[entry], n), (r << LOG_M) + 8 * j, add_galois.g[z],
                           LOG_M + log_r, q);
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k += 2) *reinterpret_cast<ulonglong2*>(out + k) = make_ulonglong2(x[k], x[k + 1]);
}

// Inverse, rows phase (stages log_n-1 .. log_r), part z = blockIdx.z: reads
// limb blockIdx.y of parts.aux[z] (src_map), writes that of parts.dst[z]
// (dst_map).
template <int LOG_M>
__device__ __forceinline__ void inv_rows(const Parts& parts, const LimbMap& dst_map, const LimbMap& src_map,
                                         const ModConst* __restrict__ consts, const u64* __restrict__ tw, u32 log_r,
                                         u32 log_s) {
    u32 sub, j;
    thread_coords<LOG_M, false>(log_s, sub, j);
    const u32 z = blockIdx.z;
    const u32 limb = blockIdx.y;
    const u32 mod = dst_map.mod[limb];
    const u32 n = 1u << (LOG_M + log_r);
    const u64 q = consts[mod].q;
    const u32 r = (blockIdx.x << log_s) + sub;
    const u64* in = limb_ptr(parts.aux[z], src_map.pos[limb], n) + ((size_t)r << LOG_M);
    u64* out = limb_ptr(parts.dst[z], dst_map.pos[limb], n) + ((size_t)r << LOG_M);
    u64 x[8];
    inverse_phase<LOG_M, false>(x, in, 1u, twiddles_of(tw, mod, n, true), (1u << log_r) + r, q, sub, j, log_s);
    const u32 b = point_base<LOG_M>(0, j), d = point_stride<LOG_M>(0);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[b + k * d] = x[k];
}

// Inverse, columns phase (stages log_r-1 .. 0), in place on limb blockIdx.y
// of parts.dst[z], then times the (s, s_shoup) pair of `scale` at the
// limb's modulus (the N^-1 table) or, with by_limb, at the limb (N^-1
// q_hat_inv: the y_i of a conversion), fully reduced.
template <int LOG_M>
__device__ __forceinline__ void inv_columns(const Parts& parts, const LimbMap& map,
                                            const ModConst* __restrict__ consts, const u64* __restrict__ tw,
                                            const u64* __restrict__ scale, u32 by_limb, u32 log_c, u32 log_s) {
    u32 sub, j;
    thread_coords<LOG_M, true>(log_s, sub, j);
    const u32 z = blockIdx.z;
    const u32 limb = blockIdx.y;
    const u32 mod = map.mod[limb];
    const u32 n = 1u << (LOG_M + log_c);
    const u64 q = consts[mod].q;
    const u32 c = (blockIdx.x << log_s) + sub;
    u64* col = limb_ptr(parts.dst[z], map.pos[limb], n) + c;
    u64 x[8];
    inverse_phase<LOG_M, true>(x, col, 1u << log_c, twiddles_of(tw, mod, n, true), 1u, q, sub, j, log_s);
    const u32 at = 2 * (by_limb ? limb : mod);
    const u64 ni = scale[at], nis = scale[at + 1];
    const u32 b = point_base<LOG_M>(0, j), d = point_stride<LOG_M>(0);
#pragma unroll
    for (int k = 0; k < 8; ++k) col[(size_t)(b + k * d) << log_c] = mul_shoup(x[k], ni, nis, q);
}

// ---------------------------------------------------------------------------
// Rows phase with 16 points per thread (NttRows::Radix16 in
// src/launch/ckks/ntt.rs; the columns phase is unchanged).
//
// The same butterflies, twiddles and lazy ranges as the 8-point kernels
// above, grouped four stages at a time (radix-16 groups) instead of three:
// for N = 2^16 (log_c = 8) a row of 256 points takes two groups and one
// shared-memory exchange (one barrier) instead of three groups and two; a
// block transforms the same 2^11 points with 128 threads instead of 256,
// and each thread has 8 independent butterflies per stage instead of 4
// (twice the instruction-level parallelism, which is what the 8-point
// kernels lack: ncu sees them latency-bound at 41 % occupancy). Every
// point meets the same butterflies in the same order with the same
// twiddle, so the output is bit-identical to the 8-point kernels'.
//
// The "more points per thread, fewer exchanges" idea is the
// hierarchical two-kernel NTT of Kim, Jung, Park, Ahn, "Accelerating
// number theoretic transformations for bootstrappable homomorphic
// encryption on GPUs" (IISWC 2020, §IV-B/C: per-thread radix-2^k
// sub-transforms in registers between shared-memory exchanges) and of
// Jung et al., "Over 100x faster bootstrapping in fully homomorphic
// encryption through memory-centric optimization with GPUs" (TCHES 2021,
// §4.1).
//
// A full group of height 4 at local stage sigma (t = M >> (sigma+1)):
// thread j holds points g*2t + j' + k*t/8 (g = j / (t/8), j' = j % (t/8)),
// k = 0..15; a shorter (last) group of height h holds the contiguous points
// 16j + k. At the group's stage s the pairs are (k, k + 2^(h-1-s)) and the
// pair's twiddle is at (U << (sigma+s)) + (G << s) + (k >> (h-s)), with
// G = g (full) or j << (4-h) (short). The last group's points are always
// 16j .. 16j+15 (LOG_M a multiple of 4, or a short last group).
// ---------------------------------------------------------------------------

template <int LOG_M>
struct Groups16 {
    static constexpr int count = (LOG_M + 3) / 4;
    static __device__ __forceinline__ constexpr int sigma(int gi) { return 4 * gi; }
    static __device__ __forceinline__ constexpr int height(int gi) {
        return 4 * gi + 4 <= LOG_M ? 4 : LOG_M - 4 * gi;
    }
};

template <int LOG_M>
__device__ __forceinline__ u32 point_base16(int gi, u32 j) {
    if (Groups16<LOG_M>::height(gi) == 4) {
        const int log_q = LOG_M - Groups16<LOG_M>::sigma(gi) - 4;  // log2(t/8)
        const u32 g = j >> log_q, jp = j & ((1u << log_q) - 1);
        return (g << (log_q + 4)) + jp;
    }
    return j << 4;
}

template <int LOG_M>
__device__ __forceinline__ u32 point_stride16(int gi) {
    return Groups16<LOG_M>::height(gi) == 4 ? 1u << (LOG_M - Groups16<LOG_M>::sigma(gi) - 4) : 1u;
}

// G: the twiddle offset of thread j's group gi at its first stage.
template <int LOG_M>
__device__ __forceinline__ u32 group_of16(int gi, u32 j) {
    const int h = Groups16<LOG_M>::height(gi);
    if (h == 4) return j >> (LOG_M - Groups16<LOG_M>::sigma(gi) - 4);
    return j << (4 - h);
}

// The twiddles of thread j's group gi: stage s's (16 >> (h-s)) values in
// w[s][0 ..] (1, 2, 4, 8 for a full group; 15 in all).
template <int LOG_M>
__device__ __forceinline__ void load_twiddles16(Twiddle (&w)[4][8], const Twiddle* __restrict__ tw, u32 u, int gi,
                                                u32 j) {
    const int sigma = Groups16<LOG_M>::sigma(gi);
    const int h = Groups16<LOG_M>::height(gi);
    const u32 g = group_of16<LOG_M>(gi, j);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        if (s < h) {
            const Twiddle* base = tw + (u << (sigma + s)) + (g << s);
#pragma unroll
            for (int i = 0; i < 8; ++i)
                if (i < (16 >> (h - s))) w[s][i] = __ldg(base + i);
        }
    }
}

template <int LOG_M>
__device__ __forceinline__ void fwd_group16(u64 (&x)[16], const Twiddle (&w)[4][8], int gi, u64 q, u64 two_q) {
    const int h = Groups16<LOG_M>::height(gi);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        if (s < h) {
            const int dist = 1 << (h - 1 - s);
#pragma unroll
            for (int k = 0; k < 16; ++k)
                if ((k & dist) == 0) fwd_bfly(x[k], x[k + dist], w[s][k >> (h - s)], q, two_q);
        }
    }
}

template <int LOG_M>
__device__ __forceinline__ void inv_group16(u64 (&x)[16], const Twiddle (&w)[4][8], int gi, u64 q, u64 two_q) {
    const int h = Groups16<LOG_M>::height(gi);
#pragma unroll
    for (int s = 3; s >= 0; --s) {
        if (s < h) {
            const int dist = 1 << (h - 1 - s);
#pragma unroll
            for (int k = 0; k < 16; ++k)
                if ((k & dist) == 0) inv_bfly(x[k], x[k + dist], w[s][k >> (h - s)], q, two_q);
        }
    }
}

// Shared-memory word of point p of row `sub`: row-major, the low 4 bits of
// p XORed with bits 4..7 (conflict-free for the exchanges of log M = 8:
// positions j + 16k and 16j + k).
template <int LOG_M>
__device__ __forceinline__ u32 smem_index16(u32 p, u32 sub) {
    return (sub << LOG_M) + (p ^ ((p >> 4) & 15u));
}

template <int LOG_M>
__device__ __forceinline__ void thread_coords16(u32& sub, u32& j) {
    j = threadIdx.x & ((1u << (LOG_M - 4)) - 1);
    sub = threadIdx.x >> (LOG_M - 4);
}

template <int LOG_M>
__device__ __forceinline__ void exchange16(u64 (&x)[16], u64* s, int from, int to, u32 sub, u32 j) {
    const u32 b0 = point_base16<LOG_M>(from, j), d0 = point_stride16<LOG_M>(from);
#pragma unroll
    for (int k = 0; k < 16; ++k) s[smem_index16<LOG_M>(b0 + k * d0, sub)] = x[k];
    __syncthreads();
    const u32 b1 = point_base16<LOG_M>(to, j), d1 = point_stride16<LOG_M>(to);
#pragma unroll
    for (int k = 0; k < 16; ++k) x[k] = s[smem_index16<LOG_M>(b1 + k * d1, sub)];
}

// Forward, rows phase with 16 points per thread: as fwd_rows (same
// arguments, same epilogues), 128 threads per block of 2^log_s rows.
template <int LOG_M>
__device__ __forceinline__ void fwd_rows16(const Parts& parts, const LimbMap& map, const ModConst* __restrict__ consts,
                                           const u64* __restrict__ tw, u32 log_r, u32 log_s, const LimbMap& aux_map,
                                           const Twiddle* __restrict__ scale, u32 mode, const LimbMap& add_map,
                                           const PartGalois& add_galois) {
    extern __shared__ u64 smem[];
    u32 sub, j;
    thread_coords16<LOG_M>(sub, j);
    const u32 z = blockIdx.z;
    const u32 entry = rows_entry(parts, z, blockIdx.y);
    if (entry >= map.count) return;
    const u32 mod = map.mod[entry];
    const u32 n = 1u << (LOG_M + log_r);
    const u64 q = consts[mod].q;
    const u64 two_q = 2 * q;
    const u32 r = (blockIdx.x << log_s) + sub;
    const u32 elems = 1u << (LOG_M + log_s);
    u64* row = limb_ptr(parts.dst[z], map.pos[entry], n) + ((size_t)r << LOG_M);
    const Twiddle* t = twiddles_of(tw, mod, n, false);
    const u32 u = (1u << log_r) + r;
    u64 x[16];
    {
        const u32 b = point_base16<LOG_M>(0, j), d = point_stride16<LOG_M>(0);
#pragma unroll
        for (int k = 0; k < 16; ++k) x[k] = row[b + k * d];
    }
#pragma unroll
    for (int gi = 0; gi < Groups16<LOG_M>::count; ++gi) {
        Twiddle w[4][8];
        load_twiddles16<LOG_M>(w, t, u, gi, j);
        if (gi > 0) exchange16<LOG_M>(x, smem + (gi & 1) * elems, gi - 1, gi, sub, j);
        fwd_group16<LOG_M>(x, w, gi, q, two_q);
    }
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        u64 v = x[k];
        v = v >= two_q ? v - two_q : v;
        x[k] = v >= q ? v - q : v;
    }
    u64* out = row + 16 * j;
    if (mode == NTT_SUB_SCALE) {
        const Twiddle s = scale[entry];
        const u64* a = limb_ptr(parts.aux[z], aux_map.pos[entry], n) + ((size_t)r << LOG_M) + 16 * j;
#pragma unroll
        for (int k = 0; k < 16; k += 2) {
            const ulonglong2 av = *reinterpret_cast<const ulonglong2*>(a + k);
            x[k] = mul_shoup(sub_mod(av.x, x[k], q), s.x, s.y, q);
            x[k + 1] = mul_shoup(sub_mod(av.y, x[k + 1], q), s.x, s.y, q);
        }
        const u64 add = parts.extra[z];
        if (add != 0) {
            add_addend<16>(x, limb_ptr(add, add_map.pos[entry], n), (r << LOG_M) + 16 * j, add_galois.g[z],
                           LOG_M + log_r, q);
        }
    }
#pragma unroll
    for (int k = 0; k < 16; k += 2) *reinterpret_cast<ulonglong2*>(out + k) = make_ulonglong2(x[k], x[k + 1]);
}

// Inverse, rows phase with 16 points per thread: as inv_rows.
template <int LOG_M>
__device__ __forceinline__ void inv_rows16(const Parts& parts, const LimbMap& dst_map, const LimbMap& src_map,
                                           const ModConst* __restrict__ consts, const u64* __restrict__ tw, u32 log_r,
                                           u32 log_s) {
    extern __shared__ u64 smem[];
    u32 sub, j;
    thread_coords16<LOG_M>(sub, j);
    const u32 z = blockIdx.z;
    const u32 limb = blockIdx.y;
    const u32 mod = dst_map.mod[limb];
    const u32 n = 1u << (LOG_M + log_r);
    const u64 q = consts[mod].q;
    const u64 two_q = 2 * q;
    const u32 r = (blockIdx.x << log_s) + sub;
    const u32 elems = 1u << (LOG_M + log_s);
    const u64* in = limb_ptr(parts.aux[z], src_map.pos[limb], n) + ((size_t)r << LOG_M);
    u64* out = limb_ptr(parts.dst[z], dst_map.pos[limb], n) + ((size_t)r << LOG_M);
    const Twiddle* t = twiddles_of(tw, mod, n, true);
    const u32 u = (1u << log_r) + r;
    constexpr int last = Groups16<LOG_M>::count - 1;
    u64 x[16];
    {
        const u32 b = point_base16<LOG_M>(last, j), d = point_stride16<LOG_M>(last);
#pragma unroll
        for (int k = 0; k < 16; ++k) x[k] = in[b + k * d];
    }
#pragma unroll
    for (int gi = last; gi >= 0; --gi) {
        Twiddle w[4][8];
        load_twiddles16<LOG_M>(w, t, u, gi, j);
        if (gi < last) exchange16<LOG_M>(x, smem + (gi & 1) * elems, gi + 1, gi, sub, j);
        inv_group16<LOG_M>(x, w, gi, q, two_q);
    }
    const u32 b = point_base16<LOG_M>(0, j), d = point_stride16<LOG_M>(0);
#pragma unroll
    for (int k = 0; k < 16; ++k) out[b + k * d] = x[k];
}

// Entry points, one per phase size: columns LOG_M = log_r in 5..8, rows
// LOG_M = log_c in 5..9 (NttGeometry in src/launch/ckks/ntt.rs). At most
// 64 registers (4 blocks of 256 threads per SM), asked for by the forward
// and the inverse kernels alike (no spills at 64). Exceptions, which would
// spill at 64: the forward rows kernel of N = 2^17 (log M 9, with the
// epilogue's addend) asks for 3 blocks (80 registers), and the columns
// kernels of small N (forward log M 5, 6; inverse log M 5: test sizes) ask
// for nothing.
#define HEMEM_NTT_COLUMNS(L, MIN_BLOCKS, INV_MIN_BLOCKS)                                                                \
    extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS)                                            \
        ntt_fwd_cols_##L(Parts parts, LimbMap dst_map, LimbMap src_map, const ModConst* __restrict__ consts, \
                         const u64* __restrict__ tw, u32 log_c, u32 log_s, u64 conv_in, LimbMap conv_map,    \
                         u32 mode) {                                                                         \
        grid_dependency_sync();                                                                               \
        fwd_columns<L>(parts, dst_map, src_map, consts, tw, log_c, log_s, conv_in, conv_map, mode);           \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(256, INV_MIN_BLOCKS)                                        \
        ntt_inv_cols_##L(Parts parts, LimbMap map, const ModConst* __restrict__ consts,                      \
                         const u64* __restrict__ tw, const u64* __restrict__ scale, u32 by_limb, u32 log_c,  \
                         u32 log_s) {                                                                        \
        grid_dependency_sync();                                                                               \
        inv_columns<L>(parts, map, consts, tw, scale, by_limb, log_c, log_s);                                 \
    }

#define HEMEM_NTT_ROWS(L, MIN_BLOCKS, INV_MIN_BLOCKS)                                                         \
    extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS)                                            \
        ntt_fwd_rows_##L(Parts parts, LimbMap map, const ModConst* __restrict__ consts,                      \
                         const u64* __restrict__ tw, u32 log_r, u32 log_s, LimbMap aux_map,                  \
                         const u64* __restrict__ scale, u32 mode, LimbMap add_map, PartGalois add_galois) {  \
        grid_dependency_sync();                                                                               \
        fwd_rows<L>(parts, map, consts, tw, log_r, log_s, aux_map, reinterpret_cast<const Twiddle*>(scale),   \
                    mode, add_map, add_galois);                                                              \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(256, INV_MIN_BLOCKS)                                        \
        ntt_inv_rows_##L(Parts parts, LimbMap dst_map, LimbMap src_map, const ModConst* __restrict__ consts, \
                         const u64* __restrict__ tw, u32 log_r, u32 log_s) {                                 \
        grid_dependency_sync();                                                                               \
        inv_rows<L>(parts, dst_map, src_map, consts, tw, log_r, log_s);                                       \
    }

HEMEM_NTT_COLUMNS(5, 1, 1)
HEMEM_NTT_COLUMNS(6, 1, 4)
HEMEM_NTT_COLUMNS(7, 4, 4)
HEMEM_NTT_COLUMNS(8, 4, 4)
HEMEM_NTT_ROWS(5, 4, 4)
HEMEM_NTT_ROWS(6, 4, 4)
HEMEM_NTT_ROWS(7, 4, 4)
HEMEM_NTT_ROWS(8, 4, 4)
HEMEM_NTT_ROWS(9, 3, 4)

// The 16-point rows kernels: 128 threads per block (16 points each, the
// same 2^11 points per block as the 8-point kernels). ptxas 13.0, sm_90:
// the forward kernels use 126 registers with no spill at 4 blocks per SM
// (5 spills 8-16 bytes), the inverse ones 80 with no spill at 6 blocks.
#define HEMEM_NTT_ROWS16(L, MIN_BLOCKS, INV_MIN_BLOCKS)                                                       \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS)                                            \
        ntt_fwd_rows16_##L(Parts parts, LimbMap map, const ModConst* __restrict__ consts,                    \
                           const u64* __restrict__ tw, u32 log_r, u32 log_s, LimbMap aux_map,                \
                           const u64* __restrict__ scale, u32 mode, LimbMap add_map, PartGalois add_galois) { \
        grid_dependency_sync();                                                                               \
        fwd_rows16<L>(parts, map, consts, tw, log_r, log_s, aux_map, reinterpret_cast<const Twiddle*>(scale), \
                      mode, add_map, add_galois);                                                            \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(128, INV_MIN_BLOCKS)                                        \
        ntt_inv_rows16_##L(Parts parts, LimbMap dst_map, LimbMap src_map, const ModConst* __restrict__ consts, \
                           const u64* __restrict__ tw, u32 log_r, u32 log_s) {                               \
        grid_dependency_sync();                                                                               \
        inv_rows16<L>(parts, dst_map, src_map, consts, tw, log_r, log_s);                                     \
    }

HEMEM_NTT_ROWS16(5, 4, 6)
HEMEM_NTT_ROWS16(6, 4, 6)
HEMEM_NTT_ROWS16(7, 4, 6)
HEMEM_NTT_ROWS16(8, 4, 6)
HEMEM_NTT_ROWS16(9, 4, 6)

// Expansion of compact plaintexts whose words are the M = 2^log_m
// coefficients of a polynomial in X^(N/M): a message whose slots repeat
// with period M/2 (ckks/src/ntt/subring.rs). Its transform is M values,
// each repeated N/M times (output c is value c >> log_gap), and those M
// values are the first log M stages of the forward transform run on the M
// coefficients alone, with the same twiddles. Part z (grid z) reads the
// words at src.ptr[z] and writes the limbs of `map` in dst.ptr[z] (grid y:
// the limb), NTT form. Each block transforms the M points in shared memory
// (M <= 4096: 32 KiB) and writes its share (grid x) of the limb's
// 2^log_out outputs, two per thread and store: with log_out = log N the
// whole transform (output c is value c >> log_gap), with log_out = log_m
// the M values alone (the periodic form that mul_sum reads with a gap).
// Every output is fully reduced, so the limbs are those of expanding the
// words and transforming at N points.
extern "C" __global__ void __launch_bounds__(256)
    expand_periodic(PtrArray dst, PtrArray src, LimbMap map, const ModConst* __restrict__ consts,
                    const u64* __restrict__ tw, u32 n, u32 log_m, u32 log_out) {
    grid_dependency_sync();
    extern __shared__ u64 pts[];
    const u32 limb = blockIdx.y;
    const u32 part = blockIdx.z;
    const u32 mod = map.mod[limb];
    const ModConst m = consts[mod];
    const u64 q = m.q, two_q = 2 * q;
    const u32 points = 1u << log_m;
    const u64* s = reinterpret_cast<const u64*>(src.ptr[part]);
    for (u32 k = threadIdx.x; k < points; k += blockDim.x) pts[k] = reduce_f64_bits(s[k], m);
    __syncthreads();
    const Twiddle* w = twiddles_of(tw, mod, n, false);
    // Stage with 2^g groups of stride t = M >> (g+1): group i uses the
    // twiddle at 2^g + i, as the staged transform's first stages.
    for (u32 g = 0; g < log_m; ++g) {
        const u32 log_t = log_m - g - 1;
        const u32 t = 1u << log_t;
        for (u32 b = threadIdx.x; b < points / 2; b += blockDim.x) {
            const u32 i = b >> log_t;
            const u32 x = (i << (log_t + 1)) + (b & (t - 1));
            u64 hi = pts[x], lo = pts[x + t];
            fwd_bfly(hi, lo, __ldg(w + (1u << g) + i), q, two_q);
            pts[x] = hi;
            pts[x + t] = lo;
        }
        __syncthreads();
    }
    for (u32 k = threadIdx.x; k < points; k += blockDim.x) {
        u64 v = pts[k];
        v = v >= two_q ? v - two_q : v;
        pts[k] = v >= q ? v - q : v;
    }
    __syncthreads();
    const u32 outputs = 1u << log_out;
    u64* o = limb_ptr(dst.ptr[part], map.pos[limb], outputs);
    const u32 log_gap = log_out - log_m;
    const u32 step = 2 * gridDim.x * blockDim.x;
    for (u32 c = 2 * (blockIdx.x * blockDim.x + threadIdx.x); c < outputs; c += step) {
        *reinterpret_cast<ulonglong2*>(o + c) = make_ulonglong2(pts[c >> log_gap], pts[(c + 1) >> log_gap]);
    }
}
