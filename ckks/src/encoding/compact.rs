//! [`CompactPlaintext`]: an encoded message kept as its rounded
//! coefficients, expanded into RNS limbs (and the NTT domain) when used.

use std::fmt;
use std::sync::Arc;

use hemem_memory::{Buffer, MemoryClass};

use super::{Form, Plaintext};
use crate::backend::{Backend, Device, LimbsMut};
use crate::context::Context;
use crate::params::{Level, Scale};
use crate::poly::{Ntt, PeriodicPoly, RnsPoly};
use crate::{OperandError, Result};

/// A plaintext stored compactly: the `2·slots` integer coefficients the
/// encoder rounds (`round(c·scale)`, exact in an `f64`), one word each, in
/// one buffer on the context's device (or in host memory, after
/// [`CompactPlaintext::to_host`]), instead of `level + 1` limbs of `N`
/// words in NTT form.
///
/// [`CompactPlaintext::expand`] rebuilds the [`Plaintext`] that
/// [`super::Encoder::encode_at_class`] makes from the same values, bit for
/// bit: each word is reduced exactly modulo every prime and transformed by
/// the same NTT. For full slots that is `level + 1` times fewer bytes (25 at
/// FGb's top level); bootstrapping keeps its DFT diagonals this way and
/// expands a few at a time into `Temporary` memory.
pub struct CompactPlaintext {
    pub(super) context: Context,
    /// The backend whose allocator holds `words`: the context's device, or
    /// its host backend.
    backend: Arc<dyn Backend>,
    words: Buffer,
    level: Level,
    scale: Scale,
    pub(super) slots: usize,
    /// The slots whose `2·period` coefficients `words` holds: `slots`,
    /// unless the message repeats a shorter one
    /// ([`CompactPlaintext::repeat_slots`]).
    pub(super) period: usize,
}

impl fmt::Debug for CompactPlaintext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactPlaintext")
            .field("level", &self.level)
            .field("scale", &self.scale)
            .field("slots", &self.slots)
            .field("period", &self.period)
            .field("class", &self.words.class())
            .finish_non_exhaustive()
    }
}

impl CompactPlaintext {
    /// A compact plaintext from its rounded coefficients as `f64` bits
    /// (`2·slots` words, checked by the encoder), in a new `class` buffer
    /// on the context's device.
    pub(crate) fn from_words(
        context: &Context,
        words: &[u64],
        level: Level,
        scale: Scale,
        slots: usize,
        class: MemoryClass,
    ) -> Result<Self> {
        Self::on_backend(
            context,
            context.backend(),
            words,
            level,
            scale,
            slots,
            class,
        )
    }

    /// As [`CompactPlaintext::from_words`], in a buffer of `backend`'s
    /// allocator.
    fn on_backend(
        context: &Context,
        backend: &Arc<dyn Backend>,
        words: &[u64],
        level: Level,
        scale: Scale,
        slots: usize,
        class: MemoryClass,
    ) -> Result<Self> {
        let allocator = backend.allocator();
        let mut buffer = allocator.allocate(class, words.len().max(1) * 8)?;
        allocator.upload(&mut buffer, 0, words)?;
        allocator.seal(&buffer)?;
        Ok(Self {
            context: context.clone(),
            backend: Arc::clone(backend),
            words: buffer,
            level,
            scale,
            slots,
            period: slots,
        })
    }

    /// The same compact plaintext on the context's device: a new buffer of
    /// the same class, filled by one synchronous copy. With
    /// [`CompactPlaintext::to_host`] this is how a program keeps read-only
    /// plaintexts in host memory and brings each to the device only while
    /// it is used (a hand-written swap; the `planned` policy does the same
    /// inside the allocator, overlapped with compute). On a CPU context
    /// both are copies.
    ///
    /// # Errors
    /// Allocation (an `OverBudget` among them) and transfer errors.
    pub fn to_device(&self) -> Result<Self> {
        self.moved(self.context.backend())
    }

    /// The same compact plaintext in host memory (the context's host
    /// backend), copied out synchronously; the device copy, if this one is
    /// dropped, frees its device memory.
    ///
    /// # Errors
    /// Allocation and transfer errors.
    pub fn to_host(&self) -> Result<Self> {
        self.moved(self.context.host_backend())
    }

    fn moved(&self, backend: &Arc<dyn Backend>) -> Result<Self> {
        let mut words = vec![0u64; self.words.words()];
        self.backend
            .allocator()
            .download(&self.words, 0, &mut words)?;
        let mut moved = Self::on_backend(
            &self.context,
            backend,
            &words,
            self.level,
            self.scale,
            self.period,
            self.words.class(),
        )?;
        moved.slots = self.slots;
        Ok(moved)
    }

    /// The level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The exact scale.
    pub fn scale(&self) -> Scale {
        self.scale
    }

    /// The slot count.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The slots one period of the message takes, whose `2·period`
    /// coefficients the words are: [`CompactPlaintext::slots`] unless the
    /// message repeats ([`CompactPlaintext::repeat_slots`]).
    pub fn period(&self) -> usize {
        self.period
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Where the words live.
    pub fn device(&self) -> Device {
        self.backend.device()
    }

    /// The buffer of rounded coefficients (`f64` bits).
    pub fn buffer(&self) -> &Buffer {
        &self.words
    }

    /// Bytes held: `2·period` words.
    pub fn size_bytes(&self) -> usize {
        self.words.bytes()
    }

    /// Bytes the expanded plaintext takes: `level + 1` limbs of `N` words.
    pub fn expanded_bytes(&self) -> usize {
        (self.level.0 + 1) * self.context.params().degree().get() * 8
    }

    /// The rounded coefficients (integer-valued, real parts then imaginary
    /// parts), downloaded.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn rounded_coefficients(&self) -> Result<Vec<f64>> {
        let mut words = vec![0u64; 2 * self.period];
        self.backend
            .allocator()
            .download(&self.words, 0, &mut words)?;
        Ok(words.into_iter().map(f64::from_bits).collect())
    }

    /// The encoded plaintext, in `Temporary` memory: bit-identical to what
    /// [`super::Encoder::encode_at_class`] gives for the same values.
    ///
    /// # Errors
    /// Allocation and backend errors.
    pub fn expand(&self) -> Result<Plaintext> {
        self.expand_as(MemoryClass::Temporary)
    }

    /// As [`CompactPlaintext::expand`], into a buffer of `class`.
    ///
    /// # Errors
    /// Allocation and backend errors.
    pub fn expand_as(&self, class: MemoryClass) -> Result<Plaintext> {
        let mut out = Self::expand_all(&[self], class)?;
        out.pop().ok_or(crate::Error::EmptyBasis)
    }

    /// Expands several compact plaintexts into `class` buffers, in order. Runs
    /// of plaintexts of one level and slot count go to the backend together
    /// ([`crate::backend::Backend::expand_compact`]: one expansion and one
    /// batched NTT per run on the GPU). Each plaintext is expanded where its
    /// words live (a host copy, [`CompactPlaintext::to_host`], on the host).
    ///
    /// # Errors
    /// [`OperandError::ContextMismatch`] for plaintexts of different
    /// contexts; allocation and backend errors.
    pub fn expand_all(compact: &[&CompactPlaintext], class: MemoryClass) -> Result<Vec<Plaintext>> {
        Self::expand_over(compact, class, false, false)
    }

    /// As [`CompactPlaintext::expand_all`], keeping each plaintext whose
    /// message repeats a short period ([`CompactPlaintext::period`], its
    /// `2·period` values a limb at most
    /// [`crate::backend::MAX_PERIODIC_POINTS`]) periodic
    /// ([`Plaintext::is_periodic`]): its limbs hold only their `2·period`
    /// distinct values, computed by a transform of that many points, and
    /// multiply ciphertexts in place. Over `Q_level ∪ P` when `extended`.
    /// The others are expanded in full. At FGb, CoeffToSlot's diagonals of
    /// period 1024 and 32 take 32 and 1024 times fewer bytes so.
    ///
    /// # Errors
    /// As [`CompactPlaintext::expand_all`].
    pub fn expand_all_periodic(
        compact: &[&CompactPlaintext],
        class: MemoryClass,
        extended: bool,
    ) -> Result<Vec<Plaintext>> {
        Self::expand_over(compact, class, extended, true)
    }

    /// Whether [`CompactPlaintext::expand_all_periodic`] keeps this
    /// plaintext periodic.
    pub fn expands_periodic(&self) -> bool {
        super::is_short_period(self.context.params().degree().get(), self.period)
    }

    /// As [`CompactPlaintext::expand_all`], over `Q_level ∪ P`: the
    /// extended plaintexts of double hoisting ([`Plaintext::is_extended`];
    /// their `Q` limbs are those [`CompactPlaintext::expand_all`] makes).
    /// The special primes' limbs exist only in the expansion, so a
    /// compact diagonal costs no more bytes when it is kept.
    ///
    /// # Errors
    /// As [`CompactPlaintext::expand_all`].
    pub fn expand_all_extended(
        compact: &[&CompactPlaintext],
        class: MemoryClass,
    ) -> Result<Vec<Plaintext>> {
        Self::expand_over(compact, class, true, false)
    }

    /// Expands over `Q_level`, or `Q_level ∪ P` when `extended`; with
    /// `periodic`, plaintexts that [`CompactPlaintext::expands_periodic`]
    /// are kept periodic.
    fn expand_over(
        compact: &[&CompactPlaintext],
        class: MemoryClass,
        extended: bool,
        periodic: bool,
    ) -> Result<Vec<Plaintext>> {
        let Some(first) = compact.first() else {
            return Ok(Vec::new());
        };
        let context = &first.context;
        let mut out = Vec::with_capacity(compact.len());
        let mut rest = compact;
        while let Some(head) = rest.first() {
            let run = rest
                .iter()
                .take_while(|c| {
                    c.level == head.level
                        && c.slots == head.slots
                        && c.period == head.period
                        && Arc::ptr_eq(&c.backend, &head.backend)
                })
                .count();
            let (now, later) = rest.split_at(run);
            rest = later;
            for c in now {
                if context.check_same(&c.context).is_err() {
                    return Err(OperandError::ContextMismatch.into());
                }
            }
            // Expanded where the words are: a host copy expands on the host.
            let backend = &head.backend;
            let indices = if extended {
                context.params().qp_indices(head.level)?
            } else {
                context.params().q_indices(head.level)?
            };
            let buffers: Vec<&Buffer> = now.iter().map(|c| &c.words).collect();
            let gap = context.params().degree().get() / (2 * head.period);
            let forms = if periodic && head.expands_periodic() {
                Self::expand_periodic_run(backend, &buffers, gap, &indices, class)?
            } else {
                let mut polys = now
                    .iter()
                    .map(|_| RnsPoly::<Ntt>::allocate(backend, &indices, class, false))
                    .collect::<Result<Vec<_>>>()?;
                let mut views = polys
                    .iter_mut()
                    .map(RnsPoly::limbs_mut)
                    .collect::<Result<Vec<LimbsMut<'_>>>>()?;
                backend.expand_compact(&buffers, gap, &mut views)?;
                drop(views);
                polys.into_iter().map(Form::Full).collect()
            };
            out.extend(forms.into_iter().zip(now).map(|(form, c)| Plaintext {
                context: context.clone(),
                form,
                level: c.level,
                scale: c.scale,
                slots: c.slots,
            }));
        }
        Ok(out)
    }
}

impl CompactPlaintext {
    /// One run of [`CompactPlaintext::expand_over`] kept periodic: the
    /// words `compact` (polynomials in `X^gap`) transformed at `N/gap`
    /// points over `moduli` ([`Backend::expand_periodic`]).
    fn expand_periodic_run(
        backend: &Arc<dyn Backend>,
        compact: &[&Buffer],
        gap: usize,
        moduli: &[usize],
        class: MemoryClass,
    ) -> Result<Vec<Form>> {
        let log_gap = gap.trailing_zeros();
        let mut polys = compact
            .iter()
            .map(|_| PeriodicPoly::allocate(backend, moduli, log_gap, class))
            .collect::<Result<Vec<_>>>()?;
        let mut buffers: Vec<&mut Buffer> =
            polys.iter_mut().map(PeriodicPoly::buffer_mut).collect();
        backend.expand_periodic(compact, gap, moduli, &mut buffers)?;
        drop(buffers);
        if class.is_read_only() {
            for p in &polys {
                p.seal()?;
            }
        }
        Ok(polys.into_iter().map(Form::Periodic).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::DeviceSelection;
    use crate::encoding::Encoder;
    use crate::params::{Parameters, Preset, SecurityCheck};
    use crate::testing::{seeded_rng, unit_disk};
    use num_complex::Complex64;
    use rand_core::Rng;

    fn context(preset: Preset) -> Context {
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        Context::new(params, DeviceSelection::Cpu).unwrap()
    }

    /// Random values at a random level, slot count and scale (some scales
    /// above 2^63 per coefficient, to take `reduce_f64`'s wide path).
    fn random_case(ctx: &Context, seed: u64) -> (Vec<Complex64>, Level, Scale, usize) {
        let mut rng = seeded_rng(seed);
        let params = ctx.params();
        let log_slots = (rng.next_u64() % u64::from(params.slots().trailing_zeros() + 1)) as u32;
        let slots = 1usize << log_slots;
        let level = Level((rng.next_u64() % (params.max_level().0 as u64 + 1)) as usize);
        let log_q: f64 = params.q_moduli()[..=level.0]
            .iter()
            .map(|m| (m.value() as f64).log2())
            .sum();
        // Values in the unit disk at a scale up to 2^(log Q − 8 − log slots).
        let top = (log_q - 8.0 - f64::from(log_slots)).clamp(20.0, 900.0);
        let log_scale = 20.0 + (rng.next_u64() % 1000) as f64 / 1000.0 * (top - 20.0);
        let values = unit_disk(&mut rng, slots);
        (values, level, Scale(2f64.powf(log_scale)), slots)
    }

    #[test]
    fn expansion_is_bit_identical_to_encoding() {
        let mut wide = 0;
        for preset in [Preset::TestFGb, Preset::TestFTb, Preset::TestFVa] {
            let ctx = context(preset);
            let encoder = Encoder::new(&ctx);
            for seed in 0..12 {
                let (values, level, scale, slots) = random_case(&ctx, 100 + seed);
                let class = MemoryClass::BootstrapConstant;
                let encoded = encoder
                    .encode_at_class(&values, level, scale, slots, class)
                    .unwrap();
                let compact = encoder
                    .encode_compact_at_class(&values, level, scale, slots, class)
                    .unwrap();
                assert_eq!(compact.size_bytes(), 2 * slots * 8);
                let rounded = compact.rounded_coefficients().unwrap();
                wide += rounded.iter().filter(|v| v.abs() >= 2f64.powi(63)).count();
                assert_eq!(
                    compact.expanded_bytes(),
                    encoded.poly().unwrap().buffer().bytes()
                );
                let expanded = compact.expand().unwrap();
                assert_eq!(expanded.poly().unwrap().class(), MemoryClass::Temporary);
                assert_eq!(
                    (expanded.level(), expanded.scale(), expanded.slots()),
                    (level, scale, slots)
                );
                assert_eq!(
                    expanded.poly().unwrap().to_words().unwrap(),
                    encoded.poly().unwrap().to_words().unwrap(),
                    "{preset:?} seed {seed}: level {level:?}, {slots} slots, scale 2^{:.1}",
                    scale.0.log2()
                );
            }
        }
        assert!(wide > 0, "no coefficient took the wide reduction");
    }

    /// A compact plaintext moved to the host and back keeps its words, class,
    /// level, scale and slots, outlives the original, and expands to the
    /// same limbs (on the CPU both moves are copies on one backend; the GPU
    /// tests cover the transfers).
    #[test]
    fn moving_between_host_and_device_keeps_every_word() {
        let ctx = context(Preset::TestFGb);
        let encoder = Encoder::new(&ctx);
        for seed in 0..4 {
            let (values, level, scale, slots) = random_case(&ctx, 700 + seed);
            let class = MemoryClass::BootstrapConstant;
            let compact = encoder
                .encode_compact_at_class(&values, level, scale, slots, class)
                .unwrap();
            let expected = compact
                .expand()
                .unwrap()
                .poly()
                .unwrap()
                .to_words()
                .unwrap();
            let rounded = compact.rounded_coefficients().unwrap();
            assert!(rounded.iter().any(|&v| v != 0.0), "seed {seed}: all zero");
            let host = compact.to_host().unwrap();
            drop(compact);
            assert_eq!(host.device(), Device::Cpu);
            let back = host.to_device().unwrap();
            drop(host);
            assert_eq!(back.device(), ctx.device());
            assert_eq!(back.buffer().class(), class);
            assert_eq!(
                (back.level(), back.scale(), back.slots()),
                (level, scale, slots)
            );
            assert_eq!(back.rounded_coefficients().unwrap(), rounded);
            assert_eq!(
                back.expand().unwrap().poly().unwrap().to_words().unwrap(),
                expected
            );
        }
    }

    #[test]
    fn batches_of_mixed_levels_expand_in_order() {
        let ctx = context(Preset::TestFGb);
        let encoder = Encoder::new(&ctx);
        let cases: Vec<_> = (0..7).map(|s| random_case(&ctx, 300 + s)).collect();
        let compact: Vec<CompactPlaintext> = cases
            .iter()
            .map(|(v, l, s, n)| {
                encoder
                    .encode_compact_at_class(v, *l, *s, *n, MemoryClass::BootstrapConstant)
                    .unwrap()
            })
            .collect();
        // Two equal neighbours make one run of the batch.
        let mut list: Vec<&CompactPlaintext> = compact.iter().collect();
        list.insert(3, &compact[3]);
        let expanded = encoder.expand(&list, MemoryClass::Plaintext).unwrap();
        assert_eq!(expanded.len(), list.len());
        for (e, c) in expanded.iter().zip(&list) {
            let direct = c.expand().unwrap();
            assert_eq!(e.poly().unwrap().class(), MemoryClass::Plaintext);
            assert_eq!(
                e.poly().unwrap().to_words().unwrap(),
                direct.poly().unwrap().to_words().unwrap()
            );
        }
        let other = context(Preset::TestFGb);
        assert!(matches!(
            Encoder::new(&other).expand(&list, MemoryClass::Temporary),
            Err(crate::Error::Operand(OperandError::ContextMismatch))
        ));
    }

    #[test]
    fn rounded_coefficients_decode_to_the_values() {
        let ctx = context(Preset::TestFGb);
        let encoder = Encoder::new(&ctx);
        let mut rng = seeded_rng(7);
        let slots = 64;
        let values = unit_disk(&mut rng, slots);
        let scale = Scale(2f64.powi(40));
        let compact = encoder
            .encode_compact_at_class(&values, Level(5), scale, slots, MemoryClass::Temporary)
            .unwrap();
        let c = compact.rounded_coefficients().unwrap();
        assert!(c.iter().all(|v| v.fract() == 0.0));
        let u: Vec<Complex64> = c[..slots]
            .iter()
            .zip(&c[slots..])
            .map(|(&a, &b)| Complex64::new(a / scale.0, b / scale.0))
            .collect();
        let back = SpecialFftForTest::forward(slots, &u);
        assert!(crate::testing::max_abs_error(&back, &values) < 1e-9);
        // Bad input is refused as the encoder refuses it.
        assert!(
            encoder
                .encode_compact_at_class(&values, Level(99), scale, slots, MemoryClass::Temporary)
                .is_err()
        );
        assert!(
            encoder
                .encode_compact_at_class(
                    &values,
                    Level(0),
                    Scale(2f64.powi(80)),
                    slots,
                    MemoryClass::Temporary
                )
                .is_err()
        );
    }

    struct SpecialFftForTest;

    impl SpecialFftForTest {
        fn forward(slots: usize, u: &[Complex64]) -> Vec<Complex64> {
            crate::encoding::SpecialFft::new(slots).forward(u)
        }
    }
}
