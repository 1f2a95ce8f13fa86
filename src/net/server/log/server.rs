//! The service's life: [`Server::bind`] checks the settings, takes the
//! writer lock and binds the socket; [`Server::run`] starts the writer
//! thread and the async workers, and drains them on a stop signal.

use super::routes::LogService;
use super::sequencer::{Batcher, Job};
use super::shared::Shared;
use super::{HEADER_READ_TIMEOUT, MAX_CONNECTIONS, MAX_QUEUE, ServeConfig, ServeError, Summary};
use crate::limits::MAX_APPEND_BATCH_ENTRIES;
use crate::log::intake::{Intake, IntakeError};
use crate::net::server::{Limits, RequestSink, bind, runtime_with_stop, serve};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use tokio::sync::{Semaphore, watch};

/// A bound, not yet running, service: it holds the writer lock and the socket.
pub struct Server {
    config: ServeConfig,
    intake: Intake,
    listener: std::net::TcpListener,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("dir", &self.config.dir)
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Check the settings, take the log's writer lock (failing at once if
    /// another writer holds it), and bind `addr`.
    pub fn bind(config: ServeConfig, addr: &str) -> Result<Server, ServeError> {
        if !(1..=MAX_APPEND_BATCH_ENTRIES).contains(&config.batch_max) {
            return Err(ServeError::Setting(format!(
                "--batch-max must be 1..={MAX_APPEND_BATCH_ENTRIES}"
            )));
        }
        if !(1..=MAX_QUEUE).contains(&config.queue_max) {
            return Err(ServeError::Setting(format!(
                "--queue-max must be 1..={MAX_QUEUE}"
            )));
        }
        let intake = Intake::serve(
            config.open_store(),
            config.key.clone(),
            config.accepted.clone(),
            config.wait,
        )
        .map_err(|e| match e {
            IntakeError::Log(e) => ServeError::Log(e),
            e => ServeError::Intake(e),
        })?;
        let listener = bind(addr).map_err(|source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        Ok(Server {
            config,
            intake,
            listener,
        })
    }

    /// The address the socket is bound to (the port, when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until SIGTERM or SIGINT, then drain: stop accepting, finish
    /// the requests in flight (queued submissions are integrated and
    /// answered), and return.
    pub fn run(self, sink: RequestSink) -> Result<Summary, ServeError> {
        let (runtime, stop) = runtime_with_stop().map_err(ServeError::Start)?;
        self.run_until(&runtime, stop, sink)
    }

    /// [`Server::run`] with the stop signal given by the caller.
    fn run_until(
        self,
        runtime: &tokio::runtime::Runtime,
        stop: watch::Receiver<bool>,
        sink: RequestSink,
    ) -> Result<Summary, ServeError> {
        let Server {
            config,
            mut intake,
            listener,
        } = self;
        let Some(log) = intake.log() else {
            return Err(IntakeError::WriterAway.into());
        };
        let shared = Arc::new(Shared::new(log, &config.dir, config.witnessing.clone()));
        let (tx, rx) = mpsc::channel::<Job>();
        let batcher = Batcher {
            config: config.clone(),
            shared: Arc::clone(&shared),
            sink: Arc::clone(&sink),
            runtime: runtime.handle().clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("rcpt-log-writer".to_string())
            .spawn(move || batcher.run(intake, rx))
            .map_err(ServeError::Start)?;
        let service = LogService {
            shared: Arc::clone(&shared),
            tx,
            permits: Arc::new(Semaphore::new(config.queue_max)),
            queue_max: config.queue_max,
            accepted: config.accepted,
        };
        let limits = Limits {
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_READ_TIMEOUT,
        };
        // The service, and with it the last sender of the queue, is gone
        // when serve returns: the writer integrates what is queued,
        // answers it, and ends.
        let served = serve(runtime, listener, limits, stop, service, sink);
        let batches = thread.join().map_err(|_| ServeError::WriterThread)?;
        let requests = served.map_err(ServeError::Start)?;
        Ok(Summary {
            requests,
            batches: batches.0,
            integrated: batches.1,
        })
    }
}
