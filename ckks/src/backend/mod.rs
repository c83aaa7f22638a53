//! The seam between CKKS algorithms and the hardware: the [`Backend`] trait of
//! RNS-polynomial operations, implemented once for the CPU ([`CpuBackend`])
//! and once for the GPU. Algorithms (key switching, rescaling, bootstrapping's
//! linear transforms) are written against this trait only.
//!
//! Operations work on [`Limbs`] views: a buffer plus, for each limb of the
//! view, its position in the buffer and its global modulus index (Q primes
//! first, then the special primes; see [`crate::params::Parameters`]). The two
//! backends must produce **bit-identical** limbs for the same inputs.
//!
//! Every operation is fallible (a GPU can be out of memory or over budget).
//! On the GPU, operations are stream-ordered: a call enqueues work and data
//! reaches the host only through [`Backend::read`], which synchronises.

mod cpu;
mod device;
#[allow(unsafe_code)]
mod gpu;
mod parts;
mod views;

pub use cpu::CpuBackend;
pub use device::{Device, DeviceParseError, DeviceSelection};
pub use gpu::GpuBackend;
pub use hemem_gpu_kernels::launch::ckks::ntt::NttRows;
pub use parts::MAX_PERIODIC_POINTS;
pub(crate) use parts::{
    compact_words, decompose_by_parts, empty_sum, expand_by_parts, inner_product_by_parts,
    mod_down_by_parts, periodic_shape, seeded_inner_product_by_parts, tensor_by_parts,
};
use views::any_sensitive;
pub(crate) use views::check_moduli;
pub(crate) use views::contiguous;
pub use views::{Addend, Limbs, LimbsMut, PeriodicLimbs};

use std::fmt;

use hemem_memory::{Allocator, Buffer, MemoryClass};

use crate::Result;
use crate::ntt::GaloisElement;
use crate::sampling::{SeededUniform, UniformSeed};
use crate::zq::Modulus;

/// Element-wise binary operations modulo each limb's prime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a − b`.
    Sub,
    /// `a · b` (NTT form: the polynomial product).
    Mul,
}

/// RNS-polynomial operations, the only way CKKS algorithms touch data.
///
/// Shapes are checked: a view whose limbs do not fit its buffer, or views of
/// different lengths, give [`crate::Error::LengthMismatch`]; a buffer of the wrong
/// placement gives a memory error.
pub trait Backend: Send + Sync + fmt::Debug {
    /// Where this backend runs.
    fn device(&self) -> Device;

    /// The ring degree N.
    fn degree(&self) -> usize;

    /// The global modulus table (Q primes, then special primes).
    fn moduli(&self) -> &[Modulus];

    /// The allocator buffers of this backend come from.
    fn allocator(&self) -> &Allocator;

    /// Waits until every operation queued so far has completed (a no-op on
    /// the CPU, whose operations complete before they return). For timing.
    ///
    /// # Errors
    /// A failure reported by the device.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Selects the NTT's rows-phase kernels for the operations queued from
    /// now on (the GPU backend; a no-op on the CPU). Both variants give the
    /// same results bit for bit: this only chooses a speed, so old and new
    /// kernels can be timed alternately in one process.
    fn set_ntt_rows(&self, rows: NttRows) {
        let _ = rows;
    }

    /// The NTT's rows-phase kernels in use (`None` on the CPU).
    fn ntt_rows(&self) -> Option<NttRows> {
        None
    }

    /// Allocates room for `limbs` limbs of N words; `sensitive` for
    /// secret-key material and anything computed from it (zeroed before its
    /// memory is reused or released). Temporaries an operation computes from
    /// a sensitive view are allocated sensitive by the operation itself.
    ///
    /// # Errors
    /// Whatever the allocator refuses.
    fn allocate(&self, class: MemoryClass, limbs: usize, sensitive: bool) -> Result<Buffer> {
        let bytes = limbs * self.degree() * 8;
        let buffer = if sensitive {
            self.allocator().allocate_sensitive(class, bytes)?
        } else {
            self.allocator().allocate(class, bytes)?
        };
        Ok(buffer)
    }

    /// Copies host words (limb after limb) into a view.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn write(&self, dst: LimbsMut<'_>, src: &[u64]) -> Result<()>;

    /// Copies a view into host words (limb after limb); synchronises.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn read(&self, src: Limbs<'_>, dst: &mut [u64]) -> Result<()>;

    /// Copies limbs between views of the same moduli.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn copy(&self, src: Limbs<'_>, dst: LimbsMut<'_>) -> Result<()>;

    /// Forward negacyclic NTT of every limb (coefficients → bit-reversed
    /// evaluations).
    ///
    /// # Errors
    /// Shape or placement errors.
    fn ntt_forward(&self, x: LimbsMut<'_>) -> Result<()>;

    /// Inverse negacyclic NTT of every limb, normalised.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn ntt_inverse(&self, x: LimbsMut<'_>) -> Result<()>;

    /// Inverse NTT of `src`'s limbs into `dst`'s (the same moduli), leaving
    /// `src` unchanged: the coefficient form of an NTT-form polynomial
    /// without a separate copy.
    ///
    /// The default copies and then transforms in place; the GPU backend
    /// reads `src` in its first kernel.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn ntt_inverse_into(&self, src: Limbs<'_>, mut dst: LimbsMut<'_>) -> Result<()> {
        self.copy(src, dst.reborrow())?;
        self.ntt_inverse(dst)
    }

    /// `out = a op b`, limb by limb.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn binary(&self, op: BinaryOp, a: Limbs<'_>, b: Limbs<'_>, out: LimbsMut<'_>) -> Result<()>;

    /// `acc = acc op b`, limb by limb.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn binary_assign(&self, op: BinaryOp, acc: LimbsMut<'_>, b: Limbs<'_>) -> Result<()>;

    /// `acc += a · b`, limb by limb.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn mul_add_assign(&self, acc: LimbsMut<'_>, a: Limbs<'_>, b: Limbs<'_>) -> Result<()>;

    /// `acc = Σ_t a_t · b_t` (with `accumulate`, `acc += Σ_t a_t · b_t`),
    /// limb by limb: the inner sum of a BSGS linear transform's giant step.
    ///
    /// Both backends read every operand once and write `acc` once (a
    /// per-term accumulation reads and writes `acc` once per term): the
    /// default is [`Backend::mul_sum_periodic`] with every second operand
    /// kept whole.
    ///
    /// # Errors
    /// Shape or placement errors; no terms without `accumulate`.
    fn mul_sum(
        &self,
        acc: LimbsMut<'_>,
        terms: &[(Limbs<'_>, Limbs<'_>)],
        accumulate: bool,
    ) -> Result<()> {
        let terms: Vec<(Limbs<'_>, PeriodicLimbs<'_>)> =
            terms.iter().map(|&(a, b)| (a, b.into())).collect();
        self.mul_sum_periodic(acc, &terms, accumulate)
    }

    /// [`Backend::mul_sum`] with second operands that may repeat
    /// ([`PeriodicLimbs`]): the inner sum of a linear transform whose
    /// diagonals repeat, read at `N >> log_gap` values a limb instead of
    /// expanded to `N`. Bit-identical to `mul_sum` over the expanded
    /// operands.
    ///
    /// # Errors
    /// Shape or placement errors; no terms without `accumulate`.
    fn mul_sum_periodic(
        &self,
        acc: LimbsMut<'_>,
        terms: &[(Limbs<'_>, PeriodicLimbs<'_>)],
        accumulate: bool,
    ) -> Result<()>;

    /// `x = −x`.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn negate(&self, x: LimbsMut<'_>) -> Result<()>;

    /// `x = x op s_i` with one scalar per limb (`scalars[i] < q_i`).
    ///
    /// # Errors
    /// Shape or placement errors.
    fn scalar_assign(&self, op: BinaryOp, x: LimbsMut<'_>, scalars: &[u64]) -> Result<()>;

    /// `out = x op s_i` with one scalar per limb (`scalars[i] < q_i`): the
    /// out-of-place form, which spares the copy that `scalar_assign` on a
    /// fresh buffer needs.
    ///
    /// The default copies and then applies `scalar_assign`; the GPU
    /// backend reads `x` in the kernel that writes `out`.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn scalar(
        &self,
        op: BinaryOp,
        x: Limbs<'_>,
        scalars: &[u64],
        mut out: LimbsMut<'_>,
    ) -> Result<()> {
        self.copy(x, out.reborrow())?;
        self.scalar_assign(op, out, scalars)
    }

    /// Divides by the last limb's prime with rounding: `x` holds `l+1` limbs
    /// in NTT form, `out` the first `l` (also NTT form).
    /// `out_i = q_l^{-1} (x_i − [x_l]_centred) mod q_i`.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn rescale(&self, x: Limbs<'_>, out: LimbsMut<'_>) -> Result<()>;

    /// ModDown: divides by `P` (the product of the last `p_count` limbs'
    /// primes) with rounding. `x` holds `Q_l ∪ P` in NTT form, `out` the
    /// `Q_l` limbs in NTT form. The centred representative of `x mod P` is
    /// found exactly (HPS), so the result is `round(x / P)`.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn mod_down(&self, x: Limbs<'_>, p_count: usize, out: LimbsMut<'_>) -> Result<()>;

    /// ModDown followed by an addition: `out = round(x / P) + addend`, with
    /// `addend` over `out`'s moduli (NTT form), or `+ σ_g(addend)` for an
    /// [`Addend::rotated`]: the addition that ends relinearisation and
    /// rotations.
    ///
    /// The default runs [`Backend::mod_down`] then
    /// [`Backend::binary_assign`] or [`Backend::add_automorphism_assign`];
    /// the GPU backend adds in the epilogue of ModDown's forward transform,
    /// reading a rotated addend through the permutation.
    ///
    /// # Errors
    /// Shape or placement errors; an even Galois element.
    fn mod_down_add(
        &self,
        x: Limbs<'_>,
        p_count: usize,
        addend: Addend<'_>,
        mut out: LimbsMut<'_>,
    ) -> Result<()> {
        self.mod_down(x, p_count, out.reborrow())?;
        match addend.galois {
            None => self.binary_assign(BinaryOp::Add, out, addend.limbs),
            Some(g) => self.add_automorphism_assign(out, addend.limbs, g),
        }
    }

    /// ModDown of the two parts of a key switch, each followed by its
    /// addition when one is given: `out[i] = round(x[i] / P) (+ addend[i])`,
    /// as [`Backend::mod_down`] and [`Backend::mod_down_add`].
    ///
    /// The default runs them one part after the other; the GPU backend runs
    /// both parts in one launch per kernel.
    ///
    /// # Errors
    /// Shape or placement errors; an even Galois element.
    fn mod_down_pair(
        &self,
        x: [Limbs<'_>; 2],
        p_count: usize,
        addend: [Option<Addend<'_>>; 2],
        out: [LimbsMut<'_>; 2],
    ) -> Result<()> {
        for ((x, addend), out) in x.into_iter().zip(addend).zip(out) {
            match addend {
                Some(e) => self.mod_down_add(x, p_count, e, out)?,
                None => self.mod_down(x, p_count, out)?,
            }
        }
        Ok(())
    }

    /// ModDown of any number of parts, each followed by its addition when
    /// one is given: the ModDowns of a set of hoisted rotations
    /// ([`crate::eval::Evaluator::rotate_hoisted`]), as
    /// [`Backend::mod_down_pair`] for each pair.
    ///
    /// The default runs them one part after the other; the GPU backend runs
    /// as many parts as its kernels take in one launch per kernel (a ModDown
    /// of one rotation is a few small launches that leave most of the GPU
    /// idle).
    ///
    /// # Errors
    /// Shape or placement errors; lists of different lengths; an even
    /// Galois element.
    fn mod_down_many(
        &self,
        x: &[Limbs<'_>],
        p_count: usize,
        addend: &[Option<Addend<'_>>],
        out: &mut [LimbsMut<'_>],
    ) -> Result<()> {
        mod_down_by_parts(self, x, p_count, addend, out)
    }

    /// `acc += x·s_i` on each limb `i` (`scalars`: one word per limb,
    /// reduced modulo the limb's prime first): relinearisation's
    /// `P·(d0, d1)` onto the inner product's `Q` limbs, in one pass over
    /// `x` where a product in place and an addition took two.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn scalar_mul_add_assign(&self, acc: LimbsMut<'_>, x: Limbs<'_>, scalars: &[u64])
    -> Result<()>;

    /// [`Backend::rescale`] of the two parts of a ciphertext.
    ///
    /// The default rescales one part after the other; the GPU backend runs
    /// both parts in one launch per kernel.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn rescale_pair(&self, x: [Limbs<'_>; 2], out: [LimbsMut<'_>; 2]) -> Result<()> {
        for (x, out) in x.into_iter().zip(out) {
            self.rescale(x, out)?;
        }
        Ok(())
    }

    /// The gadget decomposition of `c` (NTT form) into digits of `alpha`
    /// consecutive limbs (the last may have fewer), each raised by
    /// [`Backend::mod_up`] to the moduli of its view of `out` (one view per
    /// digit, in order): key switching's first step.
    ///
    /// The default takes the coefficient form of `c` into a temporary and
    /// raises one digit after the other; the GPU backend raises every digit
    /// in one launch per kernel from an inverse transform whose last
    /// multiplication also does the conversion's first step.
    ///
    /// # Errors
    /// Shape or placement errors; a digit count other than `⌈len/alpha⌉`.
    fn decompose_mod_up(&self, c: Limbs<'_>, alpha: usize, out: &mut [LimbsMut<'_>]) -> Result<()> {
        decompose_by_parts(self, c, alpha, out)
    }

    /// ModUp of one gadget digit: `digit` holds the digit's limbs in
    /// **coefficient** form; `out` receives every modulus of its view in NTT
    /// form — the digit's own limbs copied (and transformed), the others by
    /// exact conversion of the digit's centred representative (a lift with
    /// no DC offset, so key-switching noise stays white). Limbs of `out` whose modulus is in
    /// `digit` are taken from `digit_ntt` when given (already transformed).
    ///
    /// # Errors
    /// Shape or placement errors.
    fn mod_up(
        &self,
        digit: Limbs<'_>,
        digit_ntt: Option<Limbs<'_>>,
        out: LimbsMut<'_>,
    ) -> Result<()>;

    /// Spreads one limb in **coefficient** form (modulo the prime of
    /// `src.moduli[0]`) to every limb of `out` (coefficient form): each
    /// coefficient is centred in `(−p/2, p/2]` and reduced modulo the target
    /// limb's prime. ModRaise is this between two transforms.
    ///
    /// # Errors
    /// Shape or placement errors; a source of other than one limb.
    fn spread_centered(&self, src: Limbs<'_>, out: LimbsMut<'_>) -> Result<()>;

    /// Applies `X ↦ X^g` to NTT-form limbs: `out[j] = x[perm_g[j]]`.
    ///
    /// # Errors
    /// Shape or placement errors.
    fn automorphism(&self, x: Limbs<'_>, g: GaloisElement, out: LimbsMut<'_>) -> Result<()>;

    /// Adds `X ↦ X^g` of NTT-form limbs: `out[j] += x[perm_g[j]]` (the
    /// addition that ends a rotation, without a rotated copy of `x`).
    ///
    /// # Errors
    /// Shape or placement errors; an even Galois element.
    fn add_automorphism_assign(
        &self,
        out: LimbsMut<'_>,
        x: Limbs<'_>,
        g: GaloisElement,
    ) -> Result<()>;

    /// The key-switching inner product over gadget digits, NTT form:
    /// `out0 = Σ_j digits[j]·b[j]`, `out1 = Σ_j digits[j]·a[j]`.
    ///
    /// The default runs one multiply-accumulate per digit; a backend may
    /// fuse the whole sum into one pass.
    ///
    /// # Errors
    /// Shape or placement errors; an empty digit list.
    fn key_switch_inner_product(
        &self,
        digits: &[Limbs<'_>],
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        inner_product_by_parts(self, digits, b, a, out0, out1)
    }

    /// The key-switching inner product of the digits after the automorphism
    /// `g` (hoisted rotations): the same sums as
    /// [`Backend::key_switch_inner_product`] over `σ_g(digits[j])`, where
    /// `σ_g` is [`Backend::automorphism`].
    ///
    /// The default permutes every digit into a temporary buffer first
    /// (sensitive when the digit is); the CPU backend gathers each block of
    /// the digits' permuted words as it sums them, the GPU backend inside
    /// its inner-product kernel, so neither writes the rotated digits.
    ///
    /// # Errors
    /// As [`Backend::key_switch_inner_product`]; allocation errors.
    fn key_switch_inner_product_galois(
        &self,
        digits: &[Limbs<'_>],
        g: GaloisElement,
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        let rotated = digits
            .iter()
            .map(|d| {
                let mut buffer =
                    self.allocate(MemoryClass::Temporary, d.len(), any_sensitive(&[d]))?;
                self.automorphism(*d, g, LimbsMut::whole(&mut buffer, d.moduli)?)?;
                Ok(buffer)
            })
            .collect::<Result<Vec<_>>>()?;
        let views = rotated
            .iter()
            .zip(digits)
            .map(|(buffer, d)| Limbs::whole(buffer, d.moduli))
            .collect::<Result<Vec<_>>>()?;
        self.key_switch_inner_product(&views, b, a, out0, out1)
    }

    /// Fills every limb of `out` with the uniform half `a_digit` of the
    /// switching key whose seed is `seed` (NTT form): limb `l` modulo the
    /// prime with global index `out.moduli[l]`, generated by
    /// [`SeededUniform`] under that index, so any subset of a key's limbs
    /// can be generated on its own.
    ///
    /// The default generates on the host and writes the words; the CPU
    /// backend fills the limbs in place; the GPU backend generates them on
    /// the device (one thread per ChaCha block).
    ///
    /// # Errors
    /// Shape or placement errors; an unknown modulus index.
    fn uniform_from_seed(&self, seed: &UniformSeed, digit: usize, out: LimbsMut<'_>) -> Result<()> {
        let n = self.degree();
        out.check(n)?;
        let mut words = vec![0u64; out.len() * n];
        SeededUniform::new(seed).fill_limbs(
            digit,
            self.moduli(),
            out.moduli,
            words.chunks_mut(n.max(1)).collect(),
        )?;
        self.write(out, &words)
    }

    /// The key-switching inner product with a **compressed** key: as
    /// [`Backend::key_switch_inner_product`] (or, with `galois`,
    /// [`Backend::key_switch_inner_product_galois`]) where `a_j` is the
    /// uniform half of digit `j` of the key with seed `seed`
    /// ([`Backend::uniform_from_seed`] over `out0`'s moduli), never stored.
    /// `digits[j]` pairs with `b[j]` and `a_j`.
    ///
    /// The default expands every `a_j` into a temporary and runs the inner
    /// product; the GPU backend generates `a_j` inside the inner-product
    /// kernel, so it never touches device memory.
    ///
    /// # Errors
    /// As [`Backend::key_switch_inner_product`]; allocation errors.
    fn key_switch_inner_product_seeded(
        &self,
        digits: &[Limbs<'_>],
        galois: Option<GaloisElement>,
        b: &[Limbs<'_>],
        seed: &UniformSeed,
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        seeded_inner_product_by_parts(self, digits, galois, b, seed, out0, out1)
    }

    /// The tensor product of two ciphertexts `(a0, a1)·(b0, b1)`, NTT form:
    /// `d0 = a0·b0`, `d1 = a0·b1 + a1·b0`, `d2 = a1·b1`.
    ///
    /// # Errors
    /// Shape or placement errors.
    #[allow(
        clippy::too_many_arguments,
        reason = "the four inputs and three outputs of the tensor"
    )]
    fn tensor(
        &self,
        a0: Limbs<'_>,
        a1: Limbs<'_>,
        b0: Limbs<'_>,
        b1: Limbs<'_>,
        d0: LimbsMut<'_>,
        d1: LimbsMut<'_>,
        d2: LimbsMut<'_>,
    ) -> Result<()> {
        tensor_by_parts(self, [a0, a1, b0, b1], [d0, d1, d2])
    }

    /// Expands a compact plaintext into coefficient-form limbs: `compact`
    /// holds `N/gap` words, each the bits of an integer-valued `f64`
    /// (what the encoder rounded); word `k` becomes coefficient `k·gap` of
    /// every limb of `out`, reduced exactly modulo the limb's prime (as
    /// [`Modulus::reduce_f64`]), and every other coefficient is zero.
    ///
    /// # Errors
    /// Shape or placement errors; a `gap` that does not divide N; a
    /// non-finite word.
    fn expand_coefficients(&self, compact: &Buffer, gap: usize, out: LimbsMut<'_>) -> Result<()>;

    /// Expands several compact plaintexts (as
    /// [`Backend::expand_coefficients`], one per view of `out`, all with the
    /// same `gap`) and transforms them to NTT form: the encoded plaintexts
    /// the encoder would have made.
    ///
    /// The default runs one expansion and one transform per part; the GPU
    /// backend runs one batched forward transform (up to 16 parts per
    /// launch pair) that expands the words as it loads its points, so the
    /// coefficient form is never written.
    ///
    /// # Errors
    /// As [`Backend::expand_coefficients`]; `compact` and `out` of different
    /// lengths.
    fn expand_compact(
        &self,
        compact: &[&Buffer],
        gap: usize,
        out: &mut [LimbsMut<'_>],
    ) -> Result<()> {
        expand_by_parts(self, compact, gap, out)
    }

    /// Expands compact plaintexts whose words are the coefficients of a
    /// polynomial in `X^gap` (`gap > 1`) into their periodic NTT form
    /// ([`PeriodicLimbs`]): `out[z]` receives, for each of `moduli`, the
    /// `N/gap` distinct values of the limb [`Backend::expand_compact`]
    /// would write, limb `i` from word `i·N/gap`. `N/gap` is at most
    /// [`MAX_PERIODIC_POINTS`].
    ///
    /// # Errors
    /// As [`Backend::expand_compact`]; a `gap` of 1 or with more than
    /// [`MAX_PERIODIC_POINTS`] points; an `out` buffer too small.
    fn expand_periodic(
        &self,
        compact: &[&Buffer],
        gap: usize,
        moduli: &[usize],
        out: &mut [&mut Buffer],
    ) -> Result<()>;
}
