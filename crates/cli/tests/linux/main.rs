//! The tests that run memtide on this machine's real cgroups, zram, servers and guests (as
//! root; without root or a prerequisite each says why and skips, or fails under `CI` or
//! `MEMTIDE_REQUIRE_LINUX=1`). One module per former test binary; each test first takes
//! [`memtide_testkit::file_gate`] with its module's path, so that tests of two modules never
//! run at the same time (they measure convergence, memory and disk under load), while a
//! module's own tests may overlap as they did when the module was a binary of its own. Run
//! one module with `cargo test -p memtide-cli --release --test linux -- lifecycle::`.

mod host;

mod adapters;
mod alb_fig1;
mod alb_two_dbs;
mod balloon;
mod containers;
mod convergence;
mod dashboard;
mod density;
mod discover;
mod domains;
mod io;
mod ksm;
mod lifecycle;
mod mariadb_advice;
mod metrics;
mod redis;
mod safety;
mod security;
mod systemd;
mod v2;
mod vm;
mod wake;
mod zram_script;
