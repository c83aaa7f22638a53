//! The serialized form of each object, written and read one polynomial at a
//! time through [`Writer`] and [`Reader`].

use std::io::{Read, Write};
use std::path::Path;

use hemem_memory::MemoryClass;
use zeroize::Zeroizing;

use super::files::{FileMode, open_file, write_file};
use super::format::{FRAME_BYTES, HEADER_BYTES, Kind, Reader, Writer};
use super::{Load, Save};
use crate::backend::{Limbs, LimbsMut, contiguous};
use crate::context::Context;
use crate::encoding::{Form, Plaintext};
use crate::eval::Ciphertext;
use crate::keys::{KeyKind, KeySet, PublicKey, SecretKey, SwitchingKey, regenerate_uniform};
use crate::ntt::GaloisElement;
use crate::params::{Level, Parameters, ParametersSpec, Scale, SecurityCheck};
use crate::poly::{Ntt, Representation, RnsPoly};
use crate::sampling::{SeedPrf, UniformSeed};
use crate::{Result, SerializationError};

const NONE_U32: u32 = u32::MAX;

/// Bytes of host staging per transfer when a polynomial lives on a device.
const STAGING_BYTES: usize = 4 << 20;

fn invalid(field: &'static str) -> crate::Error {
    SerializationError::InvalidField { field }.into()
}

/// Limbs per staging transfer at degree `n`.
fn staging_limbs(n: usize) -> usize {
    (STAGING_BYTES / (8 * n.max(1))).max(1)
}

/// Writes a polynomial: its limb count, its global modulus indices, then its
/// words limb after limb. A host polynomial is written from its own memory;
/// a device polynomial is downloaded a few limbs at a time into a small host
/// buffer (zeroed afterwards when the polynomial is secret material).
pub(crate) fn write_poly<W: Write, R: Representation>(
    w: &mut Writer<W>,
    p: &RnsPoly<R>,
) -> Result<()> {
    let count = p.limb_count();
    w.u32(count as u32)?;
    for &m in p.moduli() {
        w.u32(m as u32)?;
    }
    let n = p.backend().degree();
    if let Ok(words) = p.buffer().host_words() {
        let words = words.get(..count * n).ok_or(crate::Error::LengthMismatch {
            expected: count * n,
            actual: words.len(),
        })?;
        return w.words(words);
    }
    let group = staging_limbs(n).min(count);
    let mut staging = Zeroizing::new(vec![0u64; group * n]);
    let mut start = 0;
    while start < count {
        let c = group.min(count - start);
        let moduli = p.moduli().get(start..start + c).unwrap_or_default();
        let view = Limbs {
            buffer: p.buffer(),
            positions: contiguous(start, c)?,
            moduli,
        };
        let buf = staging.get_mut(..c * n).unwrap_or_default();
        p.backend().read(view, buf)?;
        w.words(buf)?;
        start += c;
    }
    Ok(())
}

/// Reads a polynomial that must have exactly the moduli `expected`, with
/// every residue below its prime, straight into a new polynomial of `class`
/// on the context's device (through a small host buffer when that is a GPU).
pub(crate) fn read_poly<Rd: Read, R: Representation>(
    r: &mut Reader<Rd>,
    context: &Context,
    expected: &[usize],
    class: MemoryClass,
) -> Result<RnsPoly<R>> {
    let count = r.u32()? as usize;
    if count != expected.len() {
        return Err(invalid("limb count"));
    }
    for &m in expected {
        if r.u32()? as usize != m {
            return Err(invalid("modulus index"));
        }
    }
    let params = context.params();
    let n = params.degree().get();
    let table = params.all_moduli();
    let primes = expected
        .iter()
        .map(|&m| table.get(m).map(|q| q.value()))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| invalid("modulus index"))?;
    let backend = context.backend();
    let mut p = RnsPoly::<R>::allocate(backend, expected, class, false)?;
    let mut below = true;
    if let Ok(words) = p.buffer_mut().host_words_mut() {
        let words = words
            .get_mut(..count * n)
            .ok_or(crate::Error::LengthMismatch {
                expected: count * n,
                actual: 0,
            })?;
        for (limb, &q) in words.chunks_exact_mut(n).zip(&primes) {
            below &= r.words_below(limb, q)?;
        }
    } else {
        let group = staging_limbs(n).min(count);
        let mut staging = vec![0u64; group * n];
        let mut start = 0;
        while start < count {
            let c = group.min(count - start);
            let buf = staging.get_mut(..c * n).unwrap_or_default();
            let qs = primes.get(start..start + c).unwrap_or_default();
            for (limb, &q) in buf.chunks_exact_mut(n).zip(qs) {
                below &= r.words_below(limb, q)?;
            }
            let view = LimbsMut {
                buffer: p.buffer_mut(),
                positions: contiguous(start, c)?,
                moduli: expected.get(start..start + c).unwrap_or_default(),
            };
            backend.write(view, buf)?;
            start += c;
        }
    }
    if below {
        Ok(p)
    } else {
        Err(invalid("residue"))
    }
}

pub(crate) fn check_fingerprint(context: &Context, found: u64) -> Result<()> {
    let expected = context.params().fingerprint();
    if expected == found {
        Ok(())
    } else {
        Err(SerializationError::ParameterMismatch { expected, found }.into())
    }
}

/// Opens an object of `kind` for `context`: header and fingerprint checked.
pub(crate) fn open<R: Read>(r: R, kind: Kind, context: &Context) -> Result<Reader<R>> {
    let (header, reader) = Reader::open(r, kind)?;
    check_fingerprint(context, header.fingerprint)?;
    Ok(reader)
}

fn write_opt<W: Write>(w: &mut Writer<W>, v: Option<usize>) -> Result<()> {
    w.u32(v.map_or(NONE_U32, |v| v as u32))
}

fn read_opt<R: Read>(r: &mut Reader<R>) -> Result<Option<usize>> {
    let v = r.u32()?;
    Ok((v != NONE_U32).then_some(v as usize))
}

fn read_bits<R: Read>(r: &mut Reader<R>, field: &'static str) -> Result<Vec<u32>> {
    let count = r.u32()? as usize;
    if count > 256 {
        return Err(invalid(field));
    }
    (0..count).map(|_| r.u32()).collect()
}

/// The bytes an in-memory writer needs for a payload of `payload` bytes, so
/// its vector never reallocates (a reallocation would leave a copy behind).
fn stream_bytes(payload: usize) -> usize {
    HEADER_BYTES + payload + 8 * (payload / FRAME_BYTES + 2)
}

impl Parameters {
    fn write_body<W: Write>(&self, w: &mut Writer<W>) -> Result<()> {
        let spec = self.spec();
        w.u32(spec.name.len() as u32)?;
        w.bytes(spec.name.as_bytes())?;
        w.u32(spec.log_n)?;
        w.u32(spec.log_slots)?;
        w.u32(spec.q_bits.len() as u32)?;
        for &b in &spec.q_bits {
            w.u32(b)?;
        }
        w.u32(spec.p_bits.len() as u32)?;
        for &b in &spec.p_bits {
            w.u32(b)?;
        }
        w.u32(spec.dnum as u32)?;
        w.u32(spec.enc_level as u32)?;
        write_opt(w, spec.post_bootstrap_level)?;
        w.u32(spec.user_primes as u32)?;
        w.u32(spec.hamming_weight as u32)?;
        write_opt(w, self.preset_claim())?;
        w.u8(u8::from(spec.insecure_test))?;
        write_opt(w, spec.bootstrap_rotation_keys)
    }

    /// The security-claim slot of the file format: a matched preset's claim,
    /// written so that older readers see what they expect, and checked on
    /// loading against hemem's own decision.
    fn preset_claim(&self) -> Option<usize> {
        let security = self.security();
        security.preset.map(|_| security.bits as usize)
    }

    /// Loads parameters from `r`, rebuilding the primes and checking the
    /// fingerprint. The security level is decided again, exactly as for
    /// [`Parameters::new`]: nothing in the file can claim it.
    ///
    /// Every other object loads into a context ([`Load`]); parameters make
    /// the context, so in its place they take the security decision, last,
    /// as every constructor of [`Parameters`] does (`new(spec, check)`,
    /// `from_preset_with(preset, check)`).
    ///
    /// # Errors
    /// A [`SerializationError`] for malformed data (among them
    /// [`SerializationError::InvalidField`] for a security claim other than
    /// hemem's own, and [`SerializationError::FingerprintMismatch`] when the
    /// fields do not give the header's fingerprint: a field was edited —
    /// every field counts, see [`Parameters::fingerprint`]); the errors of [`Parameters::new`] (insecure parameters
    /// need `check` to allow them).
    pub fn load<R: Read>(r: R, check: SecurityCheck) -> Result<Self> {
        let (header, mut r) = Reader::open(r, Kind::Parameters)?;
        let name_len = r.u32()? as usize;
        if name_len > 256 {
            return Err(invalid("name"));
        }
        let mut name = vec![0u8; name_len];
        r.bytes_into(&mut name)?;
        let name = String::from_utf8(name).map_err(|_| invalid("name"))?;
        let log_n = r.u32()?;
        let log_slots = r.u32()?;
        let q_bits = read_bits(&mut r, "q_bits")?;
        let p_bits = read_bits(&mut r, "p_bits")?;
        let dnum = r.u32()? as usize;
        let enc_level = r.u32()? as usize;
        let post_bootstrap_level = read_opt(&mut r)?;
        let user_primes = r.u32()? as usize;
        let hamming_weight = r.u32()? as usize;
        let claim = read_opt(&mut r)?;
        let insecure_test = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(invalid("insecure_test")),
        };
        let bootstrap_rotation_keys = read_opt(&mut r)?;
        r.finish()?;
        let spec = ParametersSpec {
            name,
            log_n,
            log_slots,
            q_bits,
            p_bits,
            dnum,
            enc_level,
            post_bootstrap_level,
            user_primes,
            hamming_weight,
            insecure_test,
            bootstrap_rotation_keys,
        };
        // Judged as if built by hand; the file's claim slot must then say
        // what hemem decided, or the file was edited.
        let params = Parameters::new(spec, check)?;
        if claim != params.preset_claim() {
            return Err(invalid("claimed_security_bits"));
        }
        if params.fingerprint() != header.fingerprint {
            return Err(SerializationError::FingerprintMismatch {
                stated: header.fingerprint,
                computed: params.fingerprint(),
            }
            .into());
        }
        Ok(params)
    }

    /// [`Parameters::load`] from a file.
    ///
    /// # Errors
    /// As [`Parameters::load`].
    pub fn load_from_path(path: impl AsRef<Path>, check: SecurityCheck) -> Result<Self> {
        Self::load(open_file(path.as_ref())?, check)
    }

    /// [`Parameters::load`] from bytes.
    ///
    /// # Errors
    /// As [`Parameters::load`].
    pub fn from_bytes(bytes: &[u8], check: SecurityCheck) -> Result<Self> {
        Self::load(bytes, check)
    }
}

impl Save for Parameters {
    /// Writes the parameters' description (every field of their spec, and
    /// the security-claim slot); the primes are rebuilt on loading.
    fn save<W: Write>(&self, w: W) -> Result<()> {
        let mut w = Writer::new(w, Kind::Parameters, self.fingerprint())?;
        self.write_body(&mut w)?;
        w.finish()?;
        Ok(())
    }
}

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
        let all = context.params().qp_indices(context.params().max_level());
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
    let moduli = params.qp_indices(level);
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

fn write_header_fields<W: Write>(
    w: &mut Writer<W>,
    level: Level,
    scale: Scale,
    slots: usize,
) -> Result<()> {
    w.u32(level.0 as u32)?;
    w.f64(scale.0)?;
    w.u32(slots as u32)
}

/// Checks a loaded plaintext's or ciphertext's scale against its level `l`:
/// `1 ≤ scale < Q_l` (`Q_l = q_0 ⋯ q_l`, compared through `log2`).
///
/// An object at level `l` holds integers modulo `Q_l`, read as
/// `coefficient / scale`. Below 1, the rounding of a coefficient alone is
/// worth more than one unit of the message, and tiny scales make decoding
/// overflow to infinity or NaN; at `Q_l` or above, every coefficient reads
/// as less than one half, so no message of magnitude one fits. A product
/// not yet rescaled fits at every level `l ≥ 1` where it may be rescaled:
/// [`Parameters::check_rescale`] bounds its scale by `2·q_l²`, below `Q_l`
/// whenever `Q_{l−1} > 2·q_l` (in every preset `q_0` alone is). A product at
/// level 0, which can never be rescaled, is refused when its scale reaches
/// `q_0`.
fn check_scale(params: &Parameters, level: Level, scale: Scale) -> Result<()> {
    let log_q: f64 = params
        .q_moduli()
        .get(..=level.0)
        .unwrap_or_default()
        .iter()
        .map(|q| (q.value() as f64).log2())
        .sum();
    if scale.0 >= 1.0 && scale.0.log2() < log_q {
        Ok(())
    } else {
        Err(SerializationError::ScaleOutOfRange { level: level.0 }.into())
    }
}

fn read_header_fields<R: Read>(
    r: &mut Reader<R>,
    context: &Context,
) -> Result<(Level, Scale, usize)> {
    let params = context.params();
    let level = Level(r.u32()? as usize);
    if level > params.max_level() {
        return Err(invalid("level"));
    }
    let scale = Scale(r.f64()?);
    check_scale(params, level, scale)?;
    let slots = r.u32()? as usize;
    if slots == 0 || !slots.is_power_of_two() || slots > params.degree().get() / 2 {
        return Err(invalid("slots"));
    }
    Ok((level, scale, slots))
}

impl Save for Plaintext {
    fn save<W: Write>(&self, w: W) -> Result<()> {
        let mut w = Writer::new(w, Kind::Plaintext, self.context.params().fingerprint())?;
        write_header_fields(&mut w, self.level, self.scale, self.slots)?;
        match &self.form {
            Form::Full(poly) => write_poly(&mut w, poly)?,
            // Saved in full: the file is the same as the full plaintext's.
            Form::Periodic(poly) => {
                w.u32(poly.limb_count() as u32)?;
                for &m in poly.moduli() {
                    w.u32(m as u32)?;
                }
                w.words(&poly.to_full_words()?)?;
            }
        }
        w.finish()?;
        Ok(())
    }
}

impl Load for Plaintext {
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::Plaintext, context)?;
        let (level, scale, slots) = read_header_fields(&mut r, context)?;
        let moduli = context.params().q_indices(level);
        let poly = read_poly(&mut r, context, &moduli, MemoryClass::Plaintext)?;
        r.finish()?;
        Ok(Plaintext {
            context: context.clone(),
            form: Form::Full(poly),
            level,
            scale,
            slots,
        })
    }
}

impl Save for Ciphertext {
    fn save<W: Write>(&self, w: W) -> Result<()> {
        let mut w = Writer::new(w, Kind::Ciphertext, self.context.params().fingerprint())?;
        write_header_fields(&mut w, self.level, self.scale, self.slots)?;
        write_poly(&mut w, &self.c0)?;
        write_poly(&mut w, &self.c1)?;
        w.finish()?;
        Ok(())
    }
}

impl Load for Ciphertext {
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::Ciphertext, context)?;
        let (level, scale, slots) = read_header_fields(&mut r, context)?;
        let moduli = context.params().q_indices(level);
        let c0 = read_poly(&mut r, context, &moduli, MemoryClass::Ciphertext)?;
        let c1 = read_poly(&mut r, context, &moduli, MemoryClass::Ciphertext)?;
        r.finish()?;
        Ciphertext::from_parts(context, c0, c1, level, scale, slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Preset;
    use crate::serialize::ToBytes as _;
    use crate::{Error, ParametersError};

    /// A parameter file written field by field, with whatever the writer
    /// likes in the security-claim slot and the test flag.
    fn parameter_file(spec: &ParametersSpec, claim: Option<usize>, test: bool, fp: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, Kind::Parameters, fp).unwrap();
        w.u32(spec.name.len() as u32).unwrap();
        w.bytes(spec.name.as_bytes()).unwrap();
        w.u32(spec.log_n).unwrap();
        w.u32(spec.log_slots).unwrap();
        for bits in [&spec.q_bits, &spec.p_bits] {
            w.u32(bits.len() as u32).unwrap();
            for &b in bits {
                w.u32(b).unwrap();
            }
        }
        w.u32(spec.dnum as u32).unwrap();
        w.u32(spec.enc_level as u32).unwrap();
        write_opt(&mut w, spec.post_bootstrap_level).unwrap();
        w.u32(spec.user_primes as u32).unwrap();
        w.u32(spec.hamming_weight as u32).unwrap();
        write_opt(&mut w, claim).unwrap();
        w.u8(u8::from(test)).unwrap();
        write_opt(&mut w, spec.bootstrap_rotation_keys).unwrap();
        w.finish().unwrap();
        out
    }

    #[test]
    fn a_file_cannot_claim_security() {
        // FGb's description at N = 2^11 (log QP = 1555, bound 53), in a file
        // that claims 128 bits under FGb's name.
        let mut spec = Preset::FGb.spec();
        spec.log_n = 11;
        spec.log_slots = 10;
        let fp = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure)
            .unwrap()
            .fingerprint();
        let bytes = parameter_file(&spec, Some(128), false, fp);
        assert!(matches!(
            Parameters::from_bytes(&bytes, SecurityCheck::Enforce),
            Err(Error::Parameters(ParametersError::Insecure {
                log_n: 11,
                bound: Some(53),
                ..
            }))
        ));
        // Opting in loads the parameters but not the claim.
        assert!(matches!(
            Parameters::from_bytes(&bytes, SecurityCheck::AllowInsecure),
            Err(Error::Serialization(SerializationError::InvalidField {
                field: "claimed_security_bits"
            }))
        ));
        let honest = parameter_file(&spec, None, false, fp);
        let p = Parameters::from_bytes(&honest, SecurityCheck::AllowInsecure).unwrap();
        assert_eq!(p.security().bits, 0);
        assert!(p.is_insecure());

        // A test preset with its flag cleared and a claim added.
        let test =
            Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap();
        let forged = parameter_file(test.spec(), Some(128), false, test.fingerprint());
        assert!(matches!(
            Parameters::from_bytes(&forged, SecurityCheck::Enforce),
            Err(Error::Parameters(ParametersError::Insecure {
                log_n: 11,
                ..
            }))
        ));
    }

    #[test]
    fn a_loaded_preset_is_matched_again() {
        let real = Parameters::from_preset(Preset::FTb).unwrap();
        let loaded =
            Parameters::from_bytes(&real.to_bytes().unwrap(), SecurityCheck::Enforce).unwrap();
        assert_eq!(loaded, real);
        assert_eq!(loaded.security().bits, 128);
        // FTb's structure with its claim slot emptied: the slot must say what
        // the library decides, so the edit is refused.
        let edited = parameter_file(real.spec(), None, false, real.fingerprint());
        assert!(matches!(
            Parameters::from_bytes(&edited, SecurityCheck::Enforce),
            Err(Error::Serialization(SerializationError::InvalidField {
                field: "claimed_security_bits"
            }))
        ));
        // A claim of another level is refused as well.
        let edited = parameter_file(real.spec(), Some(256), false, real.fingerprint());
        assert!(Parameters::from_bytes(&edited, SecurityCheck::Enforce).is_err());
    }
}

#[cfg(test)]
mod edited_parameter_files {
    use rand::{RngExt, SeedableRng};

    use super::*;
    use crate::params::Preset;
    use crate::{Error, SerializationError};

    /// A seed from the clock, printed with every failure.
    fn fresh_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }

    /// Any value in `0..=max` but `old`.
    fn other(rng: &mut impl RngExt, max: usize, old: usize) -> usize {
        loop {
            let v = rng.random_range(0..=max);
            if v != old {
                return v;
            }
        }
    }

    /// Any `Option` of a value in `0..=max` but `old`.
    fn other_opt(rng: &mut impl RngExt, max: usize, old: Option<usize>) -> Option<usize> {
        loop {
            let v = rng.random_bool(0.8).then(|| rng.random_range(0..=max));
            if v != old {
                return v;
            }
        }
    }

    /// Edits one field of `spec` to another value that still makes a valid
    /// description; says which.
    fn edit(spec: &mut ParametersSpec, rng: &mut impl RngExt, field: usize) -> &'static str {
        let primes = spec.q_bits.len();
        match field {
            0 => {
                let len = rng.random_range(0..=24);
                let name: String = (0..len)
                    .map(|_| char::from(rng.random_range(b' '..=b'~')))
                    .collect();
                if name == spec.name {
                    spec.name.push('!');
                } else {
                    spec.name = name;
                }
                "name"
            }
            1 => {
                let max = spec.log_n as usize - 1;
                spec.log_slots = other(rng, max, spec.log_slots as usize) as u32;
                "log_slots"
            }
            2 => {
                spec.enc_level = other(rng, primes - 1, spec.enc_level);
                "enc_level"
            }
            3 => {
                spec.post_bootstrap_level = other_opt(rng, primes - 1, spec.post_bootstrap_level);
                "post_bootstrap_level"
            }
            4 => {
                spec.user_primes = other(rng, primes, spec.user_primes);
                "user_primes"
            }
            5 => {
                spec.insecure_test = !spec.insecure_test;
                "insecure_test"
            }
            6 => {
                spec.bootstrap_rotation_keys = other_opt(rng, 4096, spec.bootstrap_rotation_keys);
                "bootstrap_rotation_keys"
            }
            7 => {
                spec.dnum = 1 + other(rng, primes - 1, spec.dnum - 1);
                "dnum"
            }
            8 => {
                let n = 1usize << spec.log_n;
                spec.hamming_weight = 1 + other(rng, n - 1, spec.hamming_weight - 1);
                "hamming_weight"
            }
            _ => {
                let i = rng.random_range(0..primes);
                spec.q_bits[i] = 40 + other(rng, 20, spec.q_bits[i] as usize - 40) as u32;
                "q_bits"
            }
        }
    }

    /// `spec` in a parameter file whose checksums are right and whose
    /// security-claim slot says what hemem decides, under the fingerprint
    /// `fp`.
    fn file(spec: &ParametersSpec, fp: u64) -> Vec<u8> {
        let honest = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, Kind::Parameters, fp).unwrap();
        honest.write_body(&mut w).unwrap();
        w.finish().unwrap();
        out
    }

    #[test]
    fn every_edited_field_is_refused() {
        let seed = fresh_seed();
        println!("seed {seed}");
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let bases = [
            Preset::TestFTb,
            Preset::TestFGb,
            Preset::TestFTa,
            Preset::FTb,
        ];
        for case in 0..60 {
            let preset = bases[case % bases.len()];
            let original =
                Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
            let mut spec = original.spec().clone();
            // Every field in turn, the prime sizes' edits in between.
            let field = case / bases.len() % 10;
            let what = edit(&mut spec, &mut rng, field);
            // The edited description is itself valid, and written honestly
            // it loads: only the fingerprint tells the edit.
            let honest = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
            assert_ne!(
                honest.fingerprint(),
                original.fingerprint(),
                "seed {seed}: {preset} with {what} edited"
            );
            let edited = file(&spec, original.fingerprint());
            assert!(
                matches!(
                    Parameters::from_bytes(&edited, SecurityCheck::AllowInsecure),
                    Err(Error::Serialization(
                        SerializationError::FingerprintMismatch { stated, computed }
                    )) if stated == original.fingerprint() && computed == honest.fingerprint()
                ),
                "seed {seed}: {preset} with {what} edited"
            );
            let resealed = file(&spec, honest.fingerprint());
            assert_eq!(
                Parameters::from_bytes(&resealed, SecurityCheck::AllowInsecure).unwrap(),
                honest,
                "seed {seed}: {preset} with {what} edited"
            );
        }
    }

    #[test]
    fn a_renamed_preset_keeps_its_security_but_not_its_fingerprint() {
        let real = Parameters::from_preset(Preset::FTb).unwrap();
        let mut spec = real.spec().clone();
        spec.name = "FTb (edited)".into();
        let edited = file(&spec, real.fingerprint());
        assert!(matches!(
            Parameters::from_bytes(&edited, SecurityCheck::Enforce),
            Err(Error::Serialization(
                SerializationError::FingerprintMismatch { .. }
            ))
        ));
        let renamed = Parameters::new(spec.clone(), SecurityCheck::Enforce).unwrap();
        let loaded =
            Parameters::from_bytes(&file(&spec, renamed.fingerprint()), SecurityCheck::Enforce)
                .unwrap();
        assert_eq!(loaded.security().bits, 128);
        assert_eq!(loaded.security().preset, Some(Preset::FTb));
    }
}
