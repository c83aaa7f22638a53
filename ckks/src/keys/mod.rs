//! Keys: the secret key (exactly `h` nonzero ternary coefficients, zeroized on
//! drop), the public key, hybrid switching keys (relinearisation, rotation,
//! conjugation), key sets, and the [`KeyGenerator`] that makes them.

mod keygen;
mod keyset;
mod public;
mod secret;
mod switching;

pub use keygen::KeyGenerator;
pub use keyset::{KeySet, KeySetRequest, power_of_two_rotations};
pub use public::PublicKey;
pub use secret::SecretKey;
pub(crate) use switching::regenerate_uniform;
pub use switching::{KeyKind, SwitchingKey};

#[cfg(test)]
mod tests;
