//! [`PublicKey`].

use crate::context::Context;
use crate::poly::{Ntt, RnsPoly};

/// A public encryption key `(b, a) = (−a·s + e, a)` over `Q_L ∪ P`, so that
/// encryption can run in `QP` and divide by `P` afterwards (keeping about 7
/// more bits than encrypting at `Q`).
#[derive(Debug)]
pub struct PublicKey {
    pub(crate) context: Context,
    pub(crate) b: RnsPoly<Ntt>,
    pub(crate) a: RnsPoly<Ntt>,
}

impl PublicKey {
    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The pair `(b, a)`, NTT form, over every modulus.
    pub fn parts(&self) -> (&RnsPoly<Ntt>, &RnsPoly<Ntt>) {
        (&self.b, &self.a)
    }
}
