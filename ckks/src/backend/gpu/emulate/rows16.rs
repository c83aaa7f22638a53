//! The 16-point rows kernels of `gpu-kernels/cuda/ckks_ntt.cu`
//! (`fwd_rows16`, `inv_rows16`; `NttRows::Radix16`) run on the CPU, as the
//! parent module runs the 8-point ones, with the same shared-memory and
//! global-memory checks.

use hemem_gpu_kernels::launch::ckks::ntt::{NttGeometry, NttRows};

use super::*;
use crate::zq::Modulus;
use crate::zq::primes::PrimeGenerator;

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

pub(super) fn point_base16(log_m: u32, gi: i32, j: u32) -> u32 {
    if height16(log_m, gi) == 4 {
        let log_q = log_m - sigma16(gi) - 4;
        let g = j >> log_q;
        let jp = j & ((1 << log_q) - 1);
        return (g << (log_q + 4)) + jp;
    }
    j << 4
}

pub(super) fn point_stride16(log_m: u32, gi: i32) -> u32 {
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

pub(super) fn thread_coords16(log_m: u32, tid: u32) -> (u32, u32) {
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
pub(super) fn rows16_block(
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
