//! Who may use the control socket, as root with clients of another uid (run through
//! `setpriv`): with `stats.control_group` the socket is 0660 and its directory 0750
//! of that group; members (by primary or supplementary group) may ask `stats` and
//! are refused `rules apply` with a reason; others cannot connect and are told which
//! group the socket is for. Without it, the socket is 0600 and says it is its
//! owner's. Needs no lab.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use xdpool::internal::stats::control::{Access, ControlServer, Handlers, RulesFn};

const NOBODY: &str = "65534";

/// `xdpool ARGS` as uid 65534 with `gid` and the supplementary `groups`:
/// (success, stdout, stderr).
fn as_other(gid: u32, groups: Option<u32>, args: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={gid}"));
    match groups {
        Some(g) => cmd.arg(format!("--groups={g}")),
        None => cmd.arg("--clear-groups"),
    };
    let out = cmd
        .arg(env!("CARGO_BIN_EXE_xdpool"))
        .args(args)
        .output()
        .expect("setpriv (util-linux)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn serve(path: &Path, group: Option<&str>) -> ControlServer {
    let rules: RulesFn = Arc::new(|_: &str| serde_json::json!({"ok": true, "applied": {}}));
    ControlServer::start_with_access(
        path,
        Handlers {
            snapshot: Arc::new(|| serde_json::json!({"total": {"rx_packets": 9}})),
            rules: Some(rules),
            handler_control: None,
        },
        Access::for_group(group).unwrap(),
    )
    .unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn control_group_members_read_stats_and_nobody_else_gets_in() {
    require_root!();
    let Ok(Some(users)) = nix::unistd::Group::from_name("users") else {
        println!("skipped: no group `users` on this host");
        return;
    };
    let g = users.gid.as_raw();
    // A world-searchable scratch dir, so only the socket's own directory decides.
    let top = tempfile::Builder::new()
        .prefix("xdpool-access-")
        .permissions(std::fs::Permissions::from_mode(0o755))
        .tempdir()
        .unwrap();
    let path = top.path().join("run/x.sock");
    let sock = path.to_str().unwrap();
    let rules_file = top.path().join("rules.toml");
    std::fs::write(
        &rules_file,
        "[[rule]]\nproto = \"udp\"\naction = \"drop\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&rules_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let rules_arg = rules_file.to_str().unwrap();

    let server = serve(&path, Some("users"));
    let (s, d) = (
        std::fs::metadata(&path).unwrap(),
        std::fs::metadata(path.parent().unwrap()).unwrap(),
    );
    assert_eq!(
        (s.mode() & 0o777, s.gid()),
        (0o660, g),
        "socket mode and group"
    );
    assert_eq!(
        (d.mode() & 0o777, d.gid()),
        (0o750, g),
        "directory mode and group"
    );

    // A member by a supplementary group, and one by its primary group, read stats.
    for (gid, groups) in [(65534, Some(g)), (g, None)] {
        let (ok, out, err) = as_other(gid, groups, &["stats", "--json", "--socket", sock]);
        assert!(ok, "gid {gid} groups {groups:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["total"]["rx_packets"], 9);
    }
    // A member may not reload rules: refused with the reason.
    let (ok, _, err) = as_other(
        65534,
        Some(g),
        &["rules", "apply", rules_arg, "--socket", sock],
    );
    assert!(!ok);
    assert!(
        err.contains("permission denied: `rules apply` is for root and uid 0 (the daemon's user); members of group users may ask `stats` only"),
        "{err}"
    );
    // Not a member: cannot connect, and is told which group the socket is for.
    let (ok, _, err) = as_other(65534, None, &["stats", "--socket", sock]);
    assert!(!ok);
    assert!(
        err.contains(&format!("permission denied: {sock} is for group users")),
        "{err}"
    );
    assert!(!err.contains("os error"), "{err}");
    drop(server);

    // Without a control group: 0600, its owner's only.
    let path = top.path().join("own/x.sock");
    let sock = path.to_str().unwrap();
    let _server = serve(&path, None);
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    std::fs::set_permissions(
        path.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let (ok, _, err) = as_other(65534, Some(g), &["stats", "--socket", sock]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "permission denied: {sock} is for its owner (uid 0) only"
        )),
        "{err}"
    );
}
