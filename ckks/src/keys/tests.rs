//! Level-aware switching keys against the full key they restrict.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::KeyGenerator;
use crate::backend::DeviceSelection;
use crate::context::Context;
use crate::ntt::GaloisElement;
use crate::params::{Level, Parameters, Preset, SecurityCheck};
use crate::testing::seed32;

fn context(preset: Preset) -> Context {
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    Context::new(params, DeviceSelection::Cpu).unwrap()
}

/// A key made for level `m` holds `digits_at(m)` digits over `Q_m ∪ P`,
/// and every one of its words equals the top-level key's word at the same
/// modulus, when both come from the same randomness.
#[test]
fn level_aware_keys_equal_the_full_keys_restriction() {
    for (preset, seed) in [
        (Preset::TestFGb, 11),
        (Preset::TestFVb, 12),
        (Preset::TestFTb, 13),
    ] {
        let context = context(preset);
        let params = context.params().clone();
        let n = params.degree().get();
        let top = params.max_level();
        let g = GaloisElement::rotation(3, n);
        let full = {
            let keygen = KeyGenerator::with_seed(&context, seed32(seed));
            let secret = keygen.secret_key().unwrap();
            keygen.galois_key(&secret, g).unwrap()
        };
        assert_eq!(full.level(), top);
        for m in [0, 1, params.alpha(), top.0 / 2, top.0 - 1] {
            let m = Level(m);
            let low = {
                let keygen = KeyGenerator::with_seed(&context, seed32(seed));
                let secret = keygen.secret_key().unwrap();
                keygen.galois_key_at(&secret, g, m).unwrap()
            };
            assert_eq!(low.level(), m);
            assert_eq!(low.seed(), full.seed());
            assert_eq!(low.digits(), params.digits_at(m));
            assert!(low.size_bytes() < full.size_bytes());
            let low_moduli = low.moduli();
            let full_moduli = full.moduli();
            for (j, (b_low, b_full)) in low.b.iter().zip(&full.b).enumerate() {
                assert_eq!(b_low.moduli(), &low_moduli[..]);
                let words_low = b_low.to_words().unwrap();
                let words_full = b_full.to_words().unwrap();
                for (pos, modulus) in low_moduli.iter().enumerate() {
                    let full_pos = full_moduli.iter().position(|x| x == modulus).unwrap();
                    assert_eq!(
                        words_low[pos * n..(pos + 1) * n],
                        words_full[full_pos * n..(full_pos + 1) * n],
                        "{preset:?}, level {m:?}, digit {j}, modulus {modulus}"
                    );
                }
            }
        }
    }
}

/// A level-aware key refuses key switches above its level.
#[test]
fn a_key_above_its_level_is_a_typed_error() {
    let context = context(Preset::TestFGb);
    let keygen = KeyGenerator::with_seed(&context, seed32(14));
    let secret = keygen.secret_key().unwrap();
    let n = context.params().degree().get();
    let key = keygen
        .galois_key_at(&secret, GaloisElement::rotation(1, n), Level(2))
        .unwrap();
    assert!(key.positions_at(Level(2)).is_ok());
    assert!(matches!(
        key.positions_at(Level(3)),
        Err(crate::Error::Key(crate::KeyError::KeyLevelTooLow {
            needed: 3,
            level: 2,
            ..
        }))
    ));
    assert!(
        keygen
            .galois_key_at(&secret, GaloisElement::rotation(1, n), Level(99))
            .is_err()
    );
}
