//! Secret, public and switching keys, and key sets.

use std::io::{Read, Write};
use std::path::Path;

use hemem_memory::MemoryClass;
use zeroize::Zeroizing;

use super::super::files::{FileMode, write_file};
use super::super::format::{Kind, Reader, Writer};
use super::super::{Load, Save};
use super::{invalid, open, read_poly, stream_bytes, write_poly};
use crate::context::Context;
use crate::keys::{KeyKind, KeySet, PublicKey, SecretKey, SwitchingKey, regenerate_uniform};
use crate::ntt::GaloisElement;
use crate::params::Level;
use crate::poly::{Ntt, RnsPoly};
use crate::sampling::{SeedPrf, UniformSeed};
use crate::{Result, SerializationError};

/// The secret key implements [`Load`] (and so [`crate::serialize::FromBytes`])
/// like every other object, but deliberately not [`Save`]: its inherent
/// [`SecretKey::save`], [`SecretKey::save_to_path`] and
/// [`SecretKey::to_bytes`] have the same names and shapes, and in addition
/// write files readable by their owner only and zeroize every buffer. A
/// [`Save`] implementation would hand generic code a `save_to_path` with the
/// default file mode and a `to_bytes` that leaves the key in an ordinary
/// vector.
impl SecretKey {
    /// Writes the secret key in hemem's binary format: one byte per ternary
    /// coefficient. Every buffer the writer uses is zeroed afterwards; what
    /// `w` does with the bytes is the caller's concern (see
    /// [`SecretKey::save_to_path`]).
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn save<W: Write>(&self, w: W) -> Result<()> {
        let mut w = Writer::new(w, Kind::SecretKey, self.context.params().fingerprint())?;
        w.u32(self.coefficients.len() as u32)?;
        for &c in self.coefficients.iter() {
            w.u8(c as i8 as u8)?;
        }
        w.finish()?;
        Ok(())
    }

    /// The secret key in hemem's binary format ([`SecretKey::save`] into
    /// memory). The result is secret material: it is zeroized on drop.
    ///
    /// # Errors
    /// None in practice (the key is on the host and a vector takes any
    /// write); the `Result` keeps the shape of every `to_bytes`.
    pub fn to_bytes(&self) -> Result<Zeroizing<Vec<u8>>> {
        let n = self.coefficients.len();
        let mut out = Zeroizing::new(Vec::with_capacity(stream_bytes(4 + n)));
        self.save(&mut *out)?;
        Ok(out)
    }

    /// Writes the secret key to a file readable by its owner only (mode
    /// 0600 on Unix), through a temporary file renamed into place.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn save_to_path(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), FileMode::OwnerOnly, |f| self.save(f))
    }
}

impl Load for SecretKey {
    /// Loads a secret key into `context` (on its device). Its errors are
    /// [`Load`]'s, among them a coefficient outside {−1, 0, 1}
    /// ([`SerializationError::InvalidField`]) and a key whose Hamming
    /// weight is not exactly the parameters'
    /// ([`SerializationError::SecretKeyWeight`]: the all-zero key, say).
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::SecretKey, context)?;
        let n = context.params().degree().get();
        if r.u32()? as usize != n {
            return Err(invalid("degree"));
        }
        let mut raw = Zeroizing::new(vec![0u8; n]);
        r.bytes_into(&mut raw)?;
        let mut coefficients = Zeroizing::new(Vec::with_capacity(n));
        for &b in raw.iter() {
            coefficients.push(match b {
                0 => 0,
                1 => 1,
                0xff => -1,
                _ => return Err(invalid("secret coefficient")),
            });
        }
        r.finish()?;
        let expected = context.params().hamming_weight();
        if coefficients.iter().filter(|&&c| c != 0).count() != expected {
            return Err(SerializationError::SecretKeyWeight { expected }.into());
        }
        SecretKey::from_coefficients(context, coefficients)
    }
}

impl Save for PublicKey {
    fn save<W: Write>(&self, w: W) -> Result<()> {
        let mut w = Writer::new(w, Kind::PublicKey, self.context.params().fingerprint())?;
        write_poly(&mut w, &self.b)?;
        write_poly(&mut w, &self.a)?;
        w.finish()?;
        Ok(())
    }
}

impl Load for PublicKey {
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::PublicKey, context)?;
        let all = context.params().qp_indices(context.params().max_level())?;
        let b = read_poly(&mut r, context, &all, MemoryClass::EvaluationKey)?;
        let a = read_poly(&mut r, context, &all, MemoryClass::EvaluationKey)?;
        r.finish()?;
        Ok(PublicKey {
            context: context.clone(),
            b,
            a,
        })
    }
}

/// Writes a switching key's record: kind, Galois element, seed, level, digit
/// count, the uniform byte, then the `b` polynomials (and the `a` ones if
/// kept). `keep_uniform = false` writes the compact form.
///
/// The uniform byte's bit 0 says whether the uniform halves follow; bits
/// 1–7 number the [`SeedPrf`] that expands the seed (0: ChaCha20, the only
/// one of earlier builds, whose files therefore read unchanged; 1:
/// ChaCha12). An earlier build refuses a ChaCha12 key as an invalid field
/// rather than expanding it wrongly.
///
/// This and [`read_switching_key`] are the only code that knows the record.
pub(crate) fn write_switching_key<W: Write>(
    w: &mut Writer<W>,
    key: &SwitchingKey,
    keep_uniform: bool,
) -> Result<()> {
    let (tag, galois) = match key.kind {
        KeyKind::Relinearization => (0u8, 0u64),
        KeyKind::Rotation(g) => (1, g.0),
        KeyKind::Conjugation => (2, 0),
        KeyKind::Generic => (3, 0),
    };
    w.u8(tag)?;
    w.u64(galois)?;
    w.bytes(&key.seed.bytes)?;
    w.u32(key.level.0 as u32)?;
    w.u32(key.b.len() as u32)?;
    let uniform = key.a.as_ref().filter(|_| keep_uniform);
    w.u8(u8::from(uniform.is_some()) | (key.seed.prf.id() << 1))?;
    for b in &key.b {
        write_poly(w, b)?;
    }
    for a in uniform.into_iter().flatten() {
        write_poly(w, a)?;
    }
    Ok(())
}

/// Whether the Galois element `galois` written with a key of `kind` fits it
/// at degree `n`: 0 for relinearisation, conjugation and generic keys (their
/// automorphism, if any, is implied by the kind); for a rotation an odd
/// element in `(1, 2N − 1)`: not the identity, and not the conjugation
/// element `2N − 1`, which belongs to the conjugation key.
fn galois_fits(kind: KeyKind, galois: u64, n: usize) -> bool {
    let two_n = 2 * n as u64;
    match kind {
        KeyKind::Rotation(_) => galois % 2 == 1 && galois > 1 && galois < two_n - 1,
        KeyKind::Relinearization | KeyKind::Conjugation | KeyKind::Generic => galois == 0,
    }
}

/// Checks that the stored uniform halves `a` of a full key are those its
/// `seed` gives (regenerated on the key's device, digit by digit).
///
/// # Errors
/// [`SerializationError::UniformMismatch`] naming the first digit that
/// differs; allocation and transfer errors.
fn check_uniform(b: &[RnsPoly<Ntt>], a: &[RnsPoly<Ntt>], seed: UniformSeed) -> Result<()> {
    for (digit, (b, a)) in b.iter().zip(a).enumerate() {
        let expected =
            regenerate_uniform(b.backend(), seed, digit, b.moduli(), MemoryClass::Temporary)?;
        if expected.to_words()? != a.to_words()? {
            return Err(SerializationError::UniformMismatch { digit }.into());
        }
    }
    Ok(())
}

/// Reads a switching key's record (see [`write_switching_key`]), checking
/// its kind, Galois element (against the kind), level, digit count and every
/// polynomial's moduli against the context's parameters, and a full key's
/// uniform halves against its seed.
pub(crate) fn read_switching_key<R: Read>(
    r: &mut Reader<R>,
    context: &Context,
) -> Result<SwitchingKey> {
    let params = context.params();
    let n = params.degree().get();
    let tag = r.u8()?;
    let galois = r.u64()?;
    let kind = match tag {
        0 => KeyKind::Relinearization,
        1 => KeyKind::Rotation(GaloisElement(galois)),
        2 => KeyKind::Conjugation,
        3 => KeyKind::Generic,
        _ => return Err(invalid("key kind")),
    };
    if !galois_fits(kind, galois, n) {
        return Err(SerializationError::GaloisElementMismatch {
            kind: kind.name(),
            element: galois,
        }
        .into());
    }
    let mut seed = [0u8; 32];
    r.bytes_into(&mut seed)?;
    let level = Level(r.u32()? as usize);
    if level > params.max_level() {
        return Err(invalid("key level"));
    }
    let digits = r.u32()? as usize;
    if digits != params.digits_at(level) {
        return Err(invalid("digits"));
    }
    let uniform = r.u8()?;
    let has_uniform = uniform & 1 == 1;
    let prf = SeedPrf::from_id(uniform >> 1).ok_or_else(|| invalid("uniform PRF"))?;
    let seed = UniformSeed::new(seed, prf);
    let moduli = params.qp_indices(level)?;
    let read_digits = |r: &mut Reader<R>| -> Result<Vec<RnsPoly<Ntt>>> {
        (0..digits)
            .map(|_| read_poly(r, context, &moduli, MemoryClass::EvaluationKey))
            .collect()
    };
    let b = read_digits(r)?;
    let a = if has_uniform {
        let a = read_digits(r)?;
        check_uniform(&b, &a, seed)?;
        Some(a)
    } else {
        None
    };
    SwitchingKey {
        context: context.clone(),
        kind,
        level,
        seed,
        b,
        a,
    }
    .sealed()
}

/// Writes a key set's record: the key count, then each key's record.
pub(crate) fn write_key_set<W: Write>(
    w: &mut Writer<W>,
    set: &KeySet,
    keep_uniform: bool,
) -> Result<()> {
    w.u32(set.len() as u32)?;
    for key in set.keys() {
        write_switching_key(w, key, keep_uniform)?;
    }
    Ok(())
}

/// Reads a key set's record: no generic key, no key twice.
pub(crate) fn read_key_set<R: Read>(r: &mut Reader<R>, context: &Context) -> Result<KeySet> {
    let count = r.u32()? as usize;
    // Relinearisation, conjugation and at most one key per Galois element.
    if count > context.params().degree().get() + 2 {
        return Err(invalid("key count"));
    }
    let mut set = KeySet::new();
    for i in 0..count {
        let key = read_switching_key(r, context)?;
        let kind = key.kind();
        set.insert(key)?;
        // `insert` replaces a key of the same purpose: the set did not grow.
        if set.len() != i + 1 {
            return Err(SerializationError::DuplicateKey {
                kind: kind.name(),
                element: match kind {
                    KeyKind::Rotation(g) => g.0,
                    _ => 0,
                },
            }
            .into());
        }
    }
    Ok(set)
}

impl<W: Write> Writer<W> {
    /// Writes a switching key's record in compact form (`b` and the seed),
    /// one polynomial at a time. For objects that embed keys (such as
    /// hemem-bootstrap's key files).
    ///
    /// # Errors
    /// Transfer errors; [`SerializationError::Io`].
    pub fn switching_key(&mut self, key: &SwitchingKey) -> Result<()> {
        write_switching_key(self, key, false)
    }

    /// Writes a key set's record in compact form.
    ///
    /// # Errors
    /// Transfer errors; [`SerializationError::Io`].
    pub fn key_set(&mut self, set: &KeySet) -> Result<()> {
        write_key_set(self, set, false)
    }
}

impl<R: Read> Reader<R> {
    /// Reads a switching key's record into `context` (on its device).
    ///
    /// # Errors
    /// A [`SerializationError`] for anything out of place; allocation and
    /// transfer errors.
    pub fn switching_key(&mut self, context: &Context) -> Result<SwitchingKey> {
        read_switching_key(self, context)
    }

    /// Reads a key set's record into `context`.
    ///
    /// # Errors
    /// As [`Reader::switching_key`]; a generic key, or a key twice.
    pub fn key_set(&mut self, context: &Context) -> Result<KeySet> {
        read_key_set(self, context)
    }
}

impl SwitchingKey {
    fn save_as<W: Write>(&self, w: W, keep_uniform: bool) -> Result<()> {
        let mut w = Writer::new(w, Kind::SwitchingKey, self.context.params().fingerprint())?;
        write_switching_key(&mut w, self, keep_uniform)?;
        w.finish()?;
        Ok(())
    }

    /// The key with its uniform halves replaced by their seed: half the bytes.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_bytes_compressed(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.save_as(&mut out, false)?;
        Ok(out)
    }
}

impl Save for SwitchingKey {
    /// The key as held: compact if it is compressed, in full otherwise.
    fn save<W: Write>(&self, w: W) -> Result<()> {
        self.save_as(w, true)
    }
}

impl Load for SwitchingKey {
    /// Loads a key; a compressed key stays compressed (call
    /// [`SwitchingKey::expand`] to regenerate its uniform halves up front).
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::SwitchingKey, context)?;
        let key = read_switching_key(&mut r, context)?;
        r.finish()?;
        Ok(key)
    }
}

/// The parameters' fingerprint shared by `keys`, for objects made of
/// switching keys (a [`KeySet`], hemem-bootstrap's key files): the keys
/// carry their parameters, so saving them needs no context.
///
/// # Errors
/// [`SerializationError::InvalidField`] (`"key count"`) when there is no
/// key: nothing says which parameters the object belongs to (an empty set
/// is made by [`KeySet::new`], not loaded); [`SerializationError::ParameterMismatch`]
/// for keys of different parameters.
pub fn keys_fingerprint<'a>(mut keys: impl Iterator<Item = &'a SwitchingKey>) -> Result<u64> {
    let first = keys
        .next()
        .map(|k| k.context().params().fingerprint())
        .ok_or(SerializationError::InvalidField { field: "key count" })?;
    match keys
        .map(|k| k.context().params().fingerprint())
        .find(|&f| f != first)
    {
        Some(found) => Err(SerializationError::ParameterMismatch {
            expected: first,
            found,
        }
        .into()),
        None => Ok(first),
    }
}

impl KeySet {
    fn save_as<W: Write>(&self, w: W, keep_uniform: bool) -> Result<()> {
        let fingerprint = keys_fingerprint(self.keys())?;
        let mut w = Writer::new(w, Kind::KeySet, fingerprint)?;
        write_key_set(&mut w, self, keep_uniform)?;
        w.finish()?;
        Ok(())
    }

    /// Every key of the set in compact form (`b` and the seed), in memory:
    /// what [`Save`] writes for keys held compressed, and half the bytes of
    /// expanded ones.
    ///
    /// # Errors
    /// As the set's [`Save`].
    pub fn to_bytes_compressed(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.save_as(&mut out, false)?;
        Ok(out)
    }
}

/// A key set saves itself without a context: its keys carry their
/// parameters.
///
/// **The empty set** has no parameters to write, so saving it is refused
/// ([`SerializationError::InvalidField`] `"key count"`, as for an empty
/// hemem-bootstrap key file): it would have to be written under a
/// fingerprint it does not have, and [`KeySet::new`] makes one without a
/// file. Loading still accepts an empty set written by an earlier version
/// (the format is unchanged: a key count of 0).
impl Save for KeySet {
    /// Writes every key as held, one polynomial at a time (downloaded a few
    /// limbs at a time from a device): compressed keys compact, expanded
    /// ones in full, as [`SwitchingKey`]'s [`Save`];
    /// [`KeySet::to_bytes_compressed`] always writes the compact form. Its
    /// errors are [`Save`]'s, with [`SerializationError::InvalidField`]
    /// (`"key count"`) for an empty set and
    /// [`SerializationError::ParameterMismatch`] for keys of different
    /// parameters.
    fn save<W: Write>(&self, w: W) -> Result<()> {
        self.save_as(w, true)
    }
}

impl Load for KeySet {
    /// Loads a key set into `context`, one polynomial at a time straight
    /// into its destination. Its errors are [`SwitchingKey`]'s [`Load`]
    /// errors, and a generic key inside a set, or a key twice.
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::KeySet, context)?;
        let set = read_key_set(&mut r, context)?;
        r.finish()?;
        Ok(set)
    }
}
