//! The canonical embedding: [`Encoder`] maps complex slot vectors to
//! [`Plaintext`] polynomials at a level and scale and back, through the
//! special FFT ([`SpecialFft`]).

mod encoder;
mod fft;
mod plaintext;

pub use encoder::Encoder;
pub use fft::SpecialFft;
pub use plaintext::Plaintext;
