//! Container tenants: a Docker or Podman container named in the configuration, found through its engine (`memtide_engines`) and then managed as the Linux host's adopted cgroup, followed across restarts and re-creation by the engine's events.
//!
//! Joining: the engine's inspect gives the container's first process; its
//! `/proc/PID/cgroup` names the memory cgroup, which must lie under the daemon's parent like
//! any adopted cgroup, and the Linux host adopts it (recording the limits found there, which
//! are the engine's, to give back). A container that is not there or not running waits, as a
//! cgroup not made yet does, and the engine is asked again only once an event touched its
//! name or the event stream broke (`Watcher::stale`), at most once a second.
//!
//! Following: a restart removes the cgroup and makes it again, a re-creation makes a new one;
//! either way the Linux host sees its cgroup go (`WorldEvent::Gone`, may return), the tenant
//! waits, and the next attach finds the container anew. A rename or a re-creation under the
//! name while the old one still runs is seen only through the engine: between ticks, a
//! container an event touched is looked up again, and if its name now leads elsewhere the
//! old cgroup is given back and the tenant waits for the name.
//!
//! Costs: one watcher thread and one open socket per engine; one inspect per event that
//! touches a managed name, and per waiting container after each such event.

use super::{QemuError, QemuHost, Record};
use memtide_controller::{Attach, World};
use memtide_engines::{Engine, EngineError, EngineKind, Stamp, Watcher};
use memtide_linux::fs::hierarchy::{own_cgroup, CgroupVersion};
use memtide_model::{TenantId, TenantSpec, WorldEvent};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A container tenant: its name, its engine and where that listens, and what a cgroup tenant
/// has besides (an adapter to run in its cgroup, page sharing kept off).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerPlacement {
    pub name: String,
    pub engine: EngineKind,
    pub socket: PathBuf,
    /// The cgroup its cgroup must lie under (the daemon's parent).
    pub within: String,
    pub adapter: Option<Vec<String>>,
    pub isolated: bool,
}

/// How long one question to an engine may take.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(5);
/// The shortest time between two questions about one container.
const RECHECK: Duration = Duration::from_secs(1);

/// One engine memtide asks: its client and its event stream (`None` when the thread could
/// not start: every name is then stale, and asked about at most once a second).
struct Link {
    engine: Engine,
    watcher: Option<Watcher>,
}

impl Link {
    fn stamp(&self) -> Option<Stamp> {
        self.watcher.as_ref().map(Watcher::stamp)
    }

    fn stale(&self, name: &str, stamp: Option<Stamp>) -> bool {
        match (&self.watcher, stamp) {
            (Some(w), Some(s)) => w.stale(name, s),
            _ => true,
        }
    }
}

/// One container tenant as followed.
struct Followed {
    /// The tenant's name, and its container's.
    tenant: String,
    name: String,
    socket: PathBuf,
    /// When the engine was last asked, and what the stream had seen by then.
    asked: Option<(Instant, Option<Stamp>)>,
    /// Why it waits, as last found.
    why: String,
    /// The id of the container adopted (`None`: waiting).
    adopted: Option<String>,
}

/// The container engines and the containers followed through them.
#[derive(Default)]
pub(super) struct Containers {
    links: BTreeMap<PathBuf, Link>,
    followed: BTreeMap<TenantId, Followed>,
}

impl Containers {
    /// The link to the engine `kind` on `socket`, made at its first use.
    fn link(&mut self, kind: EngineKind, socket: &Path) {
        self.links
            .entry(socket.to_path_buf())
            .or_insert_with(|| Link {
                engine: Engine::new(kind, socket, ENGINE_TIMEOUT),
                watcher: Watcher::start(kind, socket).ok(),
            });
    }

    /// Stops following tenant `id` (detached).
    pub(super) fn forget(&mut self, id: TenantId) {
        if let Some(f) = self.followed.remove(&id) {
            if let Some(w) = self.links.get(&f.socket).and_then(|l| l.watcher.as_ref()) {
                w.unwatch(&f.name);
            }
        }
    }

    /// Tenant `id`'s cgroup went: it waits for its container again.
    pub(super) fn gone(&mut self, id: TenantId) {
        if let Some(f) = self.followed.get_mut(&id) {
            f.adopted = None;
            f.asked = None;
        }
    }
}

/// What the engine says of a container, for joining.
enum Found {
    /// Running, its first process in this memory cgroup.
    Running { id: String, cgroup: String },
    /// Not to be adopted now: why.
    Waiting(String),
}

/// Asks `engine` about container `name` and finds its memory cgroup (a path in a hierarchy of
/// `version`) from `/proc` under `proc_root`.
fn find(engine: &Engine, name: &str, proc_root: &Path, version: CgroupVersion) -> Found {
    let kind = engine.kind();
    let c = match engine.inspect(name) {
        Ok(Some(c)) => c,
        Ok(None) => return Found::Waiting(format!("{kind} has no container named {name:?}")),
        Err(e) => return Found::Waiting(waiting_for_engine(&e)),
    };
    let Some(pid) = c.pid.filter(|_| c.running) else {
        return Found::Waiting(format!(
            "{kind} container {name:?} ({}) is not running",
            c.short_id()
        ));
    };
    let path = proc_root.join(format!("proc/{pid}/cgroup"));
    let cgroup = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| own_cgroup(&path, &text, version).map_err(|e| e.to_string()));
    match cgroup {
        Ok(cgroup) => Found::Running { id: c.id, cgroup },
        // It stopped meanwhile.
        Err(e) => Found::Waiting(format!(
            "{kind} container {name:?} ({}): its process {pid} is gone ({e})",
            c.short_id()
        )),
    }
}

impl QemuHost {
    /// Attaches a container tenant: finds its cgroup through the engine (asking only when
    /// something may have changed since it was last asked) and has the Linux host adopt it.
    pub(super) fn attach_container(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        p: &ContainerPlacement,
        record: Option<&Record>,
    ) -> Result<Attach, QemuError> {
        self.containers.link(p.engine, &p.socket);
        let link = &self.containers.links[&p.socket];
        if let Some(w) = &link.watcher {
            w.watch(&p.name, None);
        }
        if let Some(f) = self.containers.followed.get(&id) {
            if let Some((at, stamp)) = f.asked {
                if at.elapsed() < RECHECK || !link.stale(&p.name, stamp) {
                    return Ok(Attach::Waiting(f.why.clone()));
                }
            }
        }
        let stamp = link.stamp();
        let found = find(
            &link.engine,
            &p.name,
            &self.options.proc_root,
            self.linux.hierarchy().version,
        );
        let followed = self
            .containers
            .followed
            .entry(id)
            .or_insert_with(|| Followed {
                tenant: spec.name.clone(),
                name: p.name.clone(),
                socket: p.socket.clone(),
                asked: None,
                why: String::new(),
                adopted: None,
            });
        followed.asked = Some((Instant::now(), stamp));
        let (container_id, cgroup) = match found {
            Found::Waiting(why) => {
                followed.why = why.clone();
                return Ok(Attach::Waiting(why));
            }
            Found::Running { id, cgroup } => (id, cgroup),
        };
        if !memtide_linux::is_under(&p.within, &cgroup) {
            // Refused, with one line; the other tenants run on.
            return Ok(Attach::Refused(format!(
                "{} container {:?} runs in cgroup {cgroup:?}, which is not under the parent \
                 {:?}; start it under the parent (--cgroup-parent) or give [host] parent a \
                 cgroup above it",
                p.engine, p.name, p.within
            )));
        }
        let placement = memtide_linux::host::Placement {
            cgroup: cgroup.clone(),
            launch: None,
            adapter: p.adapter.clone(),
            isolated: p.isolated,
            subtree: false,
        };
        // A record is this container's only while it runs in the cgroup the record names.
        let record = record.map(|r| &r.linux).filter(|r| r.cgroup == cgroup);
        let attach = self.linux.attach(id, spec, &placement, record)?;
        if let Attach::Attached(_) = attach {
            let link = &self.containers.links[&p.socket];
            if let Some(w) = &link.watcher {
                w.watch(&p.name, Some(&container_id));
            }
            if let Some(f) = self.containers.followed.get_mut(&id) {
                f.adopted = Some(container_id);
            }
        }
        Ok(attach)
    }

    /// Between ticks: looks up again each adopted container an event touched (at most once a
    /// second each), and lets go of one whose name now leads to another container or to none
    /// while it still runs (renamed, or replaced under its name): its cgroup gets back what
    /// it had, and the tenant waits for its name.
    pub(super) fn follow_containers(&mut self) {
        let due: Vec<(TenantId, String, String, PathBuf, String)> = self
            .containers
            .followed
            .iter()
            .filter_map(|(&id, f)| {
                let adopted = f.adopted.clone()?;
                let link = self.containers.links.get(&f.socket)?;
                let (at, stamp) = f.asked?;
                (at.elapsed() >= RECHECK && link.stale(&f.name, stamp)).then(|| {
                    (
                        id,
                        f.tenant.clone(),
                        f.name.clone(),
                        f.socket.clone(),
                        adopted,
                    )
                })
            })
            .collect();
        for (id, tenant, name, socket, adopted) in due {
            let link = &self.containers.links[&socket];
            let stamp = link.stamp();
            let kind = link.engine.kind();
            let answer = link.engine.inspect(&name);
            if let Some(f) = self.containers.followed.get_mut(&id) {
                f.asked = Some((Instant::now(), stamp));
            }
            // The engine is away: its containers run on; asked again later.
            let Ok(now) = answer else {
                continue;
            };
            let why = match now {
                Some(c) if c.id == adopted => continue,
                Some(c) => format!(
                    "{kind} container {name:?} is now another container ({}) than the one \
                     adopted ({})",
                    c.short_id(),
                    &adopted[..12.min(adopted.len())]
                ),
                None => {
                    format!("{kind} has no container named {name:?} any more (renamed or removed)")
                }
            };
            let restored = match self.linux.detach(id) {
                Ok(()) => true,
                Err(e) => {
                    self.events.push(WorldEvent::RestoreFailed {
                        name: tenant.clone(),
                        error: e.to_string(),
                    });
                    false
                }
            };
            self.containers.gone(id);
            self.events.push(WorldEvent::Gone {
                id,
                name: tenant,
                why,
                restored,
                may_return: true,
            });
        }
    }
}

/// Why a container waits while its engine does not answer.
fn waiting_for_engine(e: &EngineError) -> String {
    if e.is_absent() {
        format!("its engine does not answer ({e})")
    } else {
        e.to_string()
    }
}
