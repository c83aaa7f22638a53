// Buffer touch and verify kernels: the memory system's GPU tests use them to
// write a pattern into a buffer, check it word by word after the buffer has
// been evicted and brought back, and read a buffer so that its pages are used.
//
// The pattern is word i of seed s = splitmix64(s + i); hemem_gpu_kernels::pattern_word
// computes the same value on the host.

typedef unsigned long long u64;

__device__ __forceinline__ u64 splitmix64(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// dst[i] = splitmix64(seed + i) for i < words. Grid-stride loop.
extern "C" __global__ void touch_fill(u64* dst, u64 words, u64 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
        dst[i] = splitmix64(seed + i);
    }
}

// Adds to *mismatches the number of words i < words with
// src[i] != splitmix64(seed + i). One atomic per thread that found any.
extern "C" __global__ void touch_verify(const u64* src, u64 words, u64 seed, u64* mismatches) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 bad = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
        bad += (src[i] != splitmix64(seed + i)) ? 1ull : 0ull;
    }
    if (bad != 0) {
        atomicAdd(mismatches, bad);
    }
}

// Reads every word of src and folds them into *sink with one atomic XOR per
// thread, so that the reads cannot be optimised away.
extern "C" __global__ void touch_read(const u64* src, u64 words, u64* sink) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 acc = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
        acc ^= src[i];
    }
    atomicXor(sink, acc);
}
