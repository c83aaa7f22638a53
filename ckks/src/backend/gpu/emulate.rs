//! The NTT kernels of `gpu-kernels/cuda/ckks_ntt.cu` run on the CPU, thread
//! by thread, with the very index logic of the CUDA source (a line-by-line
//! transliteration), their launch geometry ([`NttGeometry`]) and the
//! twiddle tables the backend uploads. Checked against the staged
//! reference (`forward_staged`, `inverse_staged`) and concrete-ntt at every
//! supported degree, with primes up to 61 bits (the lazy ranges), and for
//! what only an emulation can see: every exchange through shared memory is
//! a permutation, free of races between barriers and of bank conflicts
//! (two wavefronts per warp access of 64-bit words), and every global word
//! is read and written exactly once per phase.
//!
//! Runs in CI without a GPU; any change to the kernels' indexing must be
//! mirrored here.

#![allow(
    clippy::needless_range_loop,
    reason = "a line-by-line transliteration of the CUDA loops"
)]

use hemem_gpu_kernels::launch::ckks::ntt::{NttGeometry, NttRows};
use rand_core::Rng;

use super::tables::{conversion_words, twiddle_tables, y_scale_words};
use crate::ntt::{NttPlan, TwiddleTables, forward_staged, inverse_staged};
use crate::rns::BaseConverter;
use crate::testing::seeded_rng;
use crate::zq::Modulus;
use crate::zq::primes::PrimeGenerator;

type Twiddle = (u64, u64);
/// The NTT_SUB_SCALE epilogue's minuend limb, scale, and optional addend.
type SubScale<'a> = (&'a [u64], Twiddle, Option<&'a [u64]>);

fn mul_shoup_lazy(a: u64, w: u64, ws: u64, q: u64) -> u64 {
    let est = ((u128::from(a) * u128::from(ws)) >> 64) as u64;
    a.wrapping_mul(w).wrapping_sub(est.wrapping_mul(q))
}

fn mul_shoup(a: u64, w: u64, ws: u64, q: u64) -> u64 {
    let r = mul_shoup_lazy(a, w, ws, q);
    if r >= q { r - q } else { r }
}

fn sub_mod(a: u64, b: u64, q: u64) -> u64 {
    if a >= b { a - b } else { a + q - b }
}

fn fwd_bfly(x: &mut [u64; 8], i: usize, k: usize, w: Twiddle, q: u64) {
    let two_q = 2 * q;
    let a = if x[i] >= two_q { x[i] - two_q } else { x[i] };
    let v = mul_shoup_lazy(x[k], w.0, w.1, q);
    assert!(a < two_q && v < two_q, "lazy range");
    x[i] = a + v;
    x[k] = a + two_q - v;
}

fn inv_bfly(x: &mut [u64; 8], i: usize, k: usize, w: Twiddle, q: u64) {
    let two_q = 2 * q;
    assert!(x[i] < two_q && x[k] < two_q, "lazy range");
    let mut s = x[i] + x[k];
    if s >= two_q {
        s -= two_q;
    }
    let d = mul_shoup_lazy(x[i] + two_q - x[k], w.0, w.1, q);
    x[i] = s;
    x[k] = d;
}

// Groups<LOG_M>.
fn group_count(log_m: u32) -> i32 {
    (log_m as i32 + 2) / 3
}
fn sigma(gi: i32) -> u32 {
    3 * gi as u32
}
fn height(log_m: u32, gi: i32) -> u32 {
    if 3 * gi as u32 + 3 <= log_m {
        3
    } else {
        log_m - 3 * gi as u32
    }
}

fn point_base(log_m: u32, gi: i32, j: u32) -> u32 {
    let s = sigma(gi);
    if height(log_m, gi) == 3 {
        let log_q = log_m - s - 3;
        let g = j >> log_q;
        let jp = j & ((1 << log_q) - 1);
        return (g << (log_q + 3)) + jp;
    }
    j << 3
}

fn point_stride(log_m: u32, gi: i32) -> u32 {
    if height(log_m, gi) == 3 {
        1 << (log_m - sigma(gi) - 3)
    } else {
        1
    }
}

fn group_of(log_m: u32, gi: i32, j: u32) -> u32 {
    if height(log_m, gi) == 3 {
        j >> (log_m - sigma(gi) - 3)
    } else {
        j
    }
}

fn load_twiddles(log_m: u32, tw: &[Twiddle], u: u32, gi: i32, j: u32) -> [Twiddle; 7] {
    let s = sigma(gi);
    let h = height(log_m, gi);
    let g = group_of(log_m, gi, j) as usize;
    let at = |i: usize| tw[i];
    let mut w = [(0, 0); 7];
    let base = |shift: u32| (u as usize) << shift;
    if h == 3 {
        w[0] = at(base(s) + g);
        w[1] = at(base(s + 1) + 2 * g);
        w[2] = at(base(s + 1) + 2 * g + 1);
        for k in 0..4 {
            w[3 + k] = at(base(s + 2) + 4 * g + k);
        }
    } else if h == 2 {
        w[0] = at(base(s) + 2 * g);
        w[1] = at(base(s) + 2 * g + 1);
        for k in 0..4 {
            w[2 + k] = at(base(s + 1) + 4 * g + k);
        }
    } else {
        for k in 0..4 {
            w[k] = at(base(s) + 4 * g + k);
        }
    }
    w
}

fn fwd_group(log_m: u32, x: &mut [u64; 8], w: &[Twiddle; 7], gi: i32, q: u64) {
    let h = height(log_m, gi);
    if h == 3 {
        for k in 0..4 {
            fwd_bfly(x, k, k + 4, w[0], q);
        }
        fwd_bfly(x, 0, 2, w[1], q);
        fwd_bfly(x, 1, 3, w[1], q);
        fwd_bfly(x, 4, 6, w[2], q);
        fwd_bfly(x, 5, 7, w[2], q);
        for k in 0..4 {
            fwd_bfly(x, 2 * k, 2 * k + 1, w[3 + k], q);
        }
    } else if h == 2 {
        fwd_bfly(x, 0, 2, w[0], q);
        fwd_bfly(x, 1, 3, w[0], q);
        fwd_bfly(x, 4, 6, w[1], q);
        fwd_bfly(x, 5, 7, w[1], q);
        for k in 0..4 {
            fwd_bfly(x, 2 * k, 2 * k + 1, w[2 + k], q);
        }
    } else {
        for k in 0..4 {
            fwd_bfly(x, 2 * k, 2 * k + 1, w[k], q);
        }
    }
}

fn inv_group(log_m: u32, x: &mut [u64; 8], w: &[Twiddle; 7], gi: i32, q: u64) {
    let h = height(log_m, gi);
    if h == 3 {
        for k in 0..4 {
            inv_bfly(x, 2 * k, 2 * k + 1, w[3 + k], q);
        }
        inv_bfly(x, 0, 2, w[1], q);
        inv_bfly(x, 1, 3, w[1], q);
        inv_bfly(x, 4, 6, w[2], q);
        inv_bfly(x, 5, 7, w[2], q);
        for k in 0..4 {
            inv_bfly(x, k, k + 4, w[0], q);
        }
    } else if h == 2 {
        for k in 0..4 {
            inv_bfly(x, 2 * k, 2 * k + 1, w[2 + k], q);
        }
        inv_bfly(x, 0, 2, w[0], q);
        inv_bfly(x, 1, 3, w[0], q);
        inv_bfly(x, 4, 6, w[1], q);
        inv_bfly(x, 5, 7, w[1], q);
    } else {
        for k in 0..4 {
            inv_bfly(x, 2 * k, 2 * k + 1, w[k], q);
        }
    }
}

fn smem_index(log_m: u32, cols: bool, p: u32, sub: u32, log_s: u32) -> u32 {
    if cols {
        return ((p ^ ((p >> 3) & 1)) << log_s) + sub;
    }
    (sub << log_m) + (p ^ (((p >> 3) ^ (sub << (log_m - 4))) & 15))
}

fn thread_coords(log_m: u32, cols: bool, log_s: u32, tid: u32) -> (u32, u32) {
    if cols {
        (tid & ((1 << log_s) - 1), tid >> log_s)
    } else {
        (tid >> (log_m - 3), tid & ((1 << (log_m - 3)) - 1))
    }
}

/// Shared memory of one block with a race detector (epoch = barriers so
/// far) and a bank-conflict counter.
struct Shared {
    words: Vec<u64>,
    written: Vec<Option<(u32, u32)>>, // (epoch, thread)
    read: Vec<Vec<(u32, u32)>>,
    epoch: u32,
}

impl Shared {
    fn new(words: usize) -> Self {
        Self {
            words: vec![0xDEAD_BEEF; words],
            written: vec![None; words],
            read: vec![Vec::new(); words],
            epoch: 0,
        }
    }
    fn store(&mut self, i: usize, v: u64, tid: u32) {
        for &(e, t) in &self.read[i] {
            assert!(e != self.epoch || t == tid, "write-after-read race at {i}");
        }
        if let Some((e, t)) = self.written[i] {
            assert!(e != self.epoch || t == tid, "write-write race at {i}");
        }
        self.words[i] = v;
        self.written[i] = Some((self.epoch, tid));
    }
    fn load(&mut self, i: usize, tid: u32) -> u64 {
        let (e, t) = self.written[i].expect("read of an unwritten shared word");
        assert!(e != self.epoch || t == tid, "read-after-write race at {i}");
        self.read[i].push((self.epoch, tid));
        self.words[i]
    }
    fn barrier(&mut self) {
        self.epoch += 1;
    }
}

/// Wavefronts of one warp access of 64-bit words: the most threads on one
/// pair of banks (2 is the minimum for 32 threads).
fn wavefronts(indices: &[u32]) -> usize {
    let mut pairs = [0usize; 16];
    for &i in indices {
        pairs[(i % 16) as usize] += 1;
    }
    pairs.into_iter().max().unwrap_or(0)
}

/// `exchange<LOG_M, COLS>` for every thread of a block: stores, barrier,
/// loads; checks the permutation and the bank conflicts.
#[allow(clippy::too_many_arguments, reason = "the kernel's arguments")]
fn exchange(
    log_m: u32,
    cols: bool,
    x: &mut [[u64; 8]],
    smem: &mut Shared,
    offset: usize,
    from: i32,
    to: i32,
    log_s: u32,
) {
    let threads = x.len() as u32;
    let elems = 1usize << (log_m + log_s);
    let mut seen = vec![0u8; elems];
    let mut store_idx = vec![[0u32; 8]; threads as usize];
    for tid in 0..threads {
        let (sub, j) = thread_coords(log_m, cols, log_s, tid);
        let (b0, d0) = (point_base(log_m, from, j), point_stride(log_m, from));
        for k in 0..8 {
            let i = smem_index(log_m, cols, b0 + k as u32 * d0, sub, log_s);
            store_idx[tid as usize][k] = i;
            assert!((i as usize) < elems);
            seen[i as usize] += 1;
            smem.store(offset + i as usize, x[tid as usize][k], tid);
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "stores are not a permutation");
    smem.barrier();
    let mut load_idx = vec![[0u32; 8]; threads as usize];
    for tid in 0..threads {
        let (sub, j) = thread_coords(log_m, cols, log_s, tid);
        let (b1, d1) = (point_base(log_m, to, j), point_stride(log_m, to));
        for k in 0..8 {
            let i = smem_index(log_m, cols, b1 + k as u32 * d1, sub, log_s);
            load_idx[tid as usize][k] = i;
            seen[i as usize] += 1;
            x[tid as usize][k] = smem.load(offset + i as usize, tid);
        }
    }
    assert!(seen.iter().all(|&c| c == 2), "loads are not a permutation");
    for idx in [&store_idx, &load_idx] {
        for warp in idx.chunks(32) {
            for k in 0..8 {
                let lanes: Vec<u32> = warp.iter().map(|t| t[k]).collect();
                let optimum = lanes.len().div_ceil(16);
                assert_eq!(wavefronts(&lanes), optimum, "bank conflict");
            }
        }
    }
}

/// Global memory of one limb with read and write counters.
struct Global {
    words: Vec<u64>,
    reads: Vec<u32>,
    writes: Vec<u32>,
}

impl Global {
    fn new(words: Vec<u64>) -> Self {
        let n = words.len();
        Self {
            words,
            reads: vec![0; n],
            writes: vec![0; n],
        }
    }
    fn load(&mut self, i: usize) -> u64 {
        self.reads[i] += 1;
        self.words[i]
    }
    fn store(&mut self, i: usize, v: u64) {
        self.writes[i] += 1;
        self.words[i] = v;
    }
    fn read_once(&self, what: &str) {
        assert!(self.reads.iter().all(|&c| c == 1), "{what}: reads");
    }
    fn written_once(&self, what: &str) {
        assert!(self.writes.iter().all(|&c| c == 1), "{what}: writes");
    }
}

/// One block of a phase: `forward_phase` / `inverse_phase` with its loads
/// (point p of sub-transform `sub` at `base(sub) + p·stride`), leaving each
/// thread's registers as the kernel does before its epilogue.
#[allow(clippy::too_many_arguments, reason = "the kernel's arguments")]
fn phase_block(
    log_m: u32,
    cols: bool,
    forward: bool,
    input: &mut Global,
    base: &dyn Fn(u32) -> usize,
    stride: usize,
    tw: &[Twiddle],
    u_of: &dyn Fn(u32) -> u32,
    q: u64,
    log_s: u32,
    convert: Option<&mut dyn FnMut(u32, u32) -> u64>,
) -> Vec<[u64; 8]> {
    let threads = 1u32 << (log_m - 3 + log_s);
    let elems = 1usize << (log_m + log_s);
    let mut smem = Shared::new(2 * elems);
    let mut x = vec![[0u64; 8]; threads as usize];
    let last = group_count(log_m) - 1;
    let first = if forward { 0 } else { last };
    match convert {
        None => {
            for tid in 0..threads {
                let (sub, j) = thread_coords(log_m, cols, log_s, tid);
                let (b, d) = (point_base(log_m, first, j), point_stride(log_m, first));
                for k in 0..8u32 {
                    x[tid as usize][k as usize] =
                        input.load(base(sub) + ((b + k * d) as usize) * stride);
                }
            }
        }
        // fwd_columns' conversion prologue: each point converted, staged in
        // the thread's own slot of buffer 0, read back.
        Some(convert) => {
            assert!(cols && forward);
            for tid in 0..threads {
                let (sub, j) = thread_coords(log_m, cols, log_s, tid);
                let (b0, d0) = (point_base(log_m, 0, j), point_stride(log_m, 0));
                for k in 0..8u32 {
                    let p = b0 + k * d0;
                    let v = convert(sub, p);
                    smem.store(smem_index(log_m, true, p, sub, log_s) as usize, v, tid);
                }
                for k in 0..8u32 {
                    let i = smem_index(log_m, true, b0 + k * d0, sub, log_s) as usize;
                    x[tid as usize][k as usize] = smem.load(i, tid);
                }
            }
        }
    }
    let order: Vec<i32> = if forward {
        (0..=last).collect()
    } else {
        (0..=last).rev().collect()
    };
    for (step, &gi) in order.iter().enumerate() {
        if step > 0 {
            let from = order[step - 1];
            exchange(
                log_m,
                cols,
                &mut x,
                &mut smem,
                (gi & 1) as usize * elems,
                from,
                gi,
                log_s,
            );
        }
        for tid in 0..threads {
            let (sub, j) = thread_coords(log_m, cols, log_s, tid);
            let w = load_twiddles(log_m, tw, u_of(sub), gi, j);
            if forward {
                fwd_group(log_m, &mut x[tid as usize], &w, gi, q);
            } else {
                inv_group(log_m, &mut x[tid as usize], &w, gi, q);
            }
        }
    }
    x
}

// The 16-point rows kernels (`fwd_rows16`, `inv_rows16`): Groups16,
// point_base16, point_stride16, group_of16, load_twiddles16, the generic
// group loops, smem_index16, thread_coords16, exchange16.
fn group_count16(log_m: u32) -> i32 {
    (log_m as i32 + 3) / 4
}
fn sigma16(gi: i32) -> u32 {
    4 * gi as u32
}
fn height16(log_m: u32, gi: i32) -> u32 {
    if 4 * gi as u32 + 4 <= log_m {
        4
    } else {
        log_m - 4 * gi as u32
    }
}

fn point_base16(log_m: u32, gi: i32, j: u32) -> u32 {
    if height16(log_m, gi) == 4 {
        let log_q = log_m - sigma16(gi) - 4;
        let g = j >> log_q;
        let jp = j & ((1 << log_q) - 1);
        return (g << (log_q + 4)) + jp;
    }
    j << 4
}

fn point_stride16(log_m: u32, gi: i32) -> u32 {
    if height16(log_m, gi) == 4 {
        1 << (log_m - sigma16(gi) - 4)
    } else {
        1
    }
}

fn group_of16(log_m: u32, gi: i32, j: u32) -> u32 {
    let h = height16(log_m, gi);
    if h == 4 {
        j >> (log_m - sigma16(gi) - 4)
    } else {
        j << (4 - h)
    }
}

fn load_twiddles16(log_m: u32, tw: &[Twiddle], u: u32, gi: i32, j: u32) -> [[Twiddle; 8]; 4] {
    let sigma = sigma16(gi);
    let h = height16(log_m, gi);
    let g = group_of16(log_m, gi, j);
    let mut w = [[(0, 0); 8]; 4];
    for s in 0..h {
        let base = ((u << (sigma + s)) + (g << s)) as usize;
        let count = 16usize >> (h - s);
        w[s as usize][..count].copy_from_slice(&tw[base..base + count]);
    }
    w
}

fn bfly16(forward: bool, x: &mut [u64; 16], i: usize, k: usize, w: Twiddle, q: u64) {
    let mut pair = [x[i], 0, 0, 0, x[k], 0, 0, 0];
    if forward {
        fwd_bfly(&mut pair, 0, 4, w, q);
    } else {
        inv_bfly(&mut pair, 0, 4, w, q);
    }
    x[i] = pair[0];
    x[k] = pair[4];
}

fn group16(forward: bool, log_m: u32, x: &mut [u64; 16], w: &[[Twiddle; 8]; 4], gi: i32, q: u64) {
    let h = height16(log_m, gi) as usize;
    let stages: Vec<usize> = if forward {
        (0..h).collect()
    } else {
        (0..h).rev().collect()
    };
    for s in stages {
        let dist = 1usize << (h - 1 - s);
        for k in 0..16 {
            if k & dist == 0 {
                bfly16(forward, x, k, k + dist, w[s][k >> (h - s)], q);
            }
        }
    }
}

fn smem_index16(log_m: u32, p: u32, sub: u32) -> u32 {
    (sub << log_m) + (p ^ ((p >> 4) & 15))
}

fn thread_coords16(log_m: u32, tid: u32) -> (u32, u32) {
    (tid >> (log_m - 4), tid & ((1 << (log_m - 4)) - 1))
}

/// `exchange16<LOG_M>` for every thread of a block: stores, barrier, loads;
/// checks the permutation and counts the warp accesses with bank conflicts
/// (returned: accesses over the optimum, accesses in all).
fn exchange16(
    log_m: u32,
    x: &mut [[u64; 16]],
    smem: &mut Shared,
    offset: usize,
    (from, to): (i32, i32),
    log_s: u32,
) -> (usize, usize) {
    let threads = x.len() as u32;
    let elems = 1usize << (log_m + log_s);
    let mut seen = vec![0u8; elems];
    let mut store_idx = vec![[0u32; 16]; threads as usize];
    for tid in 0..threads {
        let (sub, j) = thread_coords16(log_m, tid);
        let (b0, d0) = (point_base16(log_m, from, j), point_stride16(log_m, from));
        for k in 0..16 {
            let i = smem_index16(log_m, b0 + k as u32 * d0, sub);
            store_idx[tid as usize][k] = i;
            assert!((i as usize) < elems);
            seen[i as usize] += 1;
            smem.store(offset + i as usize, x[tid as usize][k], tid);
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "stores are not a permutation");
    smem.barrier();
    let mut load_idx = vec![[0u32; 16]; threads as usize];
    for tid in 0..threads {
        let (sub, j) = thread_coords16(log_m, tid);
        let (b1, d1) = (point_base16(log_m, to, j), point_stride16(log_m, to));
        for k in 0..16 {
            let i = smem_index16(log_m, b1 + k as u32 * d1, sub);
            load_idx[tid as usize][k] = i;
            seen[i as usize] += 1;
            x[tid as usize][k] = smem.load(offset + i as usize, tid);
        }
    }
    assert!(seen.iter().all(|&c| c == 2), "loads are not a permutation");
    let (mut over, mut all) = (0, 0);
    for idx in [&store_idx, &load_idx] {
        for warp in idx.chunks(32) {
            for k in 0..16 {
                let lanes: Vec<u32> = warp.iter().map(|t| t[k]).collect();
                all += 1;
                if wavefronts(&lanes) > lanes.len().div_ceil(16) {
                    over += 1;
                }
            }
        }
    }
    (over, all)
}

/// One block of the 16-point rows phase (forward: loads at group 0's
/// positions, groups in order; inverse: loads at the last group's, groups
/// backwards), leaving each thread's registers as the kernel does before
/// its stores; also the bank-conflict counts of its exchanges.
#[allow(clippy::too_many_arguments, reason = "the kernel's arguments")]
fn rows16_block(
    log_m: u32,
    forward: bool,
    input: &mut Global,
    block: u32,
    tw: &[Twiddle],
    log_r: u32,
    q: u64,
    log_s: u32,
) -> (Vec<[u64; 16]>, (usize, usize)) {
    let threads = 1u32 << (log_m - 4 + log_s);
    let elems = 1usize << (log_m + log_s);
    let mut smem = Shared::new(2 * elems);
    let mut x = vec![[0u64; 16]; threads as usize];
    let last = group_count16(log_m) - 1;
    let first = if forward { 0 } else { last };
    let row = |sub: u32| ((block << log_s) + sub) as usize;
    for tid in 0..threads {
        let (sub, j) = thread_coords16(log_m, tid);
        let (b, d) = (point_base16(log_m, first, j), point_stride16(log_m, first));
        for k in 0..16u32 {
            x[tid as usize][k as usize] = input.load((row(sub) << log_m) + (b + k * d) as usize);
        }
    }
    let order: Vec<i32> = if forward {
        (0..=last).collect()
    } else {
        (0..=last).rev().collect()
    };
    let mut conflicts = (0, 0);
    for (step, &gi) in order.iter().enumerate() {
        if step > 0 {
            let c = exchange16(
                log_m,
                &mut x,
                &mut smem,
                (gi & 1) as usize * elems,
                (order[step - 1], gi),
                log_s,
            );
            conflicts = (conflicts.0 + c.0, conflicts.1 + c.1);
        }
        for tid in 0..threads {
            let (sub, j) = thread_coords16(log_m, tid);
            let u = (1 << log_r) + row(sub) as u32;
            let w = load_twiddles16(log_m, tw, u, gi, j);
            group16(forward, log_m, &mut x[tid as usize], &w, gi, q);
        }
    }
    (x, conflicts)
}

/// The forward transform of one limb as the two kernels compute it: of `a`,
/// or with `source` of the values it gives per coefficient index (the
/// conversion prologue); with `sub_scale`, the NTT_SUB_SCALE epilogue, or
/// NTT_SUB_SCALE_ADD with its addend.
fn forward(
    g: NttGeometry,
    a: &[u64],
    tw: &[Twiddle],
    q: u64,
    mut source: Option<&mut dyn FnMut(usize) -> u64>,
    sub_scale: Option<SubScale<'_>>,
) -> Vec<u64> {
    let n = 1usize << g.log_n;
    let mut mem = Global::new(a.to_vec());
    // Columns phase: grid (C/S, limbs); LOG_M = log_r.
    let (blocks, _, _) = g.columns_shape();
    let mut out = Global::new(vec![u64::MAX; n]);
    let log_m = g.log_r;
    let log_s = g.cols_log_s;
    for block in 0..blocks {
        let column = |sub: u32| ((block << log_s) + sub) as usize;
        let x = match source.as_mut() {
            Some(f) => {
                let mut convert = |sub: u32, p: u32| f(column(sub) + ((p as usize) << g.log_c));
                phase_block(
                    log_m,
                    true,
                    true,
                    &mut mem,
                    &column,
                    1 << g.log_c,
                    tw,
                    &|_| 1,
                    q,
                    log_s,
                    Some(&mut convert),
                )
            }
            None => phase_block(
                log_m,
                true,
                true,
                &mut mem,
                &column,
                1 << g.log_c,
                tw,
                &|_| 1,
                q,
                log_s,
                None,
            ),
        };
        let last = group_count(log_m) - 1;
        for (tid, regs) in x.iter().enumerate() {
            let (sub, j) = thread_coords(log_m, true, log_s, tid as u32);
            let c = ((block << log_s) + sub) as usize;
            let (b, d) = (point_base(log_m, last, j), point_stride(log_m, last));
            for k in 0..8u32 {
                out.store(c + (((b + k * d) as usize) << g.log_c), regs[k as usize]);
            }
        }
    }
    if source.is_none() {
        mem.read_once("forward columns");
    }
    out.written_once("forward columns");
    let mut mem = Global::new(out.words);
    let mut aux = sub_scale.map(|(a, _, _)| Global::new(a.to_vec()));
    let mut addend = sub_scale
        .and_then(|(_, _, e)| e)
        .map(|e| Global::new(e.to_vec()));
    let mut result = Global::new(vec![u64::MAX; n]);
    let (blocks, _, _) = g.rows_shape();
    let log_m = g.log_c;
    let log_s = g.rows_log_s;
    // The epilogue of both rows kernels on a thread's last-group points
    // (contiguous from `at`), fully reduced.
    let mut finish = |at: usize, k: usize, mut v: u64| {
        assert!(v < 4 * q);
        v = if v >= 2 * q { v - 2 * q } else { v };
        v = if v >= q { v - q } else { v };
        if let (Some(aux), Some((_, s, _))) = (aux.as_mut(), sub_scale) {
            v = mul_shoup(sub_mod(aux.load(at + k), v, q), s.0, s.1, q);
        }
        if let Some(e) = addend.as_mut() {
            let w = e.load(at + k);
            v = if v + w >= q { v + w - q } else { v + w };
        }
        result.store(at + k, v);
    };
    if g.rows == NttRows::Radix16 {
        for block in 0..blocks {
            let (x, _) = rows16_block(log_m, true, &mut mem, block, tw, g.log_r, q, log_s);
            for (tid, regs) in x.iter().enumerate() {
                let (sub, j) = thread_coords16(log_m, tid as u32);
                let r = ((block << log_s) + sub) as usize;
                let at = (r << log_m) + 16 * j as usize;
                for (k, &v) in regs.iter().enumerate() {
                    finish(at, k, v);
                }
            }
        }
    }
    for block in (0..blocks).filter(|_| g.rows == NttRows::Radix8) {
        let x = phase_block(
            log_m,
            false,
            true,
            &mut mem,
            &|sub| (((block << log_s) + sub) as usize) << log_m,
            1,
            tw,
            &|sub| (1 << g.log_r) + (block << log_s) + sub,
            q,
            log_s,
            None,
        );
        for (tid, regs) in x.iter().enumerate() {
            let (sub, j) = thread_coords(log_m, false, log_s, tid as u32);
            let r = ((block << log_s) + sub) as usize;
            let at = (r << log_m) + 8 * j as usize;
            for k in 0..8 {
                finish(at, k, regs[k]);
            }
        }
    }
    mem.read_once("forward rows");
    result.written_once("forward rows");
    if let Some(aux) = aux.as_ref() {
        aux.read_once("forward rows, aux");
    }
    if let Some(e) = addend.as_ref() {
        e.read_once("forward rows, addend");
    }
    result.words
}

/// The inverse transform of one limb as the two kernels compute it.
fn inverse(g: NttGeometry, a: &[u64], tw: &[Twiddle], q: u64, n_inv: Twiddle) -> Vec<u64> {
    let n = 1usize << g.log_n;
    let mut mem = Global::new(a.to_vec());
    let mut mid = Global::new(vec![u64::MAX; n]);
    let (blocks, _, _) = g.rows_shape();
    let log_m = g.log_c;
    let log_s = g.rows_log_s;
    if g.rows == NttRows::Radix16 {
        for block in 0..blocks {
            let (x, _) = rows16_block(log_m, false, &mut mem, block, tw, g.log_r, q, log_s);
            for (tid, regs) in x.iter().enumerate() {
                let (sub, j) = thread_coords16(log_m, tid as u32);
                let r = ((block << log_s) + sub) as usize;
                let (b, d) = (point_base16(log_m, 0, j), point_stride16(log_m, 0));
                for k in 0..16u32 {
                    mid.store((r << log_m) + (b + k * d) as usize, regs[k as usize]);
                }
            }
        }
    }
    for block in (0..blocks).filter(|_| g.rows == NttRows::Radix8) {
        let x = phase_block(
            log_m,
            false,
            false,
            &mut mem,
            &|sub| (((block << log_s) + sub) as usize) << log_m,
            1,
            tw,
            &|sub| (1 << g.log_r) + (block << log_s) + sub,
            q,
            log_s,
            None,
        );
        for (tid, regs) in x.iter().enumerate() {
            let (sub, j) = thread_coords(log_m, false, log_s, tid as u32);
            let r = ((block << log_s) + sub) as usize;
            let (b, d) = (point_base(log_m, 0, j), point_stride(log_m, 0));
            for k in 0..8u32 {
                mid.store((r << log_m) + (b + k * d) as usize, regs[k as usize]);
            }
        }
    }
    mem.read_once("inverse rows");
    mid.written_once("inverse rows");
    let mut mem = Global::new(mid.words);
    let mut result = Global::new(vec![u64::MAX; n]);
    let (blocks, _, _) = g.columns_shape();
    let log_m = g.log_r;
    let log_s = g.cols_log_s;
    for block in 0..blocks {
        let x = phase_block(
            log_m,
            true,
            false,
            &mut mem,
            &|sub| ((block << log_s) + sub) as usize,
            1 << g.log_c,
            tw,
            &|_| 1,
            q,
            log_s,
            None,
        );
        for (tid, regs) in x.iter().enumerate() {
            let (sub, j) = thread_coords(log_m, true, log_s, tid as u32);
            let c = ((block << log_s) + sub) as usize;
            let (b, d) = (point_base(log_m, 0, j), point_stride(log_m, 0));
            for k in 0..8u32 {
                result.store(
                    c + (((b + k * d) as usize) << g.log_c),
                    mul_shoup(regs[k as usize], n_inv.0, n_inv.1, q),
                );
            }
        }
    }
    mem.read_once("inverse columns");
    result.written_once("inverse columns");
    result.words
}

#[test]
fn ntt_kernels_match_the_staged_reference() {
    for log_n in 10..=17u32 {
        let n = 1usize << log_n;
        let bits: &[u32] = if log_n >= 16 {
            &[42, 61]
        } else {
            &[30, 58, 61]
        };
        // Both rows kernels (8 and 16 points per thread): the same outputs.
        let variants = bits
            .iter()
            .flat_map(|&b| [(b, NttRows::Radix8), (b, NttRows::Radix16)]);
        for (b, rows) in variants {
            let g = NttGeometry::new(log_n).unwrap().with_rows(rows);
            let q = PrimeGenerator::new(b, 2 * n as u64).next().unwrap();
            let m = Modulus::new(q).unwrap();
            let plan = NttPlan::new(n, m).unwrap();
            let (words, n_inv) = twiddle_tables(std::slice::from_ref(&plan));
            assert_eq!(words.len(), 4 * n);
            let fwd: Vec<Twiddle> = words[..2 * n].chunks(2).map(|p| (p[0], p[1])).collect();
            let inv: Vec<Twiddle> = words[2 * n..].chunks(2).map(|p| (p[0], p[1])).collect();
            let tables = TwiddleTables::new(&plan);
            let mut rng = seeded_rng(u64::from(log_n) * 100 + u64::from(b));
            let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % q).collect();
            let mut expected = a.clone();
            forward_staged(&mut expected, &tables, &m);
            let mut concrete = a.clone();
            plan.forward(&mut concrete).unwrap();
            assert_eq!(expected, concrete);
            let got = forward(g, &a, &fwd, q, None, None);
            assert_eq!(
                got, expected,
                "forward, N = 2^{log_n}, {b}-bit prime, {rows:?}"
            );
            let back = inverse(g, &got, &inv, q, (n_inv[0], n_inv[1]));
            let mut staged = got.clone();
            inverse_staged(&mut staged, &tables, &m);
            assert_eq!(
                back, staged,
                "inverse, N = 2^{log_n}, {b}-bit prime, {rows:?}"
            );
            assert_eq!(back, a, "round trip, N = 2^{log_n}");
            // The fused ModDown epilogue: (aux − NTT(a))·s.
            let aux: Vec<u64> = (0..n).map(|_| rng.next_u64() % q).collect();
            let s = m.shoup(rng.next_u64() % q);
            let pair = (s.value(), s.quotient());
            let fused = forward(g, &a, &fwd, q, None, Some((&aux, pair, None)));
            let reference: Vec<u64> = aux
                .iter()
                .zip(&expected)
                .map(|(&x, &v)| m.mul_shoup(m.sub(x, v), &s))
                .collect();
            assert_eq!(fused, reference, "sub-scale epilogue, N = 2^{log_n}");
            // And the addition after it (relinearisation, rotations).
            let extra: Vec<u64> = (0..n).map(|_| rng.next_u64() % q).collect();
            let fused = forward(g, &a, &fwd, q, None, Some((&aux, pair, Some(&extra))));
            let reference: Vec<u64> = reference
                .iter()
                .zip(&extra)
                .map(|(&x, &e)| m.add(x, e))
                .collect();
            assert_eq!(fused, reference, "sub-scale-add epilogue, N = 2^{log_n}");
        }
    }
}

/// The 16-point rows kernels' exchanges through shared memory: a
/// permutation without races at every row size (checked inside), and free
/// of bank conflicts for log M = 8 (N = 2^16, 2^15) and 9 (N = 2^17); the
/// small test sizes are reported, not required.
#[test]
fn rows16_exchanges_are_conflict_free_where_it_matters() {
    for log_n in 10..=17u32 {
        let g = NttGeometry::new(log_n).unwrap().with_rows(NttRows::Radix16);
        let n = 1usize << log_n;
        let q = PrimeGenerator::new(50, 2 * n as u64).next().unwrap();
        let m = Modulus::new(q).unwrap();
        let plan = NttPlan::new(n, m).unwrap();
        let (words, _) = twiddle_tables(std::slice::from_ref(&plan));
        let fwd: Vec<Twiddle> = words[..2 * n].chunks(2).map(|p| (p[0], p[1])).collect();
        let mut mem = Global::new((0..n as u64).map(|v| v % q).collect());
        let (_, (over, all)) =
            rows16_block(g.log_c, true, &mut mem, 0, &fwd, g.log_r, q, g.rows_log_s);
        println!(
            "N = 2^{log_n}, log M = {}: {over} of {all} warp accesses over the optimum",
            g.log_c
        );
        if g.log_c >= 8 {
            assert_eq!(over, 0, "bank conflicts at N = 2^{log_n}");
        }
    }
}

/// `fwd_columns`' conversion of one coefficient `e` for target row `row`
/// of a table of `targets` rows, from the kernel's table words (same reads,
/// same arithmetic: the f64 sum in source order without fused
/// multiply-add; the products and the exact conversion's correction
/// `v·(−Q mod p_j)` accumulated in 128 bits, which must not overflow, and
/// reduced once: by Montgomery's reduction where the table holds
/// `−p_j^{-1}` (its factors then in Montgomery form, and the sum below
/// `p_j·2^64`), else exactly). With `prescaled` the sources hold `y_i`
/// already.
#[allow(clippy::too_many_arguments, reason = "the kernel's arguments")]
fn convert_one(
    table: &[u64],
    sources: &mut [Global],
    source_q: &[u64],
    targets: usize,
    row: usize,
    target_q: u64,
    exact: bool,
    prescaled: bool,
    e: usize,
) -> u64 {
    let ks = sources.len();
    assert!(ks <= 16, "the kernel stages at most 16 sources");
    let mut acc = 0u128;
    let mut sum = 0f64;
    for i in 0..ks {
        let (qhi, qhis, inv_q) = (table[i], table[ks + i], f64::from_bits(table[2 * ks + i]));
        let q_hat = table[3 * ks + targets + row * ks + i];
        let x = sources[i].load(e);
        let y = if prescaled {
            x
        } else {
            mul_shoup(x, qhi, qhis, source_q[i])
        };
        if exact {
            sum += y as f64 * inv_q;
        }
        acc = acc
            .checked_add(u128::from(y) * u128::from(q_hat))
            .expect("the kernel's 128-bit sum overflows");
    }
    finish_sum(table, ks, targets, row, target_q, acc, exact.then_some(sum))
}

/// The end of a conversion's sum in both kernels (`fwd_columns` and
/// `base_convert`): with the exact conversion's f64 sum, the correction
/// `v·(−Q mod p_j)` added (checked below 2^128), then `reduce_sum`: a
/// Montgomery reduction where the table holds `−p_j^{-1}` (the sum checked
/// below `p_j·2^64`), else an exact reduction (Barrett's step is exact).
fn finish_sum(
    table: &[u64],
    ks: usize,
    targets: usize,
    row: usize,
    target_q: u64,
    mut acc: u128,
    sum: Option<f64>,
) -> u64 {
    if let Some(sum) = sum {
        let v = (sum + 0.5) as u64;
        let neg_q = table[3 * ks + row];
        assert!(neg_q < target_q, "table layout");
        acc = acc
            .checked_add(u128::from(v) * u128::from(neg_q))
            .expect("the kernel's 128-bit sum overflows");
    }
    let t = u128::from(target_q);
    let p_inv_neg = table[3 * ks + targets + targets * ks + row];
    if p_inv_neg == 0 {
        return (acc % t) as u64;
    }
    assert_eq!(
        target_q.wrapping_mul(p_inv_neg),
        u64::MAX,
        "table layout: −p^-1 mod 2^64"
    );
    assert!(acc >> 64 < t, "a narrow sum is below p·2^64");
    // ckks_common.cuh's montgomery_reduce.
    let (hi, lo) = ((acc >> 64) as u64, acc as u64);
    let m = lo.wrapping_mul(p_inv_neg);
    let r = hi + ((u128::from(m) * t) >> 64) as u64 + u64::from(lo != 0);
    if r >= target_q { r - target_q } else { r }
}

/// `ckks_convert.cu`'s `base_convert` for coefficient `e` of target `row`:
/// the sources scaled by Shoup, the f64 sum in source order, the products
/// accumulated in 128 bits (checked) and folded (reduced below `p_j`) after
/// the 15th source when more follow, then [`finish_sum`].
#[allow(clippy::too_many_arguments, reason = "the kernel's arguments")]
fn base_convert_one(
    table: &[u64],
    sources: &[Vec<u64>],
    source_q: &[u64],
    targets: usize,
    row: usize,
    target_q: u64,
    exact: bool,
    e: usize,
) -> u64 {
    let k = sources.len();
    let mut acc = 0u128;
    let mut sum = 0f64;
    for i in 0..k {
        let (qhi, qhis, inv_q) = (table[i], table[k + i], f64::from_bits(table[2 * k + i]));
        let q_hat = table[3 * k + targets + row * k + i];
        let y = mul_shoup(sources[i][e], qhi, qhis, source_q[i]);
        if exact {
            sum += y as f64 * inv_q;
        }
        acc = acc
            .checked_add(u128::from(y) * u128::from(q_hat))
            .expect("the kernel's 128-bit sum overflows");
        if i % 15 == 14 && i + 1 < k {
            acc %= u128::from(target_q);
        }
    }
    finish_sum(table, k, targets, row, target_q, acc, exact.then_some(sum))
}

#[test]
fn base_convert_matches_the_cpu_conversions() {
    let n = 1usize << 10;
    // Narrow sums (Montgomery) and wide ones (Barrett), 1 to 16 sources
    // (the launcher's MAX_SOURCES, where the kernel folds once), exact and
    // approximate, every input at its largest value for one coefficient.
    for (count, from_bits, to_bits) in [
        (1usize, 50u32, 60u32),
        (5, 42, 58),
        (5, 61, 61),
        (15, 58, 40),
        (16, 59, 61),
        (16, 61, 61),
    ] {
        let from: Vec<Modulus> = PrimeGenerator::new(from_bits, 2 * n as u64)
            .take(count)
            .map(|q| Modulus::new(q).unwrap())
            .collect();
        let to: Vec<Modulus> = PrimeGenerator::new(to_bits, 2 * n as u64)
            .skip(count + 2)
            .take(3)
            .map(|q| Modulus::new(q).unwrap())
            .collect();
        let (table, _) = conversion_words(&from, &to).unwrap();
        let mut rng = seeded_rng(u64::from(from_bits) * 100 + count as u64);
        let mut inputs: Vec<Vec<u64>> = from
            .iter()
            .map(|m| (0..n).map(|_| rng.next_u64() % m.value()).collect())
            .collect();
        for (limb, m) in inputs.iter_mut().zip(&from) {
            limb[0] = m.value() - 1;
        }
        let refs: Vec<&[u64]> = inputs.iter().map(Vec::as_slice).collect();
        let converter = BaseConverter::new(&from, &to).unwrap();
        let source_q: Vec<u64> = from.iter().map(Modulus::value).collect();
        for exact in [false, true] {
            let mut expected = vec![vec![0u64; n]; to.len()];
            let mut outs: Vec<&mut [u64]> = expected.iter_mut().map(Vec::as_mut_slice).collect();
            if exact {
                converter.convert_centered(&refs, &mut outs).unwrap();
            } else {
                converter.convert_approx(&refs, &mut outs).unwrap();
            }
            for (row, m) in to.iter().enumerate() {
                let got: Vec<u64> = (0..n)
                    .map(|e| {
                        base_convert_one(
                            &table,
                            &inputs,
                            &source_q,
                            to.len(),
                            row,
                            m.value(),
                            exact,
                            e,
                        )
                    })
                    .collect();
                assert_eq!(
                    got, expected[row],
                    "{count} sources of {from_bits} bits to {to_bits}, exact {exact}"
                );
            }
        }
    }
}

/// `fwd_columns`' NTT_SPREAD: the centred lift of `v` (modulo `p`) into `q`.
fn spread_one(v: u64, p: u64, q: u64) -> u64 {
    if v > p / 2 {
        let neg = (p - v) % q;
        if neg == 0 { 0 } else { q - neg }
    } else {
        v % q
    }
}

/// `part_span` of `ckks_common.cuh`.
fn part_span(per: u32, total: u32, z: u32) -> u32 {
    let start = z * per;
    if start >= total {
        0
    } else {
        per.min(total - start)
    }
}

/// `rows_entry` of `ckks_ntt.cu`.
fn rows_entry(skip: bool, per: u32, total: u32, z: u32, t: u32) -> u32 {
    if skip && t >= z * per {
        t + part_span(per, total, z)
    } else {
        t
    }
}

/// The forward and inverse twiddle pairs and the `(N^{-1}, shoup)` pair of
/// one modulus, as uploaded.
fn tables_of(n: usize, m: Modulus) -> (Vec<Twiddle>, Vec<Twiddle>, Twiddle, NttPlan) {
    let plan = NttPlan::new(n, m).unwrap();
    let (words, n_inv) = twiddle_tables(std::slice::from_ref(&plan));
    let fwd = words[..2 * n].chunks(2).map(|p| (p[0], p[1])).collect();
    let inv = words[2 * n..].chunks(2).map(|p| (p[0], p[1])).collect();
    (fwd, inv, (n_inv[0], n_inv[1]), plan)
}

/// The whole decomposition as the batched launches index it: the inverse
/// transform with the per-limb `y` scales (`y_scale_words` per digit), then
/// one forward launch pair over every digit (grid z), whose columns phase
/// copies each digit's own limbs and converts the others (table row
/// `entry` less the digit's own) and whose rows phase passes over the own
/// limbs (`rows_entry`). Against the CPU's digit-by-digit ModUp
/// (`convert_centered` of the coefficients, then the staged NTT).
#[test]
fn batched_decomposition_matches_mod_up() {
    for (log_n, alpha) in [(10u32, 3usize), (12, 2), (16, 5)] {
        let n = 1usize << log_n;
        let g = NttGeometry::new(log_n).unwrap();
        let q_count = if log_n == 16 { 7 } else { 5 };
        let q: Vec<Modulus> = PrimeGenerator::new(42, 2 * n as u64)
            .take(q_count)
            .map(|p| Modulus::new(p).unwrap())
            .collect();
        let p_moduli: Vec<Modulus> = PrimeGenerator::new(60, 2 * n as u64)
            .take(2)
            .map(|p| Modulus::new(p).unwrap())
            .collect();
        let qp: Vec<Modulus> = q.iter().chain(&p_moduli).copied().collect();
        let tables: Vec<_> = qp.iter().map(|&m| tables_of(n, m)).collect();
        let mut rng = seeded_rng(7000 + u64::from(log_n));
        let c: Vec<Vec<u64>> = q
            .iter()
            .map(|m| (0..n).map(|_| rng.next_u64() % m.value()).collect())
            .collect();
        let parts = q_count.div_ceil(alpha);
        let (per, total) = (alpha as u32, q_count as u32);
        // The inverse with the digits' y scales.
        let mut y_scale = Vec::new();
        for digit in q.chunks(alpha) {
            y_scale.extend(y_scale_words(n, digit).unwrap());
        }
        let y: Vec<Vec<u64>> = (0..q_count)
            .map(|i| {
                let (_, inv, _, _) = &tables[i];
                let pair = (y_scale[2 * i], y_scale[2 * i + 1]);
                inverse(g, &c[i], inv, q[i].value(), pair)
            })
            .collect();
        // Column-phase blocks per entry and rows-phase blocks per entry.
        let least = (0..parts as u32)
            .map(|z| part_span(per, total, z))
            .min()
            .unwrap();
        let rows_limbs = qp.len() as u32 - least;
        for z in 0..parts as u32 {
            let (start, span) = ((z * per) as usize, part_span(per, total, z) as usize);
            let digit = &q[start..start + span];
            let targets: Vec<Modulus> = qp
                .iter()
                .enumerate()
                .filter(|&(i, _)| i < start || i >= start + span)
                .map(|(_, &m)| m)
                .collect();
            let (table, _) = conversion_words(digit, &targets).unwrap();
            // The CPU's ModUp of this digit.
            let coeff: Vec<Vec<u64>> = (start..start + span)
                .map(|i| {
                    let mut v = c[i].clone();
                    inverse_staged(&mut v, &TwiddleTables::new(&tables[i].3), &q[i]);
                    v
                })
                .collect();
            let refs: Vec<&[u64]> = coeff.iter().map(Vec::as_slice).collect();
            let mut converted = vec![vec![0u64; n]; targets.len()];
            {
                let mut outs: Vec<&mut [u64]> =
                    converted.iter_mut().map(Vec::as_mut_slice).collect();
                BaseConverter::new(digit, &targets)
                    .unwrap()
                    .convert_centered(&refs, &mut outs)
                    .unwrap();
            }
            let mut rows_seen = vec![0u32; qp.len()];
            for t in 0..rows_limbs {
                let entry = rows_entry(true, per, total, z, t);
                if entry < qp.len() as u32 {
                    rows_seen[entry as usize] += 1;
                }
            }
            for entry in 0..qp.len() {
                let own = entry >= start && entry < start + span;
                assert_eq!(rows_seen[entry], u32::from(!own), "rows phase, part {z}");
                if own {
                    continue; // copied from c by the columns phase
                }
                let row = if entry >= start { entry - span } else { entry };
                let m = qp[entry];
                let (fwd, _, _, plan) = &tables[entry];
                let mut sources: Vec<Global> = y[start..start + span]
                    .iter()
                    .map(|v| Global::new(v.clone()))
                    .collect();
                let source_q: Vec<u64> = digit.iter().map(Modulus::value).collect();
                let mut convert = |e: usize| {
                    convert_one(
                        &table,
                        &mut sources,
                        &source_q,
                        targets.len(),
                        row,
                        m.value(),
                        true,
                        true,
                        e,
                    )
                };
                let got = forward(g, &vec![0; n], fwd, m.value(), Some(&mut convert), None);
                for s in &sources {
                    s.read_once("decomposition sources");
                }
                let mut reference = converted[row].clone();
                forward_staged(&mut reference, &TwiddleTables::new(plan), &m);
                assert_eq!(got, reference, "N = 2^{log_n}, part {z}, entry {entry}");
            }
        }
    }
}

/// The ModDown pair: the P limbs' inverse transform with the conversion's
/// y scales, then the prescaled exact conversion (part z's sources are
/// entries `[z·p, z·p + p)` of the doubled source list) and the
/// sub-scale epilogue, with an addend for part 0 only (a rotation); and
/// rescaling's NTT_SPREAD. Against the CPU's `convert_centered` and
/// `center`/`reduce_i64`.
#[test]
fn prescaled_mod_down_and_spread_match_the_cpu() {
    for log_n in [10u32, 16] {
        let n = 1usize << log_n;
        let g = NttGeometry::new(log_n).unwrap();
        let q: Vec<Modulus> = PrimeGenerator::new(42, 2 * n as u64)
            .take(3)
            .map(|p| Modulus::new(p).unwrap())
            .collect();
        let p_moduli: Vec<Modulus> = PrimeGenerator::new(60, 2 * n as u64)
            .take(5)
            .map(|p| Modulus::new(p).unwrap())
            .collect();
        let (table, scale) = conversion_words(&p_moduli, &q).unwrap();
        let y_scale = y_scale_words(n, &p_moduli).unwrap();
        let mut rng = seeded_rng(9000 + u64::from(log_n));
        for part in 0..2u32 {
            assert_eq!(part_span(5, 10, part), 5);
            let x_p: Vec<Vec<u64>> = p_moduli
                .iter()
                .map(|m| (0..n).map(|_| rng.next_u64() % m.value()).collect())
                .collect();
            let y: Vec<Vec<u64>> = x_p
                .iter()
                .enumerate()
                .map(|(i, limb)| {
                    let (_, inv, _, _) = tables_of(n, p_moduli[i]);
                    let pair = (y_scale[2 * i], y_scale[2 * i + 1]);
                    inverse(g, limb, &inv, p_moduli[i].value(), pair)
                })
                .collect();
            let coeff: Vec<Vec<u64>> = x_p
                .iter()
                .zip(&p_moduli)
                .map(|(limb, m)| {
                    let mut v = limb.clone();
                    inverse_staged(
                        &mut v,
                        &TwiddleTables::new(&NttPlan::new(n, *m).unwrap()),
                        m,
                    );
                    v
                })
                .collect();
            let refs: Vec<&[u64]> = coeff.iter().map(Vec::as_slice).collect();
            let mut converted = vec![vec![0u64; n]; q.len()];
            {
                let mut outs: Vec<&mut [u64]> =
                    converted.iter_mut().map(Vec::as_mut_slice).collect();
                BaseConverter::new(&p_moduli, &q)
                    .unwrap()
                    .convert_centered(&refs, &mut outs)
                    .unwrap();
            }
            let source_q: Vec<u64> = p_moduli.iter().map(Modulus::value).collect();
            for (row, &m) in q.iter().enumerate() {
                let (fwd, _, _, plan) = tables_of(n, m);
                let aux: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
                let extra: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
                let s = (scale[2 * row], scale[2 * row + 1]);
                let add = (part == 0).then_some(extra.as_slice());
                let mut sources: Vec<Global> = y.iter().map(|v| Global::new(v.clone())).collect();
                let mut convert = |e: usize| {
                    convert_one(
                        &table,
                        &mut sources,
                        &source_q,
                        q.len(),
                        row,
                        m.value(),
                        true,
                        true,
                        e,
                    )
                };
                let got = forward(
                    g,
                    &vec![0; n],
                    &fwd,
                    m.value(),
                    Some(&mut convert),
                    Some((&aux, s, add)),
                );
                let mut v = converted[row].clone();
                forward_staged(&mut v, &TwiddleTables::new(&plan), &m);
                let sh = m.shoup(s.0);
                let reference: Vec<u64> = aux
                    .iter()
                    .zip(&v)
                    .zip(&extra)
                    .map(|((&a, &w), &e)| {
                        let r = m.mul_shoup(m.sub(a, w), &sh);
                        if part == 0 { m.add(r, e) } else { r }
                    })
                    .collect();
                assert_eq!(
                    got, reference,
                    "ModDown, N = 2^{log_n}, part {part}, limb {row}"
                );
            }
        }
        // NTT_SPREAD (rescale): the top limb's centred lift, transformed.
        let top = PrimeGenerator::new(58, 2 * n as u64).next().unwrap();
        let top_m = Modulus::new(top).unwrap();
        let mut src: Vec<u64> = (0..n).map(|_| rng.next_u64() % top).collect();
        // The boundary values.
        src[0] = top / 2;
        src[1] = top / 2 + 1;
        src[2] = top - 1;
        src[3] = 0;
        for &m in &q {
            let (fwd, _, _, plan) = tables_of(n, m);
            let mut global = Global::new(src.clone());
            let mut lift = |e: usize| spread_one(global.load(e), top, m.value());
            let got = forward(g, &vec![0; n], &fwd, m.value(), Some(&mut lift), None);
            let mut reference: Vec<u64> =
                src.iter().map(|&v| m.reduce_i64(top_m.center(v))).collect();
            forward_staged(&mut reference, &TwiddleTables::new(&plan), &m);
            assert_eq!(got, reference, "spread, N = 2^{log_n}");
        }
    }
}

#[test]
fn fused_conversion_prologue_matches_convert_then_ntt() {
    for log_n in [10u32, 12, 16] {
        let n = 1usize << log_n;
        let g = NttGeometry::new(log_n).unwrap();
        // ModUp-like (5 sources of 42 bits to 3 targets of 58 bits),
        // ModDown-like (5 special primes of 60 bits to 42-bit primes), and
        // the widest sum the kernel takes (16 sources of 61 bits, whose
        // products and correction `convert_one` checks stay below 2^128).
        for (exact, from_bits, to_bits, count) in [
            (false, 42u32, 58u32, 5),
            (true, 60, 42, 5),
            (true, 61, 61, 16),
        ] {
            let from: Vec<Modulus> = PrimeGenerator::new(from_bits, 2 * n as u64)
                .take(count)
                .map(|q| Modulus::new(q).unwrap())
                .collect();
            let to: Vec<Modulus> = PrimeGenerator::new(to_bits, 2 * n as u64)
                .skip(count + 2)
                .take(3)
                .map(|q| Modulus::new(q).unwrap())
                .collect();
            let (table, _) = conversion_words(&from, &to).unwrap();
            let mut rng = seeded_rng(u64::from(log_n) + 1000 * u64::from(exact));
            let inputs: Vec<Vec<u64>> = from
                .iter()
                .map(|m| (0..n).map(|_| rng.next_u64() % m.value()).collect())
                .collect();
            let refs: Vec<&[u64]> = inputs.iter().map(Vec::as_slice).collect();
            let mut expected = vec![vec![0u64; n]; to.len()];
            {
                let mut outs: Vec<&mut [u64]> =
                    expected.iter_mut().map(Vec::as_mut_slice).collect();
                let converter = BaseConverter::new(&from, &to).unwrap();
                if exact {
                    converter.convert_centered(&refs, &mut outs).unwrap();
                } else {
                    converter.convert_approx(&refs, &mut outs).unwrap();
                }
            }
            let source_q: Vec<u64> = from.iter().map(Modulus::value).collect();
            for (row, m) in to.iter().enumerate() {
                let plan = NttPlan::new(n, *m).unwrap();
                let (words, _) = twiddle_tables(std::slice::from_ref(&plan));
                let fwd: Vec<Twiddle> = words[..2 * n].chunks(2).map(|p| (p[0], p[1])).collect();
                let mut sources: Vec<Global> =
                    inputs.iter().map(|v| Global::new(v.clone())).collect();
                let mut convert = |e: usize| {
                    convert_one(
                        &table,
                        &mut sources,
                        &source_q,
                        to.len(),
                        row,
                        m.value(),
                        exact,
                        false,
                        e,
                    )
                };
                let got = forward(g, &vec![0; n], &fwd, m.value(), Some(&mut convert), None);
                for s in &sources {
                    s.read_once("conversion sources");
                }
                let mut reference = expected[row].clone();
                forward_staged(&mut reference, &TwiddleTables::new(&plan), m);
                assert_eq!(got, reference, "N = 2^{log_n}, exact {exact}, target {row}");
            }
        }
    }
}

/// `fwd_columns`' NTT_COMPACT: coefficient `i` of the limb is the compact
/// word `i >> log_gap` reduced (as `reduce_f64_bits`) where `i` is a
/// multiple of the gap, zero elsewhere. Against expanding first (as
/// `expand_coefficients`) and the staged NTT, at several gaps.
#[test]
fn compact_prologue_matches_expansion_then_ntt() {
    for log_n in [10u32, 12, 16] {
        let n = 1usize << log_n;
        let g = NttGeometry::new(log_n).unwrap();
        let m = Modulus::new(PrimeGenerator::new(58, 2 * n as u64).next().unwrap()).unwrap();
        let (fwd, _, _, plan) = tables_of(n, m);
        for log_gap in [0u32, 1, 5, log_n - 1] {
            let mut rng = seeded_rng(u64::from(log_n) * 100 + u64::from(log_gap));
            let words: Vec<u64> = (0..n >> log_gap)
                .map(|i| {
                    let mantissa = (rng.next_u64() >> 11) as f64;
                    let shift = if i % 2 == 0 {
                        0
                    } else {
                        (rng.next_u64() % 600) as i32
                    };
                    let sign = if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
                    (sign * mantissa * 2f64.powi(shift)).to_bits()
                })
                .collect();
            let reduce = |bits: u64| m.reduce_f64(f64::from_bits(bits)).unwrap();
            let mut reference: Vec<u64> = (0..n)
                .map(|i| {
                    if i % (1 << log_gap) == 0 {
                        reduce(words[i >> log_gap])
                    } else {
                        0
                    }
                })
                .collect();
            let mut compact = Global::new(words.clone());
            let mut load = |i: usize| {
                if i & ((1 << log_gap) - 1) == 0 {
                    reduce(compact.load(i >> log_gap))
                } else {
                    0
                }
            };
            let got = forward(g, &vec![0; n], &fwd, m.value(), Some(&mut load), None);
            forward_staged(&mut reference, &TwiddleTables::new(&plan), &m);
            assert_eq!(got, reference, "N = 2^{log_n}, gap 2^{log_gap}");
        }
    }
}
