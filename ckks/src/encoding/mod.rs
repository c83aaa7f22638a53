//! The canonical embedding: [`Encoder`] maps complex slot vectors to
//! [`Plaintext`] polynomials at a level and scale and back, through the
//! special FFT ([`SpecialFft`]); [`CompactPlaintext`] keeps an encoding as
//! its rounded coefficients and expands it when used; a message whose
//! slots repeat is kept as one period ([`least_period`]).

mod compact;
mod encoder;
mod fft;
mod period;
mod plaintext;

pub use compact::CompactPlaintext;
pub use encoder::Encoder;
pub use fft::SpecialFft;
pub use period::{is_short_period, least_period};
pub(crate) use plaintext::Form;
pub use plaintext::Plaintext;
