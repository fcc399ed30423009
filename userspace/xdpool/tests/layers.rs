//! The crate layers of docs/ARCHITECTURE.md ("Layers"), held where the compiler
//! cannot see them: it only refuses an import of a crate that is not a dependency,
//! so this test refuses the dependency. The product (`xdpool`, `pool`) never depends
//! on its tools (`xdpool-lab`), its command line (`xdpool-cli`) or what only they use
//! (`clap`, `plotters`); the tools never depend on the command line or clap.

use std::path::Path;

/// Every dependency name a manifest declares, in any dependency table (normal,
/// build, dev, target-specific), as `table: name`.
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{manifest:?}: {e}"));
    let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{manifest:?}: {e}"));
    let mut found = Vec::new();
    let mut tables: Vec<(String, &toml::Table)> = vec![("".into(), &doc)];
    if let Some(toml::Value::Table(targets)) = doc.get("target") {
        for (cfg, t) in targets {
            if let toml::Value::Table(t) = t {
                tables.push((format!("target.{cfg}."), t));
            }
        }
    }
    for (prefix, t) in tables {
        for key in ["dependencies", "build-dependencies", "dev-dependencies"] {
            if let Some(toml::Value::Table(deps)) = t.get(key) {
                found.extend(deps.keys().map(|name| format!("{prefix}{key}: {name}")));
            }
        }
    }
    found
}

fn assert_none_of(crate_dir: &str, banned: &[&str]) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("Cargo.toml");
    let deps = dependencies(&manifest);
    assert!(
        deps.iter().any(|d| d.ends_with(": thiserror")),
        "{manifest:?}: the manifest was not read as expected: {deps:?}"
    );
    let bad: Vec<&String> = deps
        .iter()
        .filter(|d| banned.iter().any(|b| d.ends_with(&format!(": {b}"))))
        .collect();
    assert!(
        bad.is_empty(),
        "{crate_dir} must not depend on {bad:?} (docs/ARCHITECTURE.md, \"Layers\": the product never imports its tools)"
    );
}

#[test]
fn the_product_depends_on_no_tool() {
    let tools = ["xdpool-lab", "xdpool-cli", "clap", "plotters"];
    assert_none_of("xdpool", &tools);
    assert_none_of(
        "pool",
        &["xdpool", "xdpool-lab", "xdpool-cli", "clap", "plotters"],
    );
}

#[test]
fn the_tools_depend_on_no_command_line() {
    assert_none_of("xdpool-lab", &["xdpool-cli", "clap"]);
}
