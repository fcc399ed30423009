//! What every example's `main` shares: its command line (`--config PATH
//! [--duration SECS]`), its log, and how it ends (the summary on stdout, or the
//! error and `xdpool::Error::exit_code`).
//!
//! The network functions themselves are the binaries under `src/bin/`; each uses
//! only `xdpool`'s crate-root API (see `docs/library.md`).
#![warn(missing_docs)]

use std::path::PathBuf;
use std::time::Duration;
use xdpool::App;

/// The library guide, `docs/library.md`: its Rust blocks run as this crate's doctests.
#[doc = include_str!("../../../docs/library.md")]
pub mod guide {}

/// An example's command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    /// The config file (`--config PATH`).
    pub config: PathBuf,
    /// Stop after this long (`--duration SECS`); until SIGINT/SIGTERM without it.
    pub duration: Option<Duration>,
}

impl Args {
    /// Reads `--config PATH [--duration SECS]` from the process's arguments; prints
    /// the usage and exits with 2 when they are wrong.
    pub fn parse() -> Args {
        let mut argv = std::env::args();
        let prog = argv.next().unwrap_or_else(|| "example".into());
        match Args::from_args(argv) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{prog}: {e}\nusage: {prog} --config PATH [--duration SECS]");
                std::process::exit(2);
            }
        }
    }

    /// Parses arguments given without the program name.
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut config = None;
        let mut duration = None;
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
            match a.as_str() {
                "--config" => config = Some(PathBuf::from(value("--config")?)),
                "--duration" => {
                    let v = value("--duration")?;
                    let secs: f64 = v
                        .parse()
                        .ok()
                        .filter(|s: &f64| s.is_finite() && *s > 0.0)
                        .ok_or_else(|| format!("--duration {v}: give seconds, e.g. 10 or 0.5"))?;
                    duration = Some(Duration::from_secs_f64(secs));
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        let config = config.ok_or("--config PATH is required")?;
        Ok(Args { config, duration })
    }

    /// The application for these arguments: its config, its duration, and the
    /// `ready` line on stdout once every port is attached (what the lab tests wait
    /// for). Register handlers on it and call `run`.
    pub fn app(&self) -> App {
        init_log();
        let app = App::from_config(&self.config).quiet().ready_line();
        match self.duration {
            Some(d) => app.duration(d),
            None => app,
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
fn init_log() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Ends the program: the run's summary as one JSON line on stdout and exit 0, or the
/// error on stderr and its exit code (the one `xdpool run` uses for the same cause).
pub fn finish<S: serde::Serialize>(result: Result<S, xdpool::Error>) -> ! {
    match result {
        Ok(summary) => {
            match serde_json::to_string(&summary) {
                Ok(line) => println!("{line}"),
                Err(e) => eprintln!("cannot print the summary: {e}"),
            }
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide shows reflect and the standalone crate's main as they are.
    #[test]
    fn the_guide_quotes_the_example_files_verbatim() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        let guide = read("docs/library.md");
        let reflect = read("userspace/xdpool-examples/src/bin/reflect/main.rs");
        let reflect = reflect.split("\n#[cfg(test)]").next().unwrap();
        assert!(reflect.lines().count() < 30, "reflect stays under 30 lines");
        for code in [
            reflect.trim_end(),
            read("examples/standalone/src/main.rs").trim_end(),
        ] {
            assert!(
                guide.contains(code),
                "docs/library.md does not quote:\n{code}"
            );
        }
    }

    fn args(s: &str) -> Result<Args, String> {
        Args::from_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn the_command_line_takes_a_config_and_an_optional_duration() {
        assert_eq!(
            args("--config a.toml --duration 1.5").unwrap(),
            Args {
                config: "a.toml".into(),
                duration: Some(Duration::from_millis(1500))
            }
        );
        assert_eq!(args("--config a.toml").unwrap().duration, None);
        assert!(args("").unwrap_err().contains("--config PATH is required"));
        assert!(args("--config").unwrap_err().contains("needs a value"));
        assert!(args("--config a --duration -1")
            .unwrap_err()
            .contains("give seconds"));
        assert!(args("--config a --verbose")
            .unwrap_err()
            .contains("unknown argument"));
    }
}
