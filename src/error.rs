//! One error type for a program written against [`crate::prelude`], and
//! the errors of the facade's own library code (the benchmark engines, the
//! plots, the encrypted network).
//!
//! Every error a prelude call returns converts into [`Error`] with `?`:
//! the crates' errors ([`hemem_ckks::Error`] and its sub-enums,
//! [`hemem_bootstrap::Error`], [`hemem_memory::Error`] and its sub-enums)
//! and the device-name parser's [`DeviceParseError`]. Each fault lands
//! under the layer it belongs to, whichever layer handed it up: a memory
//! fault is always [`Error::Memory`] (not a CKKS error wrapping it), a CKKS
//! fault from a bootstrap is [`Error::Ckks`]. The crates' own enums are
//! unchanged.

use std::path::PathBuf;

use hemem_ckks::backend::DeviceParseError;

/// Every error of hemem, for users of the `hemem` crate.
///
/// Every error a [`crate::prelude`] call returns converts into it with `?`:
/// the crates' errors ([`hemem_ckks::Error`] and its sub-enums,
/// [`hemem_bootstrap::Error`], [`hemem_memory::Error`] and its sub-enums)
/// and [`DeviceParseError`]. Each fault lands under the layer it belongs
/// to, whichever layer handed it up: a memory fault is always
/// [`Error::Memory`], a CKKS fault from a bootstrap [`Error::Ckks`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CKKS layer failed (parameters, keys, an operation,
    /// serialization).
    #[error(transparent)]
    Ckks(hemem_ckks::Error),
    /// Bootstrapping failed (its own faults; the CKKS and memory faults
    /// underneath are [`Error::Ckks`] and [`Error::Memory`]).
    #[error(transparent)]
    Bootstrap(hemem_bootstrap::Error),
    /// The memory system failed (configuration, budget, trace, driver).
    #[error(transparent)]
    Memory(hemem_memory::Error),
    /// A device name that does not parse (`--device`, a config).
    #[error(transparent)]
    Device(#[from] DeviceParseError),
    /// A file could not be read or written. (The cause is the error's
    /// `source`, not repeated in its message: `{:#}` prints both.)
    #[error("{op} {path}")]
    Io {
        /// What was being done (`reading`, `writing`, `creating`).
        op: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A results CSV could not be read or written.
    #[error("CSV {path}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: csv::Error,
    },
    /// A plot could not be drawn or written.
    #[error("plotting {path}")]
    Plot {
        /// The PNG being drawn.
        path: PathBuf,
        /// The drawing backend's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The embedded plot font does not parse.
    #[error("the embedded plot font does not parse")]
    Font,
    /// An operation name the sweep does not know.
    #[error(
        "unknown operation {name:?} (expected add, mult, rotate, conjugate, bootstrap, bootstrap_batchB or inference)"
    )]
    UnknownOperation {
        /// The name given.
        name: String,
    },
    /// An image whose pixel count is not the network's `side × side`.
    #[error("the image has {actual} pixels; the network takes {expected}")]
    ImageSize {
        /// `side²`.
        expected: usize,
        /// The pixels given.
        actual: usize,
    },
    /// A pixel outside `[−1, 1]` or not finite.
    #[error("pixel {index} is outside [-1, 1] or not finite")]
    ImagePixel {
        /// Its index (row-major).
        index: usize,
    },
    /// A network shape that cannot be built or packed into the slots.
    #[error("invalid network: {reason}")]
    InvalidNetwork {
        /// What is wrong.
        reason: &'static str,
    },
    /// A layer needs more levels than the parameters give between
    /// bootstraps (or than the encryption level, without bootstrapping).
    #[error("{layer} needs {needed} levels above level 3; the parameters give at most {available}")]
    NotEnoughLevels {
        /// The layer (`stem`, `block`, `fc`).
        layer: &'static str,
        /// Levels it needs.
        needed: usize,
        /// The most levels above 3 a ciphertext can have there.
        available: usize,
    },
    /// An encrypted network's input that is not a fresh encryption of an
    /// image packed for it (another level or slot count).
    #[error("the network's input must be at level {level} with {slots} slots")]
    InputShape {
        /// The encryption level.
        level: usize,
        /// The parameters' slot count.
        slots: usize,
    },
    /// A budget that is neither `none` nor a byte size.
    #[error("invalid budget {text:?} (expected none or a size such as 2GiB)")]
    InvalidBudget {
        /// The text given.
        text: String,
    },
    /// A sweep or workload was given nothing to run.
    #[error("nothing to run: {axis} is empty")]
    EmptyAxis {
        /// The empty list (`presets`, `budgets`, `policies`, `operations`).
        axis: &'static str,
    },
    /// A sweep policy name that is neither a memory policy nor
    /// `manual-swap`.
    #[error(
        "unknown sweep policy {name:?} (expected device, managed, static, profiled, dynamic, planned or manual-swap)"
    )]
    UnknownSweepPolicy {
        /// The name given.
        name: String,
    },
    /// `manual-swap` asked of an operation whose workload owns no buffers to
    /// swap by hand (only `inference` does).
    #[error("manual-swap runs the inference operation only, not {operation:?}")]
    ManualSwapUnsupported {
        /// The operation asked for.
        operation: String,
    },
}

impl From<hemem_memory::Error> for Error {
    fn from(e: hemem_memory::Error) -> Self {
        Self::Memory(e)
    }
}

impl From<hemem_ckks::Error> for Error {
    /// A memory fault the CKKS layer handed up is filed as
    /// [`Error::Memory`].
    fn from(e: hemem_ckks::Error) -> Self {
        match e {
            hemem_ckks::Error::Memory(m) => Self::Memory(m),
            other => Self::Ckks(other),
        }
    }
}

impl From<hemem_bootstrap::Error> for Error {
    /// A CKKS (or memory) fault the bootstrapping layer handed up is filed
    /// under its own layer.
    fn from(e: hemem_bootstrap::Error) -> Self {
        match e {
            hemem_bootstrap::Error::Ckks(c) => Self::from(c),
            other => Self::Bootstrap(other),
        }
    }
}

/// The sub-enums some calls return directly (`"FGz".parse::<Preset>()`
/// gives a [`hemem_ckks::ParametersError`]), filed through their crate's
/// error.
macro_rules! through {
    ($crate_error:ty: $($sub:ty),+) => {$(
        impl From<$sub> for Error {
            fn from(e: $sub) -> Self {
                Self::from(<$crate_error>::from(e))
            }
        }
    )+};
}
through!(hemem_ckks::Error:
    hemem_ckks::ParametersError,
    hemem_ckks::KeyError,
    hemem_ckks::SerializationError,
    hemem_ckks::OperandError,
    hemem_gpu_kernels::Error
);
through!(hemem_memory::Error:
    hemem_memory::DeviceError,
    hemem_memory::ConfigError,
    hemem_memory::TraceError
);

/// An error and its causes, outermost first, as one line joined by `: `;
/// a cause whose text already ends the line is left out (an error that
/// prints its cause as well as returning it as its `source`).
pub fn join_causes<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut text = String::new();
    for e in chain {
        let part = e.to_string();
        if text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

impl Error {
    /// The memory system's error underneath, if this is one (through the
    /// CKKS and bootstrapping layers).
    pub fn memory(&self) -> Option<&hemem_memory::Error> {
        match self {
            Self::Memory(e)
            | Self::Ckks(hemem_ckks::Error::Memory(e))
            | Self::Bootstrap(hemem_bootstrap::Error::Ckks(hemem_ckks::Error::Memory(e))) => {
                Some(e)
            }
            _ => None,
        }
    }

    /// The message with every cause after it, joined by `: ` (as
    /// `anyhow`'s `{:#}` prints it): the file errors keep their cause in
    /// `source` only, so a one-line report wants this rather than
    /// `to_string`.
    pub fn with_causes(&self) -> String {
        let mut chain = Vec::new();
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            chain.push(e);
            next = e.source();
        }
        join_causes(chain)
    }

    /// Whether the device budget refused a request
    /// ([`hemem_memory::Error::OverBudget`]).
    pub fn is_over_budget(&self) -> bool {
        matches!(self.memory(), Some(hemem_memory::Error::OverBudget { .. }))
    }

    /// Whether the device or the host ran out of memory.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(
            self.memory(),
            Some(
                hemem_memory::Error::OutOfMemory { .. }
                    | hemem_memory::Error::HostOutOfMemory { .. }
                    | hemem_memory::Error::ManagedCapExceeded { .. }
            )
        )
    }

    pub(crate) fn io(
        op: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::Io { op, path, source }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_strings() {
        assert_eq!(
            Error::UnknownOperation { name: "div".into() }.to_string(),
            "unknown operation \"div\" (expected add, mult, rotate, conjugate, bootstrap, bootstrap_batchB or inference)"
        );
        assert_eq!(
            Error::InvalidBudget {
                text: "lots".into()
            }
            .to_string(),
            "invalid budget \"lots\" (expected none or a size such as 2GiB)"
        );
        assert_eq!(
            Error::EmptyAxis { axis: "presets" }.to_string(),
            "nothing to run: presets is empty"
        );
        assert_eq!(
            Error::UnknownSweepPolicy {
                name: "swap".into()
            }
            .to_string(),
            "unknown sweep policy \"swap\" (expected device, managed, static, profiled, dynamic, planned or manual-swap)"
        );
        assert_eq!(
            Error::ManualSwapUnsupported {
                operation: "add".into()
            }
            .to_string(),
            "manual-swap runs the inference operation only, not \"add\""
        );
        assert_eq!(
            Error::ImageSize {
                expected: 1024,
                actual: 784
            }
            .to_string(),
            "the image has 784 pixels; the network takes 1024"
        );
        assert_eq!(
            Error::ImagePixel { index: 3 }.to_string(),
            "pixel 3 is outside [-1, 1] or not finite"
        );
        assert_eq!(
            Error::InvalidNetwork {
                reason: "no channels"
            }
            .to_string(),
            "invalid network: no channels"
        );
        assert_eq!(
            Error::NotEnoughLevels {
                layer: "block",
                needed: 6,
                available: 1
            }
            .to_string(),
            "block needs 6 levels above level 3; the parameters give at most 1"
        );
        assert_eq!(
            Error::InputShape {
                level: 12,
                slots: 2048
            }
            .to_string(),
            "the network's input must be at level 12 with 2048 slots"
        );
        assert_eq!(
            Error::Font.to_string(),
            "the embedded plot font does not parse"
        );
        let io = Error::io("reading", std::path::Path::new("x.csv"))(std::io::Error::other("gone"));
        // The cause is the source, printed once by a report of the chain.
        assert_eq!(io.to_string(), "reading x.csv");
        assert_eq!(io.with_causes(), "reading x.csv: gone");
        let csv = Error::Csv {
            path: "s.csv".into(),
            source: csv::Error::from(std::io::Error::other("full")),
        };
        assert_eq!(csv.to_string(), "CSV s.csv");
        assert_eq!(csv.with_causes(), "CSV s.csv: full");
        let plot = Error::Plot {
            path: "f.png".into(),
            source: Box::new(std::io::Error::other("no room")),
        };
        assert_eq!(plot.to_string(), "plotting f.png");
        assert_eq!(plot.with_causes(), "plotting f.png: no room");
        // A cause the message already ends with is not repeated.
        #[derive(Debug)]
        struct Echo(std::io::Error);
        impl std::fmt::Display for Echo {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "echo: {}", self.0)
            }
        }
        impl std::error::Error for Echo {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let echo = Echo(std::io::Error::other("gone"));
        assert_eq!(
            join_causes([&echo as &(dyn std::error::Error + 'static)]),
            "echo: gone"
        );
        assert_eq!(
            join_causes([&echo as &(dyn std::error::Error + 'static), &echo.0]),
            "echo: gone"
        );
        assert_eq!(
            Error::from(hemem_ckks::backend::DeviceParseError { name: "tpu".into() }).to_string(),
            "unknown device \"tpu\" (expected cpu, gpu, gpu:N or auto)"
        );
    }

    #[test]
    fn over_budget_is_found_through_the_layers() {
        let over = || hemem_memory::Error::OverBudget {
            requested: 1,
            placing: None,
            budget: 2,
            in_use: Box::default(),
        };
        let wrapped = Error::Bootstrap(hemem_bootstrap::Error::Ckks(hemem_ckks::Error::Memory(
            over(),
        )));
        assert!(wrapped.is_over_budget());
        assert!(Error::Ckks(hemem_ckks::Error::Memory(over())).is_over_budget());
        assert!(!wrapped.is_out_of_memory());
        assert!(!Error::Font.is_over_budget());
        // Converted with `?`, the same fault lands in one place whichever
        // layer handed it up.
        for converted in [
            Error::from(over()),
            Error::from(hemem_ckks::Error::Memory(over())),
            Error::from(hemem_bootstrap::Error::Ckks(hemem_ckks::Error::Memory(
                over(),
            ))),
        ] {
            assert!(
                matches!(
                    converted,
                    Error::Memory(hemem_memory::Error::OverBudget { .. })
                ),
                "{converted:?}"
            );
        }
    }

    /// A program written against the prelude needs no other error type:
    /// every kind of fallible call it makes (parsers, constructors,
    /// loaders fed random bytes, evaluation, bootstrapping's own checks)
    /// converts into [`Error`] with `?`, each fault filed under its layer.
    #[test]
    fn every_prelude_error_converts_with_the_question_mark() {
        use num_complex::Complex64;
        use rand_core::{Rng as _, SeedableRng as _};

        use crate::Result;
        use crate::prelude::*;

        fn preset(name: &str) -> Result<Preset> {
            Ok(name.parse::<Preset>()?)
        }
        fn device(name: &str) -> Result<DeviceSelection> {
            Ok(name.parse::<DeviceSelection>()?)
        }
        fn storage(name: &str) -> Result<DiagonalStorage> {
            Ok(name.parse::<DiagonalStorage>()?)
        }
        fn memory(policy: &str) -> Result<MemoryConfig> {
            let policy = policy.to_owned();
            Ok(MemoryConfig::from_vars(|name| {
                (name == "HEMEM_MEMORY_POLICY").then(|| policy.clone())
            })?)
        }
        fn params(bytes: &[u8]) -> Result<Parameters> {
            Ok(Parameters::from_bytes(bytes, SecurityCheck::Enforce)?)
        }
        fn ciphertext(context: &Context, bytes: &[u8]) -> Result<Ciphertext> {
            Ok(Ciphertext::from_bytes(context, bytes)?)
        }
        fn keys(context: &Context, bytes: &[u8]) -> Result<BootstrapKeys> {
            Ok(BootstrapKeys::from_bytes(context, bytes)?)
        }
        fn schedule(params: &Parameters, slots: usize) -> Result<BootstrapSchedule> {
            Ok(BootstrapSchedule::recommended_for_slots(params, slots)?)
        }
        fn polynomial(coefficients: Vec<f64>) -> Result<Polynomial> {
            Ok(Polynomial::monomial(coefficients)?)
        }

        let seed = 0x0e_4404;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let mut garbage = vec![0u8; 64 + (rng.next_u64() % 512) as usize];
        rng.fill_bytes(&mut garbage);

        assert!(matches!(
            preset("FGz"),
            Err(Error::Ckks(hemem_ckks::Error::Parameters(
                hemem_ckks::ParametersError::UnknownPreset { .. }
            )))
        ));
        assert!(matches!(device("tpu:0"), Err(Error::Device(_))));
        assert!(matches!(storage("sideways"), Err(Error::Bootstrap(_))));
        assert!(matches!(memory("sideways"), Err(Error::Memory(_))));
        for bytes in [&garbage[..], &garbage[..7]] {
            assert!(
                matches!(
                    params(bytes),
                    Err(Error::Ckks(hemem_ckks::Error::Serialization(_)))
                ),
                "seed {seed}"
            );
        }

        let test =
            Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap();
        // A sparse schedule of 3 slots: bootstrapping's own check.
        assert!(matches!(
            schedule(&test, 3),
            Err(Error::Bootstrap(
                hemem_bootstrap::Error::InvalidSlots { .. }
            ))
        ));
        let context = Context::new(test, DeviceSelection::Cpu).unwrap();
        for result in [
            ciphertext(&context, &garbage).map(drop),
            keys(&context, &garbage).map(drop),
        ] {
            assert!(
                matches!(
                    result,
                    Err(Error::Ckks(hemem_ckks::Error::Serialization(_)))
                ),
                "seed {seed}: {result:?}"
            );
        }
        assert!(matches!(
            polynomial(vec![1.0, f64::NAN]),
            Err(Error::Bootstrap(hemem_bootstrap::Error::NonFinite))
        ));

        // Evaluation: a missing key is a CKKS fault; a constant polynomial
        // is refused by the polynomial evaluator.
        let keygen = KeyGenerator::new(&context).unwrap();
        let secret = keygen.secret_key().unwrap();
        let public = keygen.public_key(&secret).unwrap();
        let values: Vec<Complex64> = (0..context.params().slots())
            .map(|_| Complex64::new((rng.next_u64() % 1000) as f64 / 1000.0, 0.0))
            .collect();
        let encoder = Encoder::new(&context);
        let ct = Encryptor::new(&context)
            .unwrap()
            .encrypt(&encoder.encode(&values).unwrap(), &public)
            .unwrap();
        let evaluator = Evaluator::new(&context);
        let rotate = || -> Result<Ciphertext> { Ok(evaluator.rotate(&ct, 1)?) };
        assert!(
            matches!(rotate(), Err(Error::Ckks(hemem_ckks::Error::Key(_)))),
            "{:?}",
            rotate()
        );
        let constant = || -> Result<Ciphertext> {
            Ok(evaluator.evaluate_polynomial(&ct, &polynomial(vec![0.5])?)?)
        };
        assert!(
            matches!(
                constant(),
                Err(Error::Bootstrap(
                    hemem_bootstrap::Error::InvalidDegree { .. }
                ))
            ),
            "{:?}",
            constant()
        );
    }
}
