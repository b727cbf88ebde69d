//! Every JSON example in docs/balloon-protocol.md decodes, in the direction its message travels, and encodes back to the same JSON.

use memtide_balloon::protocol::{AgentMessage, MemtideMessage};
use serde_json::Value;

const DOC: &str = include_str!("../../../docs/balloon-protocol.md");

/// The lines of every ```json block of the doc.
fn examples() -> Vec<&'static str> {
    let mut lines = Vec::new();
    let mut in_json = false;
    for line in DOC.lines() {
        match line.trim() {
            "```json" => in_json = true,
            "```" => in_json = false,
            example if in_json && !example.is_empty() => lines.push(example),
            _ => {}
        }
    }
    lines
}

#[test]
fn every_json_example_of_the_doc_decodes_and_encodes_back() {
    let examples = examples();
    assert!(examples.len() >= 9, "{} examples found", examples.len());
    for example in examples {
        let json: Value = serde_json::from_str(example).unwrap();
        let kind = json["type"]
            .as_str()
            .unwrap_or_else(|| panic!("no type: {example}"));
        let (to_memtide, to_agent) = match kind {
            "hello" | "progress" | "stats" => (true, false),
            "welcome" | "target" => (false, true),
            "bye" | "error" => (true, true),
            other => panic!("the doc shows a message of type {other}: {example}"),
        };
        let mut encoded = Vec::new();
        if to_memtide {
            let message = AgentMessage::decode(example.as_bytes())
                .unwrap_or_else(|e| panic!("{example}: {e}"));
            encoded.push(message.encode());
        }
        if to_agent {
            let message = MemtideMessage::decode(example.as_bytes())
                .unwrap_or_else(|e| panic!("{example}: {e}"));
            encoded.push(message.encode());
        }
        for line in encoded {
            assert_eq!(
                serde_json::from_str::<Value>(&line).unwrap(),
                json,
                "{example}"
            );
        }
    }
}
