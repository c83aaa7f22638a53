// The allocation micro-benchmark's kernels (after the reference design's
// micro-benchmark): both work on 4 KiB chunks (512 words) whose device
// addresses are listed, randomly permuted, in a table, so that consecutive
// blocks touch unrelated pages of unrelated buffers.

typedef unsigned long long u64;

#define CHUNK_WORDS 512

// Random addition: for each pair p < pairs, chunk table[2p] += chunk table[2p+1]
// word by word (wrapping). One block per pair (grid-stride over pairs).
extern "C" __global__ void bench_chunk_add(const u64* table, u64 pairs) {
    for (u64 p = blockIdx.x; p < pairs; p += gridDim.x) {
        u64* a = (u64*)table[2 * p];
        const u64* b = (const u64*)table[2 * p + 1];
        for (unsigned j = threadIdx.x; j < CHUNK_WORDS; j += blockDim.x) {
            a[j] += b[j];
        }
    }
}

// An 8-point butterfly across the 8 chunks table[8g .. 8g+8] of each group
// g < groups: word j of the 8 chunks goes through three radix-2 stages
// (x, y) -> (x + w*y, x - w*y) with fixed odd multipliers, wrapping mod 2^64,
// and is written back in place. One block per group (grid-stride over groups).
extern "C" __global__ void bench_chunk_butterfly8(const u64* table, u64 groups) {
    const u64 w[3] = {0x9E3779B97F4A7C15ull, 0xBF58476D1CE4E5B9ull, 0x94D049BB133111EBull};
    for (u64 g = blockIdx.x; g < groups; g += gridDim.x) {
        u64* c[8];
        for (int k = 0; k < 8; ++k) {
            c[k] = (u64*)table[8 * g + k];
        }
        for (unsigned j = threadIdx.x; j < CHUNK_WORDS; j += blockDim.x) {
            u64 x[8];
            for (int k = 0; k < 8; ++k) {
                x[k] = c[k][j];
            }
            for (int s = 0, half = 4; s < 3; ++s, half >>= 1) {
                for (int k = 0; k < 8; ++k) {
                    if ((k & half) == 0) {
                        u64 t = w[s] * x[k + half];
                        u64 u = x[k];
                        x[k] = u + t;
                        x[k + half] = u - t;
                    }
                }
            }
            for (int k = 0; k < 8; ++k) {
                c[k][j] = x[k];
            }
        }
    }
}
