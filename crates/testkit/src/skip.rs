//! The one rule for a test whose prerequisite (root, a memory cgroup, zram, a tool) is missing:
//! it says why and skips, except where the prerequisite is required (`.ci/run` sets
//! `MEMTIDE_REQUIRE_LINUX=1` and runs with `CI=true`): there it fails.

/// Set by `.ci/run`: a missing prerequisite fails the test instead of skipping it.
pub const REQUIRE_VAR: &str = "MEMTIDE_REQUIRE_LINUX";

/// Whether a missing prerequisite is a failure: `MEMTIDE_REQUIRE_LINUX` set to anything but
/// empty or `0`, or `CI` set to anything but empty or `false`.
pub fn required() -> bool {
    let set =
        |var: &str, off: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != off);
    set(REQUIRE_VAR, "0") || set("CI", "false")
}

/// Skips `test` (prints why; the caller returns) or, when [`required`], fails it with `why`.
pub fn skip_or_fail(test: &str, why: &str) {
    if required() {
        panic!("{test}: {why} ({REQUIRE_VAR}=1 or CI makes this a failure)");
    }
    eprintln!("SKIPPED {test}: {why}");
}
