//! The steps one bootstrap and a batch share: the memory phase, ModRaise
//! (with sparse-secret encapsulation), SubSum, and the split, EvalMod and
//! recombination that finish it.

use hemem_ckks::eval::Ciphertext;
use hemem_ckks::params::Level;
use hemem_memory::MemoryClass;

use super::{Bootstrapper, Stage};
use crate::Result;
use crate::arith::SlotArithmetic;
use crate::ckks_ops::CkksOps;
use crate::eval_mod::{eval_mod_and_recombine, split};

impl Bootstrapper {
    /// Opens the memory system's phase for one bootstrap of inputs at
    /// `scales` (one per ciphertext of a batch): the same kind of bootstrap
    /// touches the same keys and diagonals in the same order, which the
    /// `planned` policy records once and then fetches ahead of use.
    pub(super) fn phase(&self, real_only: bool, scales: &[f64]) -> hemem_memory::PhaseGuard {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ("bootstrap", real_only, scales.len()).hash(&mut h);
        for s in scales {
            s.to_bits().hash(&mut h);
        }
        self.evaluator
            .context()
            .backend()
            .allocator()
            .phase(h.finish(), scales.len())
    }

    /// ModRaise of each of `coeffs` (under the ephemeral sparse secret with
    /// SSE, each SSE key applied to all before the next), read at `q0`.
    pub(super) fn mod_raise_all(&self, coeffs: Vec<Ciphertext>) -> Result<Vec<Ciphertext>> {
        let eval = &self.evaluator;
        let low = match &self.sse {
            Some(k) => coeffs
                .iter()
                .map(|c| eval.switch_key(c, &k.to_sparse))
                .collect::<hemem_ckks::Result<Vec<_>>>()?,
            None => coeffs,
        };
        let raised = low
            .iter()
            .map(|c| eval.mod_raise(c, Level(self.schedule.top_level)))
            .collect::<hemem_ckks::Result<Vec<_>>>()?;
        let raised = match &self.sse {
            Some(k) => raised
                .iter()
                .map(|c| eval.switch_key(c, &k.to_dense))
                .collect::<hemem_ckks::Result<Vec<_>>>()?,
            None => raised,
        };
        let ops = CkksOps::new(eval);
        let q0 = ops.prime(0)? as f64;
        raised.iter().map(|c| ops.set_scale(c, q0)).collect()
    }

    /// SubSum of each of `raised`: the projection onto the subring of the
    /// slot count, each rotation applied to all before the next.
    pub(super) fn subsum_all(&self, raised: Vec<Ciphertext>) -> Result<Vec<Ciphertext>> {
        let eval = &self.evaluator;
        let full = self.context.params().slots();
        let slots: Vec<usize> = raised.iter().map(Ciphertext::slots).collect();
        let mut xs = raised
            .iter()
            .map(|c| eval.set_slots(c, full))
            .collect::<hemem_ckks::Result<Vec<_>>>()?;
        for &step in &self.subsum {
            xs = xs
                .iter()
                .map(|x| eval.add(x, &eval.rotate(x, step)?))
                .collect::<hemem_ckks::Result<Vec<_>>>()?;
        }
        Ok(xs
            .iter()
            .zip(slots)
            .map(|(x, s)| eval.set_slots(x, s))
            .collect::<hemem_ckks::Result<Vec<_>>>()?)
    }

    /// The split, EvalMod and recombination of CoeffToSlot's output `v`
    /// (whose SlotToCoeff landed on `delta0`).
    pub(super) fn finish(
        &self,
        ops: &CkksOps<'_>,
        v: &Ciphertext,
        delta0: f64,
        real_only: bool,
        observe: &mut dyn FnMut(Stage, &Ciphertext),
    ) -> Result<Ciphertext> {
        let (re, im) = split(ops, v, real_only)?;
        observe(Stage::RealPart, &re);
        if let Some(im) = &im {
            observe(Stage::ImaginaryPart, im);
        }
        let q0 = ops.prime(0)? as f64;
        let s_x = self.schedule.output_scale * q0 / delta0;
        let out = eval_mod_and_recombine(
            ops,
            &self.eval_mod,
            &re,
            im.as_ref(),
            s_x,
            self.schedule.post_level,
            self.schedule.output_scale,
        )?;
        Ok(out.clone_as(MemoryClass::Ciphertext)?)
    }
}
