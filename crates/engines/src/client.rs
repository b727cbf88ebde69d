//! `Engine`: one container engine's client, one request per call over its Unix socket (ureq, through the API crate's Unix transport), each bounded in time and size.

use crate::{Container, EngineError, EngineKind};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The API version asked for: Docker 20.10's, which Podman 4's compatible API serves too.
pub(crate) const API: &str = "/v1.41";

/// The largest answer read (a host's container list included).
const MAX_ANSWER: u64 = 8 << 20;

/// A container as the engine lists it (`GET /containers/json?all=true`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub name: String,
    pub running: bool,
}

/// One engine's client.
#[derive(Debug)]
pub struct Engine {
    kind: EngineKind,
    socket: PathBuf,
    agent: ureq::Agent,
}

impl Engine {
    /// The engine `kind` listening on `socket`; `timeout` bounds each call as a whole.
    pub fn new(kind: EngineKind, socket: &Path, timeout: Duration) -> Engine {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .max_idle_connections(0)
            .user_agent(format!("memtide/{}", env!("CARGO_PKG_VERSION")))
            .build();
        Engine {
            kind,
            socket: socket.to_path_buf(),
            agent: memtide_api::unix::agent(socket, config),
        }
    }

    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `GET path` (under the API version): the status and the body, read up to its bound.
    fn get(&self, path: &str) -> Result<(u16, String), EngineError> {
        let request = format!("GET {API}{path}");
        // Over the socket the address only fills the Host header (an IP literal: nothing is
        // resolved).
        let mut answer = self
            .agent
            .get(format!("http://127.0.0.1{API}{path}"))
            .call()
            .map_err(|e| EngineError::Transport {
                engine: self.kind,
                socket: self.socket.clone(),
                request: request.clone(),
                error: e.to_string(),
            })?;
        let status = answer.status().as_u16();
        let body = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_string()
            .map_err(|e| self.answer(&request, format!("cannot be read: {e}")))?;
        Ok((status, body))
    }

    fn answer(&self, request: &str, why: String) -> EngineError {
        EngineError::Answer {
            engine: self.kind,
            socket: self.socket.clone(),
            request: request.to_string(),
            why,
        }
    }

    fn status(&self, request: &str, status: u16, body: &str) -> EngineError {
        #[derive(Deserialize)]
        struct Message {
            message: String,
        }
        let message = serde_json::from_str::<Message>(body)
            .map(|m| m.message)
            .unwrap_or_else(|_| body.chars().take(200).collect());
        EngineError::Status {
            engine: self.kind,
            socket: self.socket.clone(),
            request: request.to_string(),
            status,
            message,
        }
    }

    /// The container named `name` (`None`: no container has that name). An engine also
    /// answers for an id or an id's prefix; a container found so, not by its name, is none.
    pub fn inspect(&self, name: &str) -> Result<Option<Container>, EngineError> {
        let path = format!("/containers/{name}/json");
        let (status, body) = self.get(&path)?;
        let request = format!("GET {API}{path}");
        match status {
            200 => {
                let c = Container::parse(&body).map_err(|why| self.answer(&request, why))?;
                Ok((c.name == name).then_some(c))
            }
            404 => Ok(None),
            _ => Err(self.status(&request, status, &body)),
        }
    }

    /// Every container the engine has, running or not.
    pub fn list(&self) -> Result<Vec<Listed>, EngineError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Item {
            id: String,
            #[serde(default)]
            names: Vec<String>,
            #[serde(default)]
            state: String,
        }
        let path = "/containers/json?all=true";
        let request = format!("GET {API}{path}");
        let (status, body) = self.get(path)?;
        if status != 200 {
            return Err(self.status(&request, status, &body));
        }
        let items: Vec<Item> = serde_json::from_str(&body)
            .map_err(|e| self.answer(&request, format!("is not a container list: {e}")))?;
        Ok(items
            .into_iter()
            .map(|i| Listed {
                name: i
                    .names
                    .first()
                    .map(|n| n.strip_prefix('/').unwrap_or(n).to_string())
                    .unwrap_or_default(),
                running: i.state == "running" || i.state == "paused",
                id: i.id,
            })
            .collect())
    }

    /// Which engine answers on the socket: Podman names itself among `GET /version`'s
    /// components ("Podman Engine"); Docker does not.
    pub fn identify(&self) -> Result<EngineKind, EngineError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Version {
            #[serde(default)]
            components: Vec<Component>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Component {
            name: String,
        }
        let path = "/version";
        let request = format!("GET {API}{path}");
        let (status, body) = self.get(path)?;
        if status != 200 {
            return Err(self.status(&request, status, &body));
        }
        let v: Version = serde_json::from_str(&body)
            .map_err(|e| self.answer(&request, format!("is not a version: {e}")))?;
        Ok(
            if v.components.iter().any(|c| c.name.starts_with("Podman")) {
                EngineKind::Podman
            } else {
                EngineKind::Docker
            },
        )
    }
}
