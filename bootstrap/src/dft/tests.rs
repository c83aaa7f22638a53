//! The DFT factors against dense products, their diagonal counts, sizes
//! and rotation keys.

use super::*;
use hemem_ckks::encoding::SpecialFft;
use hemem_ckks::testing::{max_abs_error, seeded_rng, unit_disk};

fn dense_mul(a: &[Vec<Complex64>], b: &[Vec<Complex64>]) -> Vec<Vec<Complex64>> {
    let n = a.len();
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| (0..n).map(|k| a[i][k] * b[k][j]).sum())
                .collect()
        })
        .collect()
}

#[test]
fn product_of_slot_to_coeff_factors_is_e_times_bit_reversal() {
    for log_n in 1..=7u32 {
        let n = 1usize << log_n;
        let e = decoding_matrix(n);
        // E·R: column k of E·R is column bitrev(k) of E.
        let er: Vec<Vec<Complex64>> = e
            .iter()
            .map(|row| (0..n).map(|k| row[bit_reverse(k, log_n)]).collect())
            .collect();
        for levels in [1usize, 2, 3, 4] {
            let dft = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, levels).unwrap();
            let mut product = DiagonalMatrix::identity(n).unwrap().to_dense();
            for f in dft.factors() {
                product = dense_mul(&f.to_dense(), &product);
            }
            let err = product
                .iter()
                .flatten()
                .zip(er.iter().flatten())
                .map(|(a, b)| (a - b).norm())
                .fold(0.0, f64::max);
            assert!(err < 1e-12, "n = {n}, levels = {levels}: {err}");
            let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, levels).unwrap();
            let mut inverse = DiagonalMatrix::identity(n).unwrap().to_dense();
            for f in cts.factors() {
                inverse = dense_mul(&f.to_dense(), &inverse);
            }
            let id = dense_mul(&inverse, &product);
            for (i, row) in id.iter().enumerate() {
                for (j, z) in row.iter().enumerate() {
                    let expected = if i == j { 1.0 } else { 0.0 };
                    assert!((z - expected).norm() < 1e-12, "n = {n}");
                }
            }
        }
    }
}

#[test]
fn slot_to_coeff_outputs_bit_reversed_coefficients_and_coeff_to_slot_undoes_it() {
    let mut rng = seeded_rng(21);
    for log_n in [4u32, 9, 12, 15] {
        let n = 1usize << log_n;
        let fft = SpecialFft::new(n);
        let w = unit_disk(&mut rng, n);
        let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, 3).unwrap();
        let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, 3).unwrap();
        // The slots after StC decode (special FFT inverse) to R·w.
        let slots = stc.apply(&w).unwrap();
        let coeffs = fft.inverse(&slots);
        let err = max_abs_error(&coeffs, &bit_reversed(&w));
        assert!(err < 1e-11 * (n as f64).sqrt(), "n = {n}: {err}");
        // CtS of the slots of a plaintext u gives R·u.
        let u = unit_disk(&mut rng, n);
        let back = cts.apply(&fft.forward(&u)).unwrap();
        assert!(max_abs_error(&back, &bit_reversed(&u)) < 1e-12 * n as f64);
        // And the composition is the identity.
        let id = cts.apply(&slots).unwrap();
        assert!(max_abs_error(&id, &w) < 1e-12 * n as f64, "n = {n}");
    }
}

#[test]
fn diagonal_counts_match_the_notes() {
    // BOOTSTRAP-NOTES §2: at 2^15 slots the CtS levels have 32/63/63
    // diagonals and baby steps 4096/256/8.
    let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, 1 << 15, 3).unwrap();
    let counts: Vec<usize> = cts.factors().iter().map(|f| f.diagonals().len()).collect();
    assert_eq!(counts, [32, 63, 63]);
    let n1: Vec<usize> = cts.linear_transforms(0).iter().map(|l| l.n1()).collect();
    assert_eq!(n1, [4096, 256, 8]);
    assert_eq!(cts.log_radices(), [5, 5, 5]);
    let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, 1 << 16, 3).unwrap();
    assert_eq!(stc.log_radices(), [5, 5, 6]);
    let counts: Vec<usize> = stc.factors().iter().map(|f| f.diagonals().len()).collect();
    assert_eq!(counts, [63, 63, 64]);
}

#[test]
fn rotation_key_counts_match_heaan() {
    // HEaaN: 38 keys for FG (2^15 slots), 42 for FV (2^16), 34 for FT
    // (2^14) with each giant step its own key; the BSGS ratio (log 0..2)
    // does not change them. Horner's giant steps need 23, 27 and 19.
    for (log_n, direct, horner) in [(15u32, 38usize, 23usize), (16, 42, 27), (14, 34, 19)] {
        let n = 1usize << log_n;
        let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, 3).unwrap();
        let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, 3).unwrap();
        for ratio in 0..=2 {
            let classic: BTreeSet<usize> = [&cts, &stc]
                .iter()
                .flat_map(|d| d.linear_transforms(ratio))
                .flat_map(|t| t.index().direct_rotations())
                .collect();
            assert_eq!(classic.len(), direct, "2^{log_n} slots, log ratio {ratio}");
            let keys = rotation_keys(&[&cts, &stc], ratio);
            if ratio == 0 {
                assert_eq!(keys.len(), horner, "2^{log_n} slots");
            }
            assert!(
                keys.len() < classic.len(),
                "2^{log_n} slots, log ratio {ratio}"
            );
            assert_eq!(cts.rotation_indices(ratio), stc.rotation_indices(ratio));
        }
    }
}

#[test]
fn other_splits_give_the_notes_key_counts() {
    // BOOTSTRAP-NOTES §2 at 2^15 slots: CtS 4 + StC 3 → 47, 4 + 4 → 32,
    // 2 + 2 → 60.
    let n = 1 << 15;
    for (c, s, expected) in [(4usize, 3usize, 47usize), (4, 4, 32), (2, 2, 60)] {
        let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, c).unwrap();
        let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, s).unwrap();
        let classic: BTreeSet<usize> = [&cts, &stc]
            .iter()
            .flat_map(|d| d.linear_transforms(0))
            .flat_map(|t| t.index().direct_rotations())
            .collect();
        assert_eq!(classic.len(), expected, "CtS {c} + StC {s}");
        assert!(rotation_keys(&[&cts, &stc], 0).len() < expected);
    }
}

#[test]
fn scaling_and_bad_input() {
    let n = 64;
    let mut dft = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, 3).unwrap();
    let plain = dft.clone();
    dft.scale_evenly(1.0 / 64.0).unwrap();
    dft.scale_factor(1, Complex64::new(0.0, 2.0)).unwrap();
    let mut rng = seeded_rng(5);
    let z = unit_disk(&mut rng, n);
    let a = dft.apply(&z).unwrap();
    let b: Vec<Complex64> = plain
        .apply(&z)
        .unwrap()
        .iter()
        .map(|v| v * Complex64::new(0.0, 2.0 / 64.0))
        .collect();
    assert!(max_abs_error(&a, &b) < 1e-14);
    assert!(dft.scale_factor(3, Complex64::new(1.0, 0.0)).is_err());
    assert!(matches!(
        HomomorphicDft::new(DftKind::SlotToCoeff, n, &[3, 2]),
        Err(Error::InvalidRadices { .. })
    ));
    // Radices whose u32 sum would wrap to log2 n are refused, not wrapped.
    let log_n = n.trailing_zeros();
    assert!(matches!(
        HomomorphicDft::new(DftKind::CoeffToSlot, n, &[u32::MAX, log_n + 1, 0]),
        Err(Error::InvalidRadices { sum: u32::MAX, .. })
    ));
    assert!(matches!(
        HomomorphicDft::new(DftKind::SlotToCoeff, 48, &[3, 2]),
        Err(Error::InvalidSlots { .. })
    ));
    // Past the largest ring's slot count: refused before any matrix is
    // allocated (2^40 slots would abort the process).
    assert!(matches!(
        HomomorphicDft::new(DftKind::CoeffToSlot, 1 << 40, &[14, 13, 13]),
        Err(Error::InvalidSlots {
            max: matrix::MAX_SLOTS,
            ..
        })
    ));
    // More levels than stages: identity factors keep the level count.
    let tiny = HomomorphicDft::with_levels(DftKind::SlotToCoeff, 2, 3).unwrap();
    assert_eq!(tiny.levels(), 3);
    assert_eq!(tiny.log_radices(), [0, 0, 1]);
}

#[test]
fn diagonal_matrix_matches_dense_products() {
    let mut rng = seeded_rng(8);
    let n = 16;
    let a: Vec<Vec<Complex64>> = (0..n).map(|_| unit_disk(&mut rng, n)).collect();
    let b: Vec<Vec<Complex64>> = (0..n).map(|_| unit_disk(&mut rng, n)).collect();
    let da = DiagonalMatrix::from_dense(&a).unwrap();
    let db = DiagonalMatrix::from_dense(&b).unwrap();
    let prod = da.compose(&db).unwrap().to_dense();
    let expected = dense_mul(&a, &b);
    for (x, y) in prod.iter().flatten().zip(expected.iter().flatten()) {
        assert!((x - y).norm() < 1e-12);
    }
    let z = unit_disk(&mut rng, n);
    let dense: Vec<Complex64> = a
        .iter()
        .map(|row| row.iter().zip(&z).map(|(x, y)| x * y).sum())
        .collect();
    assert!(max_abs_error(&da.apply(&z).unwrap(), &dense) < 1e-12);
}
