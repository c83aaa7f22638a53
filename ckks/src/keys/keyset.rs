//! [`KeySet`]: the evaluation keys a workload needs, and [`KeySetRequest`].

use std::collections::BTreeMap;

use super::{KeyKind, SwitchingKey};
use crate::Context;
use crate::ntt::GaloisElement;
use crate::params::{Level, Parameters};
use crate::{KeyError, Result};

/// Which evaluation keys to generate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeySetRequest {
    /// A relinearisation key (needed by every ciphertext multiplication).
    pub relinearization: bool,
    /// A conjugation key.
    pub conjugation: bool,
    /// Left rotations by these amounts (negative: right).
    pub rotations: Vec<i64>,
    /// The highest level each key must serve, by kind (rotations by their
    /// Galois element); a key not listed serves every level. A lower level
    /// makes a smaller key ([`SwitchingKey`]'s "level-aware"); using it
    /// higher is [`KeyError::KeyLevelTooLow`].
    pub levels: BTreeMap<KeyKind, Level>,
}

impl KeySetRequest {
    /// The bytes the key set this request makes holds (compressed keys,
    /// each at its level; rotations deduplicated by Galois element).
    pub fn key_bytes(&self, params: &Parameters) -> u64 {
        let n = params.degree().get();
        let top = params.max_level();
        let mut kinds = Vec::new();
        if self.relinearization {
            kinds.push(KeyKind::Relinearization);
        }
        if self.conjugation {
            kinds.push(KeyKind::Conjugation);
        }
        let mut rotations: Vec<GaloisElement> = self
            .rotations
            .iter()
            .map(|&k| GaloisElement::rotation(k, n))
            .filter(|g| g.0 != 1)
            .collect();
        rotations.sort_unstable_by_key(|g| g.0);
        rotations.dedup();
        kinds.extend(rotations.into_iter().map(KeyKind::Rotation));
        kinds
            .into_iter()
            .map(|kind| params.switching_key_bytes_at(self.level_of(kind, top), false))
            .sum()
    }

    /// The level `kind`'s key is made for: `levels`' entry, capped at `top`.
    pub fn level_of(&self, kind: KeyKind, top: Level) -> Level {
        self.levels.get(&kind).map_or(top, |&l| l.min(top))
    }

    /// Relinearisation, conjugation, and rotations by every power of two
    /// below `slots`, left and right: enough to compose any rotation with
    /// at most `log2(slots)` key switches.
    pub fn full(slots: usize) -> Self {
        Self {
            relinearization: true,
            conjugation: true,
            rotations: power_of_two_rotations(slots),
            levels: BTreeMap::new(),
        }
    }
}

/// `±2^i` for `2^i < slots` (at most `2^62`: rotation steps are `i64`).
pub fn power_of_two_rotations(slots: usize) -> Vec<i64> {
    (0..63)
        .map(|i| 1i64 << i)
        .take_while(|&k| (k as u64) < slots as u64)
        .flat_map(|k| [k, -k])
        .collect()
}

/// Evaluation keys by purpose: relinearisation, conjugation, and rotations by
/// Galois element.
#[derive(Debug, Default)]
pub struct KeySet {
    pub(crate) relinearization: Option<SwitchingKey>,
    pub(crate) conjugation: Option<SwitchingKey>,
    pub(crate) rotations: BTreeMap<u64, SwitchingKey>,
}

impl KeySet {
    /// An empty key set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a key, filed by its kind.
    ///
    /// # Errors
    /// [`KeyError::WrongKey`] for a generic switching key.
    pub fn insert(&mut self, key: SwitchingKey) -> Result<()> {
        match key.kind {
            KeyKind::Relinearization => self.relinearization = Some(key),
            KeyKind::Conjugation => self.conjugation = Some(key),
            KeyKind::Rotation(g) => {
                self.rotations.insert(g.0, key);
            }
            KeyKind::Generic => {
                return Err(KeyError::WrongKey {
                    expected: "an evaluation key",
                    found: key.kind.name(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// The relinearisation key.
    ///
    /// # Errors
    /// [`KeyError::MissingRelinearizationKey`].
    pub fn relinearization_key(&self) -> Result<&SwitchingKey> {
        self.relinearization
            .as_ref()
            .ok_or_else(|| KeyError::MissingRelinearizationKey.into())
    }

    /// The conjugation key.
    ///
    /// # Errors
    /// [`KeyError::MissingConjugationKey`].
    pub fn conjugation_key(&self) -> Result<&SwitchingKey> {
        self.conjugation
            .as_ref()
            .ok_or_else(|| KeyError::MissingConjugationKey.into())
    }

    /// The rotation key for Galois element `g`, if generated.
    pub fn rotation_key(&self, g: GaloisElement) -> Option<&SwitchingKey> {
        self.rotations.get(&g.0)
    }

    /// Whether a relinearisation key exists.
    pub fn has_relinearization_key(&self) -> bool {
        self.relinearization.is_some()
    }

    /// Whether a conjugation key exists.
    pub fn has_conjugation_key(&self) -> bool {
        self.conjugation.is_some()
    }

    /// The Galois elements of the rotation keys.
    pub fn rotation_elements(&self) -> Vec<GaloisElement> {
        self.rotations.keys().map(|&g| GaloisElement(g)).collect()
    }

    /// The context the keys were made in (or loaded into): the first
    /// key's (a set's keys come from one generation); `None` for an empty
    /// set.
    pub fn context(&self) -> Option<&Context> {
        self.keys().next().map(SwitchingKey::context)
    }

    /// All keys, in a fixed order.
    pub fn keys(&self) -> impl Iterator<Item = &SwitchingKey> {
        self.relinearization
            .iter()
            .chain(self.conjugation.iter())
            .chain(self.rotations.values())
    }

    /// Mutable access to every key (to compress or move them).
    pub fn keys_mut(&mut self) -> impl Iterator<Item = &mut SwitchingKey> {
        self.relinearization
            .iter_mut()
            .chain(self.conjugation.iter_mut())
            .chain(self.rotations.values_mut())
    }

    /// Number of switching keys.
    pub fn len(&self) -> usize {
        self.keys().count()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of all keys as held now.
    pub fn size_bytes(&self) -> usize {
        self.keys().map(SwitchingKey::size_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_of_two_rotations_stop_below_the_slot_count_and_never_overflow() {
        assert_eq!(power_of_two_rotations(1), Vec::<i64>::new());
        assert_eq!(power_of_two_rotations(8), vec![1, -1, 2, -2, 4, -4]);
        assert_eq!(power_of_two_rotations(9).len(), 8);
        // Past 2^62 the steps end at ±2^62 (k *= 2 overflowed, and in
        // release builds wrapped into an endless loop).
        let all = power_of_two_rotations(usize::MAX);
        assert_eq!(all.len(), 126);
        assert_eq!(all.last(), Some(&-(1i64 << 62)));
        assert_eq!(KeySetRequest::full(usize::MAX).rotations.len(), 126);
    }
}
