//! Run-time changes the API asks of the daemon's loop (tenant min/max/shares, the tax rate): the runner's requests, which the API checks for type and range before sending them.

pub use memtide_runner::request::{Change, Refusal, Request};
