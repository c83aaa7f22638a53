//! Adaptors: resources that wrap an upstream resource and observe or constrain it.

mod caching;
mod statistics;

pub use caching::CachingAdaptor;
pub use statistics::StatisticsAdaptor;
