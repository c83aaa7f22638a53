//! Ciphertexts and what acts on them: the [`Encryptor`], the [`Decryptor`]
//! and the [`Evaluator`] (additions, multiplications with relinearisation and
//! rescaling, rotations, conjugation, hoisted rotations).

mod arith;
mod ciphertext;
mod decryptor;
mod encryptor;
mod evaluator;
mod extended;
mod flooding;
mod keyswitch;
mod mult;
mod relinearize;
mod rotate;

pub use ciphertext::{Ciphertext, TensoredCiphertext};
pub use decryptor::Decryptor;
pub use encryptor::Encryptor;
pub use evaluator::{DEFAULT_MOD_DOWN_BATCH, Evaluator};
pub use extended::ExtendedCiphertext;
pub use flooding::{FloodingGoal, NoiseFlooding};
pub use keyswitch::Decomposition;
