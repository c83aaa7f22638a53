//! Errors of the CKKS layer.

use crate::backend::Device;
use crate::params::Level;

/// Errors of hemem-ckks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The memory system refused or failed.
    #[error(transparent)]
    Memory(#[from] hemem_memory::Error),
    /// A GPU kernel could not be loaded or launched.
    #[error(transparent)]
    Kernel(#[from] hemem_gpu_kernels::Error),
    /// Parameters could not be built.
    #[error(transparent)]
    Parameters(#[from] ParametersError),
    /// A key an operation needs is missing or unusable.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// Serialized data could not be loaded.
    #[error(transparent)]
    Serialization(#[from] SerializationError),
    /// The operands of an operation do not fit together.
    #[error(transparent)]
    Operand(#[from] OperandError),
    /// A modulus outside `[2, 2^62)`.
    #[error("modulus {modulus} is outside [2, 2^62)")]
    InvalidModulus {
        /// The modulus.
        modulus: u64,
    },
    /// No negacyclic NTT exists for this degree and modulus.
    #[error("no negacyclic NTT of degree {degree} modulo {modulus}")]
    NttUnsupported {
        /// The degree.
        degree: usize,
        /// The modulus.
        modulus: u64,
    },
    /// A slice or buffer of the wrong length.
    #[error("length mismatch: expected {expected}, got {actual}")]
    LengthMismatch {
        /// Expected length.
        expected: usize,
        /// Actual length.
        actual: usize,
    },
    /// An RNS basis with no moduli.
    #[error("an RNS basis needs at least one modulus")]
    EmptyBasis,
    /// Two moduli of a basis share a factor.
    #[error("moduli {first} and {second} are not coprime")]
    NotCoprime {
        /// One modulus.
        first: u64,
        /// The other.
        second: u64,
    },
    /// A GPU was asked for but none can be used (no driver library, no
    /// device, or no GPU support compiled in).
    #[error("no usable GPU: {reason}")]
    NoGpu {
        /// Why.
        reason: &'static str,
    },
    /// The operating system's entropy source failed.
    #[error("the operating system's random source failed")]
    Entropy,
    /// `Context::with_allocator` asked for a GPU: it makes CPU contexts only
    /// (a GPU context takes its allocator from `Context::with_memory`).
    #[error(
        "Context::with_allocator makes CPU contexts only, not gpu:{ordinal}; use Context::with_memory for a GPU"
    )]
    HostAllocatorOnGpu {
        /// The GPU asked for.
        ordinal: usize,
    },
}

/// Why parameters were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParametersError {
    /// A preset name that hemem does not know.
    #[error(
        "unknown preset {name:?} (known: FGa, FGb, FVa, FVb, FVc, FTa, FTb, and test-* variants)"
    )]
    UnknownPreset {
        /// The name given.
        name: String,
    },
    /// Parameters below 128-bit security, or a test preset, without opt-in.
    #[error(
        "insecure parameters refused: {}; opt in explicitly to use them",
        insecure_text(*.log_n, *.log_qp, *.bound, *.test)
    )]
    Insecure {
        /// `log2 N`.
        log_n: u32,
        /// `log2 QP`.
        log_qp: u32,
        /// The table's bound (`None`: the table has no row for this degree).
        bound: Option<u32>,
        /// Whether the description is marked as test parameters (the
        /// `test-*` presets, `ParametersSpec::insecure_test`), which are
        /// refused whatever their size.
        test: bool,
    },
    /// Custom parameters whose secret is sparser than the uniform ternary
    /// secret the security table assumes, without opt-in: the table says
    /// nothing about them.
    #[error(
        "insecure parameters refused: a secret of Hamming weight {weight} is sparser than the security table covers (at least {min}); opt in explicitly to use them"
    )]
    SparseSecret {
        /// The Hamming weight given.
        weight: usize,
        /// The least weight the table covers, `⌈2N/3⌉`.
        min: usize,
    },
    /// A ring degree outside `2^4 … 2^17`.
    #[error("log N = {log_n} is outside 4..=17")]
    InvalidDegree {
        /// `log2 N` given.
        log_n: u32,
    },
    /// A slot count above `N/2`.
    #[error("log slots = {log_slots} exceeds log N − 1 = {max}")]
    InvalidSlots {
        /// `log2` of the slot count given.
        log_slots: u32,
        /// The largest allowed.
        max: u32,
    },
    /// A prime size hemem cannot use.
    #[error("prime size of {bits} bits is outside 20..=61")]
    InvalidPrimeBits {
        /// The size given.
        bits: u32,
    },
    /// Not enough NTT-friendly primes of a size.
    #[error("not enough {bits}-bit primes ≡ 1 mod 2N")]
    NotEnoughPrimes {
        /// The size.
        bits: u32,
    },
    /// A modulus chain or special-prime list that is empty.
    #[error("the modulus chain needs at least one Q prime and one special prime")]
    EmptyChain,
    /// A gadget rank that does not fit the chain.
    #[error("dnum = {dnum} does not fit {primes} Q primes")]
    InvalidDnum {
        /// The rank given.
        dnum: usize,
        /// Q primes in the chain.
        primes: usize,
    },
    /// A level beyond the chain.
    #[error("level {level} is beyond the chain's top level {max}")]
    LevelOutOfRange {
        /// The level given.
        level: usize,
        /// The top level.
        max: usize,
    },
    /// Special primes whose product `P` is smaller than a key-switching
    /// digit: a key switch's ModDown divides the digits' noise by `P`, so
    /// with `P` below the largest digit every relinearisation and rotation
    /// returns noise instead of the message.
    #[error(
        "the special primes ({p_bits} bits) are smaller than the largest key-switching digit ({digit_bits} bits): raise the special primes or dnum"
    )]
    SpecialModulusTooSmall {
        /// The bits of `P` (the special primes' sizes summed).
        p_bits: u32,
        /// The bits of the largest digit (its primes' sizes summed).
        digit_bits: u32,
    },
    /// A Hamming weight outside `1..=N`.
    #[error("Hamming weight {weight} is outside 1..=N (N = {degree})")]
    InvalidHammingWeight {
        /// The weight given.
        weight: usize,
        /// The degree.
        degree: usize,
    },
    /// A field past what hemem's parameter files hold (a name of at most
    /// 256 bytes, at most 256 primes of each kind, a rotation count below
    /// `u32::MAX`): such parameters would save but never load.
    #[error("{field} is {found}, at most {max}")]
    FieldTooLarge {
        /// The field.
        field: &'static str,
        /// The largest allowed.
        max: usize,
        /// The value given.
        found: usize,
    },
}

/// [`ParametersError::Insecure`]'s reason in words: the test marking, or
/// the size against the table's bound.
fn insecure_text(log_n: u32, log_qp: u32, bound: Option<u32>, test: bool) -> String {
    let size = format!("log QP = {log_qp} at N = 2^{log_n}");
    match (test, bound) {
        (true, _) => {
            format!(
                "parameters marked as test parameters (as the test-* presets; {size}), insecure by design"
            )
        }
        (false, Some(bound)) => format!("{size} exceeds the 128-bit bound {bound}"),
        (false, None) => {
            format!("{size} has no 128-bit bound in the security table at this degree")
        }
    }
}

/// Why a key could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The evaluator was made without keys.
    #[error("this operation needs evaluation keys; build the evaluator with Evaluator::with_keys")]
    NoKeys,
    /// No relinearisation key in the key set.
    #[error("no relinearisation key was generated")]
    MissingRelinearizationKey,
    /// No conjugation key in the key set.
    #[error("no conjugation key was generated")]
    MissingConjugationKey,
    /// No key, and no composition of power-of-two keys, gives this rotation.
    #[error("no rotation key (or composition of power-of-two keys) rotates by {step}")]
    MissingRotationKey {
        /// The rotation asked for (left, in slots).
        step: i64,
    },
    /// A level-aware key used above the highest level it was made for.
    #[error(
        "the {kind} key serves levels up to {level}, not {needed}; generate it for a higher level"
    )]
    KeyLevelTooLow {
        /// What the key is for.
        kind: &'static str,
        /// The level of the key switch.
        needed: usize,
        /// The key's highest level.
        level: usize,
    },
    /// Keys that parse and fit the parameters but belong to another
    /// secret key: a test encryption under them came back as noise (key
    /// files of different key generations put side by side, say).
    #[error(
        "the {what} does not belong to this secret key (a test encryption decrypted to noise); were the files made by different key generations?"
    )]
    KeysDoNotMatch {
        /// Which key failed the test.
        what: &'static str,
    },
    /// A Galois element that is not an automorphism of the ring: even
    /// (modulo `2N`), so `X ↦ X^g` is not invertible.
    #[error("Galois element {element} is even modulo 2N = {two_n}: not an automorphism")]
    InvalidGaloisElement {
        /// The element given.
        element: u64,
        /// `2N`.
        two_n: u64,
    },
    /// A switching key for another purpose than the one asked.
    #[error("switching key is for {found}, not {expected}")]
    WrongKey {
        /// What the operation needed.
        expected: &'static str,
        /// What the key is for.
        found: &'static str,
    },
}

/// Why serialized data was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SerializationError {
    /// The data does not start with hemem's magic number.
    #[error("not hemem data (bad magic number)")]
    BadMagic,
    /// A format version this build cannot read.
    #[error("unsupported format version {version} (this build reads version {supported})")]
    UnsupportedVersion {
        /// The version found.
        version: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// Another kind of object than the one asked for.
    #[error("expected a serialized {expected}, found a {found}")]
    WrongKind {
        /// The kind asked for.
        expected: &'static str,
        /// The kind found.
        found: &'static str,
    },
    /// Data made for other parameters than those it is loaded or saved
    /// with (a context's, or the first key's of a set).
    #[error(
        "data belongs to other parameters (fingerprint {found:#018x}, expected {expected:#018x})"
    )]
    ParameterMismatch {
        /// The fingerprint of the parameters the data must fit.
        expected: u64,
        /// The data's fingerprint.
        found: u64,
    },
    /// Serialized parameters whose fields do not give the fingerprint their
    /// header states: a field was edited after they were written.
    #[error(
        "the parameters' fields give fingerprint {computed:#018x}, not the {stated:#018x} their header states (edited)"
    )]
    FingerprintMismatch {
        /// The fingerprint in the header.
        stated: u64,
        /// The fingerprint of the parameters the fields describe.
        computed: u64,
    },
    /// The data ends early.
    #[error("data truncated: {needed} more bytes needed after {available}")]
    Truncated {
        /// Bytes missing from the field being read.
        needed: u64,
        /// Bytes read before the data ended.
        available: u64,
    },
    /// The checksum does not match: the data was altered.
    #[error("data corrupted (checksum mismatch)")]
    Corrupted,
    /// A field holds a value outside its valid range.
    #[error("invalid value in field {field}")]
    InvalidField {
        /// The field.
        field: &'static str,
    },
    /// Header flags this build does not understand (it understands none:
    /// the byte is reserved and must be 0).
    #[error("unknown header flags {flags:#04x}")]
    UnknownFlags {
        /// The flags byte found.
        flags: u8,
    },
    /// A secret key that is not ternary with exactly the parameters'
    /// Hamming weight (the weight found is key data and not reported).
    #[error("the secret key does not have the parameters' Hamming weight {expected}")]
    SecretKeyWeight {
        /// The parameters' Hamming weight.
        expected: usize,
    },
    /// A switching key whose Galois element does not fit its kind: 0 for
    /// relinearisation, conjugation and generic keys; for a rotation an odd
    /// element in `(1, 2N)` other than the conjugation element `2N − 1`.
    #[error("a {kind} key cannot carry Galois element {element}")]
    GaloisElementMismatch {
        /// The key's kind.
        kind: &'static str,
        /// The element found.
        element: u64,
    },
    /// A key set holding the same key twice.
    #[error("the key set holds a {kind} key (Galois element {element}) twice")]
    DuplicateKey {
        /// The key's kind.
        kind: &'static str,
        /// Its Galois element (0 but for rotations).
        element: u64,
    },
    /// A full switching key whose stored uniform half `a_j` of digit `digit`
    /// is not the one its stored seed gives (the halves or the seed were
    /// edited).
    #[error("the stored uniform half of digit {digit} does not match the key's seed")]
    UniformMismatch {
        /// The first digit whose half differs.
        digit: usize,
    },
    /// A plaintext or ciphertext scale outside `[1, Q_level)`.
    #[error("scale outside [1, Q_{level}) for level {level}")]
    ScaleOutOfRange {
        /// The object's level.
        level: usize,
    },
    /// Bytes left over after the object.
    #[error("{extra} unexpected trailing bytes")]
    TrailingBytes {
        /// How many.
        extra: u64,
    },
    /// Reading or writing the underlying stream or file failed.
    #[error("I/O error: {kind}")]
    Io {
        /// What failed, as the operating system reported it.
        kind: std::io::ErrorKind,
    },
}

/// Why the operands of an operation were refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OperandError {
    /// Operands from different contexts.
    #[error("operands belong to different contexts")]
    ContextMismatch,
    /// Operands on different devices.
    #[error(
        "operands live on different devices ({left} and {right}); move one with to_device/to_host"
    )]
    DeviceMismatch {
        /// The first operand's device.
        left: Device,
        /// The second operand's device.
        right: Device,
    },
    /// A device the context was not created for.
    #[error("the context has no {device} backend (it was created for {context})")]
    DeviceNotInContext {
        /// The device asked for.
        device: Device,
        /// The context's device.
        context: Device,
    },
    /// Operands at different levels.
    #[error(
        "operands are at different levels ({left} and {right}); bring the higher one down with level_down"
    )]
    LevelMismatch {
        /// The first operand's level.
        left: Level,
        /// The second operand's level.
        right: Level,
    },
    /// Operands at different scales.
    #[error(
        "operands have different scales (2^{left_log2:.4} and 2^{right_log2:.4}); rescale or encode at a matching scale"
    )]
    ScaleMismatch {
        /// `log2` of the first scale.
        left_log2: f64,
        /// `log2` of the second scale.
        right_log2: f64,
    },
    /// Operands with different slot counts.
    #[error("operands have different slot counts ({left} and {right})")]
    SlotsMismatch {
        /// The first operand's slot count.
        left: usize,
        /// The second operand's slot count.
        right: usize,
    },
    /// A level above the operand's current level or the chain's top.
    #[error("level {level} is out of range (at most {max})")]
    LevelOutOfRange {
        /// The level asked for.
        level: Level,
        /// The highest allowed.
        max: Level,
    },
    /// An operation that needs a lower level (a rescale or multiplication at
    /// level 0, say).
    #[error("{operation} is not possible at level {level}")]
    LevelTooLow {
        /// The operation.
        operation: &'static str,
        /// The operand's level.
        level: Level,
    },
    /// A rescale whose result scale would exceed the prime it divides by
    /// (the scale would grow level after level instead of staying put).
    #[error(
        "rescale at level {level} would leave scale 2^{result_log2:.2} above the dropped {prime_bits}-bit prime; levels below this belong to bootstrapping"
    )]
    ScaleOverflow {
        /// The level being rescaled.
        level: Level,
        /// `log2` of the would-be result scale.
        result_log2: f64,
        /// Bits of the prime dropped.
        prime_bits: u32,
    },
    /// A scale no message of magnitude one can be read at: below 1 (the
    /// rounding of a coefficient outweighs a unit of the message) or at
    /// least `Q_l` (every coefficient reads as less than one half). Such an
    /// object decrypts to garbage and could not be loaded once saved.
    #[error(
        "scale 2^{scale_log2:.2} is outside [1, Q_{level}) at level {level} (Q_{level} = 2^{modulus_log2:.1}): no message of magnitude one fits"
    )]
    ScaleOutOfRange {
        /// The level of the object the scale would label.
        level: Level,
        /// `log2` of the scale.
        scale_log2: f64,
        /// `log2 Q_l`.
        modulus_log2: f64,
    },
    /// More values than slots.
    #[error("{values} values do not fit in {slots} slots")]
    TooManyValues {
        /// Values given.
        values: usize,
        /// Slots available.
        slots: usize,
    },
    /// A slot count that is not a power of two or exceeds the context's.
    #[error("{slots} slots: must be a power of two no larger than {max}")]
    InvalidSlots {
        /// Slots asked for.
        slots: usize,
        /// The context's maximum.
        max: usize,
    },
    /// A NaN or infinite input, or a value too large for the scale.
    #[error("input value is not finite or too large for the scale")]
    NonFiniteValue,
    /// A scale that is not positive and finite.
    #[error("scale must be positive and finite")]
    InvalidScale,
    /// A periodic plaintext ([`crate::encoding::Plaintext::is_periodic`])
    /// where the full form is needed: only multiplications read it.
    #[error(
        "the plaintext is kept periodic, which only multiplications read; encode it with Encoder::encode_at for other uses"
    )]
    PeriodicPlaintext,
    /// A Gaussian width that is negative or not a finite number: no
    /// sample could ever be drawn within its truncation.
    #[error("Gaussian width {sigma} is not a finite number at least 0")]
    InvalidStdDev {
        /// The width given.
        sigma: f64,
    },
    /// Noise flooding so wide the result would keep no precision.
    #[error(
        "noise flooding of 2^{flood_log2:.1} would leave no precision at scale 2^{scale_log2:.1}; lower the security goal or raise the scale"
    )]
    FloodingTooWide {
        /// `log2` of the flooding width in coefficient units.
        flood_log2: f64,
        /// `log2` of the ciphertext's scale.
        scale_log2: f64,
    },
    /// A noise-flooding request that would flood nothing, or nothing
    /// meaningful: a width below one coefficient unit or not a number, or a
    /// claimed precision that is not a number of bits between 0 and the
    /// scale's (a result's error is never below one coefficient unit).
    #[error("noise flooding refused: {reason}")]
    InvalidFlooding {
        /// What is wrong with the request.
        reason: &'static str,
    },
}

/// `Result` with hemem-ckks's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_strings() {
        let cases: Vec<(Error, &str)> = vec![
            (
                SerializationError::WrongKind {
                    expected: crate::serialize::Kind::Parameters.name(),
                    found: crate::serialize::Kind::Ciphertext.name(),
                }
                .into(),
                "expected a serialized parameter set, found a ciphertext",
            ),
            (
                KeyError::KeyLevelTooLow {
                    kind: "rotation",
                    needed: 5,
                    level: 3,
                }
                .into(),
                "the rotation key serves levels up to 3, not 5; generate it for a higher level",
            ),
            (
                Error::InvalidModulus { modulus: 1 },
                "modulus 1 is outside [2, 2^62)",
            ),
            (
                Error::NttUnsupported {
                    degree: 8,
                    modulus: 7,
                },
                "no negacyclic NTT of degree 8 modulo 7",
            ),
            (
                Error::LengthMismatch {
                    expected: 2,
                    actual: 3,
                },
                "length mismatch: expected 2, got 3",
            ),
            (Error::EmptyBasis, "an RNS basis needs at least one modulus"),
            (
                Error::NotCoprime {
                    first: 6,
                    second: 4,
                },
                "moduli 6 and 4 are not coprime",
            ),
            (
                Error::NoGpu {
                    reason: "no driver",
                },
                "no usable GPU: no driver",
            ),
            (
                Error::Entropy,
                "the operating system's random source failed",
            ),
            (
                Error::HostAllocatorOnGpu { ordinal: 1 },
                "Context::with_allocator makes CPU contexts only, not gpu:1; use Context::with_memory for a GPU",
            ),
            (
                SerializationError::ParameterMismatch {
                    expected: 0x10,
                    found: 0xab,
                }
                .into(),
                "data belongs to other parameters (fingerprint 0x00000000000000ab, expected 0x0000000000000010)",
            ),
            (
                SerializationError::FingerprintMismatch {
                    stated: 0x10,
                    computed: 0xab,
                }
                .into(),
                "the parameters' fields give fingerprint 0x00000000000000ab, not the 0x0000000000000010 their header states (edited)",
            ),
            (
                OperandError::DeviceNotInContext {
                    device: Device::Gpu(1),
                    context: Device::Cpu,
                }
                .into(),
                "the context has no gpu:1 backend (it was created for cpu)",
            ),
            (
                SerializationError::Io {
                    kind: std::io::ErrorKind::NotFound,
                }
                .into(),
                "I/O error: entity not found",
            ),
            (
                SerializationError::UnsupportedVersion {
                    version: 1,
                    supported: 2,
                }
                .into(),
                "unsupported format version 1 (this build reads version 2)",
            ),
            (
                SerializationError::UnknownFlags { flags: 0x80 }.into(),
                "unknown header flags 0x80",
            ),
            (
                SerializationError::SecretKeyWeight { expected: 192 }.into(),
                "the secret key does not have the parameters' Hamming weight 192",
            ),
            (
                SerializationError::GaloisElementMismatch {
                    kind: "rotation",
                    element: 4095,
                }
                .into(),
                "a rotation key cannot carry Galois element 4095",
            ),
            (
                SerializationError::DuplicateKey {
                    kind: "rotation",
                    element: 5,
                }
                .into(),
                "the key set holds a rotation key (Galois element 5) twice",
            ),
            (
                SerializationError::UniformMismatch { digit: 2 }.into(),
                "the stored uniform half of digit 2 does not match the key's seed",
            ),
            (
                SerializationError::ScaleOutOfRange { level: 3 }.into(),
                "scale outside [1, Q_3) for level 3",
            ),
            (
                SerializationError::Truncated {
                    needed: 8,
                    available: 100,
                }
                .into(),
                "data truncated: 8 more bytes needed after 100",
            ),
            (
                ParametersError::UnknownPreset { name: "FGz".into() }.into(),
                "unknown preset \"FGz\" (known: FGa, FGb, FVa, FVb, FVc, FTa, FTb, and test-* variants)",
            ),
            (
                ParametersError::Insecure {
                    log_n: 12,
                    log_qp: 1555,
                    bound: Some(106),
                    test: false,
                }
                .into(),
                "insecure parameters refused: log QP = 1555 at N = 2^12 exceeds the 128-bit bound 106; opt in explicitly to use them",
            ),
            (
                ParametersError::Insecure {
                    log_n: 11,
                    log_qp: 40,
                    bound: Some(53),
                    test: true,
                }
                .into(),
                "insecure parameters refused: parameters marked as test parameters (as the test-* presets; log QP = 40 at N = 2^11), insecure by design; opt in explicitly to use them",
            ),
            (
                ParametersError::Insecure {
                    log_n: 4,
                    log_qp: 60,
                    bound: None,
                    test: false,
                }
                .into(),
                "insecure parameters refused: log QP = 60 at N = 2^4 has no 128-bit bound in the security table at this degree; opt in explicitly to use them",
            ),
            (
                ParametersError::SparseSecret {
                    weight: 192,
                    min: 2731,
                }
                .into(),
                "insecure parameters refused: a secret of Hamming weight 192 is sparser than the security table covers (at least 2731); opt in explicitly to use them",
            ),
            (
                ParametersError::InvalidDegree { log_n: 20 }.into(),
                "log N = 20 is outside 4..=17",
            ),
            (
                ParametersError::InvalidSlots {
                    log_slots: 16,
                    max: 15,
                }
                .into(),
                "log slots = 16 exceeds log N − 1 = 15",
            ),
            (
                ParametersError::InvalidPrimeBits { bits: 70 }.into(),
                "prime size of 70 bits is outside 20..=61",
            ),
            (
                ParametersError::NotEnoughPrimes { bits: 20 }.into(),
                "not enough 20-bit primes ≡ 1 mod 2N",
            ),
            (
                ParametersError::EmptyChain.into(),
                "the modulus chain needs at least one Q prime and one special prime",
            ),
            (
                ParametersError::InvalidDnum { dnum: 0, primes: 3 }.into(),
                "dnum = 0 does not fit 3 Q primes",
            ),
            (
                ParametersError::LevelOutOfRange { level: 9, max: 4 }.into(),
                "level 9 is beyond the chain's top level 4",
            ),
            (
                ParametersError::FieldTooLarge {
                    field: "name (bytes)",
                    max: 256,
                    found: 300,
                }
                .into(),
                "name (bytes) is 300, at most 256",
            ),
            (
                ParametersError::InvalidHammingWeight {
                    weight: 0,
                    degree: 16,
                }
                .into(),
                "Hamming weight 0 is outside 1..=N (N = 16)",
            ),
            (
                OperandError::ContextMismatch.into(),
                "operands belong to different contexts",
            ),
            (
                OperandError::DeviceMismatch {
                    left: Device::Cpu,
                    right: Device::Gpu(0),
                }
                .into(),
                "operands live on different devices (cpu and gpu:0); move one with to_device/to_host",
            ),
            (
                OperandError::LevelMismatch {
                    left: Level(3),
                    right: Level(4),
                }
                .into(),
                "operands are at different levels (3 and 4); bring the higher one down with level_down",
            ),
            (
                OperandError::ScaleMismatch {
                    left_log2: 40.0,
                    right_log2: 42.0,
                }
                .into(),
                "operands have different scales (2^40.0000 and 2^42.0000); rescale or encode at a matching scale",
            ),
            (
                OperandError::SlotsMismatch { left: 4, right: 8 }.into(),
                "operands have different slot counts (4 and 8)",
            ),
            (
                OperandError::LevelOutOfRange {
                    level: Level(9),
                    max: Level(4),
                }
                .into(),
                "level 9 is out of range (at most 4)",
            ),
            (
                OperandError::LevelTooLow {
                    operation: "rescale",
                    level: Level(0),
                }
                .into(),
                "rescale is not possible at level 0",
            ),
            (
                OperandError::ScaleOverflow {
                    level: Level(3),
                    result_log2: 51.0,
                    prime_bits: 45,
                }
                .into(),
                "rescale at level 3 would leave scale 2^51.00 above the dropped 45-bit prime; levels below this belong to bootstrapping",
            ),
            (
                OperandError::TooManyValues {
                    values: 9,
                    slots: 8,
                }
                .into(),
                "9 values do not fit in 8 slots",
            ),
            (
                OperandError::InvalidSlots { slots: 3, max: 8 }.into(),
                "3 slots: must be a power of two no larger than 8",
            ),
            (
                OperandError::NonFiniteValue.into(),
                "input value is not finite or too large for the scale",
            ),
            (
                OperandError::InvalidScale.into(),
                "scale must be positive and finite",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
