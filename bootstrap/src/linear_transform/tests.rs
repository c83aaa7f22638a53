//! BSGS evaluation against dense products, the split, storage forms.

use super::*;
use crate::arith::{OpCounts, PlainSimulator, RescaleRule, SlotArithmetic};
use hemem_ckks::params::{Parameters, Preset, SecurityCheck};
use hemem_ckks::testing::{max_abs_error, seeded_rng, unit_disk};

fn random_sparse(n: usize, indices: &[i64], seed: u64) -> DiagonalMatrix {
    let mut rng = seeded_rng(seed);
    DiagonalMatrix::from_diagonals(n, indices.iter().map(|&d| (d, unit_disk(&mut rng, n)))).unwrap()
}

#[test]
fn bsgs_evaluation_matches_dense_products() {
    let params = Parameters::from_preset(Preset::FGb).unwrap();
    let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
    let mut rng = seeded_rng(31);
    let n = 256;
    let indices: Vec<i64> = vec![0, 1, 2, 5, 7, 8, 9, 16, 31, -1, -3, -40, 100, 128];
    let m = random_sparse(n, &indices, 32);
    let dense = m.to_dense();
    for ratio in [-1, 0, 1, 2] {
        let lt = if ratio < 0 {
            LinearTransform::with_n1(m.clone(), 4).unwrap()
        } else {
            LinearTransform::new(m.clone(), ratio)
        };
        let level = 20;
        let z = unit_disk(&mut rng, n);
        let s_in = 2f64.powi(50);
        let x = sim.value(&z, level, s_in).unwrap();
        let q = sim.prime(level).unwrap();
        let target = 2f64.powi(45);
        let d = LinearTransform::diagonal_scale(s_in, target, q);
        let enc = lt.encode(&sim, level, d).unwrap();
        assert_eq!(enc.plaintext_count(), indices.len());
        let y = enc.evaluate(&sim, &x).unwrap();
        assert_eq!(y.level(), level - 1);
        assert!((y.scale() / target - 1.0).abs() < 2f64.powi(-50));
        let expected: Vec<Complex64> = dense
            .iter()
            .map(|row| row.iter().zip(&z).map(|(a, b)| a * b).sum())
            .collect();
        let err = max_abs_error(y.values(), &expected);
        // Diagonals rounded at 2^46 over 14 diagonals.
        assert!(err < 1e-11, "ratio {ratio}: {err}");
    }
}

#[test]
fn the_rotation_count_follows_the_split() {
    let params =
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
    let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
    let n = 1024;
    let indices: Vec<i64> = (-31..=31).collect();
    let m = random_sparse(n, &indices, 33);
    let lt = LinearTransform::new(m, 0);
    assert_eq!(lt.n1(), 8);
    // Babies 1…7, giants 8, 16, 24 and −8…−32: 14 keys taken directly,
    // 7 + 2 with the Horner runs.
    assert_eq!(lt.index().direct_rotations().len(), 14);
    assert_eq!(
        lt.rotations().into_iter().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7, 8, n - 8]
    );
    assert_eq!((lt.index().forward, lt.index().backward), (3, 4));
    let enc = lt.encode(&sim, 5, 2f64.powi(40)).unwrap();
    let mut rng = seeded_rng(34);
    let x = sim
        .value(&unit_disk(&mut rng, n), 7, 2f64.powi(40))
        .unwrap();
    sim.reset_counts();
    let _ = enc.evaluate(&sim, &x).unwrap();
    let c = sim.counts();
    assert_eq!(c.rotations, 14);
    assert_eq!(c.hoisted_groups, 1);
    assert_eq!(c.mul_plain, 63);
    assert_eq!(c.rescales, 1);
    // An input below the transform's level is refused.
    let low = sim.level_down(&x, 4).unwrap();
    assert!(matches!(
        enc.evaluate(&sim, &low),
        Err(Error::LevelTooLow { .. })
    ));
}

#[test]
fn compact_storage_evaluates_like_encoded() {
    let params =
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
    let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
    let n = 512;
    // 40 diagonals: groups larger than one expansion batch.
    let indices: Vec<i64> = (-20..20).collect();
    let lt = LinearTransform::with_n1(random_sparse(n, &indices, 35), 64).unwrap();
    let mut rng = seeded_rng(36);
    let x = sim
        .value(&unit_disk(&mut rng, n), 9, 2f64.powi(40))
        .unwrap();
    let encoded = lt.encode(&sim, 8, 2f64.powi(41)).unwrap();
    let compact = lt
        .encode_with(&sim, 8, 2f64.powi(41), DiagonalStorage::Compact)
        .unwrap();
    assert_eq!(encoded.storage(), DiagonalStorage::Encoded);
    assert_eq!(compact.storage(), DiagonalStorage::Compact);
    assert!(compact.diagonals().all(|d| d.as_compact().is_some()));
    assert!(encoded.diagonals().all(|d| d.as_encoded().is_some()));
    assert!(compact.groups().iter().any(|(_, g)| g.len() > EXPAND_BATCH));
    sim.reset_counts();
    let a = encoded.evaluate(&sim, &x).unwrap();
    let counts = sim.counts();
    sim.reset_counts();
    let b = compact.evaluate(&sim, &x).unwrap();
    assert_eq!(a, b);
    // The same work but the expansions' transforms.
    let no_ntt = |c: OpCounts| OpCounts { ntt_limbs: 0, ..c };
    assert_eq!(no_ntt(counts), no_ntt(sim.counts()));
    assert_eq!(
        "compact".parse::<DiagonalStorage>().unwrap(),
        DiagonalStorage::Compact
    );
    assert_eq!(
        DiagonalStorage::Encoded
            .name()
            .parse::<DiagonalStorage>()
            .unwrap(),
        DiagonalStorage::Encoded
    );
    assert!("dense".parse::<DiagonalStorage>().is_err());
}

/// Double hoisting gives the very values single hoisting gives (the
/// simulator without noise makes the same products and sums), with the
/// same rotations and fewer ModDowns: none per baby step, one per
/// giant step, a pair at the end.
#[test]
fn double_hoisting_matches_single_with_fewer_mod_downs() {
    let params =
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
    let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
    let n = 1024;
    let indices: Vec<i64> = (-31..=31).collect();
    let lt = LinearTransform::new(random_sparse(n, &indices, 37), 0);
    let mut rng = seeded_rng(38);
    let x = sim
        .value(&unit_disk(&mut rng, n), 7, 2f64.powi(40))
        .unwrap();
    let mut results = Vec::new();
    for hoisting in [Hoisting::Single, Hoisting::Double] {
        for storage in [DiagonalStorage::Compact, DiagonalStorage::Encoded] {
            let enc = lt
                .encode_hoisted(&sim, 5, 2f64.powi(40), storage, hoisting)
                .unwrap();
            assert_eq!(enc.hoisting(), hoisting);
            sim.reset_counts();
            let y = enc.evaluate(&sim, &x).unwrap();
            results.push((hoisting, storage, y, sim.counts()));
        }
    }
    let (_, _, single, single_counts) = &results[0];
    // Babies 1…7, giants 8…24 and −8…−32 by Horner (3 + 4 rotations).
    let (babies, giants) = (7, 7);
    assert_eq!(single_counts.rotations, babies + giants);
    assert_eq!(single_counts.mod_downs, 2 * (babies + giants));
    for (hoisting, storage, y, counts) in &results {
        assert_eq!(y, single, "{hoisting:?} {storage:?}");
        assert_eq!(counts.rotations, babies + giants);
        assert_eq!(counts.mul_plain, 63);
        if *hoisting == Hoisting::Double {
            assert_eq!(counts.mod_downs, giants + 2, "{storage:?}");
        }
    }
    // Compact expansions over Q ∪ P: K more limb transforms each.
    let k = params.p_moduli().len();
    let ntt = |i: usize| results[i].3.ntt_limbs;
    // The same decompositions (one for the babies, one per giant).
    let l = 5;
    let saved_mod_downs = (2 * (babies + giants) - (giants + 2)) * (k + l + 1);
    assert_eq!(ntt(0) + 63 * k, ntt(2) + saved_mod_downs);
    // An extended plaintext does not multiply an ordinary value.
    let p = sim
        .encode_extended(&unit_disk(&mut rng, n), 7, 2f64.powi(20))
        .unwrap();
    assert!(sim.mul_plain(&x, &p).is_err());
    // Auto: double where the ModDowns saved outweigh the expansions'
    // extra limbs. Here (K = 5): 7 babies and 7 giants save 19
    // ModDowns of K + l + 1 limbs against 63·5 limbs of expansions.
    assert_eq!(k, 5);
    assert_eq!(lt.hoisting_at(Hoisting::Auto, 5, k), Hoisting::Single);
    assert_eq!(lt.hoisting_at(Hoisting::Auto, 20, k), Hoisting::Double);
    assert_eq!(Hoisting::Auto.resolve(0, 5, 7, 8, 63), Hoisting::Single);
    assert_eq!(Hoisting::Auto.resolve(24, 5, 7, 8, 63), Hoisting::Double);
    assert_eq!(Hoisting::Single.resolve(24, 5, 7, 8, 63), Hoisting::Single);
    assert_eq!("auto".parse::<Hoisting>().unwrap(), Hoisting::Auto);
    assert_eq!("double".parse::<Hoisting>().unwrap(), Hoisting::Double);
    assert_eq!(
        Hoisting::Single.name().parse::<Hoisting>().unwrap(),
        Hoisting::Single
    );
    assert!("triple".parse::<Hoisting>().is_err());
}

#[test]
fn lattigo_ratio_rule() {
    let n = 1 << 15;
    let top: Vec<usize> = (0..32).map(|k| k * 1024).collect();
    assert_eq!(find_best_bsgs_ratio(&top, n, 0), 4096);
    assert_eq!(find_best_bsgs_ratio(&top, n, 1), 4096);
    assert_eq!(find_best_bsgs_ratio(&top, n, 2), 8192);
    let two = [0usize, 5];
    assert_eq!(find_best_bsgs_ratio(&two, n, 0), n);
    let index = BsgsIndex::new(&two, n, n);
    assert_eq!(index.rotations().into_iter().collect::<Vec<_>>(), [5]);
}
