//! The workspace keeps the layering `docs/architecture.md` declares: its `layers` blocks give
//! the order of the crates (`layers workspace`) and of each crate's top-level modules (`layers
//! <package>`), top layer first. Every arrow must point down that order, every crate and module
//! must be in it, and no folder of any crate may hold an import circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use renderpool_testkit::modgraph::{Layers, ModuleGraph, circles, layer_blocks};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn declared_layers() -> BTreeMap<String, Layers> {
    let blocks = layer_blocks(&read(&root().join("docs/architecture.md")));
    assert!(blocks.contains_key("workspace"), "docs/architecture.md has no `layers workspace`");
    blocks
}

/// A workspace crate: its package name, folder, and the workspace crates it depends on.
struct Member {
    name: String,
    dir: PathBuf,
    deps: BTreeSet<String>,
    dev_deps: BTreeSet<String>,
}

/// The `[section]` of a manifest each line is in, with the line.
fn sections(manifest: &str) -> impl Iterator<Item = (String, &str)> {
    let mut section = String::new();
    manifest.lines().filter_map(move |line| {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            return None;
        }
        Some((section.clone(), line))
    })
}

fn members() -> Vec<Member> {
    let workspace = read(&root().join("Cargo.toml"));
    let list = workspace
        .lines()
        .find_map(|line| line.trim().strip_prefix("members = ["))
        .unwrap_or_else(|| panic!("no members in the workspace manifest"));
    let dirs: Vec<PathBuf> = list
        .trim_end_matches(']')
        .split(',')
        .map(|dir| root().join(dir.trim().trim_matches('"')))
        .collect();
    let manifests: Vec<(PathBuf, String)> =
        dirs.into_iter().map(|dir| (dir.clone(), read(&dir.join("Cargo.toml")))).collect();
    let name_of = |manifest: &str| {
        sections(manifest)
            .find_map(|(section, line)| {
                let value = line.strip_prefix("name = ")?;
                (section == "package").then(|| value.trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| panic!("a manifest without a package name:\n{manifest}"))
    };
    let names: BTreeSet<String> = manifests.iter().map(|(_, m)| name_of(m)).collect();
    manifests
        .iter()
        .map(|(dir, manifest)| {
            let deps_in = |wanted: &str| {
                sections(manifest)
                    .filter(|(section, _)| section == wanted)
                    .filter_map(|(_, line)| {
                        let key = line.split(['=', '.', ' ']).next()?;
                        names.contains(key).then(|| key.to_owned())
                    })
                    .collect()
            };
            Member {
                name: name_of(manifest),
                dir: dir.clone(),
                deps: deps_in("dependencies"),
                dev_deps: deps_in("dev-dependencies"),
            }
        })
        .collect()
}

#[test]
fn the_crates_depend_down_the_declared_layers_and_never_in_a_circle() {
    let members = members();
    let layers = &declared_layers()["workspace"];
    let names: BTreeSet<String> = members.iter().map(|m| m.name.clone()).collect();
    let deps: BTreeSet<(String, String)> =
        members.iter().flat_map(|m| m.deps.iter().map(|d| (m.name.clone(), d.clone()))).collect();
    // A dev-dependency may point sideways (a test of one binary against another's parser),
    // never into a circle.
    let all: BTreeSet<(String, String)> = members
        .iter()
        .flat_map(|m| m.deps.iter().chain(&m.dev_deps).map(|d| (m.name.clone(), d.clone())))
        .collect();
    for (from, to) in &all {
        eprintln!(
            "crate {from} -> {to}{}",
            if deps.contains(&(from.clone(), to.clone())) { "" } else { " (dev)" }
        );
    }
    let mut problems = layers.violations(&names, &deps);
    problems.extend(circles(&all).into_iter().map(|c| format!("circle of crates: {c:?}")));
    assert!(problems.is_empty(), "docs/architecture.md (layers workspace): {problems:#?}");
}

#[test]
fn every_crate_keeps_its_declared_module_layers_and_no_folder_holds_a_circle() {
    let layers = declared_layers();
    let mut problems = Vec::new();
    for member in members() {
        let graph = ModuleGraph::read(&member.dir.join("src")).unwrap_or_else(|e| panic!("{e}"));
        for (from, to) in graph.top_level() {
            eprintln!("{}: {from} -> {to}", member.name);
        }
        let Some(declared) = layers.get(&member.name) else {
            problems.push(format!("{}: no `layers {}` block", member.name, member.name));
            continue;
        };
        let found = declared.violations(&graph.top_modules(), &graph.top_level());
        problems.extend(found.into_iter().map(|p| format!("{}: {p}", member.name)));
        for (folder, circle) in graph.circles() {
            let folder =
                if folder.is_empty() { "the crate root".into() } else { folder.join("::") };
            problems.push(format!("{}: circle in {folder}: {circle:?}", member.name));
        }
    }
    assert!(problems.is_empty(), "docs/architecture.md: {problems:#?}");
}
