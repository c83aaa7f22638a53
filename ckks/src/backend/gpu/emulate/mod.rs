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

use super::tables::twiddle_tables;
use crate::ntt::{NttPlan, TwiddleTables, forward_staged, inverse_staged};
use crate::testing::seeded_rng;
use crate::zq::Modulus;
use crate::zq::primes::PrimeGenerator;

mod rows16;

use rows16::{point_base16, point_stride16, rows16_block, thread_coords16};

pub(super) type Twiddle = (u64, u64);
/// The NTT_SUB_SCALE epilogue's minuend limb, scale, and optional addend
/// with the Galois element it is read through (0 or 1: as it is).
pub(super) type SubScale<'a> = (&'a [u64], Twiddle, Option<(&'a [u64], u32)>);

/// `galois_source` of `ckks_common.cuh`: the point of the input that
/// `σ_g` moves to point `j` (NTT form, bit-reversed evaluations).
pub(super) fn galois_source(j: u32, galois: u64, log_n: u32) -> u32 {
    let mask = (2u64 << log_n) - 1;
    let rev = u64::from(j.reverse_bits() >> (32 - log_n));
    let e = (galois.wrapping_mul(2 * rev + 1)) & mask;
    let k = ((e - 1) >> 1) as u32;
    k.reverse_bits() >> (32 - log_n)
}

fn mul_shoup_lazy(a: u64, w: u64, ws: u64, q: u64) -> u64 {
    let est = ((u128::from(a) * u128::from(ws)) >> 64) as u64;
    a.wrapping_mul(w).wrapping_sub(est.wrapping_mul(q))
}

pub(super) fn mul_shoup(a: u64, w: u64, ws: u64, q: u64) -> u64 {
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
pub(super) struct Global {
    words: Vec<u64>,
    reads: Vec<u32>,
    writes: Vec<u32>,
}

impl Global {
    pub(super) fn new(words: Vec<u64>) -> Self {
        let n = words.len();
        Self {
            words,
            reads: vec![0; n],
            writes: vec![0; n],
        }
    }
    pub(super) fn load(&mut self, i: usize) -> u64 {
        self.reads[i] += 1;
        self.words[i]
    }
    pub(super) fn store(&mut self, i: usize, v: u64) {
        self.writes[i] += 1;
        self.words[i] = v;
    }
    pub(super) fn read_once(&self, what: &str) {
        assert!(self.reads.iter().all(|&c| c == 1), "{what}: reads");
    }
    pub(super) fn written_once(&self, what: &str) {
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

/// The forward transform of one limb as the two kernels compute it: of `a`,
/// or with `source` of the values it gives per coefficient index (the
/// conversion prologue); with `sub_scale`, the NTT_SUB_SCALE epilogue, or
/// NTT_SUB_SCALE_ADD with its addend.
pub(super) fn forward(
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
        .map(|(e, _)| Global::new(e.to_vec()));
    // `add_addend`: the addend's point, through the automorphism if any.
    let galois = sub_scale.and_then(|(_, _, e)| e).map_or(0, |(_, g)| g);
    let source = |p: usize| {
        if galois > 1 {
            galois_source(p as u32, u64::from(galois), g.log_n) as usize
        } else {
            p
        }
    };
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
            let w = e.load(source(at + k));
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
pub(super) fn inverse(
    g: NttGeometry,
    a: &[u64],
    tw: &[Twiddle],
    q: u64,
    n_inv: Twiddle,
) -> Vec<u64> {
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
            let fused = forward(g, &a, &fwd, q, None, Some((&aux, pair, Some((&extra, 0)))));
            let reference: Vec<u64> = reference
                .iter()
                .zip(&extra)
                .map(|(&x, &e)| m.add(x, e))
                .collect();
            assert_eq!(fused, reference, "sub-scale-add epilogue, N = 2^{log_n}");
        }
    }
}
