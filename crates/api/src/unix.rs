//! ureq over a Unix socket: a `Connector` that ignores the URI's address and connects to a socket (the daemon's, or a container engine's), and its `Transport`.
//!
//! ureq 3 speaks only TCP itself; its `unversioned::transport` traits are how a caller plugs in
//! another stream. The URI still names the TCP address (an IP literal: nothing is resolved),
//! which goes into the `Host` header only.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};
use ureq::Error;

/// An agent with `config` whose every request goes to the Unix socket at `path` (the URI's
/// address then only names the `Host` header). Each request has its own connection.
pub fn agent(path: &Path, config: ureq::config::Config) -> ureq::Agent {
    ureq::Agent::with_parts(
        config,
        UnixConnector {
            path: path.to_path_buf(),
        },
        ureq::unversioned::resolver::DefaultResolver::default(),
    )
}

/// Connects every request to the socket at `path`.
#[derive(Debug)]
struct UnixConnector {
    path: PathBuf,
}

impl Connector<()> for UnixConnector {
    type Out = UnixTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<UnixTransport>, Error> {
        let stream = UnixStream::connect(&self.path)?;
        let config = details.config;
        Ok(Some(UnixTransport {
            stream,
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
        }))
    }
}

/// One connection to the socket.
#[derive(Debug)]
struct UnixTransport {
    stream: UnixStream,
    buffers: LazyBuffers,
}

/// The time left, for the socket's timeout (none: wait without bound); an exhausted budget is
/// ureq's timeout error.
fn left(timeout: NextTimeout) -> Result<Option<Duration>, Error> {
    match timeout.not_zero() {
        Some(t) => Ok(Some(*t)),
        None if timeout.after.is_zero() => Err(Error::Timeout(timeout.reason)),
        None => Ok(None),
    }
}

fn io_error(e: io::Error, timeout: NextTimeout) -> Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout(timeout.reason),
        _ => Error::Io(e),
    }
}

impl Transport for UnixTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let timeout = timeout.for_write();
        self.stream.set_write_timeout(left(timeout)?)?;
        let output = &self.buffers.output()[..amount];
        self.stream
            .write_all(output)
            .map_err(|e| io_error(e, timeout))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        let timeout = timeout.for_read();
        self.stream.set_read_timeout(left(timeout)?)?;
        let input = self.buffers.input_append_buf();
        let amount = loop {
            match self.stream.read(input) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other.map_err(|e| io_error(e, timeout))?,
            }
        };
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // Every request has its own connection (`max_idle_connections(0)`): never reused.
        false
    }
}
