//! Encoding a message as one line of JSON, its fields in the order of docs/balloon-protocol.md and optional fields left out when absent.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::{
    AgentMessage, Bye, Durability, ErrorMessage, MemtideMessage, Progress, Stats, PROTOCOL_VERSION,
};

pub(super) fn to_line(message: &impl Serialize) -> String {
    // The messages hold only strings, integers, booleans and finite numbers (a curve's miss
    // ratios) under string keys: serde_json cannot fail on them.
    serde_json::to_string(message).expect("a protocol message always encodes")
}

impl Serialize for AgentMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            AgentMessage::Hello(hello) => {
                let pool = &hello.pool;
                map.serialize_entry("type", "hello")?;
                map.serialize_entry("version", &PROTOCOL_VERSION)?;
                map.serialize_entry("app", &pool.app)?;
                map.serialize_entry("kind", pool.kind.as_str())?;
                map.serialize_entry("pid", &hello.pid)?;
                map.serialize_entry("pool_bytes", &pool.pool_bytes)?;
                map.serialize_entry("min_bytes", &pool.min_bytes)?;
                map.serialize_entry("max_bytes", &pool.max_bytes)?;
                map.serialize_entry("granule_bytes", &pool.granule_bytes)?;
            }
            AgentMessage::Progress(progress) => progress_entries(&mut map, progress)?,
            AgentMessage::Stats(stats) => stats_entries(&mut map, stats)?,
            AgentMessage::Bye(bye) => bye_entries(&mut map, bye)?,
            AgentMessage::Error(error) => error_entries(&mut map, error)?,
        }
        map.end()
    }
}

impl Serialize for MemtideMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            MemtideMessage::Welcome(welcome) => {
                map.serialize_entry("type", "welcome")?;
                map.serialize_entry("version", &PROTOCOL_VERSION)?;
                map.serialize_entry("tenant", &welcome.tenant)?;
                map.serialize_entry("stats_interval_ms", &welcome.stats_interval_ms)?;
                map.serialize_entry("dead_after_ms", &welcome.dead_after_ms)?;
            }
            MemtideMessage::Target(target) => {
                map.serialize_entry("type", "target")?;
                map.serialize_entry("seq", &target.seq)?;
                map.serialize_entry("pool_bytes", &target.pool_bytes)?;
                map.serialize_entry("deadline_ms", &target.deadline_ms)?;
            }
            MemtideMessage::Bye(bye) => bye_entries(&mut map, bye)?,
            MemtideMessage::Error(error) => error_entries(&mut map, error)?,
        }
        map.end()
    }
}

fn progress_entries<M: SerializeMap>(map: &mut M, progress: &Progress) -> Result<(), M::Error> {
    map.serialize_entry("type", "progress")?;
    map.serialize_entry("seq", &progress.seq)?;
    map.serialize_entry("pool_bytes", &progress.pool_bytes)?;
    map.serialize_entry("status", progress.status.as_str())?;
    if let Some(reason) = &progress.reason {
        map.serialize_entry("reason", reason)?;
    }
    Ok(())
}

fn stats_entries<M: SerializeMap>(map: &mut M, stats: &Stats) -> Result<(), M::Error> {
    map.serialize_entry("type", "stats")?;
    map.serialize_entry("pool_bytes", &stats.pool_bytes)?;
    map.serialize_entry("used_bytes", &stats.used_bytes)?;
    map.serialize_entry("hits", &stats.hits)?;
    map.serialize_entry("misses", &stats.misses)?;
    map.serialize_entry("evictions", &stats.evictions)?;
    map.serialize_entry("dirty_bytes", &stats.dirty_bytes)?;
    if let Some(durability) = &stats.durability {
        map.serialize_entry("durability", &DurabilityFields(durability))?;
    }
    if let Some(curve) = &stats.curve {
        let pairs: Vec<(u64, f64)> = curve
            .iter()
            .map(|point| (point.pool_bytes, point.miss_ratio()))
            .collect();
        map.serialize_entry("curve", &pairs)?;
    }
    Ok(())
}

/// `stats.durability`: the fields present, in the order of the doc.
struct DurabilityFields<'a>(&'a Durability);

impl Serialize for DurabilityFields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (value, (name, ..)) in self.0.values().into_iter().zip(Durability::FIELDS) {
            if let Some(value) = value {
                map.serialize_entry(name, &value)?;
            }
        }
        map.end()
    }
}

fn bye_entries<M: SerializeMap>(map: &mut M, bye: &Bye) -> Result<(), M::Error> {
    map.serialize_entry("type", "bye")?;
    if let Some(reason) = &bye.reason {
        map.serialize_entry("reason", reason)?;
    }
    Ok(())
}

fn error_entries<M: SerializeMap>(map: &mut M, error: &ErrorMessage) -> Result<(), M::Error> {
    map.serialize_entry("type", "error")?;
    map.serialize_entry("code", error.code.as_str())?;
    map.serialize_entry("message", &error.message)?;
    map.serialize_entry("fatal", &error.fatal)
}

#[cfg(test)]
mod tests {
    use super::super::{
        CurvePoint, ErrorCode, Hello, PoolInfo, PoolKind, ProgressStatus, Target, Welcome,
    };
    use super::*;

    /// The doc's examples, built from the types, encode to the doc's text byte for byte.
    #[test]
    fn messages_built_in_code_encode_as_the_doc_writes_them() {
        let agent = [
            (
                AgentMessage::Hello(Hello {
                    pid: 4242,
                    pool: PoolInfo {
                        app: "mariadb".into(),
                        kind: PoolKind::BufferPool,
                        pool_bytes: 8589934592,
                        min_bytes: 1073741824,
                        max_bytes: 8589934592,
                        granule_bytes: 1048576,
                    },
                }),
                r#"{"type":"hello","version":1,"app":"mariadb","kind":"buffer_pool","pid":4242,"pool_bytes":8589934592,"min_bytes":1073741824,"max_bytes":8589934592,"granule_bytes":1048576}"#,
            ),
            (
                AgentMessage::Progress(Progress {
                    seq: 1,
                    pool_bytes: 7516192768,
                    status: ProgressStatus::Failed,
                    reason: Some("pages pinned by running queries".into()),
                }),
                r#"{"type":"progress","seq":1,"pool_bytes":7516192768,"status":"failed","reason":"pages pinned by running queries"}"#,
            ),
            (
                AgentMessage::Progress(Progress {
                    seq: 1,
                    pool_bytes: 6442450944,
                    status: ProgressStatus::Done,
                    reason: None,
                }),
                r#"{"type":"progress","seq":1,"pool_bytes":6442450944,"status":"done"}"#,
            ),
            (
                AgentMessage::Stats(Stats {
                    pool_bytes: 6442450944,
                    used_bytes: 6000000000,
                    hits: 912345,
                    misses: 2345,
                    evictions: 1200,
                    dirty_bytes: 52428800,
                    durability: None,
                    curve: None,
                }),
                r#"{"type":"stats","pool_bytes":6442450944,"used_bytes":6000000000,"hits":912345,"misses":2345,"evictions":1200,"dirty_bytes":52428800}"#,
            ),
            (
                AgentMessage::Bye(Bye {
                    reason: Some("shutting down".into()),
                }),
                r#"{"type":"bye","reason":"shutting down"}"#,
            ),
            (AgentMessage::Bye(Bye::default()), r#"{"type":"bye"}"#),
            (
                AgentMessage::Error(ErrorMessage {
                    code: ErrorCode::BadField,
                    message: "hello.min_bytes = 9000000000 > max_bytes = 8589934592".into(),
                    fatal: false,
                }),
                r#"{"type":"error","code":"bad_field","message":"hello.min_bytes = 9000000000 > max_bytes = 8589934592","fatal":false}"#,
            ),
        ];
        for (message, line) in agent {
            assert_eq!(message.encode(), line);
            assert_eq!(AgentMessage::decode(line.as_bytes()), Ok(message));
        }
        let memtide = [
            (
                MemtideMessage::Welcome(Welcome {
                    tenant: "db".into(),
                    stats_interval_ms: 1000,
                    dead_after_ms: 5000,
                }),
                r#"{"type":"welcome","version":1,"tenant":"db","stats_interval_ms":1000,"dead_after_ms":5000}"#,
            ),
            (
                MemtideMessage::Target(Target {
                    seq: 1,
                    pool_bytes: 6442450944,
                    deadline_ms: 30000,
                }),
                r#"{"type":"target","seq":1,"pool_bytes":6442450944,"deadline_ms":30000}"#,
            ),
        ];
        for (message, line) in memtide {
            assert_eq!(message.encode(), line);
            assert_eq!(MemtideMessage::decode(line.as_bytes()), Ok(message));
        }
    }

    fn stats_with(curve: Option<Vec<CurvePoint>>) -> AgentMessage {
        AgentMessage::Stats(Stats {
            pool_bytes: 1073741824,
            used_bytes: 1000000000,
            hits: 912345,
            misses: 2345,
            evictions: 1200,
            dirty_bytes: 0,
            durability: None,
            curve,
        })
    }

    /// The doc's example of a stats with a curve, built from the types.
    #[test]
    fn a_curve_is_written_last_as_size_and_ratio_pairs_and_reads_back() {
        let stats = stats_with(Some(vec![
            CurvePoint::new(134217728, 0.61),
            CurvePoint::new(268435456, 0.4),
            CurvePoint::new(1073741824, 0.05),
        ]));
        let line = r#"{"type":"stats","pool_bytes":1073741824,"used_bytes":1000000000,"hits":912345,"misses":2345,"evictions":1200,"dirty_bytes":0,"curve":[[134217728,0.61],[268435456,0.4],[1073741824,0.05]]}"#;
        assert_eq!(stats.encode(), line);
        assert_eq!(AgentMessage::decode(line.as_bytes()), Ok(stats));
    }

    #[test]
    fn stats_without_a_curve_have_no_curve_field() {
        assert!(!stats_with(None).encode().contains("curve"));
    }

    #[test]
    fn a_ratio_is_rounded_to_a_part_per_million_and_written_as_a_number() {
        let stats = stats_with(Some(vec![
            CurvePoint::new(4096, 1.0),
            CurvePoint::new(8192, 0.123_456_7),
            CurvePoint::new(12288, 0.0),
        ]));
        let AgentMessage::Stats(Stats {
            curve: Some(curve), ..
        }) = &stats
        else {
            unreachable!("built with a curve")
        };
        assert_eq!(curve[1].miss_ppm, 123_457);
        let line = stats.encode();
        assert!(
            line.ends_with(r#""curve":[[4096,1.0],[8192,0.123457],[12288,0.0]]}"#),
            "{line}"
        );
        assert_eq!(AgentMessage::decode(line.as_bytes()), Ok(stats));
    }

    /// The doc's example of a stats with durability figures, built from the types.
    #[test]
    fn durability_is_written_before_the_curve_its_missing_fields_left_out() {
        let AgentMessage::Stats(stats) = stats_with(Some(vec![CurvePoint::new(4096, 0.5)])) else {
            unreachable!("built as a stats")
        };
        let stats = AgentMessage::Stats(Stats {
            durability: Some(Durability {
                flush_log_at_trx_commit: Some(1),
                sync_binlog: Some(1),
                log_buffer_bytes: Some(16777216),
                write_io_threads: Some(4),
                data_fsyncs: Some(50612),
                log_fsyncs: None,
                log_waits: Some(0),
                binlog_commits: Some(50000),
                binlog_group_commits: Some(41000),
            }),
            ..stats
        });
        let line = stats.encode();
        assert!(
            line.ends_with(r#","dirty_bytes":0,"durability":{"flush_log_at_trx_commit":1,"sync_binlog":1,"log_buffer_bytes":16777216,"write_io_threads":4,"data_fsyncs":50612,"log_waits":0,"binlog_commits":50000,"binlog_group_commits":41000},"curve":[[4096,0.5]]}"#),
            "{line}"
        );
        assert_eq!(AgentMessage::decode(line.as_bytes()), Ok(stats));
    }

    #[test]
    fn stats_without_durability_have_no_durability_field() {
        assert!(!stats_with(None).encode().contains("durability"));
    }

    #[test]
    fn strings_are_escaped_so_the_line_stays_one_line() {
        let bye = AgentMessage::Bye(Bye {
            reason: Some("two\nlines \"quoted\"".into()),
        });
        let line = bye.encode();
        assert!(!line.contains('\n'));
        assert_eq!(AgentMessage::decode(line.as_bytes()), Ok(bye));
    }
}
