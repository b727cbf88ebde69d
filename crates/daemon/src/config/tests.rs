//! Tests of the configuration loader: defaults, a full file, the examples, and a table of bad files with the one-line error each must give.

use super::*;
use std::net::SocketAddr;

const FILE: &str = "test.toml";

fn parse(text: &str) -> Result<DaemonConfig, ConfigError> {
    DaemonConfig::parse(text, Path::new(FILE))
}

fn parse_ok(text: &str) -> DaemonConfig {
    match parse(text) {
        Ok(c) => c,
        Err(e) => panic!("{e}\n--- in ---\n{text}"),
    }
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A tenant that is valid on its own; cases add keys to it.
const ADOPT_A: &str = "[[tenant]]\nname = \"a\"\ncgroup = \"/memtide/a\"\nmax = \"1G\"\n";

/// Bad files: the text, then the field, the value as shown and a part of the message that the
/// error must contain.
const BAD: &[(&str, &str, &str, &str)] = &[
    // [daemon]
    ("[daemon]\ntick = \"50ms\"\n", "daemon.tick", "\"50ms\"", "between 100ms and 60s"),
    ("[daemon]\ntick = \"61s\"\n", "daemon.tick", "\"61s\"", "between 100ms and 60s"),
    ("[daemon]\ntick = 1\n", "daemon.tick", "1", "invalid type: integer `1`, expected a duration"),
    ("[daemon]\ntick = \"1x\"\n", "daemon.tick", "\"1x\"", "unknown unit \"x\""),
    ("[daemon]\ntick = \"5\"\n", "daemon.tick", "\"5\"", "has no unit"),
    ("[daemon]\nlisten = \"0.0.0.0:9464\"\n", "daemon.listen", "\"0.0.0.0:9464\"", "not a loopback address"),
    ("[daemon]\nlisten = \"localhost:9464\"\n", "daemon.listen", "\"localhost:9464\"", "not an IP address and port"),
    ("[daemon]\nlisten = \"127.0.0.1\"\n", "daemon.listen", "\"127.0.0.1\"", "not an IP address and port"),
    ("[daemon]\nlisten_public = \"yes\"\n", "daemon.listen_public", "\"yes\"", "expected a boolean"),
    ("[daemon]\ndecisions_kept = 0\n", "daemon.decisions_kept", "0", "between 1 and 100000"),
    ("[daemon]\ndecisions_kept = 100001\n", "daemon.decisions_kept", "100001", "between 1 and 100000"),
    ("[daemon]\ndecisions_kept = 2.5\n", "daemon.decisions_kept", "2.5", "invalid type: floating point `2.5`"),
    ("[daemon]\nlog_format = \"xml\"\n", "daemon.log_format", "\"xml\"", "unknown variant `xml`, expected `text` or `json`"),
    ("[daemon]\ndry_run = \"yes\"\n", "daemon.dry_run", "\"yes\"", "invalid type: string \"yes\", expected a boolean"),
    ("[daemon]\nstate_file = \"\"\n", "daemon.state_file", "\"\"", "non-empty path"),
    ("[daemon]\ntikc = \"1s\"\n", "daemon.tikc", "\"1s\"", "unknown field `tikc`, expected one of `tick`, `listen`"),
    ("[daemon]\ntick_ms = 500\n[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax_mb = 256\n", "daemon.tick_ms", "500", "`tick_ms` is now `tick`, its unit in the value: `tick = \"500ms\"`; 1 more key of the old format: `tenant[0].max_mb` (6:10) is now `max = \"256M\"`"),
    ("daemon = 5\n", "daemon", "5", "invalid type: integer `5`, expected the [daemon] table"),
    ("[sharing]\ncpu_budget = 0\n", "sharing.cpu_budget", "0", "more than 0 and at most 1"),
    ("[sharing]\ncpu_budget = 1.5\n", "sharing.cpu_budget", "1.5", "more than 0 and at most 1"),
    ("[sharing]\nidle_rate = 20000000\n", "sharing.idle_rate", "20000000", "between 0 and 10000000"),
    ("[sharing]\npressed_rate = -1\n", "sharing.pressed_rate", "-1", "invalid value"),
    ("[sharing]\nrate = 5\n", "sharing.rate", "5", "unknown field `rate`"),
    // the top level
    ("tick = \"1s\"\n", "tick", "\"1s\"", "unknown field `tick`, expected one of `daemon`, `host`"),
    ("[[tenants]]\nname = \"a\"\n", "tenants", "", "unknown field `tenants`"),
    ("[hots]\n", "hots", "", "unknown field `hots`"),
    ("tenant = 5\n", "tenant", "5", "invalid type: integer `5`, expected a sequence"),
    ("[tenant]\nname = \"a\"\n", "tenant", "", "invalid type: map, expected a sequence"),
    // [host]
    ("[host]\nparent = \"memtide\"\n", "host.parent", "\"memtide\"", "does not start with \"/\""),
    ("[host]\nparent = \"/a/../b\"\n", "host.parent", "\"/a/../b\"", "has a \"..\" component"),
    ("[host]\nparent = 5\n", "host.parent", "5", "invalid type: integer `5`, expected a string"),
    ("[host]\nbudget = 0\n", "host.budget", "0", "must be > 0"),
    ("[host]\nbudget = \"10X\"\n", "host.budget", "\"10X\"", "unknown unit \"X\""),
    ("[host]\nbudget = \"512MB\"\n", "host.budget", "\"512MB\"", "ambiguous"),
    ("[host]\nbudget = 1.5\n", "host.budget", "1.5", "invalid type: floating point `1.5`, expected a size"),
    ("[host]\nreserve = -1\n", "host.reserve", "-1", "is negative"),
    ("[host]\nwrite_timeout = \"5ms\"\n", "host.write_timeout", "\"5ms\"", "between 10ms and 60s"),
    ("[host]\nwrite_timeout = \"2m\"\n", "host.write_timeout", "\"2m\"", "between 10ms and 60s"),
    ("[host]\nproc_root = false\n", "host.proc_root", "false", "invalid type: boolean `false`, expected a string"),
    // [policy]
    ("[policy]\ntax_rate = 1.0\n", "policy.tax_rate", "1.0", "tax rate 1 is outside [0, 1)"),
    ("[policy]\ntax_rate = -0.1\n", "policy.tax_rate", "-0.1", "tax rate -0.1 is outside [0, 1)"),
    ("[policy]\ntax_rate = \"high\"\n", "policy.tax_rate", "\"high\"", "invalid type: string \"high\", expected f64"),
    ("[policy]\ntax_rate = nan\n", "policy.tax_rate", "nan", "is outside [0, 1)"),
    ("[policy]\nsampling_period = \"500ms\"\n", "policy.sampling_period", "\"500ms\"", "between 1s and 1h"),
    ("[host]\nbudget = \" 1G\"\n", "host.budget", "\" 1G\"", "spaces around it"),
    ("[policy]\nreclaim = \"sometimes\"\n", "policy.reclaim", "\"sometimes\"", "unknown variant `sometimes`, expected `when_short` or `always`"),
    // [rails]
    ("[rails]\nshrink_step = 0\n", "rails.shrink_step", "0", "must be > 0 and <= 0.5"),
    ("[rails]\nshrink_step = 0.6\n", "rails.shrink_step", "0.6", "must be > 0 and <= 0.5"),
    ("[rails]\nfloor_margin = true\n", "rails.floor_margin", "true", "expected a size"),
    ("[rails]\nbackoff_refaults_per_s = 0\n", "rails.backoff_refaults_per_s", "0", "must be a finite number > 0"),
    ("[rails]\nbackoff_refaults_per_s = -inf\n", "rails.backoff_refaults_per_s", "-inf", "must be a finite number > 0"),
    ("[rails]\nbackoff_pressure = -1.0\n", "rails.backoff_pressure", "-1.0", "must be > 0 and <= 100"),
    ("[rails]\nbackoff_pressure = 150\n", "rails.backoff_pressure", "150", "must be > 0 and <= 100"),
    ("[rails]\nbackoff_throttled_per_s = 0\n", "rails.backoff_throttled_per_s", "0", "must be a finite number > 0"),
    ("[rails]\nbackoff_faults_per_s = 5\n", "rails.backoff_faults_per_s", "5", "unknown field `backoff_faults_per_s`, expected one of `shrink_step`"),
    // [[tenant]]: name
    ("[[tenant]]\ncgroup = \"/a\"\nmax = \"1G\"\n", "tenant[0]", "", "missing field `name`"),
    ("[[tenant]]\nnmae = \"a\"\n", "tenant[0].nmae", "\"a\"", "unknown field `nmae`, expected one of `name`"),
    ("[[tenant]]\nname = \"bad name\"\ncgroup = \"/a\"\nmax = \"1G\"\n", "tenant[0].name", "\"bad name\"", "is not a tenant name"),
    ("[[tenant]]\nname = \"..\"\ncgroup = \"/a\"\nmax = \"1G\"\n", "tenant[0].name", "\"..\"", "is not a tenant name"),
    ("[[tenant]]\nname = \"\"\ncgroup = \"/a\"\nmax = \"1G\"\n", "tenant[0].name", "\"\"", "is not a tenant name"),
    ("[[tenant]]\nname = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\ncgroup = \"/a\"\nmax = \"1G\"\n",
        "tenant[0].name", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "1 to 64 letters"),
    ("[[tenant]]\nname = 7\n", "tenant[0].name", "7", "invalid type: integer `7`, expected a string"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[[tenant]]\nname = \"a\"\ncgroup = \"/b\"\nmax = \"1G\"\n",
        "tenant[1].name", "\"a\"", "is already the name of tenant[0]"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nbogus = 1\n", "tenant[0].bogus", "1", "unknown field `bogus`, expected one of `name`, `cgroup`, `command`"),
    // [[tenant]]: cgroup or command
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\ncommand = [\"x\"]\nmax = \"1G\"\n", "tenant[0]", "", "has both cgroup and command"),
    ("[[tenant]]\nname = \"a\"\nmax = \"1G\"\n", "tenant[0]", "", "has neither cgroup nor command"),
    ("[[tenant]]\nname = \"a\"\ncommand = []\nmax = \"1G\"\n", "tenant[0].command", "[]", "is empty"),
    ("[[tenant]]\nname = \"a\"\ncommand = [\"x\", 5]\nmax = \"1G\"\n", "tenant[0].command[1]", "5", "invalid type: integer `5`, expected a string"),
    ("[[tenant]]\nname = \"a\"\ncommand = \"x --y\"\nmax = \"1G\"\n", "tenant[0].command", "\"x --y\"", "invalid type: string \"x --y\", expected a sequence"),
    ("[[tenant]]\nname = \"a\"\ncommand = [\"\", \"x\"]\nmax = \"1G\"\n", "tenant[0].command[0]", "\"\"", "the first element is the program"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"memtide/a\"\nmax = \"1G\"\n", "tenant[0].cgroup", "\"memtide/a\"", "does not start with \"/\""),
    ("[[tenant]]\nname = \"a\"\nunit = \"a.service\"\ncgroup = \"/memtide/a\"\nmax = \"1G\"\n", "tenant[0].unit", "\"a.service\"", "give no cgroup, command or [tenant.vm] beside it"),
    ("[[tenant]]\nname = \"a\"\nunit = \"redis\"\nmax = \"1G\"\n", "tenant[0].unit", "\"redis\"", "is not a systemd unit name"),
    ("[[tenant]]\nname = \"a\"\nslice = \"a.service\"\nmax = \"1G\"\n", "tenant[0].slice", "\"a.service\"", "is not a slice; expected a name ending in .slice"),
    ("[[tenant]]\nname = \"a\"\nunit = \"batch.slice\"\nmax = \"1G\"\n", "tenant[0].unit", "\"batch.slice\"", "is a slice: write it as slice = "),
    ("[[tenant]]\nname = \"a\"\nunit = \"a.service\"\nslice = \"b.slice\"\nmax = \"1G\"\n", "tenant[0].slice", "\"b.slice\"", "give no unit beside it"),
    ("[[tenant]]\nname = \"a\"\nslice = \"b.slice\"\ncgroup = \"/memtide/a\"\nmax = \"1G\"\n", "tenant[0].slice", "\"b.slice\"", "adopts a systemd slice's cgroup; give no cgroup"),
    ("[[tenant]]\nname = \"a\"\nunit = \"a/b.service\"\nmax = \"1G\"\n", "tenant[0].unit", "\"a/b.service\"", "is not a systemd unit name"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/memtide/../a\"\nmax = \"1G\"\n", "tenant[0].cgroup", "\"/memtide/../a\"", "has a \"..\" component"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/\"\nmax = \"1G\"\n", "tenant[0].cgroup", "\"/\"", "is the root cgroup"),
    ("[host]\nparent = \"/memtide\"\n[[tenant]]\nname = \"db\"\ncgroup = \"/x/y\"\nmax = \"1G\"\n",
        "tenant[0].cgroup", "\"/x/y\"", "is outside the configured parent \"/memtide\""),
    ("[host]\nparent = \"/a/b\"\n[[tenant]]\nname = \"db\"\ncgroup = \"/a/bc\"\nmax = \"1G\"\n",
        "tenant[0].cgroup", "\"/a/bc\"", "is outside the configured parent \"/a/b\""),
    ("[host]\nparent = \"/memtide\"\n[[tenant]]\nname = \"db\"\ncgroup = \"/memtide/\"\nmax = \"1G\"\n",
        "tenant[0].cgroup", "\"/memtide/\"", "is the configured parent \"/memtide\" itself"),
    // [[tenant]]: cgroups of different tenants
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/m/x\"\nmax = \"1G\"\n[[tenant]]\nname = \"b\"\ncgroup = \"/m//x/\"\nmax = \"1G\"\n",
        "tenant[1].cgroup", "\"/m//x/\"", "is also tenant \"a\"'s cgroup \"/m/x\""),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/m/x\"\nmax = \"1G\"\n[[tenant]]\nname = \"b\"\ncgroup = \"/m/x/y\"\nmax = \"1G\"\n",
        "tenant[1].cgroup", "\"/m/x/y\"", "lies inside tenant \"a\"'s cgroup \"/m/x\""),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/m/x/y\"\nmax = \"1G\"\n[[tenant]]\nname = \"b\"\ncgroup = \"/m/x\"\nmax = \"1G\"\n",
        "tenant[1].cgroup", "\"/m/x\"", "contains tenant \"a\"'s cgroup \"/m/x/y\""),
    ("[host]\nparent = \"/m\"\n[[tenant]]\nname = \"a\"\ncgroup = \"/m/b\"\nmax = \"1G\"\n[[tenant]]\nname = \"b\"\ncommand = [\"x\"]\nmax = \"1G\"\n",
        "tenant[1]", "", "would be launched into \"/m/b\", which is also tenant \"a\"'s cgroup"),
    // [[tenant]]: sizes and the rest
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\n", "tenant[0]", "", "missing field `max`"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = 0\n", "tenant[0].max", "0", "must be > 0"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nmin = \"2G\"\n", "tenant[0].min", "\"2G\"", "must not exceed max = \"1G\""),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1 gigabyte\"\n", "tenant[0].max", "\"1 gigabyte\"", "unknown unit \"gigabyte\""),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nshares = 0\n", "tenant[0].shares", "0", "must be at least 1"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nshares = \"high\"\n", "tenant[0].shares", "\"high\"", "invalid type: string \"high\", expected u64"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nestimator = \"esx\"\n", "tenant[0].estimator", "\"esx\"", "unknown variant `esx`, expected `tws` or `sampling`"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\ncap_at_estimate = 1\n", "tenant[0].cap_at_estimate", "1", "invalid type: integer `1`, expected a boolean"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nwhen = 1979-05-27\n", "tenant[0].when", "1979-05-27", "unknown field `when`"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = 1979-05-27\n", "tenant[0].max", "1979-05-27", "the size has an unknown unit"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nslo = { kind = \"best-effort\" }\n", "tenant[0].slo", "", "needs [cache]"),
    ("[cache]\nbudget = \"1G\"\n[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nslo = { kind = \"strict\", target_us = 0 }\n", "tenant[0].slo.target_us", "0", "must be more than 0"),
    ("[cache]\nbudget = \"1G\"\nsteps = 5000\n", "cache.steps", "5000", "must be between 2 and 1024"),
    // [io] and [tenant.io]
    ("[io]\nscheduler = \"cfq\"\n", "io.scheduler", "\"cfq\"", "unknown variant `cfq`, expected `bfq` or `keep`"),
    ("[io]\nenabled = true\n", "io", "", "has enabled = true and no device"),
    ("[io]\ndevice = \"\"\n", "io.device", "\"\"", "is not a device"),
    ("[io]\nenable = true\n", "io.enable", "true", "unknown field `enable`, expected one of `enabled`, `device`, `scheduler`"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nweight = 200\n", "tenant[0].io", "", "needs [io] enabled = true"),
    ("[io]\nenabled = false\n[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\nio = {}\n", "tenant[0].io", "", "needs [io] enabled = true"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nweight = 0\n", "tenant[0].io.weight", "0", "must be between 1 and 1000"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nweight = 1001\n", "tenant[0].io.weight", "1001", "must be between 1 and 1000"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nlatency_target = \"2m\"\n", "tenant[0].io.latency_target", "\"2m\"", "between 0.1ms and 60s"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nlatency_target = 20\n", "tenant[0].io.latency_target", "20", "expected a duration"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nwrite_iops = 0\n", "tenant[0].io.write_iops", "0", "must be at least 1; leave it out for no cap"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nread_bps = \"0\"\n", "tenant[0].io.read_bps", "\"0\"", "must be at least 1"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\nwrite_bps = \"10X\"\n", "tenant[0].io.write_bps", "\"10X\"", "unknown unit"),
    ("[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n[tenant.io]\niops = 5\n", "tenant[0].io.iops", "5", "unknown field `iops`, expected one of `weight`"),
    // across sections
    ("[host]\nbudget = \"100M\"\n[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmin = \"64M\"\nmax = \"1G\"\n[[tenant]]\nname = \"b\"\ncgroup = \"/b\"\nmin = \"64M\"\nmax = \"1G\"\n",
        "host.budget", "\"100M\"", "is less than the sum of the tenants' min (128M)"),
];

#[test]
fn bad_files_give_one_line_naming_file_field_and_value() {
    let mut wrong = Vec::new();
    for (text, field, value, message) in BAD {
        let e = match parse(text) {
            Ok(c) => panic!("accepted:\n{text}\nas {c:?}"),
            Err(e) => e,
        };
        let line = e.to_string();
        let expected = if value.is_empty() {
            format!(": {field}")
        } else {
            format!(": {field} = {value}: ")
        };
        let good = !line.contains('\n')
            && line.starts_with("test.toml:")
            && e.field() == Some(*field)
            && line.contains(&expected)
            && line.contains(message)
            && e.line_col().is_some();
        if !good {
            wrong.push(format!("want {expected:?} and {message:?} in {line}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn errors_point_at_the_value_or_the_header() {
    let e = parse("# c\n[daemon]\ntick   = \"50ms\"\n").unwrap_err();
    assert_eq!(e.line_col(), Some((3, 10)), "{e}");
    assert!(
        e.to_string()
            .starts_with("test.toml:3:10: daemon.tick = \"50ms\": must be between"),
        "{e}"
    );
    // An unknown key: at its value, or its header when it is a table.
    let e = parse("[rails]\n  bogus = 1\n").unwrap_err();
    assert_eq!(e.line_col(), Some((2, 11)), "{e}");
    let e = parse("[daemon]\n[bogus]\nx = 1\n").unwrap_err();
    assert_eq!(e.line_col(), Some((2, 1)), "{e}");
    // A missing field: at the tenant's header.
    let e = parse("[daemon]\n\n[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\n").unwrap_err();
    assert_eq!(e.line_col().map(|l| l.0), Some(3), "{e}");
    // The budget against the mins: at the budget.
    let e = parse(&format!("[host]\nbudget = \"1M\"\n{ADOPT_A}min = \"2M\"\n")).unwrap_err();
    assert_eq!(e.line_col(), Some((2, 10)), "{e}");
}

#[test]
fn the_parent_error_reads_as_documented() {
    let text = "[host]\nparent = \"/memtide\"\n\n[[tenant]]\nname = \"db\"\ncgroup = \"/x/y\"\nmax = \"1G\"\n";
    let e = parse(text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.toml:6:10: tenant[0].cgroup = \"/x/y\": is outside the configured parent \
         \"/memtide\"; an adopted cgroup must lie under [host] parent"
    );
}

#[test]
fn syntax_errors_are_one_line_with_a_location() {
    for text in [
        "[daemon\n",
        "a = \n",
        "[daemon]\ntick = \"1s\"\ntick = \"2s\"\n",
        "x = \"\n",
    ] {
        let e = parse(text).unwrap_err();
        let line = e.to_string();
        assert!(!line.contains('\n'), "{line:?}");
        assert!(line.starts_with("test.toml:"), "{line}");
        assert!(line.contains("invalid TOML"), "{line}");
        assert!(e.line_col().is_some(), "{line}");
    }
}

#[test]
fn a_missing_file_names_the_path_and_the_os_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let e = DaemonConfig::load(&path).unwrap_err();
    let line = e.to_string();
    assert!(!line.contains('\n'), "{line:?}");
    assert!(line.starts_with(&path.display().to_string()), "{line}");
    assert!(line.contains("cannot read"), "{line}");
    assert!(line.contains("os error"), "{line}");
    assert_eq!(e.file(), path.as_path());
}

#[test]
fn load_reads_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.toml");
    std::fs::write(&path, "[daemon]\ndry_run = true\n").unwrap();
    assert!(DaemonConfig::load(&path).unwrap().daemon.dry_run);
    std::fs::write(&path, "[daemon]\ndry_run = 1\n").unwrap();
    let e = DaemonConfig::load(&path).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2:11: daemon.dry_run = 1: ", path.display())),
        "{e}"
    );
}

#[test]
fn an_empty_file_gives_every_default() {
    let c = parse_ok("");
    assert_eq!(c, DaemonConfig::default());
    let d = &c.daemon;
    assert_eq!(d.tick, Duration::from_secs(1));
    assert_eq!(d.listen, "127.0.0.1:9464".parse::<SocketAddr>().unwrap());
    assert!(!d.listen_public);
    assert_eq!(d.state_file, PathBuf::from("/run/memtide/state.json"));
    assert!(!d.dry_run);
    assert_eq!(d.log_format, LogFormat::Text);
    assert_eq!(d.decisions_kept, 200);
    let h = &c.host;
    assert_eq!(h.proc_root, PathBuf::from("/"));
    assert_eq!(h.parent, ParentCgroup::OwnCgroup);
    assert_eq!(h.budget_bytes, None);
    assert_eq!(h.reserve_bytes, GIB);
    assert_eq!(h.write_timeout, Duration::from_secs(2));
    assert_eq!(c.policy.tax_rate, memtide_model::TaxRate::DEFAULT);
    assert_eq!(c.policy.sampling_period, Duration::from_secs(30));
    let r = &c.rails;
    assert_eq!(r.shrink_step, 0.05);
    assert_eq!(r.floor_margin_bytes, 32 * MIB);
    assert_eq!(r.backoff_faults_per_s, 2000.0);
    assert_eq!(r.backoff_pressure, 10.0);
    assert_eq!(r.backoff_throttled_per_s, 100.0);
    assert!(c.tenants.is_empty());
    // Empty sections are the same as absent ones.
    assert_eq!(parse_ok("[daemon]\n[host]\n[policy]\n[rails]\n"), c);
}

#[test]
fn tenant_defaults_follow_the_estimator() {
    let c = parse_ok(&format!(
        "{ADOPT_A}[[tenant]]\nname = \"b\"\ncommand = [\"x\"]\nmax = 4096\nestimator = \"sampling\"\n"
    ));
    let a = &c.tenants[0];
    assert_eq!(a.min_bytes, 0);
    assert_eq!(a.max_bytes, GIB);
    assert_eq!(a.shares, 1000);
    assert_eq!(
        a.estimator,
        EstimatorChoice::Sampling,
        "sampling is the default"
    );
    assert!(!a.cap_at_estimate);
    let b = &c.tenants[1];
    assert_eq!(
        b.origin,
        TenantOrigin::Launch {
            argv: vec!["x".into()]
        }
    );
    assert_eq!(b.max_bytes, 4096);
    assert_eq!(b.estimator, EstimatorChoice::Sampling);
    assert!(!b.cap_at_estimate);
    let c = parse_ok(&format!(
        "{ADOPT_A}estimator = \"tws\"\ncap_at_estimate = false\n"
    ));
    assert!(!c.tenants[0].cap_at_estimate);
    let c = parse_ok(&format!("{ADOPT_A}estimator = \"tws\"\n"));
    assert_eq!(c.tenants[0].estimator, EstimatorChoice::Tws);
    assert!(
        c.tenants[0].cap_at_estimate,
        "tws caps at its estimate by default"
    );
}

const FULL: &str = r#"
[daemon]
tick = "500ms"
listen = "10.0.0.5:9000"
listen_public = true
state_file = "/var/lib/memtide/state.json"
dry_run = true
log_format = "json"
decisions_kept = 1000

[api]
socket = "/run/memtide/api.sock"
group = "memtide"
token_file = "/etc/memtide/token"

[engines]
docker_socket = "/run/d.sock"
podman_socket = "/run/p.sock"

[host]
proc_root = "/tmp/fake"
parent = "/memtide/"
budget = "16G"
reserve = "2GiB"
write_timeout = "250ms"

[policy]
tax_rate = 0.5
sampling_period = "1m"
reclaim = "always"

[rails]
shrink_step = 0.1
floor_margin = 67108864
backoff_refaults_per_s = 500
backoff_pressure = 25.5
backoff_throttled_per_s = 40

[balloon]
enabled = false
socket = "/run/agents/b.sock"
mode = "0600"
group = "memtide"
stats_interval = "2s"
dead_after = "20s"
max_agents = 100
max_agents_per_uid = 10

[sharing]
enabled = true
idle_rate = 500
pressed_rate = 40000
cpu_budget = 0.3

[cache]
budget = "512M"
hit_us = 5
miss_us = 4000
steps = 32

[[tenant]]
name = "db"
cgroup = "/memtide/db"
min = "1G"
max = "8G"
shares = 2000
estimator = "sampling"
cap_at_estimate = true
slo = { kind = "strict", target_us = 400, slack = 0.1 }

[tenant.app]
kind = "redis"
url = "unix:///run/redis/redis.sock"
password_file = "/etc/memtide/redis.pass"
min = "256M"
max = "6G"
granule = "16M"

[[tenant]]
name = "web.1"
command = ["memtide-toucher", "--active", "400M"]
min = "64M"
max = "1.5G"
isolated = true
slo = { kind = "best-effort" }
"#;

#[test]
fn a_full_file_reads_every_key() {
    let c = parse_ok(FULL);
    let expected = DaemonConfig {
        daemon: DaemonSection {
            tick: Duration::from_millis(500),
            listen: "10.0.0.5:9000".parse().unwrap(),
            listen_public: true,
            state_file: PathBuf::from("/var/lib/memtide/state.json"),
            dry_run: true,
            log_format: LogFormat::Json,
            decisions_kept: 1000,
        },
        api: ApiSection {
            socket: Some(PathBuf::from("/run/memtide/api.sock")),
            group: Some("memtide".into()),
            token_file: Some(PathBuf::from("/etc/memtide/token")),
        },
        host: HostSection {
            proc_root: PathBuf::from("/tmp/fake"),
            parent: ParentCgroup::Path("/memtide".into()),
            budget_bytes: Some(16 * GIB),
            reserve_bytes: 2 * GIB,
            write_timeout: Duration::from_millis(250),
        },
        policy: PolicySection {
            tax_rate: memtide_model::TaxRate::new(0.5).unwrap(),
            sampling_period: Duration::from_secs(60),
            reclaim: Reclaim::Always,
        },
        rails: RailsSection {
            shrink_step: 0.1,
            floor_margin_bytes: 64 * MIB,
            backoff_faults_per_s: 500.0,
            backoff_pressure: 25.5,
            backoff_throttled_per_s: 40.0,
        },
        balloon: BalloonSection {
            enabled: false,
            socket: PathBuf::from("/run/agents/b.sock"),
            mode: 0o600,
            group: Some("memtide".into()),
            stats_interval: Duration::from_secs(2),
            dead_after: Duration::from_secs(20),
            max_agents: 100,
            max_agents_per_uid: 10,
        },
        sharing: SharingSection {
            enabled: true,
            idle_rate: 500,
            pressed_rate: 40_000,
            cpu_budget: 0.3,
        },
        cache: Some(memtide_config::quotas::QuotaTable {
            budget: memtide_model::Pages::from_mib(512),
            hit_us: 5.0,
            miss_us: 4000.0,
            steps: 32,
        }),
        io: IoSection::default(),
        engines: EnginesSection {
            docker_socket: PathBuf::from("/run/d.sock"),
            podman_socket: PathBuf::from("/run/p.sock"),
        },
        tenants: vec![
            TenantConfig {
                name: "db".into(),
                origin: TenantOrigin::Adopt {
                    cgroup: "/memtide/db".into(),
                },
                min_bytes: GIB,
                max_bytes: 8 * GIB,
                shares: 2000,
                estimator: EstimatorChoice::Sampling,
                cap_at_estimate: true,
                app: Some(AppConfig {
                    server: AppServer::Redis {
                        url: "unix:///run/redis/redis.sock".into(),
                        password_file: Some(PathBuf::from("/etc/memtide/redis.pass")),
                    },
                    min_bytes: 256 * MIB,
                    max_bytes: 6 * GIB,
                    granule_bytes: 16 * MIB,
                }),
                isolated: false,
                slo: Some(memtide_model::Slo::Strict {
                    target_us: 400.0,
                    slack: 0.1,
                }),
                io: None,
            },
            TenantConfig {
                name: "web.1".into(),
                origin: TenantOrigin::Launch {
                    argv: vec!["memtide-toucher".into(), "--active".into(), "400M".into()],
                },
                min_bytes: 64 * MIB,
                max_bytes: 1536 * MIB,
                shares: 1000,
                estimator: EstimatorChoice::Sampling,
                cap_at_estimate: false,
                app: None,
                isolated: true,
                slo: Some(memtide_model::Slo::BestEffort),
                io: None,
            },
        ],
    };
    assert_eq!(c, expected);
    assert_eq!(
        c.tenant("web.1").map(|t| t.cgroup_under("/memtide")),
        Some("/memtide/web.1".into())
    );
    assert_eq!(
        c.tenant("db").and_then(TenantConfig::adopted_cgroup),
        Some("/memtide/db")
    );
    assert!(c.tenant("nope").is_none());
}

/// A host root with one block device, `loop7`, in its sysfs.
fn fake_disk() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("sys/block/loop7");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("dev"), "7:7\n").unwrap();
    tmp
}

fn io_file(root: &Path) -> String {
    format!(
        "[host]\nproc_root = \"{}\"\n[io]\nenabled = true\ndevice = \"loop7\"\nscheduler = \"keep\"\n\
         {ADOPT_A}[tenant.io]\nweight = 400\nlatency_target = \"20ms\"\nwrite_iops = 500\nread_bps = \"10M\"\n\
         [[tenant]]\nname = \"b\"\ncgroup = \"/memtide/b\"\nmax = \"1G\"\nio = {{}}\n\
         [[tenant]]\nname = \"c\"\ncgroup = \"/memtide/c\"\nmax = \"1G\"\n",
        root.display()
    )
}

#[test]
fn io_reads_the_device_and_each_tenant_s_weight_target_and_caps() {
    let root = fake_disk();
    let c = parse_ok(&io_file(root.path()));
    assert_eq!(
        c.io,
        IoSection {
            enabled: true,
            device: Some("loop7".into()),
            scheduler: IoScheduler::Keep,
        }
    );
    let a = c.tenants[0].io.as_ref().unwrap();
    assert_eq!(a.weight, 400);
    assert_eq!(a.latency_target, Some(Duration::from_millis(20)));
    assert_eq!(
        a.caps,
        IoCaps {
            write_iops: Some(500),
            read_bps: Some(10 * MIB),
            ..IoCaps::default()
        }
    );
    assert_eq!(
        a.disk_spec(),
        memtide_model::DiskSpec {
            weight: 400,
            latency_target_us: Some(20_000)
        }
    );
    let b = c.tenants[1].io.as_ref().unwrap();
    assert_eq!((b.weight, b.latency_target), (100, None), "defaults");
    assert!(b.caps.is_none());
    assert_eq!(
        c.tenants[2].io, None,
        "a tenant without [tenant.io] is not managed"
    );
    // The default: disabled, BFQ when enabled.
    let d = parse_ok("");
    assert_eq!((d.io.enabled, d.io.scheduler), (false, IoScheduler::Bfq));
}

#[test]
fn a_device_path_must_be_a_block_device_node() {
    let root = fake_disk();
    let node = root.path().join("loop7");
    std::fs::write(&node, "").unwrap();
    let text = format!(
        "[host]\nproc_root = \"{}\"\n[io]\nenabled = true\ndevice = \"{}\"\n",
        root.path().display(),
        node.display()
    );
    assert!(parse(&text).is_ok(), "parsing alone reads no host file");
    let msg = DaemonConfig::parse_on_host(&text, Path::new(FILE))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("io.device") && msg.contains("is not a block device node"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn this_host_refuses_a_shared_disk_that_is_not_a_whole_block_device() {
    let root = fake_disk();
    let on = |device: &str| {
        let text = format!(
            "[host]\nproc_root = \"{}\"\n[io]\nenabled = true\ndevice = \"{device}\"\n",
            root.path().display()
        );
        DaemonConfig::parse_on_host(&text, Path::new(FILE))
    };
    assert_eq!(on("loop7").unwrap().io.device.as_deref(), Some("loop7"));
    for (device, message) in [
        (
            "/dev/memtide-no-such-disk",
            "is not a whole block device on this host: /dev/memtide-no-such-disk: No such file",
        ),
        ("/etc/hostname", "/etc/hostname is not a block device node"),
        (
            "memtide-no-such-disk",
            "no block device \"memtide-no-such-disk\" at ",
        ),
    ] {
        let e = on(device).unwrap_err();
        let line = e.to_string();
        assert_eq!(e.field(), Some("io.device"), "{line}");
        assert!(line.starts_with("test.toml:5:10: io.device = "), "{line}");
        assert!(line.contains(message) && !line.contains('\n'), "{line}");
    }
}

#[test]
fn dotted_keys_and_inline_tables_are_the_same_as_sections() {
    let dotted = parse_ok("daemon.tick = \"2s\"\nhost = { budget = \"1G\" }\ntenant = [{ name = \"a\", cgroup = \"/a\", max = \"1G\" }]\n");
    let sections = parse_ok("[daemon]\ntick = \"2s\"\n[host]\nbudget = \"1G\"\n[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n");
    assert_eq!(dotted, sections);
    let e = parse("daemon.tick = \"2h\"\n").unwrap_err();
    assert!(e.to_string().contains("daemon.tick = \"2h\": "), "{e}");
}

#[test]
fn listen_public_allows_any_address_and_zero_tenants_are_allowed() {
    let c = parse_ok("[daemon]\nlisten = \"[::]:9464\"\nlisten_public = true\n");
    assert_eq!(c.daemon.listen, "[::]:9464".parse::<SocketAddr>().unwrap());
    let c = parse_ok("[daemon]\nlisten = \"[::1]:1\"\n");
    assert!(c.daemon.listen.ip().is_loopback());
    assert!(parse_ok("tenant = []\n").tenants.is_empty());
}

#[test]
fn parent_self_defers_the_adopted_cgroup_check_to_the_daemon() {
    let c = parse_ok("[[tenant]]\nname = \"db\"\ncgroup = \"/x/y\"\nmax = \"1G\"\n");
    assert_eq!(c.host.parent, ParentCgroup::OwnCgroup);
    assert_eq!(
        c.first_adopted_outside("/system.slice/memtide.service")
            .map(|t| t.name.as_str()),
        Some("db")
    );
    assert!(c.first_adopted_outside("/x").is_none());
    assert!(c.first_adopted_outside("/").is_none());
}

#[test]
fn strictly_under_compares_components() {
    assert!(cgroup_is_strictly_under("/a/b/c", "/a/b"));
    assert!(cgroup_is_strictly_under("/a/b/c", "/a/b/"));
    assert!(cgroup_is_strictly_under("/a", "/"));
    assert!(!cgroup_is_strictly_under("/a/bc", "/a/b"));
    assert!(!cgroup_is_strictly_under("/a/b", "/a/b"));
    assert!(!cgroup_is_strictly_under("/a", "/a/b"));
    assert!(!cgroup_is_strictly_under("/", "/"));
}

#[test]
fn cgroup_paths_are_normalised() {
    let c = parse_ok("[host]\nparent = \"//memtide//\"\n[[tenant]]\nname = \"a\"\ncgroup = \"/memtide//a/\"\nmax = \"1G\"\n");
    assert_eq!(c.host.parent, ParentCgroup::Path("/memtide".into()));
    assert_eq!(c.tenants[0].adopted_cgroup(), Some("/memtide/a"));
    assert_eq!(
        parse_ok("[host]\nparent = \"/\"\n").host.parent,
        ParentCgroup::Path("/".into())
    );
}

#[test]
fn the_budget_may_equal_the_sum_of_mins() {
    let c = parse_ok(&format!(
        "[host]\nbudget = \"64M\"\n{ADOPT_A}min = \"64M\"\n"
    ));
    assert_eq!(c.host.budget_bytes, Some(64 * MIB));
}

#[test]
fn many_tenants_read_in_file_order() {
    let mut text = String::from("[host]\nparent = \"/m\"\n");
    for i in 0..2000 {
        text.push_str(&format!(
            "[[tenant]]\nname = \"t{i}\"\ncommand = [\"x\"]\nmax = \"1G\"\n"
        ));
    }
    text.push_str("[[tenant]]\nname = \"adopted\"\ncgroup = \"/m/t1999/inner\"\nmax = \"1G\"\n");
    let e = parse(&text).unwrap_err();
    assert!(
        e.to_string()
            .contains("lies inside tenant \"t1999\"'s cgroup \"/m/t1999\" (launched there)"),
        "{e}"
    );
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn every_daemon_example_loads() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("daemon-") && name.ends_with(".toml") {
            if let Err(e) = DaemonConfig::load(&path) {
                panic!("{e}");
            }
            seen += 1;
        }
    }
    assert!(seen >= 2, "found {seen} daemon examples");
}

#[test]
fn the_dry_run_example_adopts_one_cgroup() {
    let c = DaemonConfig::load(&examples_dir().join("daemon-dry-run.toml")).unwrap();
    assert!(c.daemon.dry_run);
    assert_eq!(c.tenants.len(), 1);
    assert!(c.tenants[0].adopted_cgroup().is_some());
}

#[test]
fn the_two_touchers_example_launches_two_sampling_tenants() {
    let c = DaemonConfig::load(&examples_dir().join("daemon-two-touchers.toml")).unwrap();
    assert_eq!(c.host.parent, ParentCgroup::OwnCgroup);
    assert_eq!(c.host.budget_bytes, Some(600 * MIB));
    assert_eq!(c.policy.tax_rate, memtide_model::TaxRate::DEFAULT);
    let argv: Vec<Vec<String>> = c
        .tenants
        .iter()
        .map(|t| match &t.origin {
            TenantOrigin::Launch { argv } => argv.clone(),
            other => panic!("not launched: {other:?}"),
        })
        .collect();
    assert_eq!(
        argv,
        vec![
            vec!["memtide-toucher", "--active", "400M"],
            vec!["memtide-toucher", "--active", "8M", "--idle", "300M"],
        ]
    );
    for t in &c.tenants {
        assert_eq!((t.min_bytes, t.max_bytes, t.shares), (64 * MIB, GIB, 1000));
        assert_eq!(t.estimator, EstimatorChoice::Sampling);
    }
}

#[test]
fn the_documented_example_parses() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let text = std::fs::read_to_string(doc).unwrap();
    let start = text.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + text[start..].find("```").expect("its end");
    let c = parse_ok(&text[start..end]);
    assert_eq!(c.tenants.len(), 2);
    assert_eq!(c.host.parent, ParentCgroup::Path("/memtide".into()));
    let defaults = DaemonConfig::default();
    assert_eq!(c.daemon, defaults.daemon);
    assert_eq!(c.policy, defaults.policy);
    assert_eq!(c.rails, defaults.rails);
    assert_eq!(c.balloon, defaults.balloon);
    assert_eq!(c.sharing, defaults.sharing);
    assert_eq!(c.io, defaults.io);
}

#[test]
fn odd_inputs_give_errors_not_panics() {
    let deep = format!("x = {}{}\n", "[".repeat(200), "]".repeat(200));
    let odd = [
        "\u{feff}[daemon]\ntick = \"1s\"\n",
        "[[tenant]]\nname = \"a\"\n[tenant.x]\ny = 1\n",
        "tenant = [1, 2]\n",
        "tenant = [[]]\n",
        "[[tenant]]\nname = \"é\"\n",
        "[[tenant]]\n\"ü\" = 1\n",
        "[host]\nbudget = \"\u{0661}G\"\n",
        "[host]\nbudget = \"1\u{212A}\"\n",
        "[[tenant]]\nname = \"a\"\ncgroup = \"/a\\n/b\"\nmax = \"1G\"\n",
        "a.b.c.d = 1\n",
        "[daemon]\ntick = \"\"\n",
        "[host]\nbudget = 9223372036854775807\n",
        "[rails]\nbackoff_pressure = 1e400\n",
        deep.as_str(),
    ];
    for text in odd {
        match parse(text) {
            Ok(_) => {}
            Err(e) => assert!(!e.to_string().contains('\n'), "{e:?}"),
        }
    }
}

#[test]
fn an_unknown_field_is_refused_naming_its_path_value_and_line() {
    let e = parse(&format!("{ADOPT_A}memory = \"1G\"\n")).unwrap_err();
    assert_eq!(e.field(), Some("tenant[0].memory"));
    assert!(
        e.to_string()
            .starts_with("test.toml:5:10: tenant[0].memory = \"1G\": unknown field `memory`"),
        "{e}"
    );
}

#[test]
fn a_wrong_type_a_bad_size_and_a_bad_duration_each_name_field_and_value() {
    let e = parse(&format!("{ADOPT_A}shares = true\n")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("test.toml:5:10: tenant[0].shares = true: invalid type: boolean"),
        "{e}"
    );
    let e = parse("[rails]\nfloor_margin = \"32 megs\"\n").unwrap_err();
    assert!(
        e.to_string().starts_with(
            "test.toml:2:16: rails.floor_margin = \"32 megs\": the size has an unknown unit \"megs\""
        ),
        "{e}"
    );
    let e = parse("[policy]\nsampling_period = \"30\"\n").unwrap_err();
    assert!(
        e.to_string().starts_with(
            "test.toml:2:19: policy.sampling_period = \"30\": the duration has no unit"
        ),
        "{e}"
    );
}

#[test]
fn a_relation_error_points_at_the_field_it_names() {
    let e = parse(&format!("{ADOPT_A}min = \"2G\"\n")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.toml:5:7: tenant[0].min = \"2G\": must not exceed max = \"1G\""
    );
}

#[test]
fn balloon_settings_out_of_range_name_their_field() {
    for (text, field, words) in [
        ("[balloon]\nmode = \"0999\"\n", "balloon.mode", "octal"),
        ("[balloon]\nmode = \"rw\"\n", "balloon.mode", "octal"),
        (
            "[balloon]\nstats_interval = \"2s\"\ndead_after = \"1s\"\n",
            "balloon.dead_after",
            "stats_interval and 10m",
        ),
        (
            "[balloon]\nmax_agents = 0\n",
            "balloon.max_agents",
            "between 1 and",
        ),
        (
            "[balloon]\nmax_agents_per_uid = 0\n",
            "balloon.max_agents_per_uid",
            "between 1 and 1000000",
        ),
        ("[balloon]\nsocket = \"\"\n", "balloon.socket", "not a path"),
    ] {
        let err = DaemonConfig::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(field) && err.contains(words), "{text}: {err}");
    }
    let beside = parse_ok("[daemon]\nstate_file = \"/var/lib/m/state.json\"\n");
    assert_eq!(
        beside.balloon.socket,
        PathBuf::from("/var/lib/m/balloon.sock")
    );
    let long = format!("[balloon]\nsocket = \"/{}\"\n", "s".repeat(120));
    let err = DaemonConfig::parse(&long, Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("at most 107"), "{err}");
}

#[test]
fn app_settings_that_make_no_sense_name_their_field() {
    for (app, field, words) in [
        (
            "kind = \"redis\"\nmin = \"2G\"\nmax = \"1G\"\n",
            "tenant[0].app.min",
            "must not exceed max",
        ),
        (
            "kind = \"redis\"\nmin = \"0\"\nmax = \"1G\"\ngranule = \"2G\"\n",
            "tenant[0].app.granule",
            "at most max",
        ),
        (
            "kind = \"redis\"\nurl = \"http://x\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.url",
            "not a Redis address",
        ),
        (
            "kind = \"oracle\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.kind",
            "oracle",
        ),
        (
            "kind = \"mariadb\"\nurl = \"redis://x:1\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.url",
            "not a MariaDB address; expected mysql://",
        ),
        (
            "kind = \"redis\"\nurl = \"redis://:s3cret@127.0.0.1:6379\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.url",
            "= \"redis://***@127.0.0.1:6379\": must not carry a user or password",
        ),
        (
            "kind = \"mariadb\"\nurl = \"mysql://root:s3cret@db:3306\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.url",
            "put the password in password_file",
        ),
        (
            "kind = \"jvm\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.collector",
            "declares its collector",
        ),
        (
            "kind = \"jvm\"\ncollector = \"g1\"\nurl = \"unix:///x\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.url",
            "not a setting of kind = \"jvm\"",
        ),
        (
            "kind = \"redis\"\ncollector = \"g1\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.collector",
            "only jvm takes it",
        ),
        (
            "kind = \"memcached\"\nuser = \"root\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.user",
            "only mariadb takes it",
        ),
        (
            "kind = \"jvm\"\ncollector = \"cms\"\nmin = \"0\"\nmax = \"1G\"\n",
            "tenant[0].app.collector",
            "cms",
        ),
    ] {
        let text = format!("{ADOPT_A}[tenant.app]\n{app}");
        let err = DaemonConfig::parse(&text, Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(field) && err.contains(words), "{app}: {err}");
        assert!(!err.contains("s3cret"), "the error shows the password: {err}");
    }
}

#[test]
fn each_app_kind_reads_its_own_fields_with_its_defaults() {
    for (app, server) in [
        (
            "kind = \"mariadb\"\npassword_file = \"/etc/memtide/db.pass\"\n",
            AppServer::Mariadb {
                url: "unix:///run/mysqld/mysqld.sock".into(),
                user: "root".into(),
                password_file: Some(PathBuf::from("/etc/memtide/db.pass")),
            },
        ),
        (
            "kind = \"mariadb\"\nurl = \"mysql://127.0.0.1:3306\"\nuser = \"memtide\"\n",
            AppServer::Mariadb {
                url: "mysql://127.0.0.1:3306".into(),
                user: "memtide".into(),
                password_file: None,
            },
        ),
        (
            "kind = \"memcached\"\n",
            AppServer::Memcached {
                url: "memcache://127.0.0.1:11211".into(),
            },
        ),
        (
            "kind = \"jvm\"\ncollector = \"shenandoah\"\n",
            AppServer::Jvm {
                collector: Collector::Shenandoah,
            },
        ),
    ] {
        let text = format!("{ADOPT_A}[tenant.app]\n{app}min = \"64M\"\nmax = \"1G\"\n");
        let c = DaemonConfig::parse(&text, Path::new("t.toml")).unwrap();
        let got = c.tenants[0].app.clone().unwrap();
        assert_eq!(got.server, server, "{app}");
    }
}

#[test]
fn parsing_alone_reads_no_host_file() {
    let text = "[io]\nenabled = true\ndevice = \"/dev/memtide-no-such-disk\"\n\
                [[tenant]]\nname = \"up\"\nmax = \"1G\"\n[tenant.vm]\nmemory = \"512M\"\nkernel = \"/nonexistent/vmlinuz\"\n\
                [[tenant]]\nname = \"old\"\nmax = \"1G\"\n[tenant.vm]\nqmp = \"/nonexistent/old.qmp\"\n";
    let c = parse_ok(text);
    assert!(c.tenants[0].launched());
    assert!(
        !c.tenants[1].launched(),
        "an adopted VM, its cgroup not yet found"
    );
    assert_eq!(c.tenants[1].adopted_cgroup(), None);
    let e = DaemonConfig::parse_on_host(text, Path::new(FILE)).unwrap_err();
    assert_eq!(e.field(), Some("io.device"), "{e}");
}

#[test]
fn the_api_socket_defaults_to_the_state_files_directory() {
    let c = parse_ok("[daemon]\nstate_file = \"/var/lib/memtide/state.json\"\n");
    assert_eq!(c.api, ApiSection::default());
    assert_eq!(
        c.api.socket_path(&c.daemon.state_file),
        PathBuf::from("/var/lib/memtide/api.sock")
    );
}

const CONTAINER: &str = "[[tenant]]\nname = \"r\"\nmax = \"1G\"\n";

#[test]
fn a_container_tenant_names_its_container_and_perhaps_its_engine() {
    let c = parse_ok(&format!(
        "{CONTAINER}container = \"redis-a\"\nengine = \"podman\"\n"
    ));
    assert_eq!(
        c.tenants[0].origin,
        TenantOrigin::Container {
            name: "redis-a".into(),
            engine: Some(memtide_engines::EngineKind::Podman),
        }
    );
    assert!(!c.tenants[0].launched());
    assert_eq!(c.tenants[0].adopted_cgroup(), None);
    let c = parse_ok(&format!("{CONTAINER}container = \"redis-a\"\n"));
    assert!(matches!(
        c.tenants[0].origin,
        TenantOrigin::Container { engine: None, .. }
    ));
    assert_eq!(
        c.engines.socket(memtide_engines::EngineKind::Docker),
        Path::new("/var/run/docker.sock")
    );
}

#[test]
fn a_container_tenant_refuses_a_bad_name_engine_or_a_second_origin() {
    for (extra, line, key, says) in [
        (
            "container = \"a b\"\n",
            4,
            "container",
            "is not a container name",
        ),
        (
            "container = \"-a\"\n",
            4,
            "container",
            "is not a container name",
        ),
        (
            "container = \"a\"\nengine = \"lxc\"\n",
            5,
            "engine",
            "expected \"docker\" or \"podman\"",
        ),
        ("engine = \"docker\"\n", 4, "engine", "give container"),
        (
            "container = \"a\"\ncgroup = \"/memtide/a\"\n",
            5,
            "cgroup",
            "is given beside container",
        ),
        (
            "container = \"a\"\nunit = \"a.service\"\n",
            5,
            "unit",
            "is given beside container",
        ),
    ] {
        let e = parse(&format!("{CONTAINER}{extra}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("test.toml:{line}:")) && e.contains(&format!("tenant[0].{key}")),
            "{extra}: {e}"
        );
        assert!(e.contains(says), "{extra}: {e}");
    }
}

#[test]
fn one_container_is_one_tenant() {
    let two = format!(
        "{CONTAINER}container = \"a\"\n[[tenant]]\nname = \"s\"\nmax = \"1G\"\ncontainer = \"a\"\nengine = \"docker\"\n"
    );
    let e = parse(&two).unwrap_err().to_string();
    assert!(
        e.contains("tenant[1].container") && e.contains("already the container of tenant[0]"),
        "{e}"
    );
    // The same name under two engines is two containers.
    let apart = two.replace(
        "container = \"a\"\n[[",
        "container = \"a\"\nengine = \"podman\"\n[[",
    );
    parse_ok(&apart);
}
