//! The files a run leaves behind: summary.json, timeline.csv and report.html, plus the short text summary for stdout.
//!
//! [`Outputs`] takes a run's ticks as they come: each tick's rows are written to the timeline at
//! once and the tick is added to the summary's sums and the charts' bounded series, then
//! dropped, so memory does not grow with the run's length. Nothing looks finished before the
//! run is: the files are written under names ending in `.partial` (the timeline as the run goes,
//! so a long run's progress can be read), and renamed to their own names only when all three
//! are complete. A run that fails removes its partial files (and the directories it made); a
//! run killed leaves `timeline.csv.partial` and nothing that passes for its outputs. The outputs
//! of an earlier run in the same directory stay as they were until the three renames.

pub mod headline;
pub mod index;
pub mod report;
pub mod summary;
pub mod text;
pub mod timeline;

use crate::record::{Run, TickRecord, Ticks};
use report::Charts;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use summary::{Accumulator, Summary};
use timeline::TimelineWriter;

/// The three outputs, in the order they are put in place.
const FILES: [&str; 3] = ["timeline.csv", "summary.json", "report.html"];

/// An output directory the outputs could not be written to, found before a run.
#[derive(Debug, thiserror::Error)]
#[error("--out {path}: {why}")]
pub struct OutDirError {
    pub path: String,
    pub why: String,
}

/// Checks, before a run and without changing anything, that `dir` can take the outputs: it is
/// a directory, or does not exist yet under a directory that is not read-only.
pub fn check_dir(dir: &Path) -> Result<(), OutDirError> {
    let err = |why: String| OutDirError {
        path: dir.display().to_string(),
        why,
    };
    if dir.as_os_str().is_empty() {
        return Err(err("an empty path".to_string()));
    }
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if !m.is_dir() => {
                return Err(err(if at == dir {
                    "not a directory".to_string()
                } else {
                    format!("{} is not a directory", at.display())
                }))
            }
            Ok(m) if m.permissions().readonly() => {
                return Err(err(format!("{} is read-only", at.display())))
            }
            Ok(_) => return Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                match at.parent().filter(|p| !p.as_os_str().is_empty()) {
                    Some(parent) => at = parent,
                    // A relative path whose first part does not exist: under the current
                    // directory.
                    None => return Ok(()),
                }
            }
            Err(e) => return Err(err(format!("{}: {e}", at.display()))),
        }
    }
}

/// A run's outputs in the making.
pub struct Outputs {
    files: Partial,
    timeline: TimelineWriter<BufWriter<File>>,
    summary: Accumulator,
    charts: Charts,
}

/// The partial files in `dir`: removed when dropped before they are put in place, with the
/// directories made for them.
struct Partial {
    dir: PathBuf,
    /// Directories made for the outputs, outermost first.
    made: Vec<PathBuf>,
    /// Put in place: nothing to clean up.
    done: bool,
}

impl Partial {
    /// Where `name` is written until it is complete.
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.partial"))
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for name in FILES {
            let _ = std::fs::remove_file(self.path(name));
        }
        // Innermost first; a directory something else now holds stays.
        for d in self.made.iter().rev() {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
        }
    }
}

/// An I/O error that names the file it concerns.
fn at(path: &Path) -> impl Fn(std::io::Error) -> std::io::Error + '_ {
    move |e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl Outputs {
    /// Makes `dir` (and its missing parents) and starts `run`'s timeline in it.
    pub fn create(dir: &Path, run: &Run) -> std::io::Result<Outputs> {
        let mut made: Vec<PathBuf> = dir
            .ancestors()
            .filter(|d| !d.as_os_str().is_empty())
            .take_while(|d| !d.exists())
            .map(Path::to_path_buf)
            .collect();
        made.reverse();
        std::fs::create_dir_all(dir).map_err(at(dir))?;
        let files = Partial {
            dir: dir.to_path_buf(),
            made,
            done: false,
        };
        let path = files.path(FILES[0]);
        let timeline = File::create(&path)
            .map(|f| BufWriter::with_capacity(1 << 16, f))
            .and_then(|f| TimelineWriter::new(f, &run.tenants))
            .map_err(at(&path))?;
        Ok(Outputs {
            files,
            timeline,
            summary: Accumulator::new(run),
            charts: Charts::new(run),
        })
    }

    /// Writes the summary and the report of `run` (the run these ticks came from, with its
    /// events, refusals and baseline), puts the three files in place and returns the summary.
    pub fn finish(self, run: &Run) -> std::io::Result<Summary> {
        let Outputs {
            mut files,
            timeline,
            summary,
            charts,
        } = self;
        let path = files.path(FILES[0]);
        timeline
            .finish()
            .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
            .map_err(at(&path))?;
        let figures = summary.finish(run);
        let path = files.path(FILES[1]);
        summary::write_summary(&path, &figures).map_err(at(&path))?;
        let path = files.path(FILES[2]);
        report::write_report(&path, run, &figures, &charts).map_err(at(&path))?;
        for name in FILES {
            let to = files.dir.join(name);
            std::fs::rename(files.path(name), &to).map_err(at(&to))?;
        }
        files.done = true;
        Ok(figures)
    }
}

impl Ticks for Outputs {
    fn tick(&mut self, tick: TickRecord) -> std::io::Result<()> {
        if let Err(e) = self.timeline.add(&tick) {
            return Err(at(&self.files.path(FILES[0]))(e));
        }
        self.summary.add(&tick);
        self.charts.add(&tick);
        Ok(())
    }
}

pub(crate) use memtide_runner::columns::round3;

#[cfg(test)]
pub(crate) mod test_record {
    //! A small hand-made record shared by the output tests.

    use crate::record::*;
    use crate::settings::{EstimatorKind, EstimatorSettings, PolicySettings};
    use memtide_controller::ControllerConfig;
    use memtide_model::{
        BalloonLever, BalloonNote, Bytes, EstimateNote, HostSwapLever, HostSwapNote, MechanismNote,
        Mechanisms, Pages, Reason, ReclamationState, TaxRate, TenantId,
    };

    fn mib(m: f64) -> Bytes {
        Bytes((m * (1u64 << 20) as f64) as u64)
    }

    /// The reason every hand-made row carries: a balloon inflating toward a lower target.
    pub(crate) fn reason() -> Reason {
        Reason {
            disk: None,
            mechanism: MechanismNote {
                balloon: Some(BalloonNote {
                    size: Pages::from_mib(156),
                    target: Some(Pages::from_mib(166)),
                    limit: Some(Pages::from_mib(200)),
                    stalled: false,
                    beyond: Pages::ZERO,
                }),
                host_swap: Some(HostSwapNote {
                    wanted: Pages::ZERO,
                    out: Pages::ZERO,
                    room: None,
                    blocked: false,
                }),
                ..MechanismNote::new(
                    ReclamationState::Soft,
                    Pages::from_mib(100),
                    Pages::from_mib(90),
                )
            },
            estimate: EstimateNote::Committed {
                estimate: Pages::from_mib(105),
                known: true,
            },
            cache: None,
        }
    }

    fn row(tenant: u32, allocated: f64, ws: f64, throughput: f64) -> TenantRow {
        TenantRow {
            tenant: TenantId(tenant),
            allocated: mib(allocated),
            target: mib(allocated + 10.0),
            active_estimate: mib(ws + 5.0),
            working_set: Some(mib(ws)),
            throughput: Some(throughput),
            latency_ms: Some(if throughput > 0.0 { 2.0 } else { 0.0 }),
            swap_ins: Some(1),
            refaults: Some(2),
            blocked: false,
            anon: None,
            file: None,
            swapped: None,
            balloon: Some(BalloonLever {
                memory: Pages::from_mib(256),
                size: mib(256.0 - allocated).to_pages_floor(),
                driver: None,
                free_unbacked: false,
            }),
            host_swap: Some(HostSwapLever {
                swapped: Pages::ZERO,
                swap_ins: Some(0),
                room: None,
            }),
            sharing: None,
            limit: None,
            disk: None,
            durability: None,
            mechanisms: Mechanisms::new(),
            reason: reason(),
        }
    }

    /// Four ticks; tenant "a" (id 0) runs throughout, "b, <web>" (id 1) from tick 2, "c"
    /// (id 2) was refused. States: high, soft, soft, high.
    pub(crate) fn record() -> RunRecord {
        let meta = |id: u32, name: &str| TenantMeta {
            id: TenantId(id),
            name: name.to_string(),
            estimator: "sampling".to_string(),
            min_mb: 0.0,
            max_mb: 256.0,
            shares: 1000,
            balloon_driver: true,
            estimator_settings: EstimatorSettings {
                cap_at_estimate: false,
                kind: EstimatorKind::Sampling {
                    sample_pages: 100,
                    period_s: 30.0,
                    slow_gain: 0.15,
                    fast_gain: 0.7,
                    headroom: 0.5,
                },
            },
        };
        let states = [
            ReclamationState::High,
            ReclamationState::Soft,
            ReclamationState::Soft,
            ReclamationState::High,
        ];
        // a: allocated 100, 150, 100, 100 against ws 100 -> in [0.9, 1.3] x ws except tick 1.
        let a = [
            (100.0, 100.0),
            (150.0, 100.0),
            (100.0, 100.0),
            (100.0, 100.0),
        ];
        let ticks = (0..4)
            .map(|i| {
                let mut rows = vec![row(0, a[i].0, a[i].1, if i == 0 { 0.0 } else { 100.0 })];
                if i >= 2 {
                    rows.push(row(1, 50.0, 100.0, 50.0));
                }
                TickRecord {
                    time_s: i as f64,
                    state: states[i],
                    machine: mib(512.0),
                    free: mib(10.0 * (i as f64 + 1.0)),
                    budget: mib(300.0),
                    host_swap_total: Bytes::ZERO,
                    host_swap_used: Bytes::ZERO,
                    pressure: None,
                    sharing: None,
                    scan_rate: None,
                    rows,
                    remapping: None,
                }
            })
            .collect();
        let run = Run {
            scenario: "hand-made".to_string(),
            description: "a <small> & simple record".to_string(),
            variant: Some("v1".to_string()),
            seed: 3,
            tick_s: 1.0,
            duration_s: 4.0,
            machine_mb: 512.0,
            tenants: vec![meta(0, "a"), meta(1, "b, <web>"), meta(2, "c")],
            policy: PolicySettings::of(&ControllerConfig {
                tax_rate: TaxRate::new(0.5).unwrap(),
                ..ControllerConfig::default()
            }),
            refusals: vec![Refusal {
                time_s: 1.0,
                tenant: "c".to_string(),
                reason: "min exceeds unreserved memory".to_string(),
            }],
            events: vec![EventRecord {
                time_s: 2.0,
                description: "tax rate -> 0.75".to_string(),
            }],
            baseline: Some(vec![
                BaselineFigures {
                    tenant: TenantId(0),
                    throughput: 100.0,
                },
                BaselineFigures {
                    tenant: TenantId(1),
                    throughput: 100.0,
                },
            ]),
            convergence_low: 0.9,
            convergence_high: 1.3,
            convergence_goal: true,
            headline: None,
        };
        RunRecord { run, ticks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunRecord;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memtide-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The outputs of a whole record, fed tick by tick.
    fn write_record(dir: &Path, record: &RunRecord) -> Summary {
        let mut outputs = Outputs::create(dir, record).unwrap();
        for tick in &record.ticks {
            outputs.tick(tick.clone()).unwrap();
        }
        outputs.finish(record).unwrap()
    }

    #[test]
    fn outputs_are_three_files_and_the_same_bytes_twice() {
        let base = temp("twice");
        let (a, b) = (base.join("a"), base.join("b"));
        let record = test_record::record();
        let summary = write_record(&a, &record);
        write_record(&b, &record);
        assert_eq!(summary, summary::summarize(&record));
        let mut names: Vec<String> = std::fs::read_dir(&a)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["report.html", "summary.json", "timeline.csv"]);
        for f in FILES {
            let x = std::fs::read(a.join(f)).unwrap();
            let y = std::fs::read(b.join(f)).unwrap();
            assert!(!x.is_empty(), "{f} is empty");
            assert!(x == y, "{f} differs between two writes of one record");
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn the_timeline_is_written_as_the_run_goes_under_a_partial_name() {
        let dir = temp("partial");
        let record = test_record::record();
        let mut outputs = Outputs::create(&dir, &record).unwrap();
        for tick in &record.ticks {
            outputs.tick(tick.clone()).unwrap();
        }
        // Nothing passes for finished outputs yet, and the rows are on disk, not in memory,
        // once the writer's buffer is flushed.
        assert!(dir.join("timeline.csv.partial").exists());
        for f in FILES {
            assert!(!dir.join(f).exists(), "{f} before the run finished");
        }
        outputs.timeline.finish().unwrap();
        let text = std::fs::read_to_string(dir.join("timeline.csv.partial")).unwrap();
        assert_eq!(text.lines().count(), 1 + 4 + 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_run_that_does_not_finish_leaves_nothing_behind() {
        let base = temp("unfinished");
        std::fs::create_dir_all(&base).unwrap();
        let dir = base.join("new").join("variant");
        let record = test_record::record();
        let mut outputs = Outputs::create(&dir, &record).unwrap();
        outputs.tick(record.ticks[0].clone()).unwrap();
        drop(outputs);
        assert!(
            !base.join("new").exists(),
            "the directories made for it are gone"
        );
        assert!(base.exists(), "a directory that was there stays");
        // An earlier run's outputs in the same directory stay as they were.
        write_record(&base, &record);
        let before = std::fs::read(base.join("summary.json")).unwrap();
        let mut outputs = Outputs::create(&base, &record).unwrap();
        outputs.tick(record.ticks[0].clone()).unwrap();
        drop(outputs);
        assert_eq!(std::fs::read(base.join("summary.json")).unwrap(), before);
        assert!(!base.join("timeline.csv.partial").exists());
        let _ = std::fs::remove_dir_all(&base);
    }
}
