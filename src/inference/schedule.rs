//! Where levels go: the network's forward pass written once over an
//! engine, run by a planner on levels alone (which level each
//! linear layer runs at, where bootstrapping is needed) and by the
//! encrypted network on ciphertexts, so the two cannot disagree.
//!
//! Levels run out as layers consume them: a convolution or the FC layer
//! takes one, an activation `⌈log2(degree + 1)⌉`. User computation stops at
//! level 3 (levels 0–2 belong to bootstrapping's SlotToCoeff). Before a
//! residual block the input is bootstrapped if the whole block would not
//! fit but would after a bootstrap; a block deeper than a bootstrap's
//! levels bootstraps inside, its main path and shortcut together
//! (`bootstrap_real_many`). A shortcut and a main path that meet at
//! different levels are added at the lower one (the higher brought down
//! with one multiplication by the constant 1, which also sets the scale).

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::network::Network;
use crate::{Error, Result};

/// The lowest level user computation reaches.
pub const MIN_LEVEL: usize = 3;

/// A linear layer of the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// The stem convolution.
    Stem,
    /// Block `b`'s first convolution.
    Conv1(usize),
    /// Block `b`'s second convolution.
    Conv2(usize),
    /// Block `b`'s 1×1 stride-2 shortcut.
    Shortcut(usize),
    /// Pooling and the FC layer.
    Fc,
}

/// The operations the forward pass is made of.
pub(crate) trait Engine {
    /// A ciphertext, or its level.
    type Value;
    /// The level of `x`.
    fn level(&self, x: &Self::Value) -> usize;
    /// A linear layer: one level.
    fn linear(&self, layer: Layer, x: &Self::Value) -> Result<Self::Value>;
    /// The activation: its polynomial's depth in levels.
    fn activate(&self, x: &Self::Value) -> Result<Self::Value>;
    /// Bootstraps every value (to the post-bootstrap level).
    fn bootstrap(&self, xs: Vec<Self::Value>) -> Result<Vec<Self::Value>>;
    /// `a + b` at the lower of their levels.
    fn add(&self, a: Self::Value, b: Self::Value) -> Result<Self::Value>;
    /// The rotate-and-add sum after the FC layer (no level).
    fn pool(&self, x: &Self::Value) -> Result<Self::Value>;
}

/// The levels the forward pass works with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Levels {
    /// The post-bootstrap level, if the parameters bootstrap.
    pub post: Option<usize>,
    /// The activation's depth.
    pub activation: usize,
}

impl Levels {
    /// Makes sure `x` has `need` levels above [`MIN_LEVEL`], bootstrapping it
    /// (with `skip`, if given) otherwise.
    fn ensure<E: Engine>(
        &self,
        e: &E,
        x: E::Value,
        skip: Option<E::Value>,
        need: usize,
        layer: &'static str,
    ) -> Result<(E::Value, Option<E::Value>)> {
        if e.level(&x) >= MIN_LEVEL + need {
            return Ok((x, skip));
        }
        let available = self.post.map_or(0, |p| p.saturating_sub(MIN_LEVEL));
        if available < need {
            return Err(Error::NotEnoughLevels {
                layer,
                needed: need,
                available,
            });
        }
        let with_skip = skip.is_some();
        let mut out = e.bootstrap(std::iter::once(x).chain(skip).collect())?;
        let skip = if with_skip { out.pop() } else { None };
        let x = out.pop().ok_or(Error::InvalidNetwork {
            reason: "bootstrapping returned nothing",
        })?;
        Ok((x, skip))
    }

    fn ensure_one<E: Engine>(
        &self,
        e: &E,
        x: E::Value,
        need: usize,
        layer: &'static str,
    ) -> Result<E::Value> {
        Ok(self.ensure(e, x, None, need, layer)?.0)
    }
}

/// The forward pass of `network` on `x` (the packed image at the encryption
/// level): logit `j` in slot [`super::layout::SlotLayout::logit_slot`].
pub(crate) fn forward<E: Engine>(
    e: &E,
    network: &Network,
    levels: &Levels,
    x: E::Value,
) -> Result<E::Value> {
    let act = levels.activation;
    let x = levels.ensure_one(e, x, 1 + act, "stem")?;
    let mut x = e.activate(&e.linear(Layer::Stem, &x)?)?;
    let block_depth = 2 + 2 * act;
    let fits_after_bootstrap = levels.post.is_some_and(|p| p >= MIN_LEVEL + block_depth);
    for (b, block) in network.blocks().iter().enumerate() {
        if e.level(&x) < MIN_LEVEL + block_depth && fits_after_bootstrap {
            x = levels.ensure_one(e, x, block_depth, "block")?;
        }
        let x_in = levels.ensure_one(e, x, 1, "block")?;
        let h = e.linear(Layer::Conv1(b), &x_in)?;
        let skip = match block.shortcut {
            Some(_) => e.linear(Layer::Shortcut(b), &x_in)?,
            None => x_in,
        };
        let (h, skip) = levels.ensure(e, h, Some(skip), act, "block")?;
        let h = e.activate(&h)?;
        let (h, skip) = levels.ensure(e, h, skip, 1, "block")?;
        let h = e.linear(Layer::Conv2(b), &h)?;
        let skip = skip.ok_or(Error::InvalidNetwork {
            reason: "the shortcut was lost",
        })?;
        let sum = levels.ensure_one(e, e.add(h, skip)?, act, "block")?;
        x = e.activate(&sum)?;
    }
    let x = levels.ensure_one(e, x, 1, "fc")?;
    e.pool(&e.linear(Layer::Fc, &x)?)
}

/// The levels of one forward pass, found by running it on levels alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The level each linear layer runs at (its diagonals are encoded there).
    pub layers: BTreeMap<Layer, usize>,
    /// The levels of the ciphertexts bootstrapped, in order (their scales
    /// are those levels' defaults).
    pub bootstrap_inputs: Vec<usize>,
    /// Bootstrapping calls (a batch of two is one call).
    pub bootstrap_calls: usize,
    /// The highest level an activation starts at (the relinearisation
    /// key's level).
    pub top_activation: usize,
    /// The level of the pooling rotations.
    pub pool_level: usize,
    /// The output's level.
    pub output_level: usize,
}

/// An [`Engine`] on levels: records what the pass does.
pub(crate) struct Planner {
    levels: Levels,
    plan: RefCell<Plan>,
}

impl Planner {
    /// The plan of `network` from `input_level`.
    ///
    /// # Errors
    /// [`Error::NotEnoughLevels`] where a layer cannot get its levels.
    pub(crate) fn plan(network: &Network, levels: Levels, input_level: usize) -> Result<Plan> {
        let planner = Self {
            levels,
            plan: RefCell::new(Plan {
                layers: BTreeMap::new(),
                bootstrap_inputs: Vec::new(),
                bootstrap_calls: 0,
                top_activation: 0,
                pool_level: 0,
                output_level: 0,
            }),
        };
        let out = forward(&planner, network, &levels, input_level)?;
        let mut plan = planner.plan.into_inner();
        plan.output_level = out;
        Ok(plan)
    }
}

impl Engine for Planner {
    type Value = usize;

    fn level(&self, x: &usize) -> usize {
        *x
    }

    fn linear(&self, layer: Layer, x: &usize) -> Result<usize> {
        self.plan.borrow_mut().layers.insert(layer, *x);
        Ok(x - 1)
    }

    fn activate(&self, x: &usize) -> Result<usize> {
        let mut plan = self.plan.borrow_mut();
        plan.top_activation = plan.top_activation.max(*x);
        Ok(x - self.levels.activation)
    }

    fn bootstrap(&self, xs: Vec<usize>) -> Result<Vec<usize>> {
        let post = self.levels.post.ok_or(Error::InvalidNetwork {
            reason: "the parameters do not bootstrap",
        })?;
        let mut plan = self.plan.borrow_mut();
        plan.bootstrap_calls += 1;
        plan.bootstrap_inputs.extend(&xs);
        Ok(vec![post; xs.len()])
    }

    fn add(&self, a: usize, b: usize) -> Result<usize> {
        Ok(a.min(b))
    }

    fn pool(&self, x: &usize) -> Result<usize> {
        self.plan.borrow_mut().pool_level = *x;
        Ok(*x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::NetworkShape;

    fn network(shape: NetworkShape) -> Network {
        Network::random(&shape, 7).unwrap()
    }

    #[test]
    fn resnet20_on_fgb_levels_bootstraps_before_blocks() {
        let net = network(NetworkShape::resnet20(16));
        let levels = Levels {
            post: Some(12),
            activation: 2,
        };
        let plan = Planner::plan(&net, levels, 12).unwrap();
        assert_eq!(plan.layers[&Layer::Stem], 12);
        assert_eq!(plan.layers[&Layer::Conv1(0)], 9);
        // Block 0 runs 9 → 3, then each block is bootstrapped first.
        assert_eq!(plan.bootstrap_calls, 8);
        assert_eq!(plan.bootstrap_inputs[..2], [3, 6]);
        assert!(plan.bootstrap_inputs[1..].iter().all(|&l| l == 6));
        assert_eq!(plan.layers[&Layer::Shortcut(3)], 12);
        assert_eq!(plan.layers[&Layer::Fc], 6);
        assert_eq!(plan.output_level, 5);
        assert_eq!(plan.top_activation, 11);
    }

    #[test]
    fn a_block_deeper_than_a_bootstrap_bootstraps_inside() {
        let net = network(NetworkShape {
            stages: 1,
            blocks_per_stage: 1,
            classes: 1,
            activation_degree: 15,
            ..NetworkShape::resnet20(2)
        });
        let levels = Levels {
            post: Some(12),
            activation: net.activation().depth(),
        };
        assert_eq!(levels.activation, 4);
        let plan = Planner::plan(&net, levels, 12).unwrap();
        // Stem 12 → 7; conv1 7 → 6; main and skip bootstrapped together.
        assert_eq!(plan.bootstrap_inputs[..2], [6, 7]);
        assert_eq!(plan.layers[&Layer::Conv2(0)], 8);
        assert!(plan.output_level >= MIN_LEVEL);
    }

    #[test]
    fn too_few_levels_is_a_typed_error() {
        let net = network(NetworkShape::resnet20(2));
        let levels = Levels {
            post: Some(4),
            activation: 2,
        };
        assert!(matches!(
            Planner::plan(&net, levels, 4),
            Err(Error::NotEnoughLevels {
                layer: "stem",
                needed: 3,
                available: 1
            })
        ));
        let levels = Levels {
            post: None,
            activation: 2,
        };
        assert!(matches!(
            Planner::plan(&net, levels, 12),
            Err(Error::NotEnoughLevels { layer: "block", .. })
        ));
    }
}
