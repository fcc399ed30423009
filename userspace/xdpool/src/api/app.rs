//! The application builder: a program's packet functions on the whole runtime.

use super::handler::{HandlerSet, Named};
use super::Handler;
use crate::config::{Config, HandlerTable};
use crate::error::RunError as Error;
use crate::run::{RunOptions, Summary, WorkerBody};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A program built on xdpool: a config file and the packet functions its
/// `action = "call"` rules name, run with everything `xdpool run` has (ports on one
/// shared UMEM, zero-copy, NUMA-aware pools, pinned workers, device loss and
/// re-attach, hot rule reload on SIGHUP and `xdpool rules apply`, the control socket
/// for `xdpool stats` and `xdpool capture`, Prometheus, systemd notify, and the
/// summary with its frame accounting).
///
/// ```no_run
/// use xdpool::{App, Mac, Packet, Verdict};
///
/// fn main() {
///     let run = App::from_config("/etc/xdpool/reflect.toml")
///         .handler("reflect", |pkt: &mut Packet<'_>| {
///             Verdict::back().with_mac(Mac::Swap)
///         })
///         .run();
///     match run {
///         Ok(summary) => println!("{} frames", summary.packets),
///         Err(e) => {
///             eprintln!("reflect: {e}");
///             std::process::exit(e.exit_code());
///         }
///     }
/// }
/// ```
///
/// The rule that sends frames to it:
///
/// ```toml
/// [[rule]]
/// proto = "udp"
/// action = "call"
/// handler = "reflect"
/// ```
pub struct App<H: HandlerSet = ()> {
    config: PathBuf,
    handlers: H,
    options: RunOptions,
}

impl App<()> {
    /// A program running the config file at `path` (read when it runs).
    pub fn from_config(path: impl AsRef<Path>) -> App<()> {
        App {
            config: path.as_ref().to_path_buf(),
            handlers: (),
            options: RunOptions::default(),
        }
    }
}

impl<H: HandlerSet> App<H> {
    /// Registers `handler` under `name`, the name rules give as `handler`.
    pub fn handler<F: Handler>(self, name: &str, handler: F) -> App<(H, Named<F>)> {
        App {
            config: self.config,
            handlers: (self.handlers, Named::new(name, handler)),
            options: self.options,
        }
    }

    /// Stops the run after `d` (default: until SIGINT or SIGTERM).
    pub fn duration(mut self, d: Duration) -> Self {
        self.options.duration = Some(d);
        self
    }

    /// No live line on stderr (the log stays).
    pub fn quiet(mut self) -> Self {
        self.options.quiet = true;
        self
    }

    /// Prints `ready` on stdout once every port is attached with carrier.
    pub fn ready_line(mut self) -> Self {
        self.options.ready_line = true;
        self
    }

    /// The handlers' names and declarations, as the config is checked against; two
    /// handlers with one name are refused.
    fn table(&self) -> Result<Arc<HandlerTable>, Error> {
        let mut handlers = Vec::new();
        self.handlers.decls(&mut handlers);
        HandlerTable::new(handlers)
            .map(Arc::new)
            .map_err(Error::Usage)
    }

    /// Reads and checks the config against the registered handlers (a rule naming an
    /// unknown handler, or a handler declaring a port the config lacks, is an error
    /// naming the file, the line and the key), without running anything. Two
    /// handlers registered under one name are refused first.
    pub fn check(&self) -> Result<(), Error> {
        Config::load_with(&self.config, self.table()?)
            .map(|_| ())
            .map_err(|e| Error::Usage(e.to_string()))
    }

    /// Runs until stopped (SIGINT, SIGTERM, [`duration`](Self::duration)), then
    /// detaches everything and returns the summary. Two handlers may not share a
    /// name.
    pub fn run(self) -> Result<Summary, Error> {
        let table = self.table()?;
        let cfg =
            Config::load_with(&self.config, table).map_err(|e| Error::Usage(e.to_string()))?;
        crate::worker::install_panic_hook();
        let handlers = Arc::new(self.handlers);
        let mut options = self.options;
        options.config_path = Some(self.config);
        options.worker = Some(WorkerBody(Arc::new(move |region, spec, fabric, stop| {
            crate::worker::run_with(region, spec, fabric, stop, handlers.clone())
        })));
        crate::run::run(&cfg, &options)
    }
}
