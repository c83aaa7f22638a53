//! The network itself: its shape ([`NetworkShape`]), its random weights
//! ([`Network`]) and its evaluation in f64 ([`Network::infer_plain`]), the
//! reference the encrypted evaluation is checked against.
//!
//! The f64 evaluation works on feature maps (`channels × side × side`
//! arrays) with zero padding, as a plaintext framework would; it knows
//! nothing of slots, rotations or levels, so agreeing with it checks the
//! packing as well as the arithmetic.

// Feature-map and weight indices are computed from the shape the arrays
// were made with, and stay inside them by construction.
#![expect(
    clippy::indexing_slicing,
    reason = "indices come from the shapes the arrays are made with"
)]

use hemem_bootstrap::approx::chebyshev;
use hemem_bootstrap::poly_eval::Polynomial;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

use crate::{Error, Result};

/// The shape of a ResNet-style network on one square, single-channel image.
///
/// A **stem** 3×3 convolution (1 → `channels`) and activation, then
/// `stages` stages of `blocks_per_stage` residual blocks
/// (`act(conv(act(conv(x))) + shortcut(x))`, 3×3 convolutions); the first
/// block of every stage after the first halves the feature map (its first
/// convolution has stride 2, its shortcut is a 1×1 stride-2 convolution).
/// Then global average pooling and a fully-connected layer to `classes`
/// logits. Every activation is the same low-degree polynomial
/// approximation of ReLU on `[−1, 1]`.
///
/// ResNet-20 is 3 stages of 3 blocks on 32×32 images
/// ([`NetworkShape::resnet20`]): 19 convolutions and the FC layer. Unlike
/// ResNet-20, the width stays `channels` in every stage (doubling it would
/// need a second packing of the slots), there are no biases (the
/// activation's constant term plays their part) and no batch normalisation
/// (fold it into the weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkShape {
    /// Side of the input image, in pixels (at least 4).
    pub image_size: usize,
    /// Channels of every convolution after the stem (a power of two).
    pub channels: usize,
    /// Stages; each one after the first halves the feature map.
    pub stages: usize,
    /// Residual blocks per stage.
    pub blocks_per_stage: usize,
    /// Logits of the FC layer (at most `4^(stages − 1)`: the packing puts
    /// them in the corners of the last stage's pooling grid).
    pub classes: usize,
    /// Degree of the ReLU approximation (depth `⌈log2(degree + 1)⌉`).
    pub activation_degree: usize,
}

impl NetworkShape {
    /// ResNet-20's shape on 32×32 images: 3 stages of 3 residual blocks,
    /// 10 classes, a degree-2 activation, `channels` wide.
    pub const fn resnet20(channels: usize) -> Self {
        Self {
            image_size: 32,
            channels,
            stages: 3,
            blocks_per_stage: 3,
            classes: 10,
            activation_degree: 2,
        }
    }

    /// [`NetworkShape::resnet20`] as wide as `slots` allow, at most 16
    /// channels (ResNet-20's first stage): 16 at FGb's 2^15 slots, 2 at
    /// test-FGb's 2^11.
    pub fn resnet20_for_slots(slots: usize) -> Self {
        let grid = 32 * 32;
        let channels = (slots / grid).clamp(1, 16);
        Self::resnet20(1 << channels.ilog2())
    }

    /// Side of the square grid the image is packed into: the image size
    /// rounded up to a power of two.
    pub fn grid(&self) -> usize {
        self.image_size.next_power_of_two()
    }

    /// Side of the feature maps of stage `stage` (`⌈size / 2^stage⌉`).
    pub fn side_at(&self, stage: usize) -> usize {
        u32::try_from(stage)
            .ok()
            .and_then(|s| 1usize.checked_shl(s))
            .map_or(1, |d| self.image_size.div_ceil(d))
    }

    /// Slots one copy of the feature maps takes: `channels × grid²`
    /// (saturating: a shape too large for any ring reports `usize::MAX`).
    pub fn packed_slots(&self) -> usize {
        self.channels
            .saturating_mul(self.grid())
            .saturating_mul(self.grid())
    }

    /// Convolutions, the stem and shortcuts included.
    pub fn convolutions(&self) -> usize {
        1 + 2 * self.stages * self.blocks_per_stage + self.stages.saturating_sub(1)
    }

    /// Checks that the shape can be built and packed.
    ///
    /// # Errors
    /// [`Error::InvalidNetwork`] naming the first problem.
    pub fn validate(&self) -> Result<()> {
        let fail = |reason| Err(Error::InvalidNetwork { reason });
        if self.channels == 0 || !self.channels.is_power_of_two() {
            return fail("the channel count must be a power of two");
        }
        if self.image_size < 4 || self.image_size > MAX_IMAGE_SIZE {
            return fail("the image must be between 4×4 and 2^15×2^15");
        }
        if self.channels > MAX_IMAGE_SIZE {
            return fail("at most 2^15 channels");
        }
        if self.stages == 0 || self.blocks_per_stage == 0 {
            return fail("at least one stage of at least one block");
        }
        if self.blocks_per_stage > MAX_BLOCKS_PER_STAGE {
            return fail("at most 1024 blocks a stage");
        }
        if self.packed_slots() > MAX_SLOTS {
            return fail("channels × grid² must fit in 2^16 slots, the largest ring's");
        }
        // The widest stride keeps 3×3 offsets within a quarter of the grid
        // block, so that every diagonal index is unique (and, the grid
        // being at most 2^15, the stride's shift stays in range).
        if self.stages > MAX_IMAGE_SIZE.ilog2() as usize {
            return fail("too many stages for the image size");
        }
        let last = 1usize << (self.stages - 1);
        if 4 * last > self.grid() {
            return fail("too many stages for the image size");
        }
        if self.classes == 0 || self.classes > last * last {
            return fail("classes must be between 1 and 4^(stages − 1)");
        }
        if self.activation_degree == 0 || self.activation_degree > MAX_ACTIVATION_DEGREE {
            return fail("the activation's degree must be between 1 and 1024");
        }
        Ok(())
    }
}

/// The largest image side and channel count a shape may have: far beyond
/// what a ring's slots hold (2^16 at most), small enough that no size
/// derived from them overflows.
const MAX_IMAGE_SIZE: usize = 1 << 15;

/// The largest activation degree: every doubling costs a level, and no
/// preset has more than 30.
const MAX_ACTIVATION_DEGREE: usize = 1024;

/// The most slots any parameters have: a shape that packs into more fits
/// no ring (and its weights no memory).
pub(crate) use hemem_ckks::params::MAX_SLOTS;

/// The most residual blocks a stage may have: far beyond any network a
/// bootstrap budget evaluates, small enough that the convolution count and
/// the weights it sizes cannot overflow.
const MAX_BLOCKS_PER_STAGE: usize = 1024;

/// A convolution's weights, `[out][in][ky][kx]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv {
    /// Output channels.
    pub out_channels: usize,
    /// Input channels.
    pub in_channels: usize,
    /// Kernel side: 3, or 1 for a shortcut.
    pub kernel: usize,
    /// 1, or 2 to halve the feature map.
    pub stride: usize,
    /// `out × in × kernel × kernel` weights.
    pub weights: Vec<f64>,
}

impl Conv {
    /// Uniform random weights in `±√(3/(in·kernel²))` (variance-preserving,
    /// before [`Network::calibrate`] scales them).
    fn random(
        rng: &mut ChaCha20Rng,
        out_channels: usize,
        in_channels: usize,
        kernel: usize,
        stride: usize,
    ) -> Self {
        let count = out_channels * in_channels * kernel * kernel;
        let bound = (3.0 / (in_channels * kernel * kernel) as f64).sqrt();
        Self {
            out_channels,
            in_channels,
            kernel,
            stride,
            weights: (0..count).map(|_| uniform(rng, bound)).collect(),
        }
    }

    /// The weight from input channel `ci` at kernel offset `(dy, dx)`
    /// (each in `−r..=r`, `r = kernel / 2`) to output channel `co`; `None`
    /// outside the layer.
    pub fn weight(&self, co: usize, ci: usize, dy: i64, dx: i64) -> Option<f64> {
        let r = (self.kernel / 2) as i64;
        let inside = co < self.out_channels
            && ci < self.in_channels
            && (-r..=r).contains(&dy)
            && (-r..=r).contains(&dx);
        inside.then(|| self.weight_at(co, ci, dy, dx))
    }

    /// [`Conv::weight`] for indices inside the layer by construction.
    pub(crate) fn weight_at(&self, co: usize, ci: usize, dy: i64, dx: i64) -> f64 {
        let r = (self.kernel / 2) as i64;
        let (ky, kx) = ((dy + r) as usize, (dx + r) as usize);
        self.weights[((co * self.in_channels + ci) * self.kernel + ky) * self.kernel + kx]
    }

    /// The kernel offsets `(dy, dx)`, row by row.
    pub fn offsets(&self) -> Vec<(i64, i64)> {
        let r = (self.kernel / 2) as i64;
        (-r..=r)
            .flat_map(|dy| (-r..=r).map(move |dx| (dy, dx)))
            .collect()
    }

    /// The convolution of `input` with zero padding.
    fn apply(&self, input: &FeatureMap) -> FeatureMap {
        let side = input.side.div_ceil(self.stride);
        let mut out = FeatureMap::zeros(self.out_channels, side);
        let offsets = self.offsets();
        for co in 0..self.out_channels {
            for y in 0..side {
                for x in 0..side {
                    let mut sum = 0.0;
                    for ci in 0..self.in_channels {
                        for &(dy, dx) in &offsets {
                            let yi = (self.stride * y) as i64 + dy;
                            let xi = (self.stride * x) as i64 + dx;
                            sum += self.weight_at(co, ci, dy, dx) * input.at(ci, yi, xi);
                        }
                    }
                    out.values[(co * side + y) * side + x] = sum;
                }
            }
        }
        out
    }
}

/// One residual block: `act(conv2(act(conv1(x))) + shortcut(x))`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The first 3×3 convolution (stride 2 in a stage's first block after
    /// the first stage).
    pub conv1: Conv,
    /// The second 3×3 convolution.
    pub conv2: Conv,
    /// The 1×1 stride-2 shortcut where `conv1` halves the map; the identity
    /// otherwise.
    pub shortcut: Option<Conv>,
    /// The stage the block belongs to.
    pub stage: usize,
}

/// A network of [`NetworkShape`] with random weights (no trained model is
/// at hand; the encrypted evaluation is checked against the same weights in
/// f64, which is what matters for a benchmark and a test), scaled as folded
/// batch normalisation would keep activations inside `[−1, 1]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    shape: NetworkShape,
    activation: Polynomial,
    stem: Conv,
    blocks: Vec<Block>,
    /// `[class][channel]`, applied to the channel means.
    fc: Vec<f64>,
}

impl Network {
    /// A network of `shape` with weights drawn from ChaCha20 seeded with
    /// `seed` (uniform, never zero in law), and the Chebyshev interpolant of
    /// ReLU on `[−1, 1]` as its activation.
    ///
    /// # Errors
    /// [`Error::InvalidNetwork`] for a shape [`NetworkShape::validate`]
    /// refuses.
    pub fn random(shape: &NetworkShape, seed: u64) -> Result<Self> {
        shape.validate()?;
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let c = shape.channels;
        let stem = Conv::random(&mut rng, c, 1, 3, 1);
        let mut blocks = Vec::with_capacity(shape.stages * shape.blocks_per_stage);
        for stage in 0..shape.stages {
            for b in 0..shape.blocks_per_stage {
                let stride = if stage > 0 && b == 0 { 2 } else { 1 };
                blocks.push(Block {
                    conv1: Conv::random(&mut rng, c, c, 3, stride),
                    conv2: Conv::random(&mut rng, c, c, 3, 1),
                    shortcut: (stride == 2).then(|| Conv::random(&mut rng, c, c, 1, 2)),
                    stage,
                });
            }
        }
        let fc = (0..shape.classes * c)
            .map(|_| uniform(&mut rng, 1.0))
            .collect();
        let mut network = Self {
            shape: *shape,
            activation: relu_approximation(shape.activation_degree)?,
            stem,
            blocks,
            fc,
        };
        network.calibrate(&random_image(shape, seed ^ CALIBRATION_SEED)?);
        Ok(network)
    }

    /// Scales each convolution as folded batch normalisation would, on one
    /// calibration image: every activation's input then peaks at
    /// [`ACTIVATION_PEAK`] and every shortcut's output at [`SHORTCUT_PEAK`].
    /// Random weights alone either fade (the ReLU approximation halves
    /// small values) or grow past `[−1, 1]`, where the approximation and
    /// bootstrapping stop holding; calibrated, the signal keeps its size
    /// through every block and other images stay well inside.
    fn calibrate(&mut self, image: &[f64]) {
        let input = FeatureMap {
            channels: 1,
            side: self.shape.image_size,
            values: image.to_vec(),
        };
        let stem = normalize(&mut self.stem, &input, ACTIVATION_PEAK);
        let mut x = self.activate(stem);
        let mut blocks = std::mem::take(&mut self.blocks);
        for block in &mut blocks {
            let h = normalize(&mut block.conv1, &x, ACTIVATION_PEAK);
            let h = self.activate(h);
            let skip = match &mut block.shortcut {
                Some(conv) => normalize(conv, &x, SHORTCUT_PEAK),
                None => x,
            };
            let c = block.conv2.apply(&h);
            let alpha = peak_factor(&c.values, &skip.values, ACTIVATION_PEAK);
            scale_weights(&mut block.conv2, alpha);
            let mut sum = c;
            for (a, b) in sum.values.iter_mut().zip(&skip.values) {
                *a = alpha * *a + b;
            }
            x = self.activate(sum);
        }
        self.blocks = blocks;
    }

    /// The shape.
    pub fn shape(&self) -> &NetworkShape {
        &self.shape
    }

    /// The activation polynomial.
    pub fn activation(&self) -> &Polynomial {
        &self.activation
    }

    /// The stem convolution.
    pub fn stem(&self) -> &Conv {
        &self.stem
    }

    /// The residual blocks, in order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The FC weight from channel `c`'s mean to logit `class`; `None`
    /// outside the layer.
    pub fn fc_weight(&self, class: usize, c: usize) -> Option<f64> {
        (class < self.shape.classes && c < self.shape.channels).then(|| self.fc_weight_at(class, c))
    }

    /// [`Network::fc_weight`] for indices inside the layer by construction.
    pub(crate) fn fc_weight_at(&self, class: usize, c: usize) -> f64 {
        self.fc[class * self.shape.channels + c]
    }

    /// Checks an image: `image_size²` pixels, row-major, each in `[−1, 1]`.
    ///
    /// # Errors
    /// [`Error::ImageSize`], [`Error::ImagePixel`].
    pub fn check_image(&self, image: &[f64]) -> Result<()> {
        let expected = self.shape.image_size * self.shape.image_size;
        if image.len() != expected {
            return Err(Error::ImageSize {
                expected,
                actual: image.len(),
            });
        }
        match image.iter().position(|p| p.is_nan() || p.abs() > 1.0) {
            Some(index) => Err(Error::ImagePixel { index }),
            None => Ok(()),
        }
    }

    /// The logits of `image` (row-major, pixels in `[−1, 1]`), in f64.
    ///
    /// # Errors
    /// As [`Network::check_image`].
    pub fn infer_plain(&self, image: &[f64]) -> Result<Vec<f64>> {
        Ok(self.run_plain(image)?.0)
    }

    /// The largest `|value|` any activation gets on `image`: what must stay
    /// inside `[−1, 1]` for the ReLU approximation and bootstrapping to hold.
    ///
    /// # Errors
    /// As [`Network::check_image`].
    pub fn peak_activation_input(&self, image: &[f64]) -> Result<f64> {
        Ok(self.run_plain(image)?.1)
    }

    /// The logits and the peak activation input.
    fn run_plain(&self, image: &[f64]) -> Result<(Vec<f64>, f64)> {
        self.check_image(image)?;
        let input = FeatureMap {
            channels: 1,
            side: self.shape.image_size,
            values: image.to_vec(),
        };
        let mut peak = 0.0f64;
        let mut act = |map: FeatureMap| {
            peak = map.values.iter().fold(peak, |m, v| m.max(v.abs()));
            self.activate(map)
        };
        let mut x = act(self.stem.apply(&input));
        for block in &self.blocks {
            let h = act(block.conv1.apply(&x));
            let mut h = block.conv2.apply(&h);
            let skip = match &block.shortcut {
                Some(conv) => conv.apply(&x),
                None => x,
            };
            for (a, b) in h.values.iter_mut().zip(&skip.values) {
                *a += b;
            }
            x = act(h);
        }
        let area = (x.side * x.side) as f64;
        let means: Vec<f64> = x
            .values
            .chunks_exact(x.side * x.side)
            .map(|c| c.iter().sum::<f64>() / area)
            .collect();
        let logits = (0..self.shape.classes)
            .map(|j| {
                means
                    .iter()
                    .enumerate()
                    .map(|(c, m)| self.fc_weight_at(j, c) * m)
                    .sum()
            })
            .collect();
        Ok((logits, peak))
    }

    fn activate(&self, mut map: FeatureMap) -> FeatureMap {
        for v in &mut map.values {
            *v = self.activation.evaluate_f64(*v);
        }
        map
    }
}

/// The peak of every activation's input on the calibration image.
pub const ACTIVATION_PEAK: f64 = 0.5;
/// The peak of every 1×1 shortcut's output on the calibration image.
pub const SHORTCUT_PEAK: f64 = 0.4;
/// Mixed into the weights' seed for the calibration image's.
const CALIBRATION_SEED: u64 = 0x6361_6c69_6272_6174;

/// Applies `conv` to `input` and scales its weights (and the output) so
/// that the output peaks at `peak`.
fn normalize(conv: &mut Conv, input: &FeatureMap, peak: f64) -> FeatureMap {
    let mut out = conv.apply(input);
    let max = out.values.iter().fold(0.0, |m: f64, v| m.max(v.abs()));
    if max > 0.0 {
        let factor = peak / max;
        scale_weights(conv, factor);
        for v in &mut out.values {
            *v *= factor;
        }
    }
    out
}

fn scale_weights(conv: &mut Conv, factor: f64) {
    for w in &mut conv.weights {
        *w *= factor;
    }
}

/// The `α > 0` with `max |α·c + s| = peak` (by bisection; `max |s| <
/// peak`, and the maximum is convex in `α`, so there is one).
fn peak_factor(c: &[f64], s: &[f64], peak: f64) -> f64 {
    let at = |alpha: f64| {
        c.iter()
            .zip(s)
            .fold(0.0, |m: f64, (a, b)| m.max((alpha * a + b).abs()))
    };
    let mut hi = 1.0;
    while at(hi) < peak && hi < 1e12 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if at(mid) < peak {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// A random image for `shape`: `image_size²` pixels uniform in `[−1, 1]`.
///
/// # Errors
/// [`NetworkShape::validate`]'s, for a shape no network has (an image side
/// of 2^32 overflowed the pixel count).
pub fn random_image(shape: &NetworkShape, seed: u64) -> Result<Vec<f64>> {
    shape.validate()?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    Ok((0..shape.image_size * shape.image_size)
        .map(|_| uniform(&mut rng, 1.0))
        .collect())
}

/// The degree-`degree` Chebyshev interpolant of ReLU on `[−1, 1]`
/// (coefficients below `10^−12`, rounding noise of the odd ones, dropped).
///
/// # Errors
/// [`Error::InvalidNetwork`] for degree 0 or above 1024, the networks'
/// limit (the fit is quadratic in the degree, and `usize::MAX` overflowed
/// its node count).
pub fn relu_approximation(degree: usize) -> Result<Polynomial> {
    if degree == 0 || degree > MAX_ACTIVATION_DEGREE {
        return Err(Error::InvalidNetwork {
            reason: "the activation must have degree 1 to 1024",
        });
    }
    let coefficients = chebyshev::interpolate(|x| x.max(0.0), -1.0, 1.0, degree)?
        .into_iter()
        .map(|c| if c.abs() < 1e-12 { 0.0 } else { c })
        .collect();
    Ok(Polynomial::chebyshev(-1.0, 1.0, coefficients)?)
}

/// Uniform in `[−bound, bound)`.
fn uniform(rng: &mut ChaCha20Rng, bound: f64) -> f64 {
    let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    bound * (2.0 * unit - 1.0)
}

/// `channels × side × side` values, zero outside.
#[derive(Clone, Debug)]
struct FeatureMap {
    channels: usize,
    side: usize,
    values: Vec<f64>,
}

impl FeatureMap {
    fn zeros(channels: usize, side: usize) -> Self {
        Self {
            channels,
            side,
            values: vec![0.0; channels * side * side],
        }
    }

    /// The value at `(c, y, x)`, 0 outside the map (zero padding).
    fn at(&self, c: usize, y: i64, x: i64) -> f64 {
        let side = self.side as i64;
        if c >= self.channels || y < 0 || x < 0 || y >= side || x >= side {
            return 0.0;
        }
        self.values[(c * self.side + y as usize) * self.side + x as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked() {
        let good = NetworkShape::resnet20(4);
        assert!(good.validate().is_ok());
        assert_eq!(good.convolutions(), 21);
        assert_eq!(good.side_at(2), 8);
        assert_eq!(NetworkShape::resnet20_for_slots(1 << 15).channels, 16);
        assert_eq!(NetworkShape::resnet20_for_slots(1 << 11).channels, 2);
        for bad in [
            NetworkShape {
                channels: 3,
                ..good
            },
            NetworkShape {
                classes: 17,
                ..good
            },
            NetworkShape { stages: 5, ..good },
            NetworkShape {
                image_size: 2,
                ..good
            },
            NetworkShape {
                activation_degree: 0,
                ..good
            },
            // Shapes no ring packs, or whose counts overflowed.
            NetworkShape {
                blocks_per_stage: usize::MAX,
                ..good
            },
            NetworkShape {
                channels: 1 << 15,
                ..good
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::InvalidNetwork { .. })),
                "{bad:?}"
            );
        }
        // An image for a shape no network has is refused, not sized (a side
        // of 2^32 overflowed the pixel count).
        let huge = NetworkShape {
            image_size: 1 << 32,
            ..good
        };
        assert!(matches!(
            random_image(&huge, 1),
            Err(Error::InvalidNetwork { .. })
        ));
        assert_eq!(random_image(&good, 1).unwrap().len(), 32 * 32);
    }

    #[test]
    fn relu_approximation_is_close_and_shallow() {
        for degree in [0, 1025, usize::MAX] {
            assert!(
                matches!(
                    relu_approximation(degree),
                    Err(Error::InvalidNetwork { .. })
                ),
                "{degree}"
            );
        }
        let p = relu_approximation(2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.depth(), 2);
        for x in [-1.0, -0.5, 0.0, 0.5, 1.0] {
            assert!((p.evaluate_f64(x) - f64::max(x, 0.0)).abs() < 0.2, "{x}");
        }
    }

    #[test]
    fn images_are_checked_and_logits_vary_with_the_input() {
        let shape = NetworkShape {
            image_size: 8,
            channels: 2,
            stages: 2,
            blocks_per_stage: 1,
            classes: 3,
            activation_degree: 2,
        };
        let net = Network::random(&shape, 1).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            net.infer_plain(&[0.0; 10]),
            Err(Error::ImageSize {
                expected: 64,
                actual: 10
            })
        ));
        let mut bad = random_image(&shape, 2).unwrap();
        bad[5] = f64::NAN;
        assert!(matches!(
            net.infer_plain(&bad),
            Err(Error::ImagePixel { index: 5 })
        ));
        let a = net
            .infer_plain(&random_image(&shape, 2).unwrap())
            .unwrap_or_else(|e| panic!("{e}"));
        let b = net
            .infer_plain(&random_image(&shape, 3).unwrap())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.len(), 3);
        let peak = net
            .peak_activation_input(&random_image(&shape, 2).unwrap())
            .unwrap();
        assert!(peak > 0.2 && peak < 0.9, "{peak}");
        assert!(a.iter().zip(&b).any(|(x, y)| (x - y).abs() > 1e-6));
    }
}
