//! The agent finds the socket in MEMTIDE_BALLOON_SOCKET when the application names none (a test binary of its own, as it sets the environment).

use std::os::unix::net::UnixListener;
use std::time::Duration;

use memtide_balloon::agent::{Agent, PoolStats, SOCKET_ENV};
use memtide_balloon::line::{Line, LineReader};
use memtide_balloon::protocol::{AgentMessage, PoolInfo, PoolKind};

#[test]
fn the_socket_comes_from_the_environment_when_the_application_names_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("from-env.sock");
    let listener = UnixListener::bind(&path).unwrap();
    std::env::set_var(SOCKET_ENV, &path);
    let agent = Agent::builder(PoolInfo {
        app: "env-test".into(),
        kind: PoolKind::Other,
        pool_bytes: 4096,
        min_bytes: 0,
        max_bytes: 8192,
        granule_bytes: 4096,
    })
    .on_shrink(|_| Ok(()))
    .on_grow(|_| Ok(()))
    .stats(PoolStats::default)
    .start()
    .unwrap();
    assert_eq!(agent.socket(), path);
    let (stream, _) = listener.accept().unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let Some(Line::Complete(line)) = LineReader::new(stream).read_line().unwrap() else {
        panic!("no hello");
    };
    assert!(
        matches!(AgentMessage::decode(&line), Ok(AgentMessage::Hello(hello)) if hello.pool.app == "env-test")
    );
    agent.stop();
}
