//! The daemon's configuration loader against mutated files (issue 27's bounded fuzz target,
//! run as proptest cases in every test run): whatever the text, `DaemonConfig::parse` returns
//! a configuration or one error line naming the file, and never panics.
//!
//! The seeds are the TOML examples of the docs and `examples/`, so mutations start from files
//! that use every section.

use memtide_daemon::config::DaemonConfig;
use proptest::prelude::*;
use std::path::Path;

/// Every TOML block of the docs that describe the daemon's file, and the example configs.
fn seeds() -> Vec<String> {
    let docs = [
        include_str!("../../../docs/configuration.md"),
        include_str!("../../../docs/apps.md"),
        include_str!("../../../docs/cache.md"),
        include_str!("../../../docs/io.md"),
        include_str!("../../../docs/sharing.md"),
        include_str!("../../../docs/vms.md"),
    ];
    let mut seeds: Vec<String> = docs
        .iter()
        .flat_map(|d| d.split("```toml\n").skip(1))
        .map(|block| block.split("```").next().unwrap_or("").to_string())
        .collect();
    seeds.push(include_str!("../../../examples/daemon-two-touchers.toml").to_string());
    seeds.push(include_str!("../../../examples/daemon-dry-run.toml").to_string());
    seeds
}

/// A change to one line of a seed.
#[derive(Clone, Debug)]
enum Edit {
    Drop(usize),
    Repeat(usize),
    /// The value after `=` replaced.
    Value(usize, &'static str),
    /// A byte of the line replaced.
    Byte(usize, usize, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    const VALUES: &[&str] = &[
        "\"\"",
        "\"0\"",
        "\"-1M\"",
        "\"18446744073709551615\"",
        "\"99999999999T\"",
        "0",
        "-1",
        "1e308",
        "nan",
        "inf",
        "true",
        "[]",
        "{}",
        "[[]]",
        "\"1ms\"",
        "\"0s\"",
        "\"../../etc\"",
        "\"/\"",
        "\"\\u0000\"",
        "\"9999999999h\"",
        "\"self\"",
        "\"x\"",
        "[\"\"]",
        "\"0.0.0.0:0\"",
        "1.5",
        "\"1.5G\"",
    ];
    prop_oneof![
        any::<usize>().prop_map(Edit::Drop),
        any::<usize>().prop_map(Edit::Repeat),
        (any::<usize>(), prop::sample::select(VALUES)).prop_map(|(i, v)| Edit::Value(i, v)),
        (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(i, j, b)| Edit::Byte(i, j, b)),
    ]
}

fn mutate(seed: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = seed.lines().map(str::to_string).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match *e {
            Edit::Drop(i) => {
                lines.remove(i % n);
            }
            Edit::Repeat(i) => lines.insert(i % n, lines[i % n].clone()),
            Edit::Value(i, v) => {
                let line = &mut lines[i % n];
                if let Some(eq) = line.find('=') {
                    *line = format!("{}= {v}", &line[..eq]);
                }
            }
            Edit::Byte(i, j, b) => {
                let mut bytes = lines[i % n].clone().into_bytes();
                if !bytes.is_empty() {
                    let m = bytes.len();
                    bytes[j % m] = b;
                }
                lines[i % n] = String::from_utf8_lossy(&bytes).into_owned();
            }
        }
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 5000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_mutated_config_loads_or_fails_with_one_line(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..5),
    ) {
        let seeds = seeds();
        let text = mutate(&seeds[seed.index(seeds.len())], &edits);
        if let Err(e) = DaemonConfig::parse(&text, Path::new("fuzz.toml")) {
            let msg = e.to_string();
            prop_assert!(msg.starts_with("fuzz.toml"), "{}", msg);
            prop_assert!(!msg.contains('\n'), "not one line: {:?}\n{}", msg, text);
        }
    }
}
