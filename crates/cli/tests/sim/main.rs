//! The tests on simulated hosts and of the command itself: the scenarios' shapes, determinism,
//! the command line, the shipped examples, the docs' runnable commands, the API against a
//! daemon, the report in a browser.
//! One module per former test binary; each test first takes [`memtide_testkit::file_gate`]
//! with its module's path, so that tests of two modules never run at the same time, as when
//! each module was a binary of its own. Run one module with
//! `cargo test -p memtide-cli --release --test sim -- alb_shapes::`.

mod common;

mod alb_shapes;
mod api;
mod browser;
mod cache_cli;
mod cache_shapes;
mod cli;
mod density_shapes;
mod determinism;
mod disk_shapes;
mod docs;
mod examples;
mod headlines;
mod quota_shapes;
mod scenario_shapes;
mod sharing_shapes;
