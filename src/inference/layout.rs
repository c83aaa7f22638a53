//! How the network's feature maps sit in the slots, and its layers as
//! diagonal matrices on them.
//!
//! **Packing.** Channel `c`'s pixel `(y, x)` is slot `c·B + y·W + x`, with
//! `W` the grid side (the image side rounded up to a power of two) and
//! `B = W²`; the `C·B` slots of one copy are repeated to fill all `n`
//! slots, so every ciphertext is periodic with period `C·B` (the input,
//! one channel, with period `B`). A cyclic rotation by `k·B` then moves
//! channel `c + k (mod C)` onto channel `c`, which is what lets a
//! convolution read every input channel.
//!
//! **Strided layout.** Downsampling never moves data: after a stride-2
//! layer the stage's pixels stay where they were, on the grid of every
//! `t`-th row and column (`t = 2^stage`), and the next layers' kernel
//! offsets are `t` apart (the multiplexed packing of Lee et al., ICML 2022,
//! without the multiplexing). Slots off the grid hold garbage that every
//! convolution's diagonals multiply by 0.
//!
//! **Convolution.** `out = Σ_k Σ_(dy,dx) diag_(k·B + t·(dy·W + dx)) ⊙
//! rot_(k·B + t·(dy·W + dx))(in)`, a [`LinearTransform`] whose
//! baby steps (`N1 = B`) are the 3×3 offsets — one hoisted decomposition —
//! and whose giant steps `k·B` run by Horner's rule on one key: `8 + 2`
//! rotation keys per stride, whatever the width. The diagonals carry the
//! weights, zero padding and the output grid (a stride-2 convolution is
//! the stride-1 one with its off-grid outputs zeroed).
//!
//! **Pooling and FC.** Logit `j` goes to slot `o_j = (j / t)·W + j mod t`
//! (a corner of the last stage's grid cells, `t` its stride): one
//! transform multiplies every channel by its FC weight over the pool area
//! and shifts class `j`'s products by `o_j`, then rotations by
//! `t, 2t, …, W/2`, `tW, …, B/2` and `B, …, C·B/2` add up the grid and
//! the channels, leaving class `j`'s sum in slot `o_j` alone.

use hemem_bootstrap::dft::DiagonalMatrix;
use hemem_bootstrap::linear_transform::LinearTransform;
use num_complex::Complex64;

use super::network::{Conv, Network, NetworkShape};
use crate::{Error, Result};

/// The slot layout of a network's feature maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLayout {
    shape: NetworkShape,
    slots: usize,
}

impl SlotLayout {
    /// The layout of `shape` on `slots` slots.
    ///
    /// # Errors
    /// [`Error::InvalidNetwork`] for an invalid shape or one whose
    /// `channels × grid²` exceeds `slots`.
    pub fn new(shape: &NetworkShape, slots: usize) -> Result<Self> {
        shape.validate()?;
        if shape.packed_slots() > slots
            || !slots.is_power_of_two()
            || slots > super::network::MAX_SLOTS
        {
            return Err(Error::InvalidNetwork {
                reason: "channels × grid² exceeds the slot count",
            });
        }
        Ok(Self {
            shape: *shape,
            slots,
        })
    }

    /// The slot count.
    pub fn slots(&self) -> usize {
        self.slots
    }

    fn grid(&self) -> usize {
        self.shape.grid()
    }

    fn block(&self) -> usize {
        self.grid() * self.grid()
    }

    /// The stride of the last stage's grid.
    fn last_stride(&self) -> usize {
        1 << (self.shape.stages - 1)
    }

    /// `image` (row-major, `image_size²` pixels) packed into every slot:
    /// the grid with zeros beyond the image, repeated. The image is not
    /// checked here (missing pixels read as 0): check it first with
    /// [`Network::check_image`](super::Network::check_image), as
    /// [`super::EncryptedNetwork::encrypt`] does.
    pub fn pack_image(&self, image: &[f64]) -> Vec<Complex64> {
        let (w, size) = (self.grid(), self.shape.image_size);
        (0..self.slots)
            .map(|i| {
                let p = i % self.block();
                let (y, x) = (p / w, p % w);
                let v = if y < size && x < size {
                    image.get(y * size + x).copied().unwrap_or(0.0)
                } else {
                    0.0
                };
                Complex64::new(v, 0.0)
            })
            .collect()
    }

    /// Whether block position `p` is on the grid of stride `t` inside a
    /// feature map of side `side`.
    fn on_grid(&self, p: usize, t: usize, side: usize) -> bool {
        let (y, x) = (p / self.grid(), p % self.grid());
        y % t == 0 && x % t == 0 && y / t < side && x / t < side
    }

    /// `conv` on input at layout stride `t` (`t · conv.stride` after), as a
    /// linear transform with baby-step size `B`.
    ///
    /// # Errors
    /// Diagonal-matrix errors (none for a valid layout).
    pub fn convolution(&self, conv: &Conv, t: usize) -> Result<LinearTransform> {
        let (w, b, c) = (self.grid(), self.block(), self.shape.channels);
        let size = self.shape.image_size;
        let t_out = t * conv.stride;
        let (side_in, side_out) = (size.div_ceil(t), size.div_ceil(t_out));
        // A one-channel input (the stem's) is the same in every block.
        let shifts = if conv.in_channels == 1 { 1 } else { c };
        let mut diagonals = Vec::with_capacity(shifts * conv.kernel * conv.kernel);
        for k in 0..shifts {
            for (dy, dx) in conv.offsets() {
                let offset = t as i64 * (dy * w as i64 + dx);
                let values = (0..self.slots)
                    .map(|i| {
                        let p = i % b;
                        let co = (i / b) % c;
                        let (y, x) = ((p / w) as i64, (p % w) as i64);
                        let (yi, xi) = (y + t as i64 * dy, x + t as i64 * dx);
                        let inside = |v: i64| v >= 0 && ((v as usize) / t) < side_in;
                        let value = if self.on_grid(p, t_out, side_out) && inside(yi) && inside(xi)
                        {
                            let ci = if conv.in_channels == 1 {
                                0
                            } else {
                                (co + k) % c
                            };
                            conv.weight_at(co, ci, dy, dx)
                        } else {
                            0.0
                        };
                        Complex64::new(value, 0.0)
                    })
                    .collect();
                diagonals.push(((k * b) as i64 + offset, values));
            }
        }
        let matrix = DiagonalMatrix::from_diagonals(self.slots, diagonals)?;
        Ok(LinearTransform::with_n1(matrix, b)?)
    }

    /// The slot of logit `class` after [`SlotLayout::fc`] and the
    /// [`SlotLayout::pool_steps`] rotations, for `class` below the shape's
    /// class count (beyond it, a slot no logit is in).
    pub fn logit_slot(&self, class: usize) -> usize {
        let t = self.last_stride();
        // Saturating: a class far past the count is past every slot, not a
        // wrapped slot that holds another logit.
        (class / t)
            .saturating_mul(self.grid())
            .saturating_add(class % t)
    }

    /// Global average pooling's weights and the FC layer as one transform:
    /// class `j`'s diagonal, at index `−o_j`, holds channel `c`'s FC weight
    /// over the pool area on the last stage's grid, shifted to `o_j`.
    ///
    /// # Errors
    /// Diagonal-matrix errors (none for a valid layout).
    pub fn fc(&self, network: &Network) -> Result<LinearTransform> {
        let (b, c) = (self.block(), self.shape.channels);
        let t = self.last_stride();
        let side = self.shape.side_at(self.shape.stages - 1);
        let area = (side * side) as f64;
        let n = self.slots;
        let diagonals = (0..self.shape.classes).map(|j| {
            let o = self.logit_slot(j);
            let values = (0..n)
                .map(|i| {
                    // diag_(−o)[i] multiplies in[i − o].
                    let src = (i + n - o) % n;
                    let value = if self.on_grid(src % b, t, side) {
                        network.fc_weight_at(j, (src / b) % c) / area
                    } else {
                        0.0
                    };
                    Complex64::new(value, 0.0)
                })
                .collect();
            (-(o as i64), values)
        });
        let matrix = DiagonalMatrix::from_diagonals(n, diagonals)?;
        Ok(LinearTransform::new(matrix, 0))
    }

    /// The rotate-and-add steps that sum the FC products over the last
    /// grid and the channels: `t·2^m < W`, `t·W·2^m < B`, `B·2^m < C·B`.
    pub fn pool_steps(&self) -> Vec<i64> {
        let (w, b) = (self.grid(), self.block());
        let t = self.last_stride();
        let run = |from: usize, below: usize| {
            std::iter::successors(Some(from), |s| Some(s * 2)).take_while(move |&s| s < below)
        };
        run(t, w)
            .chain(run(t * w, b))
            .chain(run(b, self.shape.channels * b))
            .map(|s| s as i64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hemem_bootstrap::arith::{PlainSimulator, SlotArithmetic};
    use hemem_ckks::params::{Parameters, Preset, SecurityCheck};

    /// The layout's transforms, run on the f64 simulator without noise,
    /// match the feature-map convolution of the network.
    /// A slot count past any ring is refused (pack_image then sized a
    /// 2^62-entry vector); a class far past the count is past every slot
    /// (the product overflowed).
    #[test]
    fn layouts_past_any_ring_and_classes_past_the_count_are_refused() {
        let shape = NetworkShape::resnet20(4);
        assert!(matches!(
            SlotLayout::new(&shape, 1 << 62),
            Err(Error::InvalidNetwork { .. })
        ));
        let layout = SlotLayout::new(&shape, 1 << 16).unwrap();
        assert!(layout.logit_slot(usize::MAX / 2) >= layout.slots());
        assert!(layout.logit_slot(0) < layout.slots());
    }

    #[test]
    fn slot_transforms_match_the_plain_network() {
        let shape = NetworkShape {
            image_size: 7,
            channels: 2,
            stages: 2,
            blocks_per_stage: 1,
            classes: 3,
            activation_degree: 1,
        };
        let params =
            Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
        let network = Network::random(&shape, 5).unwrap();
        let layout = SlotLayout::new(&shape, 1 << 8).unwrap();
        let sim = PlainSimulator::new(&params);
        let image = super::super::network::random_image(&shape, 9).unwrap();
        let level = 20;
        let scale = sim.prime(level).unwrap() as f64;
        // The activation, slot by slot in f64.
        let act = |v: &[Complex64]| -> Vec<Complex64> {
            v.iter()
                .map(|z| Complex64::new(network.activation().evaluate_f64(z.re), 0.0))
                .collect()
        };
        let apply = |t: &LinearTransform, v: &[Complex64], l: usize| -> Vec<Complex64> {
            let x = sim.value(v, l, scale).unwrap();
            let e = t.encode(&sim, l, sim.prime(l).unwrap() as f64).unwrap();
            e.evaluate(&sim, &x).unwrap().values().to_vec()
        };
        let x0 = layout.pack_image(&image);
        let x = act(&apply(
            &layout.convolution(network.stem(), 1).unwrap(),
            &x0,
            level,
        ));
        let block = &network.blocks()[1];
        let b0 = &network.blocks()[0];
        let h = act(&apply(
            &layout.convolution(&b0.conv1, 1).unwrap(),
            &x,
            level,
        ));
        let h = apply(&layout.convolution(&b0.conv2, 1).unwrap(), &h, level);
        let x: Vec<Complex64> = act(&h.iter().zip(&x).map(|(a, b)| a + b).collect::<Vec<_>>());
        let h = act(&apply(
            &layout.convolution(&block.conv1, 1).unwrap(),
            &x,
            level,
        ));
        let h = apply(&layout.convolution(&block.conv2, 2).unwrap(), &h, level);
        let s = apply(
            &layout
                .convolution(block.shortcut.as_ref().unwrap(), 1)
                .unwrap(),
            &x,
            level,
        );
        let x = act(&h.iter().zip(&s).map(|(a, b)| a + b).collect::<Vec<_>>());
        let mut y = apply(&layout.fc(&network).unwrap(), &x, level);
        for step in layout.pool_steps() {
            let r: Vec<Complex64> = (0..y.len())
                .map(|i| y[(i + step as usize) % y.len()])
                .collect();
            y = y.iter().zip(&r).map(|(a, b)| a + b).collect();
        }
        let expected = network.infer_plain(&image).unwrap();
        for (j, e) in expected.iter().enumerate() {
            let got = y[layout.logit_slot(j)].re;
            assert!((got - e).abs() < 1e-9, "class {j}: {got} vs {e}");
        }
    }
}
