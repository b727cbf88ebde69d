//! ARCHITECTURE.md's list of the crates and their memtide dependencies is the one `cargo metadata` gives: a dependency added or dropped without the document following fails here, with the list to paste.

use memtide_testkit::repo;
use std::process::Command;

const BEGIN: &str = "<!-- crate-graph:";
const END: &str = "<!-- /crate-graph -->";

/// Each workspace crate and its normal dependencies on other workspace crates, `memtide-`
/// dropped, as `name -> a, b` lines sorted by name.
fn graph_from_cargo() -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let short = |n: &str| n.trim_start_matches("memtide-").to_string();
    let members: Vec<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut lines: Vec<String> = packages
        .iter()
        .map(|p| {
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap())
                .filter(|n| members.iter().any(|m| m == n))
                .map(short)
                .collect();
            deps.sort();
            deps.dedup();
            let name = short(p["name"].as_str().unwrap());
            if deps.is_empty() {
                format!("{name} ->")
            } else {
                format!("{name} -> {}", deps.join(", "))
            }
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

/// The list between the crate-graph markers, without its code fence.
fn graph_in_document() -> String {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let start = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {BEGIN} marker"));
    let end = text[start..]
        .find(END)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {END} marker"));
    text[start..start + end]
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("```"))
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_documented_crate_graph_is_cargo_s() {
    let cargo = graph_from_cargo();
    assert_eq!(
        graph_in_document(),
        cargo,
        "ARCHITECTURE.md's crate graph differs from cargo metadata; the list is:\n{cargo}"
    );
}
