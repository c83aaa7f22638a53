//! Errors of hemem-bootstrap.

use std::ops::Range;

use hemem_ckks::backend::Device;

/// Errors of hemem-bootstrap.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CKKS layer refused (parameters, levels, rescale rules).
    #[error(transparent)]
    Ckks(#[from] hemem_ckks::Error),
    /// Two operands at different levels.
    #[error("level mismatch: {left} and {right}")]
    LevelMismatch {
        /// Level of the left operand.
        left: usize,
        /// Level of the right operand.
        right: usize,
    },
    /// Two operands whose scales differ by more than a relative `2^-40`.
    #[error("scale mismatch: 2^{left_log2:.6} and 2^{right_log2:.6}")]
    ScaleMismatch {
        /// `log2` of the left operand's scale.
        left_log2: f64,
        /// `log2` of the right operand's scale.
        right_log2: f64,
    },
    /// Two operands with different slot counts.
    #[error("slot count mismatch: {left} and {right}")]
    SlotMismatch {
        /// Slots of the left operand.
        left: usize,
        /// Slots of the right operand.
        right: usize,
    },
    /// A slot count that is not a power of two, or exceeds `N/2`.
    #[error("invalid slot count {slots} (a power of two up to {max} is needed)")]
    InvalidSlots {
        /// The slot count given.
        slots: usize,
        /// The largest allowed.
        max: usize,
    },
    /// An operation that needs a higher level than the operand has.
    #[error("{operation} needs level {needed}, the operand is at level {level}")]
    LevelTooLow {
        /// The operation.
        operation: &'static str,
        /// The level it needs (at least).
        needed: usize,
        /// The operand's level.
        level: usize,
    },
    /// A level beyond the modulus chain.
    #[error("level {level} is beyond the chain's top level {max}")]
    LevelOutOfRange {
        /// The level given.
        level: usize,
        /// The top level.
        max: usize,
    },
    /// A value whose coefficients would wrap around the modulus at its level
    /// (the plaintext simulator checks this before every rescale and after
    /// every level drop).
    #[error(
        "modulus overflow at level {level}: coefficients reach 2^{magnitude_log2:.2}, modulus/2 is 2^{modulus_log2:.2}"
    )]
    ModulusOverflow {
        /// The level.
        level: usize,
        /// `log2` of the largest scaled coefficient.
        magnitude_log2: f64,
        /// `log2` of half the modulus at that level.
        modulus_log2: f64,
    },
    /// A NaN or infinite value, scale or constant.
    #[error("a value, constant or scale is not finite (or a scale is not positive)")]
    NonFinite,
    /// A slice of the wrong length.
    #[error("length mismatch: expected {expected}, got {actual}")]
    LengthMismatch {
        /// The expected length.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// DFT radices that do not add up to `log2` of the slot count.
    #[error("DFT radices (log2) add up to {sum}, the slot count needs {log_slots}")]
    InvalidRadices {
        /// The sum of the `log2` radices.
        sum: u32,
        /// `log2` of the slot count.
        log_slots: u32,
    },
    /// A polynomial of degree 0 (or with no coefficients), or a degree that
    /// does not fit the request.
    #[error("invalid polynomial degree {degree}")]
    InvalidDegree {
        /// The degree.
        degree: usize,
    },
    /// An interval `[a, b]` with `a >= b` or non-finite ends.
    #[error("invalid interval [{a}, {b}]")]
    InvalidInterval {
        /// Left end.
        a: f64,
        /// Right end.
        b: f64,
    },
    /// A parameter outside its documented range.
    #[error("invalid parameter {name}: {reason}")]
    InvalidParameter {
        /// The parameter.
        name: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// Parameters without a post-bootstrap level, or whose shape has no
    /// schedule.
    #[error("the parameters {name:?} are not bootstrappable")]
    NotBootstrappable {
        /// The parameters' name.
        name: String,
    },
    /// One or more devices of a
    /// [`MultiBootstrapper`](crate::multi_device::MultiBootstrapper) failed:
    /// each failure names the device, the inputs it held and the cause.
    #[error("{} of the device group failed: {}", plural(failures.len()), list(failures))]
    DeviceFailures {
        /// Every failure, in input order.
        failures: Vec<DeviceFailure>,
    },
    /// The host thread running the device with this index in its group
    /// panicked (a bug; reported rather than propagated).
    #[error("the thread of device {worker} of the group panicked")]
    WorkerPanicked {
        /// The device's index in its group.
        worker: usize,
    },
}

/// One device's failure in a
/// [`MultiBootstrapper`](crate::multi_device::MultiBootstrapper).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceFailure {
    /// The device's index in its group (two logical devices may share one
    /// GPU).
    pub index: usize,
    /// The device.
    pub device: Device,
    /// The inputs (indices into the batch) the device held and did not
    /// return; empty when it failed while being set up.
    pub inputs: Range<usize>,
    /// The cause.
    pub error: Box<Error>,
}

impl std::fmt::Display for DeviceFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {} ({})", self.index, self.device)?;
        if !self.inputs.is_empty() {
            write!(f, ", inputs {}..{}", self.inputs.start, self.inputs.end)?;
        }
        write!(f, ": {}", self.error)
    }
}

fn plural(n: usize) -> String {
    if n == 1 {
        "1 device".to_owned()
    } else {
        format!("{n} devices")
    }
}

fn list(failures: &[DeviceFailure]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The result type of hemem-bootstrap.
pub type Result<T> = std::result::Result<T, Error>;

/// The one output of a batch of one (`evaluate` over `evaluate_many`, and
/// the like); [`Error::InvalidParameter`] naming `name` if the batch gave
/// none back.
pub(crate) fn only_output<T>(mut outputs: Vec<T>, name: &'static str) -> Result<T> {
    outputs.pop().ok_or(Error::InvalidParameter {
        name,
        reason: "no output for the input",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_strings() {
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::LevelMismatch { left: 3, right: 4 },
                "level mismatch: 3 and 4",
            ),
            (
                Error::ScaleMismatch {
                    left_log2: 40.0,
                    right_log2: 41.0,
                },
                "scale mismatch: 2^40.000000 and 2^41.000000",
            ),
            (
                Error::SlotMismatch { left: 8, right: 16 },
                "slot count mismatch: 8 and 16",
            ),
            (
                Error::InvalidSlots { slots: 3, max: 8 },
                "invalid slot count 3 (a power of two up to 8 is needed)",
            ),
            (
                Error::LevelTooLow {
                    operation: "rescale",
                    needed: 1,
                    level: 0,
                },
                "rescale needs level 1, the operand is at level 0",
            ),
            (
                Error::LevelOutOfRange { level: 30, max: 24 },
                "level 30 is beyond the chain's top level 24",
            ),
            (
                Error::ModulusOverflow {
                    level: 0,
                    magnitude_log2: 60.5,
                    modulus_log2: 57.0,
                },
                "modulus overflow at level 0: coefficients reach 2^60.50, modulus/2 is 2^57.00",
            ),
            (
                Error::NonFinite,
                "a value, constant or scale is not finite (or a scale is not positive)",
            ),
            (
                Error::LengthMismatch {
                    expected: 4,
                    actual: 5,
                },
                "length mismatch: expected 4, got 5",
            ),
            (
                Error::InvalidRadices {
                    sum: 14,
                    log_slots: 15,
                },
                "DFT radices (log2) add up to 14, the slot count needs 15",
            ),
            (
                Error::InvalidDegree { degree: 0 },
                "invalid polynomial degree 0",
            ),
            (
                Error::InvalidInterval { a: 1.0, b: -1.0 },
                "invalid interval [1, -1]",
            ),
            (
                Error::InvalidParameter {
                    name: "K",
                    reason: "must be positive",
                },
                "invalid parameter K: must be positive",
            ),
            (
                Error::NotBootstrappable {
                    name: "custom".to_owned(),
                },
                "the parameters \"custom\" are not bootstrappable",
            ),
            (
                Error::DeviceFailures {
                    failures: vec![DeviceFailure {
                        index: 1,
                        device: Device::Gpu(0),
                        inputs: 4..8,
                        error: Box::new(Error::NonFinite),
                    }],
                },
                "1 device of the device group failed: device 1 (gpu:0), inputs 4..8: a value, constant or scale is not finite (or a scale is not positive)",
            ),
            (
                Error::DeviceFailures {
                    failures: vec![
                        DeviceFailure {
                            index: 0,
                            device: Device::Cpu,
                            inputs: 0..0,
                            error: Box::new(Error::WorkerPanicked { worker: 0 }),
                        },
                        DeviceFailure {
                            index: 2,
                            device: Device::Gpu(1),
                            inputs: 5..6,
                            error: Box::new(Error::InvalidDegree { degree: 0 }),
                        },
                    ],
                },
                "2 devices of the device group failed: device 0 (cpu): the thread of device 0 of the group panicked; device 2 (gpu:1), inputs 5..6: invalid polynomial degree 0",
            ),
            (
                Error::WorkerPanicked { worker: 3 },
                "the thread of device 3 of the group panicked",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }
}
