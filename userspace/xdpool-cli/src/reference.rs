//! The files generated from the code, kept in the tree under `docs/reference/` so that
//! a reader finds them and the package ships them: the configuration, metrics and
//! command references, the man pages (`xdpool(1)` and one per subcommand, clap_mangen)
//! and the shell completions (clap_complete). `xdpool reference --out docs/reference`
//! (`make reference`) writes them; a test fails when the tree differs.

use std::path::Path;

use clap::{Command, CommandFactory};
use clap_complete::Shell;

use crate::cli::Cli;

/// The completion file of each shell, as packages install them.
pub const COMPLETIONS: &[(Shell, &str)] = &[
    (Shell::Bash, "completions/xdpool.bash"),
    (Shell::Zsh, "completions/_xdpool"),
    (Shell::Fish, "completions/xdpool.fish"),
];

/// The command tree, built (global options propagated, bin names set).
pub fn command() -> Command {
    let mut cmd = Cli::command();
    cmd.build();
    cmd
}

/// Every generated file: (path under `docs/reference/`, contents).
pub fn files() -> Vec<(String, Vec<u8>)> {
    let mut out = vec![
        (
            "config.md".to_string(),
            xdpool::internal::config::keys::reference_markdown().into_bytes(),
        ),
        (
            "metrics.md".to_string(),
            xdpool::internal::stats::reference::reference_markdown().into_bytes(),
        ),
        ("cli.md".to_string(), cli_markdown().into_bytes()),
    ];
    let cmd = command();
    for (name, c) in visible_commands(&cmd, "xdpool") {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c.clone().name(name.clone()))
            .render(&mut buf)
            .expect("render to a Vec");
        out.push((format!("man/{name}.1"), buf));
    }
    for (shell, path) in COMPLETIONS {
        out.push((path.to_string(), completion(*shell)));
    }
    out
}

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> Vec<u8> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "xdpool", &mut buf);
    buf
}

/// `cmd` and its visible subcommands, depth first, each with its page name
/// (`xdpool`, `xdpool-lab`, `xdpool-lab-up`).
fn visible_commands<'a>(cmd: &'a Command, name: &str) -> Vec<(String, &'a Command)> {
    let mut out = vec![(name.to_string(), cmd)];
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        out.extend(visible_commands(sub, &format!("{name}-{}", sub.get_name())));
    }
    out
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// `docs/reference/cli.md`: every visible command with its usage and options.
pub fn cli_markdown() -> String {
    let cmd = command();
    let mut out = String::from(
        "# Command reference\n\n\
         <!-- Generated from the clap definitions by `make reference`; do not edit: a \
         test fails when this file and the code differ. -->\n\n\
         The same text is in the man pages (`man xdpool`, `man xdpool-run`, ...) and \
         `xdpool help COMMAND`. Exit codes: see the README.\n",
    );
    for (name, c) in visible_commands(&cmd, "xdpool") {
        let top = name == "xdpool";
        let title = name.replace('-', " ");
        let depth = title.split(' ').count().min(3);
        out.push_str(&format!("\n{} `{title}`\n\n", "#".repeat(depth + 1)));
        let about = c
            .get_long_about()
            .or(c.get_about())
            .map(|s| s.to_string())
            .unwrap_or_default();
        if !about.is_empty() {
            out.push_str(about.trim());
            out.push_str("\n\n");
        }
        let usage = c.clone().render_usage().to_string();
        out.push_str(&format!("```text\n{}\n```\n", usage.trim()));
        let args: Vec<&clap::Arg> = c
            .get_arguments()
            // Global options are listed once, under `xdpool`.
            .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
            .filter(|a| top || !a.is_global_set())
            .collect();
        if !args.is_empty() {
            out.push_str("\n| Option | Meaning | Default |\n|---|---|---|\n");
            for a in args {
                let takes = a.get_action().takes_values();
                let value = a
                    .get_value_names()
                    .filter(|_| takes)
                    .map(|v| {
                        v.iter()
                            .map(|n| format!("<{n}>"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let flag = match (a.get_long(), a.get_short(), a.is_positional()) {
                    (_, _, true) => value.clone(),
                    (Some(l), Some(s), _) => format!("-{s}, --{l} {value}"),
                    (Some(l), None, _) => format!("--{l} {value}"),
                    (None, Some(s), _) => format!("-{s} {value}"),
                    (None, None, _) => a.get_id().to_string(),
                };
                let help = a
                    .get_long_help()
                    .or(a.get_help())
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                let possible: Vec<String> = a
                    .get_possible_values()
                    .iter()
                    .filter(|p| !p.is_hide_set())
                    .map(|p| format!("`{}`", p.get_name()))
                    .collect();
                let help = help.trim().to_string();
                let mut help = if help.is_empty() || help.ends_with('.') {
                    help
                } else {
                    format!("{help}.")
                };
                if !possible.is_empty() && takes {
                    help.push_str(&format!(" One of {}.", possible.join(", ")));
                }
                let default: Vec<String> = a
                    .get_default_values()
                    .iter()
                    .filter(|_| takes)
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect();
                let default = if default.is_empty() {
                    String::new()
                } else {
                    format!("`{}`", default.join(" "))
                };
                out.push_str(&format!(
                    "| `{}` | {} | {} |\n",
                    flag.trim(),
                    cell(help.trim()),
                    default
                ));
            }
        }
    }
    out
}

/// Writes every file under `dir`.
pub fn write(dir: &Path) -> std::io::Result<usize> {
    let files = files();
    for (rel, bytes) in &files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    Ok(files.len())
}

/// The files under `dir` that differ from the code's or are missing, and the man
/// pages and completions there that the code no longer makes.
pub fn stale(dir: &Path) -> Vec<String> {
    let files = files();
    let mut out: Vec<String> = files
        .iter()
        .filter(|(rel, bytes)| {
            std::fs::read(dir.join(rel)).ok().as_deref() != Some(bytes.as_slice())
        })
        .map(|(rel, _)| rel.clone())
        .collect();
    for sub in ["man", "completions"] {
        for e in std::fs::read_dir(dir.join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            let rel = format!("{sub}/{}", e.file_name().to_string_lossy());
            if !files.iter().any(|(r, _)| *r == rel) {
                out.push(format!("{rel} (no longer generated: remove it)"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference")
    }

    #[test]
    fn the_generated_files_in_the_tree_match_the_code() {
        let stale = stale(&tree());
        assert!(
            stale.is_empty(),
            "docs/reference/ differs from what the code generates: {stale:?}; run `make reference` and commit the result"
        );
    }

    #[test]
    fn every_visible_subcommand_has_a_man_page_and_a_section() {
        let files = files();
        let cmd = command();
        let cli = cli_markdown();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let n = sub.get_name();
            if n == "help" {
                continue;
            }
            assert!(
                files.iter().any(|(p, _)| *p == format!("man/xdpool-{n}.1")),
                "no man page for {n}"
            );
            assert!(
                cli.contains(&format!("`xdpool {n}`")),
                "no section for {n} in cli.md"
            );
        }
        assert!(
            !files.iter().any(|(p, _)| p.contains("reference")),
            "the hidden command has no page"
        );
        for (shell, path) in COMPLETIONS {
            let text = String::from_utf8(completion(*shell)).unwrap();
            assert!(text.contains("doctor"), "{path} completes the subcommands");
        }
    }
}
