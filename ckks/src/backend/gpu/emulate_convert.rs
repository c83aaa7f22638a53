//! The base conversions of `gpu-kernels/cuda/ckks_convert.cu` and of the
//! NTT's fused prologues (`fwd_columns` in `ckks_ntt.cu`: conversions,
//! the rescale's spread, compact plaintexts) run on the CPU with the
//! kernels' table words and arithmetic, through the NTT emulation of
//! [`super::emulate`], and checked against the CPU backend's conversions
//! and transforms: batched decompositions (ModUp), prescaled ModDowns, and
//! every 128-bit sum checked below 2^128 (a narrow one below `p·2^64`).
//!
//! Runs in CI without a GPU; any change to the kernels' conversion
//! arithmetic or table layout must be mirrored here.

use rand_core::Rng;

use super::emulate::{Global, Twiddle, forward, inverse, mul_shoup};
use super::emulate_acc::LazyAcc;
use super::tables::{conversion_words, twiddle_tables, y_scale_words};
use crate::ntt::{
    GaloisElement, NttPlan, TwiddleTables, automorphism_permutation, forward_staged, inverse_staged,
};
use crate::rns::BaseConverter;
use crate::testing::seeded_rng;
use crate::zq::Modulus;
use crate::zq::primes::PrimeGenerator;
use hemem_gpu_kernels::launch::ckks::ntt::{NttGeometry, NttRows};

/// `fwd_columns`' conversion of one coefficient `e` for target row `row`
/// of a table of `targets` rows: each source's word loaded (counted), then
/// [`convert_values`]. With `prescaled` the sources hold `y_i` already.
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
    let xs: Vec<u64> = sources.iter_mut().map(|s| s.load(e)).collect();
    convert_values(
        table, &xs, source_q, targets, row, target_q, exact, prescaled,
    )
}

/// `ckks_convert.cu`'s `base_convert` for coefficient `e` of target `row`:
/// [`convert_values`] of the sources' words, scaled by Shoup.
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
    let xs: Vec<u64> = sources.iter().map(|s| s[e]).collect();
    convert_values(table, &xs, source_q, targets, row, target_q, exact, false)
}

/// Both conversion kernels' arithmetic on one coefficient's source words
/// `xs`, from the kernel's table words (same reads, same arithmetic): each
/// word scaled by Shoup unless `prescaled`; the f64 sum in source order
/// without fused multiply-add; the products and the exact conversion's
/// correction `v·(−Q mod p_j)` accumulated in 128 bits ([`KernelSum`]),
/// which must not overflow; then `reduce_sum`: a Montgomery reduction
/// where the table holds `−p_j^{-1}` (its factors then in Montgomery form,
/// the sum checked below `p_j·2^64`), else an exact reduction (Barrett's
/// step is exact).
#[allow(clippy::too_many_arguments, reason = "the kernel's arguments")]
fn convert_values(
    table: &[u64],
    xs: &[u64],
    source_q: &[u64],
    targets: usize,
    row: usize,
    target_q: u64,
    exact: bool,
    prescaled: bool,
) -> u64 {
    let ks = xs.len();
    assert!(ks <= 16, "the kernels stage at most 16 sources");
    let mut acc = KernelSum::default();
    let mut sum = 0f64;
    for (i, &x) in xs.iter().enumerate() {
        let (qhi, qhis, inv_q) = (table[i], table[ks + i], f64::from_bits(table[2 * ks + i]));
        let q_hat = table[3 * ks + targets + row * ks + i];
        let y = if prescaled {
            x
        } else {
            mul_shoup(x, qhi, qhis, source_q[i])
        };
        if exact {
            sum += y as f64 * inv_q;
        }
        acc.add(y, q_hat);
    }
    if exact {
        let v = (sum + 0.5) as u64;
        let neg_q = table[3 * ks + row];
        assert!(neg_q < target_q, "table layout");
        acc.add(v, neg_q);
    }
    let acc = acc.value();
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

/// A kernel's sum of products kept twice: exactly (checked below 2^128)
/// and in the kernel's lazy words ([`LazyAcc`]), compared when it is read.
#[derive(Default)]
struct KernelSum {
    exact: u128,
    lazy: LazyAcc,
}

impl KernelSum {
    fn add(&mut self, a: u64, b: u64) {
        self.exact = self
            .exact
            .checked_add(u128::from(a) * u128::from(b))
            .expect("the kernel's 128-bit sum overflows");
        self.lazy.mul_add(a, b);
    }

    /// The sum, once the lazy words are checked to hold it.
    fn value(&self) -> u128 {
        assert_eq!(self.lazy.value(), self.exact, "the kernel's lazy sum");
        self.exact
    }
}

/// `n` random residues modulo each of `moduli`.
fn random_limbs(rng: &mut impl Rng, moduli: &[Modulus], n: usize) -> Vec<Vec<u64>> {
    moduli
        .iter()
        .map(|m| (0..n).map(|_| rng.next_u64() % m.value()).collect())
        .collect()
}

/// `count` NTT-friendly primes of `from_bits` for degree `n` and three
/// targets of `to_bits`, distinct from the sources where the sizes agree.
fn conversion_bases(
    n: usize,
    count: usize,
    from_bits: u32,
    to_bits: u32,
) -> (Vec<Modulus>, Vec<Modulus>) {
    let primes = |bits, skip, take| -> Vec<Modulus> {
        PrimeGenerator::new(bits, 2 * n as u64)
            .skip(skip)
            .take(take)
            .map(|q| Modulus::new(q).unwrap())
            .collect()
    };
    (primes(from_bits, 0, count), primes(to_bits, count + 2, 3))
}

/// The CPU's conversion of `inputs` from `from` to `to`: centred and exact,
/// or approximate.
fn cpu_conversion(
    from: &[Modulus],
    to: &[Modulus],
    inputs: &[Vec<u64>],
    exact: bool,
) -> Vec<Vec<u64>> {
    let refs: Vec<&[u64]> = inputs.iter().map(Vec::as_slice).collect();
    let n = refs.first().map_or(0, |limb| limb.len());
    let mut expected = vec![vec![0u64; n]; to.len()];
    let mut outs: Vec<&mut [u64]> = expected.iter_mut().map(Vec::as_mut_slice).collect();
    let converter = BaseConverter::new(from, to).unwrap();
    if exact {
        converter.convert_centered(&refs, &mut outs).unwrap();
    } else {
        converter.convert_approx(&refs, &mut outs).unwrap();
    }
    expected
}

#[test]
fn base_convert_matches_the_cpu_conversions() {
    let n = 1usize << 10;
    // Narrow sums (Montgomery) and wide ones (Barrett), 1 to 16 sources
    // (the launcher's MAX_SOURCES), exact and approximate, every input at
    // its largest value for one coefficient.
    for (count, from_bits, to_bits) in [
        (1usize, 50u32, 60u32),
        (5, 42, 58),
        (5, 61, 61),
        (15, 58, 40),
        (16, 59, 61),
        (16, 61, 61),
    ] {
        let (from, to) = conversion_bases(n, count, from_bits, to_bits);
        let (table, _) = conversion_words(&from, &to).unwrap();
        let mut rng = seeded_rng(u64::from(from_bits) * 100 + count as u64);
        let mut inputs = random_limbs(&mut rng, &from, n);
        for (limb, m) in inputs.iter_mut().zip(&from) {
            limb[0] = m.value() - 1;
        }
        let source_q: Vec<u64> = from.iter().map(Modulus::value).collect();
        for exact in [false, true] {
            let expected = cpu_conversion(&from, &to, &inputs, exact);
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
        let c = random_limbs(&mut rng, &q, n);
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
/// sub-scale epilogue with its addend, plain (relinearisation) and read
/// through an automorphism (a rotation's `σ_g(c0)`), by the 8- and the
/// 16-point rows kernels; and rescaling's NTT_SPREAD. Against the
/// CPU's `convert_centered`, `center`/`reduce_i64` and
/// `automorphism_permutation`.
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
        // The rotated addends' element (a random odd one below 2N).
        let galois = GaloisElement::rotation(1 + (rng.next_u64() % 1000) as i64, n);
        let perm = automorphism_permutation(n, galois);
        let epilogues = [NttRows::Radix8, NttRows::Radix16]
            .into_iter()
            .flat_map(|rows| [(rows, false), (rows, true)]);
        for part in 0..2u32 {
            assert_eq!(part_span(5, 10, part), 5);
            let x_p = random_limbs(&mut rng, &p_moduli, n);
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
            // Three limbs a part: part 0 takes the first three epilogues,
            // part 1 the last two and the first.
            let shifted = epilogues.clone().cycle().skip(2 * part as usize);
            for ((row, &m), (rows, rotated)) in q.iter().enumerate().zip(shifted) {
                let g = g.with_rows(rows);
                let (fwd, _, _, plan) = tables_of(n, m);
                let aux: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
                let extra: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
                let s = (scale[2 * row], scale[2 * row + 1]);
                let add = Some((extra.as_slice(), u32::from(rotated) * galois.0 as u32));
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
                    .zip(&perm)
                    .enumerate()
                    .map(|(j, ((&a, &w), &p))| {
                        let r = m.mul_shoup(m.sub(a, w), &sh);
                        m.add(r, if rotated { extra[p] } else { extra[j] })
                    })
                    .collect();
                assert_eq!(
                    got, reference,
                    "ModDown, N = 2^{log_n}, part {part}, limb {row}, {rows:?}, rotated {rotated}"
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
            let (from, to) = conversion_bases(n, count, from_bits, to_bits);
            let (table, _) = conversion_words(&from, &to).unwrap();
            let mut rng = seeded_rng(u64::from(log_n) + 1000 * u64::from(exact));
            let inputs = random_limbs(&mut rng, &from, n);
            let expected = cpu_conversion(&from, &to, &inputs, exact);
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
