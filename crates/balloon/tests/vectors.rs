//! The protocol's test vectors: every line of messages.json decodes (or fails) as it says and goes through the line splitter, and every agent/ exchange is played as memtide against the real agent on a socket in a temporary directory.

mod common;

use std::path::PathBuf;
use std::thread;

use memtide_balloon::line::{Line, LineSplitter};
use memtide_balloon::protocol::{AgentMessage, ErrorCode, MemtideMessage, ProtocolError};
use memtide_balloon::vectors::{
    load_exchanges, load_messages, Direction, Exchange, Expected, MessageVector,
};
use serde_json::Value;

use common::Memtide;

fn vectors_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../protocol/vectors"
    ))
}

/// Decodes a vector's line in its direction and answers the message as JSON.
fn decode(vector: &MessageVector) -> Result<Value, ProtocolError> {
    let line = vector.line.as_bytes();
    let encoded = match vector.direction {
        Direction::ToMemtide => AgentMessage::decode(line)?.encode(),
        Direction::ToAgent => MemtideMessage::decode(line)?.encode(),
    };
    Ok(serde_json::from_str(&encoded).expect("an encoded message is JSON"))
}

#[test]
fn every_message_vector_decodes_to_its_message_or_fails_with_its_code() {
    let vectors = load_messages(&vectors_dir().join("messages.json")).unwrap();
    for direction in [Direction::ToMemtide, Direction::ToAgent] {
        assert!(
            vectors.iter().any(|v| v.direction == direction),
            "no {direction:?} vectors"
        );
    }
    let mut failures = Vec::new();
    for vector in &vectors {
        match (&vector.expected, decode(vector)) {
            (Expected::Valid(message), Ok(decoded)) if decoded == *message => {}
            (Expected::Invalid(code), Err(error)) if error.code == *code => {
                assert!(!error.message.is_empty() && !error.message.contains('\n'));
            }
            (expected, got) => failures.push(format!(
                "{}: expected {expected:?}, got {got:?}",
                vector.name
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} vectors fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The SDK builds each message an agent sends from its types: the valid `to_memtide`
/// messages, decoded from the vector's expected JSON (not from its line), encode back to it.
#[test]
fn every_valid_agent_message_is_built_from_the_types_and_encodes_to_the_vector_s_json() {
    let vectors = load_messages(&vectors_dir().join("messages.json")).unwrap();
    let mut built = 0;
    for vector in &vectors {
        let (Direction::ToMemtide, Expected::Valid(message)) = (vector.direction, &vector.expected)
        else {
            continue;
        };
        let typed = AgentMessage::decode(message.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", vector.name));
        let encoded: Value = serde_json::from_str(&typed.encode()).unwrap();
        assert_eq!(&encoded, message, "{}", vector.name);
        built += 1;
    }
    assert!(built > 0);
}

#[test]
fn every_message_vector_goes_through_the_line_splitter() {
    let vectors = load_messages(&vectors_dir().join("messages.json")).unwrap();
    for vector in &vectors {
        let mut splitter = LineSplitter::new();
        let mut bytes = vector.line.clone().into_bytes();
        bytes.push(b'\n');
        let lines = splitter.feed(&bytes);
        if vector.expected == Expected::Invalid(ErrorCode::TooLong) {
            assert_eq!(lines, [Line::TooLong], "{}", vector.name);
        } else {
            let line = vector.line.strip_suffix('\r').unwrap_or(&vector.line);
            assert_eq!(
                lines,
                [Line::Complete(line.as_bytes().to_vec())],
                "{}",
                vector.name
            );
        }
    }
}

/// Plays `exchange` as memtide against an agent whose pool is the exchange's.
fn play(exchange: &Exchange) -> Result<(), String> {
    let memtide = Memtide::listen();
    let pool = exchange.pool.clone().ok_or("the exchange has no pool")?;
    let app = exchange.app.ok_or("the exchange has no app")?;
    let (builder, _) = common::agent(pool, app, &memtide.path);
    let agent = builder.start().map_err(|e| e.to_string())?;
    let outcome = memtide.accept().play(&exchange.steps);
    agent.stop();
    outcome.map_err(|e| e.to_string())
}

#[test]
fn every_agent_exchange_plays_against_the_agent() {
    let exchanges = load_exchanges(&vectors_dir().join("agent")).unwrap();
    assert!(exchanges.len() >= 12, "{} agent exchanges", exchanges.len());
    let failures: Vec<String> = thread::scope(|scope| {
        let plays: Vec<_> = exchanges
            .iter()
            .map(|exchange| (exchange, scope.spawn(|| play(exchange))))
            .collect();
        plays
            .into_iter()
            .filter_map(|(exchange, play)| match play.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("{}: {e}", exchange.name)),
                Err(_) => Some(format!("{}: the player panicked", exchange.name)),
            })
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_memtide_exchanges_load_with_their_placeholders() {
    let exchanges = load_exchanges(&vectors_dir().join("memtide")).unwrap();
    assert!(
        exchanges.len() >= 11,
        "{} memtide exchanges",
        exchanges.len()
    );
    assert!(exchanges
        .iter()
        .all(|exchange| exchange.pool.is_none() && exchange.app.is_none()));
    let hello = exchanges
        .iter()
        .find(|e| e.name == "hello-is-welcomed")
        .unwrap();
    assert!(
        matches!(&hello.steps[0], memtide_balloon::vectors::Step::Send(line) if line.contains("{{pid}}"))
    );
}
