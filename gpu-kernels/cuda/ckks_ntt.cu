// Negacyclic NTT over many limbs, as two kernels per direction (the first
// log2(R) stages on columns, the last on contiguous rows), 8 points per
// thread in shared memory, Shoup twiddles and Harvey's lazy reduction.
//
// Forward (natural -> bit-reversed): stage s has 2^s groups of stride
// t = N/2^(s+1); group i uses W = psi^bitrev(2^s + i):
// (X, Y) -> (X + W*Y, X - W*Y), values kept in [0, 4q).
// Inverse (bit-reversed -> natural): stages run backwards with
// W = psi^-bitrev(2^s + i): (X, Y) -> (X + Y, (X - Y)*W), values in [0, 2q),
// then multiplication by N^-1.
//
// Twiddle table layout, per global modulus index m (4 tables of N words):
// tw + m*4N: forward W, forward W_shoup, inverse W, inverse W_shoup.
// n_inv: per modulus, (N^-1, N^-1 shoup).
#include "ckks_common.cuh"

// Column phase of the forward transform: stages 0 .. log_r-1. Each block
// handles `cols` adjacent columns (all R = 2^log_r rows) of one limb.
extern "C" __global__ void ntt_forward_columns(u64 data, LimbMap map, const ModConst* __restrict__ consts,
                                               const u64* __restrict__ tw, u32 log_n, u32 log_r, u32 log_cols) {
    extern __shared__ u64 s[];
    const u32 n = 1u << log_n;
    const u32 r_count = 1u << log_r;
    const u32 c_count = n >> log_r;
    const u32 limb = blockIdx.y;
    const u32 mod = map.mod[limb];
    const u64 q = consts[mod].q;
    const u64 two_q = 2 * q;
    u64* a = limb_ptr(data, map.pos[limb], n);
    const u64* w = tw + (size_t)mod * 4 * n;
    const u64* ws = w + n;
    const u32 cols = 1u << log_cols;
    const u32 c0 = blockIdx.x * cols;
    const u32 elems = r_count * cols;
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) {
        u32 r = e >> log_cols, cc = e & (cols - 1);
        s[e] = a[c0 + cc + (size_t)c_count * r];
    }
    __syncthreads();
    const u32 half = elems / 2;
    for (u32 st = 0; st < log_r; ++st) {
        const u32 log_t = log_r - st - 1;  // row stride 2^log_t
        const u32 t = 1u << log_t;
        for (u32 b = threadIdx.x; b < half; b += blockDim.x) {
            u32 cc = b & (cols - 1), k = b >> log_cols;
            u32 i = k >> log_t, j = k & (t - 1);
            u32 r1 = 2 * i * t + j;
            u32 e1 = r1 * cols + cc, e2 = (r1 + t) * cols + cc;
            u32 wi = (1u << st) + i;
            u64 x = s[e1];
            x = x >= two_q ? x - two_q : x;
            u64 v = mul_shoup_lazy(s[e2], w[wi], ws[wi], q);
            s[e1] = x + v;
            s[e2] = x + two_q - v;
        }
        __syncthreads();
    }
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) {
        u32 r = e >> log_cols, cc = e & (cols - 1);
        a[c0 + cc + (size_t)c_count * r] = s[e];
    }
}

// Row phase of the forward transform: stages log_r .. log_n-1 on contiguous
// chunks of C = N/R words; each block handles `rows` chunks. Outputs are
// fully reduced.
extern "C" __global__ void ntt_forward_rows(u64 data, LimbMap map, const ModConst* __restrict__ consts,
                                            const u64* __restrict__ tw, u32 log_n, u32 log_r, u32 rows) {
    extern __shared__ u64 s[];
    const u32 n = 1u << log_n;
    const u32 log_c = log_n - log_r;
    const u32 c_count = 1u << log_c;
    const u32 limb = blockIdx.y;
    const u32 mod = map.mod[limb];
    const u64 q = consts[mod].q;
    const u64 two_q = 2 * q;
    u64* a = limb_ptr(data, map.pos[limb], n);
    const u64* w = tw + (size_t)mod * 4 * n;
    const u64* ws = w + n;
    const u32 r0 = blockIdx.x * rows;
    const u32 elems = rows * c_count;
    const size_t base = (size_t)r0 * c_count;
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) s[e] = a[base + e];
    __syncthreads();
    const u32 half = elems / 2;
    for (u32 st = log_r; st < log_n; ++st) {
        const u32 log_t = log_n - st - 1;
        const u32 t = 1u << log_t;
        for (u32 b = threadIdx.x; b < half; b += blockDim.x) {
            u32 rl = b >> (log_c - 1);           // chunk within the block
            u32 k = b & ((c_count >> 1) - 1);    // butterfly within the chunk
            u32 i_local = k >> log_t, j = k & (t - 1);
            u32 jl = (i_local << (log_t + 1)) + j;
            u32 e1 = (rl << log_c) + jl, e2 = e1 + t;
            u32 i = ((r0 + rl) << (log_c - log_t - 1)) + i_local;
            u32 wi = (1u << st) + i;
            u64 x = s[e1];
            x = x >= two_q ? x - two_q : x;
            u64 v = mul_shoup_lazy(s[e2], w[wi], ws[wi], q);
            s[e1] = x + v;
            s[e2] = x + two_q - v;
        }
        __syncthreads();
    }
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) {
        u64 x = s[e];
        x = x >= two_q ? x - two_q : x;
        x = x >= q ? x - q : x;
        a[base + e] = x;
    }
}

// Row phase of the inverse transform: stages log_n-1 down to log_r.
extern "C" __global__ void ntt_inverse_rows(u64 data, LimbMap map, const ModConst* __restrict__ consts,
                                            const u64* __restrict__ tw, u32 log_n, u32 log_r, u32 rows) {
    extern __shared__ u64 s[];
    const u32 n = 1u << log_n;
    const u32 log_c = log_n - log_r;
    const u32 c_count = 1u << log_c;
    const u32 limb = blockIdx.y;
    const u32 mod = map.mod[limb];
    const u64 q = consts[mod].q;
    const u64 two_q = 2 * q;
    u64* a = limb_ptr(data, map.pos[limb], n);
    const u64* w = tw + (size_t)mod * 4 * n + 2 * (size_t)n;
    const u64* ws = w + n;
    const u32 r0 = blockIdx.x * rows;
    const u32 elems = rows * c_count;
    const size_t base = (size_t)r0 * c_count;
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) s[e] = a[base + e];
    __syncthreads();
    const u32 half = elems / 2;
    for (int st = (int)log_n - 1; st >= (int)log_r; --st) {
        const u32 log_t = log_n - st - 1;
        const u32 t = 1u << log_t;
        for (u32 b = threadIdx.x; b < half; b += blockDim.x) {
            u32 rl = b >> (log_c - 1);
            u32 k = b & ((c_count >> 1) - 1);
            u32 i_local = k >> log_t, j = k & (t - 1);
            u32 jl = (i_local << (log_t + 1)) + j;
            u32 e1 = (rl << log_c) + jl, e2 = e1 + t;
            u32 i = ((r0 + rl) << (log_c - log_t - 1)) + i_local;
            u32 wi = (1u << st) + i;
            u64 x = s[e1], y = s[e2];
            u64 sum = x + y;
            sum = sum >= two_q ? sum - two_q : sum;
            s[e1] = sum;
            s[e2] = mul_shoup_lazy(x + two_q - y, w[wi], ws[wi], q);
        }
        __syncthreads();
    }
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) a[base + e] = s[e];
}

// Column phase of the inverse transform: stages log_r-1 down to 0, then
// multiplication by N^-1; outputs fully reduced.
extern "C" __global__ void ntt_inverse_columns(u64 data, LimbMap map, const ModConst* __restrict__ consts,
                                               const u64* __restrict__ tw, const u64* __restrict__ n_inv,
                                               u32 log_n, u32 log_r, u32 log_cols) {
    extern __shared__ u64 s[];
    const u32 n = 1u << log_n;
    const u32 r_count = 1u << log_r;
    const u32 c_count = n >> log_r;
    const u32 limb = blockIdx.y;
    const u32 mod = map.mod[limb];
    const u64 q = consts[mod].q;
    const u64 two_q = 2 * q;
    u64* a = limb_ptr(data, map.pos[limb], n);
    const u64* w = tw + (size_t)mod * 4 * n + 2 * (size_t)n;
    const u64* ws = w + n;
    const u32 cols = 1u << log_cols;
    const u32 c0 = blockIdx.x * cols;
    const u32 elems = r_count * cols;
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) {
        u32 r = e >> log_cols, cc = e & (cols - 1);
        s[e] = a[c0 + cc + (size_t)c_count * r];
    }
    __syncthreads();
    const u32 half = elems / 2;
    for (int st = (int)log_r - 1; st >= 0; --st) {
        const u32 log_t = log_r - st - 1;
        const u32 t = 1u << log_t;
        for (u32 b = threadIdx.x; b < half; b += blockDim.x) {
            u32 cc = b & (cols - 1), k = b >> log_cols;
            u32 i = k >> log_t, j = k & (t - 1);
            u32 r1 = 2 * i * t + j;
            u32 e1 = r1 * cols + cc, e2 = (r1 + t) * cols + cc;
            u32 wi = (1u << st) + i;
            u64 x = s[e1], y = s[e2];
            u64 sum = x + y;
            sum = sum >= two_q ? sum - two_q : sum;
            s[e1] = sum;
            s[e2] = mul_shoup_lazy(x + two_q - y, w[wi], ws[wi], q);
        }
        __syncthreads();
    }
    const u64 ni = n_inv[2 * mod], nis = n_inv[2 * mod + 1];
    for (u32 e = threadIdx.x; e < elems; e += blockDim.x) {
        u32 r = e >> log_cols, cc = e & (cols - 1);
        a[c0 + cc + (size_t)c_count * r] = mul_shoup(s[e], ni, nis, q);
    }
}
