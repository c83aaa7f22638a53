//! Adaptors: resources that wrap an upstream resource and observe or constrain it.

mod statistics;

pub use statistics::StatisticsAdaptor;
