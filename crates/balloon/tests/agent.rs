//! The agent against a scripted memtide on a socket in a temporary directory: registration, stats, reconnection after a drop or a bye, stop saying bye, slow and superseded resizes, refusals, and the lines it refuses.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memtide_balloon::agent::{Agent, AgentError, AgentState, PoolStats, Refusal, StartError};
use memtide_balloon::protocol::{
    CurvePoint, Durability, ErrorCode, PoolInfo, PoolKind, MAX_LINE_BYTES,
};
use memtide_balloon::vectors::{App, Player, Step};
use serde_json::{json, Map, Value};

use common::{Memtide, WITHIN};

const GRANULE: u64 = 1 << 20;

fn pool() -> PoolInfo {
    PoolInfo {
        app: "agent-test".into(),
        kind: PoolKind::Heap,
        pool_bytes: 512 * GRANULE,
        min_bytes: 64 * GRANULE,
        max_bytes: 1024 * GRANULE,
        granule_bytes: GRANULE,
    }
}

fn expect(value: Value) -> Step {
    match value {
        Value::Object(object) => Step::Expect(object),
        _ => unreachable!("expectations are objects"),
    }
}

fn send(value: Value) -> Step {
    Step::Send(value.to_string())
}

fn welcome(stats_interval_ms: u64) -> Step {
    send(
        json!({"type": "welcome", "version": 1, "tenant": "test", "stats_interval_ms": stats_interval_ms, "dead_after_ms": 3 * stats_interval_ms}),
    )
}

fn target(seq: u64, pool_bytes: u64) -> Step {
    send(json!({"type": "target", "seq": seq, "pool_bytes": pool_bytes, "deadline_ms": 30000}))
}

/// Reads the next line as a JSON object, skipping nothing.
fn next_object(player: &mut Player<std::os::unix::net::UnixStream>) -> Map<String, Value> {
    use std::io::BufRead;
    let mut line = String::new();
    let stream = player.stream().try_clone().unwrap();
    let mut reader = std::io::BufReader::new(stream);
    reader.read_line(&mut line).unwrap();
    match serde_json::from_str(&line) {
        Ok(Value::Object(object)) => object,
        _ => panic!("not a JSON object: {line:?}"),
    }
}

/// Waits until the agent's state is `state`.
fn wait_for_state(agent: &Agent, state: &AgentState) {
    let since = Instant::now();
    while agent.state() != *state {
        assert!(
            since.elapsed() < WITHIN,
            "state {:?}, not {state:?}",
            agent.state()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Accepts the agent, checks its hello and welcomes it; stats every `stats_interval_ms`.
fn register(memtide: &Memtide, stats_interval_ms: u64) -> Player<std::os::unix::net::UnixStream> {
    let mut player = memtide.accept();
    player
        .play(&[
            expect(json!({"type": "hello", "version": 1, "app": "agent-test", "kind": "heap"})),
            welcome(stats_interval_ms),
            expect(json!({"type": "stats"})),
        ])
        .unwrap();
    player
}

#[test]
fn the_hello_carries_this_process_s_pid_and_the_pool_and_stats_follow_the_welcome() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = memtide.accept();
    player
        .play(&[expect(json!({
            "type": "hello", "version": 1, "app": "agent-test", "kind": "heap",
            "pid": std::process::id(), "pool_bytes": 512 * GRANULE, "min_bytes": 64 * GRANULE,
            "max_bytes": 1024 * GRANULE, "granule_bytes": GRANULE,
        }))])
        .unwrap();
    wait_for_state(&agent, &AgentState::Registering);
    player
        .play(&[
            welcome(60_000),
            expect(
                json!({"type": "stats", "pool_bytes": 512 * GRANULE, "used_bytes": 512 * GRANULE,
                "hits": 10, "misses": 2, "evictions": 0, "dirty_bytes": 0}),
            ),
        ])
        .unwrap();
    wait_for_state(
        &agent,
        &AgentState::Registered {
            tenant: "test".into(),
        },
    );
    agent.stop();
}

#[test]
fn stats_come_again_every_stats_interval() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = register(&memtide, 50);
    let stats = expect(json!({"type": "stats", "pool_bytes": 512 * GRANULE}));
    player.play(&[stats.clone(), stats.clone(), stats]).unwrap();
    agent.stop();
}

/// Accepts the agent, welcomes it and answers the first stats it sends, with the connection
/// (kept open while the test looks at the agent).
fn first_stats(memtide: &Memtide) -> (Map<String, Value>, Player<std::os::unix::net::UnixStream>) {
    let mut player = memtide.accept();
    player
        .play(&[expect(json!({"type": "hello"})), welcome(60_000)])
        .unwrap();
    let stats = next_object(&mut player);
    assert_eq!(stats["type"], "stats", "{stats:?}");
    (stats, player)
}

/// An agent whose stats callback reports `curve`.
fn agent_with_curve(memtide: &Memtide, curve: Vec<CurvePoint>) -> Agent {
    Agent::builder(pool())
        .socket(&memtide.path)
        .on_shrink(|_| Ok(()))
        .on_grow(|_| Ok(()))
        .stats(move || PoolStats {
            hits: 10,
            curve: Some(curve.clone()),
            ..PoolStats::default()
        })
        .start()
        .unwrap()
}

#[test]
fn the_application_s_miss_ratio_curve_is_sent_with_its_stats() {
    let memtide = Memtide::listen();
    let agent = agent_with_curve(
        &memtide,
        vec![
            CurvePoint::new(128 * GRANULE, 0.61),
            CurvePoint::new(256 * GRANULE, 0.4),
            CurvePoint::new(1024 * GRANULE, 0.05),
        ],
    );
    let (stats, _player) = first_stats(&memtide);
    assert_eq!(
        stats["curve"],
        json!([
            [128 * GRANULE, 0.61],
            [256 * GRANULE, 0.4],
            [1024 * GRANULE, 0.05]
        ])
    );
    assert_eq!(stats["hits"], 10);
    assert!(agent.last_error().is_none());
    agent.stop();
}

#[test]
fn a_curve_that_breaks_the_rules_is_left_out_and_recorded_and_the_stats_are_sent() {
    let memtide = Memtide::listen();
    let agent = agent_with_curve(
        &memtide,
        vec![
            CurvePoint::new(128 * GRANULE, 0.4),
            CurvePoint::new(256 * GRANULE, 0.5),
        ],
    );
    let (stats, _player) = first_stats(&memtide);
    assert!(!stats.contains_key("curve"), "{stats:?}");
    assert_eq!(stats["hits"], 10);
    assert!(
        matches!(agent.last_error(), Some(AgentError::Curve(ref e)) if e.code == ErrorCode::BadField),
        "{:?}",
        agent.last_error()
    );
    assert_eq!(
        agent.last_error().unwrap().to_string(),
        "the application's miss-ratio curve is not sent: bad_field: stats.curve[1][1] = 0.5: above the previous point's 0.4: an LRU pool never misses more when larger"
    );
    agent.stop();
}

/// An agent whose stats callback reports `durability`.
fn agent_with_durability(memtide: &Memtide, durability: Durability) -> Agent {
    Agent::builder(pool())
        .socket(&memtide.path)
        .on_shrink(|_| Ok(()))
        .on_grow(|_| Ok(()))
        .stats(move || PoolStats {
            hits: 10,
            durability: Some(durability),
            ..PoolStats::default()
        })
        .start()
        .unwrap()
}

#[test]
fn the_application_s_durability_figures_are_sent_with_its_stats() {
    let memtide = Memtide::listen();
    let agent = agent_with_durability(
        &memtide,
        Durability {
            flush_log_at_trx_commit: Some(1),
            sync_binlog: Some(1),
            log_buffer_bytes: Some(16 << 20),
            binlog_commits: Some(500),
            ..Durability::default()
        },
    );
    let (stats, _player) = first_stats(&memtide);
    assert_eq!(
        stats["durability"],
        json!({"flush_log_at_trx_commit": 1, "sync_binlog": 1,
               "log_buffer_bytes": 16 << 20, "binlog_commits": 500})
    );
    assert!(agent.last_error().is_none());
    agent.stop();
}

#[test]
fn durability_that_breaks_the_rules_is_left_out_and_recorded_and_the_stats_are_sent() {
    let memtide = Memtide::listen();
    let agent = agent_with_durability(
        &memtide,
        Durability {
            write_io_threads: Some(0),
            ..Durability::default()
        },
    );
    let (stats, _player) = first_stats(&memtide);
    assert!(!stats.contains_key("durability"), "{stats:?}");
    assert_eq!(stats["hits"], 10);
    assert_eq!(
        agent.last_error().unwrap().to_string(),
        "the application's durability figures are not sent: bad_field: stats.durability.write_io_threads = 0 is not an integer in [1, 64]"
    );
    agent.stop();
}

#[test]
fn durability_counters_that_fall_back_after_a_server_restart_are_sent_as_they_are() {
    let memtide = Memtide::listen();
    let calls = Arc::new(AtomicU64::new(0));
    let agent = Agent::builder(pool())
        .socket(&memtide.path)
        .on_shrink(|_| Ok(()))
        .on_grow(|_| Ok(()))
        .stats(move || PoolStats {
            durability: Some(Durability {
                data_fsyncs: Some(if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    1000
                } else {
                    5
                }),
                ..Durability::default()
            }),
            ..PoolStats::default()
        })
        .start()
        .unwrap();
    let mut player = memtide.accept();
    player
        .play(&[
            expect(json!({"type": "hello"})),
            welcome(50),
            expect(json!({"type": "stats", "durability": {"data_fsyncs": 1000}})),
            expect(json!({"type": "stats", "durability": {"data_fsyncs": 5}})),
        ])
        .unwrap();
    assert!(agent.last_error().is_none());
    agent.stop();
}

#[test]
fn a_dropped_connection_brings_the_agent_back_with_a_new_hello() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    drop(register(&memtide, 60_000));
    let mut again = memtide.accept();
    again
        .play(&[expect(
            json!({"type": "hello", "pool_bytes": 512 * GRANULE}),
        )])
        .unwrap();
    assert!(
        matches!(agent.last_error(), Some(AgentError::Closed { .. })),
        "{:?}",
        agent.last_error()
    );
    agent.stop();
}

#[test]
fn a_bye_from_memtide_closes_the_connection_and_the_agent_comes_back() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            send(json!({"type": "bye", "reason": "restarting"})),
            Step::ExpectClosed,
        ])
        .unwrap();
    let mut again = memtide.accept();
    again
        .play(&[expect(json!({"type": "hello"})), welcome(60_000)])
        .unwrap();
    match agent.last_error() {
        Some(error @ AgentError::Bye { .. }) => {
            assert_eq!(error.to_string(), "memtide said bye (restarting)")
        }
        other => panic!("last error {other:?}"),
    }
    agent.stop();
}

#[test]
fn the_hello_after_a_reconnect_carries_the_pool_s_new_size() {
    let memtide = Memtide::listen();
    let (builder, size) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            target(1, 128 * GRANULE),
            expect(json!({"type": "progress", "seq": 1, "status": "done", "pool_bytes": 128 * GRANULE})),
        ])
        .unwrap();
    assert_eq!(size.load(Ordering::Relaxed), 128 * GRANULE);
    assert_eq!(agent.pool_bytes(), 128 * GRANULE);
    drop(player);
    memtide
        .accept()
        .play(&[expect(
            json!({"type": "hello", "pool_bytes": 128 * GRANULE}),
        )])
        .unwrap();
    agent.stop();
}

#[test]
fn stop_says_bye_and_closes_the_connection() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = register(&memtide, 60_000);
    agent.stop();
    player
        .play(&[expect(json!({"type": "bye"})), Step::ExpectClosed])
        .unwrap();
}

#[test]
fn without_memtide_the_agent_records_why_and_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody.sock");
    let (builder, _) = common::agent(pool(), App::Comply, &socket);
    let agent = builder.start().unwrap();
    wait_for_state(&agent, &AgentState::WaitingToReconnect);
    let error = agent.last_error().expect("a connection error").to_string();
    assert!(
        error.starts_with(&format!(
            "cannot connect to memtide at {}: ",
            socket.display()
        )),
        "{error}"
    );
    let since = Instant::now();
    agent.stop();
    assert!(
        since.elapsed() < Duration::from_secs(2),
        "stop took {:?}",
        since.elapsed()
    );
}

/// A pool whose resizes each wait for a go from the test.
fn gated_agent(memtide: &Memtide) -> (Agent, mpsc::Sender<()>, Arc<AtomicUsize>) {
    let (go, gate) = mpsc::channel::<()>();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let agent = Agent::builder(pool())
        .socket(&memtide.path)
        .on_shrink(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            gate.recv().map_err(|_| Refusal::new("the test ended"))
        })
        .on_grow(|_| Err(Refusal::new("not in this test")))
        .stats(PoolStats::default)
        .start()
        .unwrap();
    (agent, go, calls)
}

#[test]
fn a_slow_resize_is_reported_working_and_a_newer_target_supersedes_it() {
    let memtide = Memtide::listen();
    let (agent, go, calls) = gated_agent(&memtide);
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            target(1, 256 * GRANULE),
            expect(json!({"type": "progress", "seq": 1, "status": "working", "pool_bytes": 512 * GRANULE})),
            target(2, 128 * GRANULE),
            expect(json!({"type": "progress", "seq": 2, "status": "working"})),
        ])
        .unwrap();
    go.send(()).unwrap();
    go.send(()).unwrap();
    // Nothing answers target 1 once target 2 came: the next answer is target 2's.
    loop {
        let line = next_object(&mut player);
        if line["type"] == "progress" && line["status"] == "working" {
            continue;
        }
        assert_eq!(
            Value::Object(line),
            json!({"type": "progress", "seq": 2, "pool_bytes": 128 * GRANULE, "status": "done"})
        );
        break;
    }
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    agent.stop();
}

#[test]
fn an_invalid_target_is_answered_bad_field_and_the_resize_in_progress_goes_on() {
    let memtide = Memtide::listen();
    let (agent, go, calls) = gated_agent(&memtide);
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            target(1, 256 * GRANULE),
            expect(json!({"type": "progress", "seq": 1, "status": "working"})),
            target(2, 256 * GRANULE + 1),
            expect(json!({"type": "error", "code": "bad_field", "fatal": false})),
        ])
        .unwrap();
    go.send(()).unwrap();
    player
        .play(&[
            expect(json!({"type": "progress", "seq": 1, "status": "done", "pool_bytes": 256 * GRANULE})),
            // The invalid target 2 did not count: 2 is still above the last valid seq.
            target(2, 128 * GRANULE),
        ])
        .unwrap();
    go.send(()).unwrap();
    player
        .play(&[expect(
            json!({"type": "progress", "seq": 2, "status": "done"}),
        )])
        .unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    agent.stop();
}

#[test]
fn without_a_welcome_the_agent_closes_and_comes_back() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder
        .welcome_timeout(Duration::from_millis(200))
        .start()
        .unwrap();
    memtide
        .accept()
        .play(&[expect(json!({"type": "hello"})), Step::ExpectClosed])
        .unwrap();
    let error = agent.last_error().expect("no welcome recorded").to_string();
    assert!(
        error.ends_with("sent no welcome within 200ms of the hello"),
        "{error}"
    );
    memtide
        .accept()
        .play(&[expect(json!({"type": "hello"}))])
        .unwrap();
    agent.stop();
}

#[test]
fn a_target_at_the_pool_s_size_is_done_without_a_callback() {
    let memtide = Memtide::listen();
    let (agent, _go, calls) = gated_agent(&memtide);
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            target(1, 512 * GRANULE),
            expect(json!({"type": "progress", "seq": 1, "status": "done", "pool_bytes": 512 * GRANULE})),
        ])
        .unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    agent.stop();
}

#[test]
fn a_refusal_that_moved_the_pool_reports_where_it_is_and_is_recorded() {
    let memtide = Memtide::listen();
    let agent = Agent::builder(pool())
        .socket(&memtide.path)
        .on_shrink(|_| Err(Refusal::new("pages pinned by running queries").at(384 * GRANULE)))
        .on_grow(|_| Ok(()))
        .stats(PoolStats::default)
        .start()
        .unwrap();
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            target(1, 256 * GRANULE),
            expect(json!({"type": "progress", "seq": 1, "status": "failed",
                "pool_bytes": 384 * GRANULE, "reason": "pages pinned by running queries"})),
        ])
        .unwrap();
    assert_eq!(agent.pool_bytes(), 384 * GRANULE);
    assert_eq!(
        agent.last_error().unwrap().to_string(),
        "the application did not resize its pool to 268435456 bytes (target 1): pages pinned by running queries"
    );
    agent.stop();
}

#[test]
fn a_panicking_callback_is_answered_failed_and_the_session_goes_on() {
    let memtide = Memtide::listen();
    let size = Arc::new(AtomicU64::new(512 * GRANULE));
    let grown = size.clone();
    let agent = Agent::builder(pool())
        .socket(&memtide.path)
        .on_shrink(|_| panic!("the shrink callback broke"))
        .on_grow(move |to| {
            grown.store(to, Ordering::Relaxed);
            Ok(())
        })
        .stats(PoolStats::default)
        .start()
        .unwrap();
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            target(1, 256 * GRANULE),
            expect(json!({"type": "progress", "seq": 1, "status": "failed", "reason": "the shrink callback panicked"})),
            target(2, 768 * GRANULE),
            expect(json!({"type": "progress", "seq": 2, "status": "done", "pool_bytes": 768 * GRANULE})),
        ])
        .unwrap();
    assert_eq!(size.load(Ordering::Relaxed), 768 * GRANULE);
    agent.stop();
}

#[test]
fn a_line_over_65536_bytes_is_answered_too_long_and_the_session_goes_on() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = register(&memtide, 60_000);
    let long = format!(
        "{{\"type\":\"bye\",\"reason\":\"{}\"}}",
        "z".repeat(MAX_LINE_BYTES)
    );
    player
        .play(&[
            Step::Send(long),
            expect(json!({"type": "error", "code": "too_long", "fatal": false})),
            target(1, 256 * GRANULE),
            expect(json!({"type": "progress", "seq": 1, "status": "done"})),
        ])
        .unwrap();
    assert!(
        matches!(agent.last_error(), Some(AgentError::Unreadable(ref e)) if e.code == ErrorCode::TooLong),
        "{:?}",
        agent.last_error()
    );
    agent.stop();
}

#[test]
fn a_target_before_the_welcome_is_not_registered() {
    let memtide = Memtide::listen();
    let (builder, size) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = memtide.accept();
    player
        .play(&[
            expect(json!({"type": "hello"})),
            target(1, 256 * GRANULE),
            expect(json!({"type": "error", "code": "not_registered", "fatal": false})),
        ])
        .unwrap();
    assert_eq!(size.load(Ordering::Relaxed), 512 * GRANULE);
    agent.stop();
}

#[test]
fn a_target_whose_seq_does_not_grow_is_a_bad_field() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            target(5, 256 * GRANULE),
            expect(json!({"type": "progress", "seq": 5, "status": "done"})),
            target(5, 128 * GRANULE),
            expect(json!({"type": "error", "code": "bad_field", "fatal": false,
                "message": "target.seq = 5 is not above the last target's seq 5"})),
        ])
        .unwrap();
    assert_eq!(agent.pool_bytes(), 256 * GRANULE);
    agent.stop();
}

#[test]
fn a_second_welcome_is_already_registered() {
    let memtide = Memtide::listen();
    let (builder, _) = common::agent(pool(), App::Comply, &memtide.path);
    let agent = builder.start().unwrap();
    let mut player = register(&memtide, 60_000);
    player
        .play(&[
            welcome(60_000),
            expect(json!({"type": "error", "code": "already_registered", "fatal": false})),
        ])
        .unwrap();
    agent.stop();
}

#[test]
fn start_refuses_a_pool_memtide_would_refuse_and_a_missing_callback() {
    let bad = PoolInfo {
        min_bytes: 2048 * GRANULE,
        ..pool()
    };
    let error = Agent::builder(bad)
        .on_shrink(|_| Ok(()))
        .on_grow(|_| Ok(()))
        .stats(PoolStats::default)
        .start()
        .err()
        .expect("an invalid pool");
    assert_eq!(
        error.to_string(),
        "the pool cannot be registered: bad_field: hello.min_bytes = 2147483648 > max_bytes = 1073741824"
    );
    let error = Agent::builder(pool())
        .on_shrink(|_| Ok(()))
        .stats(PoolStats::default)
        .start()
        .err()
        .expect("no grow callback");
    assert!(matches!(error, StartError::Missing("grow")), "{error}");
}
