//! The canonical embedding: [`Encoder`] maps complex slot vectors to
//! [`Plaintext`] polynomials at a level and scale and back, through the
//! special FFT ([`SpecialFft`]); [`CompactPlaintext`] keeps an encoding as
//! its rounded coefficients and expands it when used.

mod compact;
mod encoder;
mod fft;
mod plaintext;

pub use compact::CompactPlaintext;
pub use encoder::Encoder;
pub use fft::SpecialFft;
pub use plaintext::Plaintext;
