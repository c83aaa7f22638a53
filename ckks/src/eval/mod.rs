//! Ciphertexts and what acts on them: the [`Encryptor`], the [`Decryptor`]
//! and the [`Evaluator`].

mod arith;
mod ciphertext;
mod decryptor;
mod encryptor;

pub use arith::Evaluator;
pub use ciphertext::Ciphertext;
pub use decryptor::Decryptor;
pub use encryptor::Encryptor;
