//! Adaptors: resources that wrap an upstream resource and observe or
//! constrain it, read outside-in as
//! `TraceAdaptor<StatisticsAdaptor<BudgetAdaptor<Router>>>`.

mod budget;
mod caching;
mod replay_check;
mod statistics;
mod trace;

pub use budget::BudgetAdaptor;
pub use caching::CachingAdaptor;
pub use replay_check::ReplayCheckAdaptor;
pub use statistics::StatisticsAdaptor;
pub use trace::{TraceAdaptor, TraceHandle};
