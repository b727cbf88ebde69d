//! The balloon decoder and line splitter against arbitrary and mutated input (issue 27's
//! bounded fuzz target, run as proptest cases in every test run): no input panics, a decoded
//! message encodes to a line that decodes to the same message, and the splitter never keeps
//! or yields more than a line's bound.

use memtide_balloon::line::{Line, LineSplitter, MAX_LINE_BYTES};
use memtide_balloon::protocol::{AgentMessage, MemtideMessage};
use memtide_balloon::vectors::load_messages;
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Every line of the protocol's message vectors: the seeds the mutations start from.
fn seeds() -> &'static [String] {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let path = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../protocol/vectors/messages.json"
        ));
        let vectors = load_messages(&path).expect("the message vectors load");
        vectors.into_iter().map(|v| v.line).collect()
    })
}

/// A mutation of a seed line: bytes replaced, inserted or removed at chosen places.
#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    /// A JSON-ish token, where the grammar is most likely to be wrong-footed.
    Token(usize, &'static str),
}

fn edit() -> impl Strategy<Value = Edit> {
    const TOKENS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        "-1",
        "1e309",
        "18446744073709551616",
        "null",
        "true",
        "\\u0000",
        "\\ud800",
        "\"type\":\"hello\"",
        "9007199254740993",
        "0.0",
        "NaN",
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Replace(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Remove),
        (any::<usize>(), prop::sample::select(TOKENS)).prop_map(|(i, t)| Edit::Token(i, t)),
    ]
}

fn mutate(seed: &str, edits: &[Edit]) -> Vec<u8> {
    let mut bytes = seed.as_bytes().to_vec();
    for e in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *e {
            Edit::Replace(i, b) if !bytes.is_empty() => {
                let n = bytes.len();
                bytes[i % n] = b;
            }
            Edit::Insert(i, b) => bytes.insert(at(i, bytes.len()), b),
            Edit::Remove(i) if !bytes.is_empty() => {
                let n = bytes.len();
                bytes.remove(i % n);
            }
            Edit::Token(i, t) => {
                let p = at(i, bytes.len());
                bytes.splice(p..p, t.bytes());
            }
            _ => {}
        }
    }
    bytes
}

/// Decodes `line` both ways; whatever decodes must survive its own encoding.
fn decode_both_ways(line: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(m) = AgentMessage::decode(line) {
        let again = AgentMessage::decode(m.encode().as_bytes());
        prop_assert_eq!(
            again.as_ref().ok(),
            Some(&m),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
    if let Ok(m) = MemtideMessage::decode(line) {
        let again = MemtideMessage::decode(m.encode().as_bytes());
        prop_assert_eq!(
            again.as_ref().ok(),
            Some(&m),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 20000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(line in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_both_ways(&line)?;
    }

    #[test]
    fn mutated_valid_lines_decode_or_fail_cleanly(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let seeds = seeds();
        let line = mutate(&seeds[seed.index(seeds.len())], &edits);
        decode_both_ways(&line)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_splitter_never_keeps_or_yields_more_than_a_line(
        chunks in prop::collection::vec(
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..64),
                (1usize..70_000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
                Just(b"\n".to_vec()),
            ],
            1..12,
        ),
    ) {
        let mut splitter = LineSplitter::new();
        for chunk in &chunks {
            for line in splitter.feed(chunk) {
                if let Line::Complete(bytes) = line {
                    prop_assert!(bytes.len() < MAX_LINE_BYTES, "a line of {} bytes", bytes.len());
                    prop_assert!(!bytes.contains(&b'\n'));
                }
            }
        }
    }
}
