//! The parameter fingerprint every serialized object's header carries.

use super::ParametersSpec;
use crate::zq::Modulus;

/// 64-bit FNV-1a (the `fnv` crate) over every field of the description and
/// every prime, each as little-endian 64-bit words: two parameter sets share
/// a fingerprint only if they agree on all of them. (Everything else
/// [`Parameters`](super::Parameters) holds is derived from these.) Variable length fields are
/// preceded by their length, optional ones by a tag, so that no two
/// descriptions give the same sequence of words. The value is part of the
/// file format (every object's header carries it): the crate computes the
/// same FNV-1a the format has always used, so files keep loading.
pub(super) fn fingerprint(spec: &ParametersSpec, q: &[Modulus], p: &[Modulus]) -> u64 {
    use std::hash::Hasher as _;
    let mut h = fnv::FnvHasher::default();
    let mut eat = |x: u64| h.write(&x.to_le_bytes());
    let option = |v: Option<usize>| v.map_or([0, 0], |v| [1, v as u64]);
    let ParametersSpec {
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
    } = spec;
    eat(u64::from(*log_n));
    eat(*dnum as u64);
    eat(*hamming_weight as u64);
    eat(q.len() as u64);
    for m in q.iter().chain(p) {
        eat(m.value());
    }
    // Fields after the primes.
    eat(p.len() as u64);
    for &bits in q_bits.iter().chain(p_bits) {
        eat(u64::from(bits));
    }
    eat(u64::from(*log_slots));
    eat(*enc_level as u64);
    option(*post_bootstrap_level).into_iter().for_each(&mut eat);
    eat(*user_primes as u64);
    eat(u64::from(*insecure_test));
    option(*bootstrap_rotation_keys)
        .into_iter()
        .for_each(&mut eat);
    eat(name.len() as u64);
    for &byte in name.as_bytes() {
        eat(u64::from(byte));
    }
    h.finish()
}
