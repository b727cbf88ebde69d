//! Issue 27's attacks on a real daemon, each as a test: what a local user, a tenant or whoever
//! can write beside memtide tries, and what must hold afterwards (limits and OOM settings as
//! the policy wants, the daemon ticking, every change refused or authorised). The attacker is
//! a real unprivileged user the test makes ([`memtide_testkit::UnprivilegedUser`]).

mod api;
mod balloon;
mod liar;
mod state;
