//! Plaintexts and ciphertexts: level, scale and slots, then their
//! polynomials.

use std::io::{Read, Write};

use hemem_memory::MemoryClass;

use super::super::format::{Kind, Reader, Writer};
use super::super::{Load, Save};
use super::{invalid, open, read_poly, write_poly};
use crate::context::Context;
use crate::encoding::{Form, Plaintext};
use crate::eval::Ciphertext;
use crate::params::{Level, Parameters, Scale};
use crate::{Result, SerializationError};

fn write_header_fields<W: Write>(
    w: &mut Writer<W>,
    level: Level,
    scale: Scale,
    slots: usize,
) -> Result<()> {
    w.u32(level.0 as u32)?;
    w.f64(scale.0)?;
    w.u32(slots as u32)
}

/// Checks a loaded plaintext's or ciphertext's scale against its level `l`:
/// `1 ≤ scale < Q_l` (`Q_l = q_0 ⋯ q_l`, compared through `log2`).
///
/// An object at level `l` holds integers modulo `Q_l`, read as
/// `coefficient / scale`. Below 1, the rounding of a coefficient alone is
/// worth more than one unit of the message, and tiny scales make decoding
/// overflow to infinity or NaN; at `Q_l` or above, every coefficient reads
/// as less than one half, so no message of magnitude one fits. A product
/// not yet rescaled fits at every level `l ≥ 1` where it may be rescaled:
/// [`Parameters::check_rescale`] bounds its scale by `2·q_l²`, below `Q_l`
/// whenever `Q_{l−1} > 2·q_l` (in every preset `q_0` alone is). A product at
/// level 0, which can never be rescaled, is refused when its scale reaches
/// `q_0`.
fn check_scale(params: &Parameters, level: Level, scale: Scale) -> Result<()> {
    params
        .check_scale(level, scale)
        .map_err(|_| SerializationError::ScaleOutOfRange { level: level.0 }.into())
}

fn read_header_fields<R: Read>(
    r: &mut Reader<R>,
    context: &Context,
) -> Result<(Level, Scale, usize)> {
    let params = context.params();
    let level = Level(r.u32()? as usize);
    if level > params.max_level() {
        return Err(invalid("level"));
    }
    let scale = Scale(r.f64()?);
    check_scale(params, level, scale)?;
    let slots = r.u32()? as usize;
    if slots == 0 || !slots.is_power_of_two() || slots > params.degree().get() / 2 {
        return Err(invalid("slots"));
    }
    Ok((level, scale, slots))
}

impl Save for Plaintext {
    /// # Errors
    /// [`SerializationError::InvalidField`] (`"extended plaintext"`) for a
    /// plaintext over `Q_l ∪ P` (double hoisting's diagonals): the format
    /// holds plaintexts over `Q_l`, and a file that could not be loaded
    /// back is not written. Write errors.
    fn save<W: Write>(&self, w: W) -> Result<()> {
        if self.is_extended() {
            return Err(invalid("extended plaintext"));
        }
        let mut w = Writer::new(w, Kind::Plaintext, self.context.params().fingerprint())?;
        write_header_fields(&mut w, self.level, self.scale, self.slots)?;
        match &self.form {
            Form::Full(poly) => write_poly(&mut w, poly)?,
            // Saved in full: the file is the same as the full plaintext's.
            Form::Periodic(poly) => {
                w.u32(poly.limb_count() as u32)?;
                for &m in poly.moduli() {
                    w.u32(m as u32)?;
                }
                w.words(&poly.to_full_words()?)?;
            }
        }
        w.finish()?;
        Ok(())
    }
}

impl Load for Plaintext {
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::Plaintext, context)?;
        let (level, scale, slots) = read_header_fields(&mut r, context)?;
        let moduli = context.params().q_indices(level)?;
        let poly = read_poly(&mut r, context, &moduli, MemoryClass::Plaintext)?;
        r.finish()?;
        Ok(Plaintext {
            context: context.clone(),
            form: Form::Full(poly),
            level,
            scale,
            slots,
        })
    }
}

impl Save for Ciphertext {
    fn save<W: Write>(&self, w: W) -> Result<()> {
        let mut w = Writer::new(w, Kind::Ciphertext, self.context.params().fingerprint())?;
        write_header_fields(&mut w, self.level, self.scale, self.slots)?;
        write_poly(&mut w, &self.c0)?;
        write_poly(&mut w, &self.c1)?;
        w.finish()?;
        Ok(())
    }
}

impl Load for Ciphertext {
    fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let mut r = open(r, Kind::Ciphertext, context)?;
        let (level, scale, slots) = read_header_fields(&mut r, context)?;
        let moduli = context.params().q_indices(level)?;
        let c0 = read_poly(&mut r, context, &moduli, MemoryClass::Ciphertext)?;
        let c1 = read_poly(&mut r, context, &moduli, MemoryClass::Ciphertext)?;
        r.finish()?;
        Ciphertext::from_parts(context, c0, c1, level, scale, slots)
    }
}
