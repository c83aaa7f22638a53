//! [`SwitchingKey`]: hybrid key-switching keys (Han–Ki, ePrint 2019/688, §3).

use std::fmt;
use std::sync::Arc;

use hemem_memory::MemoryClass;

use crate::Result;
use crate::backend::Backend;
use crate::context::Context;
use crate::ntt::GaloisElement;
use crate::params::Level;
use crate::poly::{Ntt, RnsPoly};
use crate::sampling::UniformSeed;

/// What a switching key switches from (it always switches *to* the secret
/// key `s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyKind {
    /// From `s²`: relinearisation after a multiplication.
    Relinearization,
    /// From `σ_g(s)`: the rotation with Galois element `g`.
    Rotation(GaloisElement),
    /// From `σ_{2N−1}(s)`: complex conjugation of the slots.
    Conjugation,
    /// From another secret key.
    Generic,
}

impl KeyKind {
    /// A short name for errors and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Relinearization => "relinearisation",
            Self::Rotation(_) => "rotation",
            Self::Conjugation => "conjugation",
            Self::Generic => "key switching",
        }
    }
}

/// A hybrid key-switching key from a secret `s'` to the secret `s`, with
/// gadget rank `dnum`: for each digit `j` (the primes `D_j` of `Q`), an RLWE
/// pair over `Q_L ∪ P`
///
/// `b_j = −a_j·s + e_j + P·[D̂_j]·s'`, with `P·[D̂_j] ≡ P (mod q_i ∈ D_j)` and
/// `≡ 0` modulo every other prime,
///
/// so that `Σ_j ModUp([c]_{D_j})·(b_j, a_j)` decrypts to `P·c·s'` and ModDown
/// by `P` leaves `c·s'` plus small noise.
///
/// The uniform halves `a_j` come from a 32-byte seed (one ChaCha12 sub-stream
/// per digit and limb, or ChaCha20 for keys made by earlier builds:
/// [`UniformSeed`]), so a key is stored **compressed** — `b` and the
/// seed only, half the bytes — and `a` regenerated limb by limb when needed
/// ([`SwitchingKey::expand`] keeps them instead).
///
/// **Level-aware.** A key switch at level `l` reads only the first
/// `⌈(l+1)/α⌉` digits and, of each, only the limbs `q_0 … q_l` and the
/// special primes. A key made for a highest level `m` ([`SwitchingKey::level`])
/// holds exactly that: `digits_at(m)` digits over `Q_m ∪ P`, and equals the
/// restriction of the top-level key made from the same randomness (the
/// gadget `P·[D̂_j]` is diagonal in the RNS basis, so restricting limbs
/// commutes with it). Bootstrapping's SlotToCoeff keys (levels ≤ 3) take a
/// few percent of a full key. Using a key above its level is
/// [`crate::KeyError::KeyLevelTooLow`]. Buffers are `EvaluationKey`-class.
pub struct SwitchingKey {
    pub(crate) context: Context,
    pub(crate) kind: KeyKind,
    pub(crate) level: Level,
    pub(crate) seed: UniformSeed,
    pub(crate) b: Vec<RnsPoly<Ntt>>,
    pub(crate) a: Option<Vec<RnsPoly<Ntt>>>,
}

impl fmt::Debug for SwitchingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwitchingKey")
            .field("kind", &self.kind)
            .field("level", &self.level.0)
            .field("digits", &self.b.len())
            .field("compressed", &self.is_compressed())
            .finish_non_exhaustive()
    }
}

/// Regenerates the uniform polynomial of `digit` over `moduli` from `seed`
/// ([`crate::sampling::SeededUniform`], on the backend's device).
pub(crate) fn regenerate_uniform(
    backend: &Arc<dyn Backend>,
    seed: UniformSeed,
    digit: usize,
    moduli: &[usize],
    class: MemoryClass,
) -> Result<RnsPoly<Ntt>> {
    let mut a = RnsPoly::<Ntt>::allocate(backend, moduli, class, false)?;
    backend.uniform_from_seed(&seed, digit, a.limbs_mut()?)?;
    Ok(a)
}

impl SwitchingKey {
    /// Seals every polynomial of the key (it is complete and read-only from
    /// now on; see [`RnsPoly::seal`]).
    pub(crate) fn sealed(self) -> Result<Self> {
        for poly in self.b.iter().chain(self.a.iter().flatten()) {
            poly.seal()?;
        }
        Ok(self)
    }

    /// What the key switches from.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// The number of gadget digits.
    pub fn digits(&self) -> usize {
        self.b.len()
    }

    /// Whether the uniform halves are dropped (regenerated from the seed on use).
    pub fn is_compressed(&self) -> bool {
        self.a.is_none()
    }

    /// The seed of the uniform halves and the function that expands it.
    pub fn seed(&self) -> UniformSeed {
        self.seed
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Bytes held in memory now.
    pub fn size_bytes(&self) -> usize {
        let b: usize = self.b.iter().map(|p| p.buffer().bytes()).sum();
        let a: usize = self.a.iter().flatten().map(|p| p.buffer().bytes()).sum();
        a + b
    }

    /// Drops the uniform halves, keeping the seed: half the memory; key
    /// switching then regenerates what it needs.
    pub fn compress(&mut self) {
        self.a = None;
    }

    /// Regenerates the uniform halves from the seed on the key's device.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn expand(&mut self) -> Result<()> {
        if self.a.is_some() {
            return Ok(());
        }
        let a = self
            .b
            .iter()
            .enumerate()
            .map(|(j, b)| {
                regenerate_uniform(
                    b.backend(),
                    self.seed,
                    j,
                    b.moduli(),
                    MemoryClass::EvaluationKey,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        for poly in &a {
            poly.seal()?;
        }
        self.a = Some(a);
        Ok(())
    }

    /// The same key on the context's device.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_device(&self) -> Result<Self> {
        self.moved(Arc::clone(self.context.backend()))
    }

    /// The same key in host memory.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_host(&self) -> Result<Self> {
        self.moved(Arc::clone(self.context.host_backend()))
    }

    fn moved(&self, backend: Arc<dyn Backend>) -> Result<Self> {
        let b = self
            .b
            .iter()
            .map(|p| p.to_backend(&backend))
            .collect::<Result<Vec<_>>>()?;
        let a = match &self.a {
            Some(a) => Some(
                a.iter()
                    .map(|p| p.to_backend(&backend))
                    .collect::<Result<Vec<_>>>()?,
            ),
            None => None,
        };
        Ok(Self {
            context: self.context.clone(),
            kind: self.kind,
            level: self.level,
            seed: self.seed,
            b,
            a,
        })
    }

    /// The highest level the key serves: it holds `digits_at(level)` digits
    /// over `Q_level ∪ P`.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The global moduli indices of the key's limbs, `Q_level ∪ P`, in
    /// storage order (a key's level is within its context's chain).
    pub fn moduli(&self) -> Vec<usize> {
        (0..=self.level.0)
            .chain(self.context.params().p_indices())
            .collect()
    }

    /// For a key switch at `level`: the storage positions of `Q_level ∪ P`
    /// in each digit (`q_i` at `i`, the special primes after `q_{self.level}`)
    /// and the number of digits it reads.
    ///
    /// # Errors
    /// [`crate::KeyError::KeyLevelTooLow`] above the key's level.
    pub(crate) fn positions_at(&self, level: Level) -> Result<(Vec<usize>, usize)> {
        if level > self.level {
            return Err(crate::KeyError::KeyLevelTooLow {
                kind: self.kind.name(),
                needed: level.0,
                level: self.level.0,
            }
            .into());
        }
        let params = self.context.params();
        let p_count = params.p_moduli().len();
        let positions = (0..=level.0)
            .chain(self.level.0 + 1..self.level.0 + 1 + p_count)
            .collect();
        Ok((positions, params.digits_at(level)))
    }
}
