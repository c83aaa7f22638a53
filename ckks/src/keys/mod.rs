//! Keys: the secret key (exactly `h` nonzero ternary coefficients, zeroized on
//! drop), the public key, and the [`KeyGenerator`] that makes them.

mod keygen;
mod public;
mod secret;

pub use keygen::KeyGenerator;
pub use public::PublicKey;
pub use secret::SecretKey;
