// Shared definitions of hemem's CKKS kernels: modular arithmetic on 64-bit
// words (primes below 2^62), per-modulus constants, and limb maps.
//
// Every kernel leaves its outputs fully reduced in [0, q), so results are
// bit-identical to the CPU backend whatever the internal (lazy) ranges are.
#pragma once

typedef unsigned long long u64;
typedef unsigned int u32;

#define HEMEM_MAX_LIMBS 64
#define HEMEM_MAX_DIGITS 16
#define HEMEM_MAX_SOURCES 16
// A conversion sums up to HEMEM_MAX_SOURCES products y_i·q_hat below
// (2^62)^2 and its correction v·(-Q mod p) with v <= HEMEM_MAX_SOURCES in
// 128 bits with no intermediate reduction (base_convert, fwd_columns): 16
// sources is the most that bound allows.
static_assert(HEMEM_MAX_SOURCES <= 16, "a conversion's 128-bit sum would overflow");
#define HEMEM_MAX_PARTS 16

// Programmatic dependent launch (CUDA C++ Programming Guide, "Programmatic
// Dependent Launch and Synchronization"; PTX ISA 7.8, griddepcontrol, sm_90).
// Every CKKS kernel calls this first, before it reads or writes any global
// memory. A launch made with the programmatic-serialization attribute
// (src/launch/mod.rs, `Launch`) may start its blocks while the kernel before
// it in the stream still runs; `griddepcontrol.wait` holds every thread
// until all grids it depends on have completed and their writes are visible,
// so what follows sees exactly what a serial launch would (and writes nothing
// the previous kernel still reads). Since every kernel waits before it can
// complete, a chain of such launches keeps the stream's order transitively.
// `griddepcontrol.launch_dependents` then lets the next launch schedule its
// blocks: it takes effect once every block of this grid has issued it or
// exited, that is during this grid's last wave, which is the tail the next
// kernel's start overlaps. Launched without the attribute both instructions
// are no-ops; the sm_75 PTX (older cards) has neither.
__device__ __forceinline__ void grid_dependency_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Constants of one modulus (global index), uploaded once per context.
struct ModConst {
    u64 q;
    u64 mu;        // floor(2^(2b) / q), b = bit length of q: one-word Barrett
    u64 ratio_lo;  // floor(2^128 / q), low word: two-word Barrett
    u64 ratio_hi;  // high word
    u32 bits;      // b
    u32 pad;
};

// Which limbs of a buffer a launch touches: limb i of the view is limb
// pos[i] of the buffer, reduced modulo the prime with global index mod[i].
struct LimbMap {
    u32 count;
    unsigned short pos[HEMEM_MAX_LIMBS];
    unsigned short mod[HEMEM_MAX_LIMBS];
};

// Device pointers of several buffers (gadget digits, key parts).
struct PtrArray {
    u64 ptr[HEMEM_MAX_DIGITS];
};

// Independent parts of one batched launch, along blockIdx.z (the NTT
// kernels): part z writes buffer dst[z]; aux[z] and extra[z] are what each
// kernel says (a source, a minuend, a conversion table, an addend). With
// per > 0, part z owns the entries [z*per, z*per + span) of the source list
// (span = min(per, total - z*per)): a gadget digit, or one polynomial's
// limbs of a pair; with skip, those entries of the output list are the
// digit's own limbs (ModUp), which the part copies instead of converting.
struct Parts {
    u64 dst[HEMEM_MAX_PARTS];
    u64 aux[HEMEM_MAX_PARTS];
    u64 extra[HEMEM_MAX_PARTS];
    u32 per;
    u32 total;
    u32 skip;
    u32 pad;
};

__device__ __forceinline__ u32 part_start(const Parts& p, u32 z) { return z * p.per; }

__device__ __forceinline__ u32 part_span(const Parts& p, u32 z) {
    const u32 start = z * p.per;
    return start >= p.total ? 0u : min(p.per, p.total - start);
}

__device__ __forceinline__ u64 add_mod(u64 a, u64 b, u64 q) {
    u64 s = a + b;
    return s >= q ? s - q : s;
}

__device__ __forceinline__ u64 sub_mod(u64 a, u64 b, u64 q) {
    return a >= b ? a - b : a + q - b;
}

// x = hi·2^64 + lo mod q, fully reduced, for every 128-bit x: Barrett with
// the two-word constant floor(2^128/q). The quotient estimate is exactly
// floor(x·floor(2^128/q) / 2^128), which is floor(x/q) or one less, so one
// conditional subtraction finishes it (the same arithmetic as the CPU's
// Modulus::reduce_u128, where the proof is written and tested at the
// 128-bit extremes).
__device__ __forceinline__ u64 reduce_u128(u64 hi, u64 lo, const ModConst& m) {
    u64 low = __umul64hi(lo, m.ratio_lo);
    // mid = hi·ratio_lo + lo·ratio_hi + low, 128 bits; only its high word matters.
    u64 a_lo = hi * m.ratio_lo;
    u64 a_hi = __umul64hi(hi, m.ratio_lo);
    u64 b_lo = lo * m.ratio_hi;
    u64 b_hi = __umul64hi(lo, m.ratio_hi);
    u64 s1 = a_lo + b_lo;
    u64 c1 = s1 < a_lo ? 1ull : 0ull;
    u64 s2 = s1 + low;
    u64 c2 = s2 < s1 ? 1ull : 0ull;
    u64 mid_hi = a_hi + b_hi + c1 + c2;
    u64 quotient = hi * m.ratio_hi + mid_hi;
    u64 r = lo - quotient * m.q;
    return r >= m.q ? r - m.q : r;
}

// x·2^-64 mod q, fully reduced, for x = hi·2^64 + lo < q·2^64 (Montgomery's
// reduction; p_inv_neg = -q^-1 mod 2^64): the low words of x and m·q add to
// 0 mod 2^64, with a carry unless lo is 0, and (x + m·q)/2^64 < 2q. Two
// multiplications where Barrett's reduce_u128 takes seven; the same as the
// CPU's montgomery_reduce (ckks/src/rns/convert.rs).
__device__ __forceinline__ u64 montgomery_reduce(u64 hi, u64 lo, u64 q, u64 p_inv_neg) {
    const u64 m = lo * p_inv_neg;
    const u64 t = hi + __umul64hi(m, q) + (lo != 0 ? 1ull : 0ull);
    return t >= q ? t - q : t;
}

// a·b mod q for a, b < q < 2^62 (one-word Barrett; the estimate is off by at
// most two).
__device__ __forceinline__ u64 mul_mod(u64 a, u64 b, const ModConst& m) {
    u64 lo = a * b;
    u64 hi = __umul64hi(a, b);
    u32 s = m.bits - 1;
    u64 x = (lo >> s) | (hi << (64 - s));
    u64 plo = x * m.mu;
    u64 phi = __umul64hi(x, m.mu);
    u32 t = m.bits + 1;
    u64 est = (plo >> t) | (phi << (64 - t));
    u64 r = lo - est * m.q;
    if (r >= m.q) r -= m.q;
    if (r >= m.q) r -= m.q;
    return r;
}

// a·w mod q by Shoup, lazily in [0, 2q), for any word a and w < q with
// w_shoup = floor(w·2^64/q).
__device__ __forceinline__ u64 mul_shoup_lazy(u64 a, u64 w, u64 w_shoup, u64 q) {
    u64 est = __umul64hi(a, w_shoup);
    return a * w - est * q;
}

__device__ __forceinline__ u64 mul_shoup(u64 a, u64 w, u64 w_shoup, u64 q) {
    u64 r = mul_shoup_lazy(a, w, w_shoup, q);
    return r >= q ? r - q : r;
}

// A sum of products of words, kept lazily as lo + mid·2^32 + hi·2^64 (each
// a 64-bit word). acc_mul adds a·b as its four 32-bit partial products:
// a0·b0 into lo, its carry and a1·b1 into hi, a0·b1 and a1·b0 into mid,
// their carries into hi's upper half. That is four IMAD.WIDE.U32 and one
// carry addition where the 128-bit multiply-add (mad.lo.cc / madc.hi on
// 64-bit words) took about fifteen instructions: ptxas builds the low and
// high products separately, a0·b0 twice. The words are combined once, when
// the sum is reduced (acc_words). The callers keep the sum's value below
// 2^128, so hi never overflows: hi·2^64 is at most the value. Any words a, b
// below 2^64 are allowed.
struct Acc128 {
    u64 lo;
    u64 mid;
    u64 hi;
};

__device__ __forceinline__ Acc128 acc_zero() { return Acc128{0ull, 0ull, 0ull}; }

// acc += a·b.
__device__ __forceinline__ void acc_mul(Acc128& acc, u64 a, u64 b) {
    asm("{\n\t.reg .u32 a0, a1, b0, b1, h0, h1;\n\t.reg .u64 t;\n\t"
        "mov.b64 {a0, a1}, %3;\n\t"
        "mov.b64 {b0, b1}, %4;\n\t"
        "mul.wide.u32 t, a0, b0;\n\t"
        "add.cc.u64 %0, %0, t;\n\t"
        "mul.wide.u32 t, a1, b1;\n\t"
        "addc.u64 %2, %2, t;\n\t"
        "mov.b64 {h0, h1}, %2;\n\t"
        "mul.wide.u32 t, a0, b1;\n\t"
        "add.cc.u64 %1, %1, t;\n\t"
        "addc.u32 h1, h1, 0;\n\t"
        "mul.wide.u32 t, a1, b0;\n\t"
        "add.cc.u64 %1, %1, t;\n\t"
        "addc.u32 h1, h1, 0;\n\t"
        "mov.b64 %2, {h0, h1};\n\t}"
        : "+l"(acc.lo), "+l"(acc.mid), "+l"(acc.hi)
        : "l"(a), "l"(b));
}

// The sum's value as two words: hi·2^64 + lo.
__device__ __forceinline__ void acc_words(const Acc128& acc, u64& hi, u64& lo) {
    lo = acc.lo + (acc.mid << 32);
    hi = acc.hi + (acc.mid >> 32) + (lo < acc.lo ? 1ull : 0ull);
}

// The sum mod q, fully reduced.
__device__ __forceinline__ u64 acc_reduce(const Acc128& acc, const ModConst& m) {
    u64 hi, lo;
    acc_words(acc, hi, lo);
    return reduce_u128(hi, lo, m);
}

// The sum reduced below q, its other words cleared: every 8 products, it
// keeps a sum of products of words below 2^62 under 2^128.
__device__ __forceinline__ void acc_fold(Acc128& acc, const ModConst& m) {
    acc.lo = acc_reduce(acc, m);
    acc.mid = 0;
    acc.hi = 0;
}

// A conversion's sum finished: by Montgomery's reduction where the table's
// factors are in Montgomery form (p_inv_neg != 0: the sources' primes sum
// below 2^64, so the sum is below q·2^64), else by Barrett's.
__device__ __forceinline__ u64 reduce_sum(const Acc128& acc, const ModConst& m, u64 p_inv_neg) {
    u64 hi, lo;
    acc_words(acc, hi, lo);
    return p_inv_neg != 0 ? montgomery_reduce(hi, lo, m.q, p_inv_neg) : reduce_u128(hi, lo, m);
}

__device__ __forceinline__ u64* limb_ptr(u64 base, u32 position, u32 n) {
    return reinterpret_cast<u64*>(base) + (size_t)position * n;
}

// The automorphism X -> X^g in the NTT domain as a gather: evaluation j
// (at psi^(2 bitrev(j) + 1)) of the result is evaluation galois_source(j)
// of the input.
__device__ __forceinline__ u32 galois_source(u32 j, u64 galois, u32 log_n) {
    const u64 mask = (2ull << log_n) - 1;
    const u64 rev = __brev(j) >> (32 - log_n);
    const u64 e = (galois * (2 * rev + 1)) & mask;
    const u32 k = (u32)((e - 1) >> 1);
    return __brev(k) >> (32 - log_n);
}

// The automorphism of each part of a batched launch (struct PartGalois):
// part z's addend is read through sigma_g for g = g[z] > 1 (1 or 0: as it
// is). The ModDowns of rotations (hoisted, single, conjugation) add each
// rotation's sigma_g(c0) this way instead of rotating c0 first (one launch,
// a write and a read of c0 fewer per rotation).
struct PartGalois {
    u32 g[HEMEM_MAX_PARTS];
};

// x[k] += addend[p + k] (k < K), or addend[galois_source(p + k)] with
// galois > 1, mod q: the addition that ends a key switch, in the forward
// rows kernels' epilogue (K contiguous points from p, p a multiple of K,
// so the plain reads are 16-byte loads). The gather reads one aligned block
// of K points (in general not p's): galois_source maps the points that
// share their high bits to points that share theirs, so a warp's reads stay
// in a few sectors.
template <int K>
__device__ __forceinline__ void add_addend(u64 (&x)[K], const u64* __restrict__ limb, u32 p, u32 galois,
                                           u32 log_n, u64 q) {
    if (galois > 1) {
#pragma unroll
        for (int k = 0; k < K; ++k) x[k] = add_mod(x[k], limb[galois_source(p + k, galois, log_n)], q);
    } else {
#pragma unroll
        for (int k = 0; k < K; k += 2) {
            const ulonglong2 ev = *reinterpret_cast<const ulonglong2*>(limb + p + k);
            x[k] = add_mod(x[k], ev.x, q);
            x[k + 1] = add_mod(x[k + 1], ev.y, q);
        }
    }
}

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
