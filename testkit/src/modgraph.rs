//! The import graph of a crate's modules, read from its sources, and the checks that keep a
//! layering: no circle among the modules of one folder, and every arrow between top-level
//! modules pointing down a declared order of layers.
//!
//! An arrow is a `crate::` or `super::` path (use trees included) from one module to another
//! that is neither its ancestor nor its descendant, lifted to the two siblings under their
//! closest common ancestor: `engine::slot` using `crate::metrics::Labels` is the top-level arrow
//! `engine -> metrics`. Test code (`#[cfg(test)]` items and the modules they declare) is left out:
//! tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`["engine", "slot"]`); the root is empty.
pub type ModPath = Vec<String>;

/// A crate's modules and the arrows between siblings.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ModuleGraph {
    /// Every module of the crate (outside test code), the root included.
    pub modules: BTreeSet<ModPath>,
    /// Arrows by the folder (parent module) whose children they join: `[] -> {(engine,
    /// metrics)}` for the top level.
    pub arrows: BTreeMap<ModPath, BTreeSet<(String, String)>>,
}

/// Why a crate's graph could not be read.
#[derive(Debug)]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub source: std::io::Error,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for ReadError {}

impl ModuleGraph {
    /// Reads the library of the crate whose sources are in `src` (from `src/lib.rs`, following
    /// its `mod` declarations).
    pub fn read(src: &Path) -> Result<Self, ReadError> {
        let mut files = BTreeMap::new();
        collect(src, &src.join("lib.rs"), Vec::new(), &mut files)?;
        Ok(Self::from_sources(&files))
    }

    /// The graph of modules given as (path, file text); each text's `mod x;` declarations must
    /// be among the paths.
    pub fn from_sources(files: &BTreeMap<ModPath, String>) -> Self {
        let mut graph = Self { modules: files.keys().cloned().collect(), ..Self::default() };
        for (module, text) in files {
            let items = scan(&tokens(text));
            for path in items.paths {
                let Some(target) = resolve(module, &path, &graph.modules) else { continue };
                let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
                // An ancestor or a descendant: a folder and what it holds are one unit.
                if common == module.len() || common == target.len() {
                    continue;
                }
                let (from, to) = (module[common].clone(), target[common].clone());
                graph.arrows.entry(module[..common].to_vec()).or_default().insert((from, to));
            }
        }
        graph
    }

    /// The arrows between top-level modules.
    pub fn top_level(&self) -> BTreeSet<(String, String)> {
        self.arrows.get(&Vec::new()).cloned().unwrap_or_default()
    }

    /// The top-level modules.
    pub fn top_modules(&self) -> BTreeSet<String> {
        self.modules.iter().filter(|m| m.len() == 1).map(|m| m[0].clone()).collect()
    }

    /// Every circle among the children of one folder, as (folder, the modules in it).
    pub fn circles(&self) -> Vec<(ModPath, Vec<String>)> {
        self.arrows
            .iter()
            .flat_map(|(folder, arrows)| {
                circles(arrows).into_iter().map(move |circle| (folder.clone(), circle))
            })
            .collect()
    }
}

/// Layers, top first: a name may depend only on names of lower layers (later lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers(pub Vec<Vec<String>>);

impl Layers {
    /// One layer a line, names separated by spaces, top line first.
    pub fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .map(|line| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .filter(|layer| !layer.is_empty())
                .collect(),
        )
    }

    /// Every declared name.
    pub fn names(&self) -> BTreeSet<String> {
        self.0.iter().flatten().cloned().collect()
    }

    /// The layer of `name`, counted from the bottom (0).
    fn level(&self, name: &str) -> Option<usize> {
        let from_top = self.0.iter().position(|layer| layer.iter().any(|n| n == name))?;
        Some(self.0.len() - 1 - from_top)
    }

    /// The problems of `arrows` over `names` against these layers: a name not declared, a
    /// declared name that does not exist, an arrow within a layer or up.
    pub fn violations(
        &self,
        names: &BTreeSet<String>,
        arrows: &BTreeSet<(String, String)>,
    ) -> Vec<String> {
        let declared = self.names();
        let mut problems: Vec<String> = names
            .difference(&declared)
            .map(|name| format!("{name} is in no layer"))
            .chain(declared.difference(names).map(|name| format!("{name} is declared but absent")))
            .collect();
        for (from, to) in arrows {
            if let (Some(a), Some(b)) = (self.level(from), self.level(to))
                && a <= b
            {
                let how = if a == b { "within its layer" } else { "up" };
                problems.push(format!("{from} -> {to} points {how}"));
            }
        }
        problems
    }
}

/// The `layers NAME` blocks of a Markdown document: fenced code blocks whose info string is
/// `layers` and a name.
pub fn layer_blocks(markdown: &str) -> BTreeMap<String, Layers> {
    let mut blocks = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in markdown.lines() {
        match &mut current {
            None => {
                if let Some(name) = line.trim().strip_prefix("```layers ") {
                    current = Some((name.trim().to_owned(), String::new()));
                }
            }
            Some((name, body)) => {
                if line.trim() == "```" {
                    blocks.insert(std::mem::take(name), Layers::parse(body));
                    current = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    blocks
}

/// Every circle in a directed graph (its strongly connected components of two or more),
/// each sorted.
pub fn circles(arrows: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in arrows {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    // Kosaraju: the nodes each can reach, intersected with those that reach it.
    let reach = |start: &str, forward: bool| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start.to_owned()];
        while let Some(node) = stack.pop() {
            for (from, to) in arrows {
                let (a, b) = if forward { (from, to) } else { (to, from) };
                if *a == node && seen.insert(b.clone()) {
                    stack.push(b.clone());
                }
            }
        }
        seen
    };
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for node in next.keys() {
        let forward = reach(node, true);
        if !forward.contains(*node) {
            continue;
        }
        let circle: Vec<String> = forward.intersection(&reach(node, false)).cloned().collect();
        found.insert(circle);
    }
    found.into_iter().collect()
}

/// Reads `file` as module `module` and, through its `mod x;` declarations, its submodules.
fn collect(
    src: &Path,
    file: &Path,
    module: ModPath,
    files: &mut BTreeMap<ModPath, String>,
) -> Result<(), ReadError> {
    let text = std::fs::read_to_string(file)
        .map_err(|source| ReadError { path: file.to_path_buf(), source })?;
    let declared = scan(&tokens(&text)).submodules;
    // A module's children live in the folder named after it (`a.rs` and `a/`, or `a/mod.rs`).
    let folder = module.iter().fold(src.to_path_buf(), |dir, part| dir.join(part));
    files.insert(module.clone(), text);
    for child in declared {
        let flat = folder.join(format!("{child}.rs"));
        let child_file = if flat.is_file() { flat } else { folder.join(&child).join("mod.rs") };
        let mut path = module.clone();
        path.push(child);
        collect(src, &child_file, path, files)?;
    }
    Ok(())
}

/// What one file declares and refers to, outside its test code.
#[derive(Debug, Default, PartialEq, Eq)]
struct Items {
    /// `mod x;` declarations.
    submodules: Vec<String>,
    /// `crate::` and `super::` paths, each starting with `crate` or one `super` per step up.
    paths: Vec<Vec<String>>,
}

/// The module a path names, relative to `module`: its longest prefix that is a module.
fn resolve(module: &ModPath, path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut base = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => module.clone(),
        _ => return None,
    };
    let mut rest = path.iter().skip(usize::from(path[0] == "crate")).peekable();
    while rest.peek().is_some_and(|part| *part == "super") {
        base.pop();
        rest.next();
    }
    base.extend(rest.cloned());
    (0..=base.len()).rev().map(|n| base[..n].to_vec()).find(|prefix| modules.contains(prefix))
}

/// A token of Rust source: an identifier or keyword, `::`, or one punctuation character.
/// Comments, string and character literals and numbers are dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Path,
    Punct(char),
}

fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= chars.len() {
                    break;
                } else if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&chars, i) {
            i = end;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('a', '\n', '{'), else a lifetime's quote.
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            if !c.is_ascii_digit() {
                out.push(Token::Word(chars[start..i].iter().collect()));
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push(Token::Path);
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// The end of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) starting at `i`, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let prefix_ok = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    let mut j = i + usize::from(chars.get(i) == Some(&'b'));
    if !prefix_ok || chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..].iter().take(hashes).filter(|c| **c == '#').count() == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}

fn scan(tokens: &[Token]) -> Items {
    let word = |i: usize, w: &str| matches!(tokens.get(i), Some(Token::Word(x)) if x == w);
    let punct = |i: usize, p: char| tokens.get(i) == Some(&Token::Punct(p));
    let mut items = Items::default();
    let mut i = 0;
    while i < tokens.len() {
        // #[cfg(test)]: the next item is test code.
        if punct(i, '#')
            && punct(i + 1, '[')
            && word(i + 2, "cfg")
            && punct(i + 3, '(')
            && word(i + 4, "test")
            && punct(i + 5, ')')
            && punct(i + 6, ']')
        {
            i = skip_item(tokens, i + 7);
            continue;
        }
        if word(i, "mod")
            && let Some(Token::Word(name)) = tokens.get(i + 1)
            && punct(i + 2, ';')
        {
            items.submodules.push(name.clone());
            i += 3;
            continue;
        }
        if (word(i, "crate") || word(i, "super")) && tokens.get(i + 1) == Some(&Token::Path) {
            // Not the tail of a longer path (`x::super` does not occur; `$crate` is a macro's).
            let after_path = i > 0 && tokens[i - 1] == Token::Path;
            if !after_path {
                i = use_tree(tokens, i, Vec::new(), &mut items.paths);
                continue;
            }
        }
        i += 1;
    }
    items
}

/// Skips one item starting at `i` (its attributes, then up to a `;` or a closed `{ }` block).
fn skip_item(tokens: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i] {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Punct(';') if depth == 0 => return i + 1,
            Token::Punct('[') if depth == 0 => {
                // Another attribute: step over its brackets.
                let mut square = 0usize;
                while i < tokens.len() {
                    match tokens[i] {
                        Token::Punct('[') => square += 1,
                        Token::Punct(']') => {
                            square -= 1;
                            if square == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Reads the path (or use tree) starting at `i` after `prefix`; pushes each full path. Returns
/// the index after it.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(i) {
            Some(Token::Word(w)) if w == "self" && !prefix.is_empty() => {
                i += 1;
            }
            Some(Token::Word(w)) => {
                prefix.push(w.clone());
                i += 1;
            }
            Some(Token::Punct('{')) => {
                i += 1;
                while i < tokens.len() && tokens[i] != Token::Punct('}') {
                    if tokens[i] == Token::Punct(',') {
                        i += 1;
                        continue;
                    }
                    i = use_tree(tokens, i, prefix.clone(), out);
                }
                return i + 1;
            }
            _ => {}
        }
        if tokens.get(i) == Some(&Token::Path) {
            i += 1;
            continue;
        }
        // `as name` renames the last segment; it names nothing more.
        if matches!(tokens.get(i), Some(Token::Word(w)) if w == "as") {
            i += 2;
        }
        out.push(prefix);
        return i;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn graph(files: &[(&str, &str)]) -> ModuleGraph {
        let files = files
            .iter()
            .map(|(path, text)| {
                let path: ModPath =
                    path.split("::").filter(|p| !p.is_empty()).map(str::to_owned).collect();
                (path, text.to_string())
            })
            .collect();
        ModuleGraph::from_sources(&files)
    }

    fn arrows(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn paths_and_use_trees_become_arrows_between_siblings() {
        let g = graph(&[
            ("", "mod a; mod b; mod c;"),
            ("a", "mod x; use crate::{b::{self, Thing}, c as see};"),
            ("a::x", "fn f() { super::super::c::run(); let _ = crate::a::x::Y; }"),
            ("b", "use super::c::*;"),
            (
                "c",
                "// use crate::a;\nconst S: &str = \"crate::b\"; const R: &str = r#\"super::a\"#;",
            ),
        ]);
        assert_eq!(g.top_level(), arrows(&[("a", "b"), ("a", "c"), ("b", "c")]));
        assert_eq!(g.top_modules(), ["a", "b", "c"].map(String::from).into());
        assert!(g.circles().is_empty());
    }

    #[test]
    fn test_code_is_left_out() {
        let g = graph(&[
            ("", "mod a; mod b; #[cfg(test)]\nmod fixtures;"),
            (
                "a",
                "fn f() {}\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests { use crate::b; fn g() { if true { crate::b::h(); } } }\nuse crate::b as _b;",
            ),
            ("b", "#[cfg(test)] use crate::a; pub fn h() {}"),
        ]);
        assert_eq!(g.top_level(), arrows(&[("a", "b")]));
        let root = scan(&tokens("mod a; mod b; #[cfg(test)]\nmod fixtures;"));
        assert_eq!(root.submodules, ["a", "b"], "a test module's file is not read");
    }

    #[test]
    fn circles_are_found_in_every_folder() {
        let g = graph(&[
            ("", "mod net; mod util;"),
            ("net", "mod p; mod q; mod r; use crate::util;"),
            ("net::p", "use super::q::X;"),
            ("net::q", "use super::r;"),
            ("net::r", "use crate::net::p::{Y, Z};"),
            ("util", "use crate::net::p;"),
        ]);
        let circles = g.circles();
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(circles.contains(&(vec!["net".into()], names(&["p", "q", "r"]))), "{circles:?}");
        assert!(circles.contains(&(vec![], names(&["net", "util"]))), "{circles:?}");
    }

    #[test]
    fn layers_refuse_arrows_up_and_sideways_and_undeclared_modules() {
        let layers = Layers::parse("top\nmid other\n\nbottom\n");
        let names: BTreeSet<String> =
            ["top", "mid", "other", "bottom", "new"].map(String::from).into();
        let problems = layers.violations(
            &names,
            &arrows(&[("top", "bottom"), ("mid", "bottom"), ("bottom", "mid"), ("mid", "other")]),
        );
        assert_eq!(
            problems,
            [
                "new is in no layer",
                "bottom -> mid points up",
                "mid -> other points within its layer"
            ]
        );
        let gone: BTreeSet<String> = ["top", "mid", "other"].map(String::from).into();
        assert_eq!(layers.violations(&gone, &BTreeSet::new()), ["bottom is declared but absent"]);
    }

    #[test]
    fn layer_blocks_are_read_from_markdown() {
        let doc = "# A\n```layers crate-a\nx\ny z\n```\n\n```text\nnot layers\n```\n```layers w\nq\n```\n";
        let blocks = layer_blocks(doc);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks["crate-a"].0, [vec!["x".to_string()], vec!["y".into(), "z".into()]]);
        assert_eq!(blocks["w"].names(), ["q".to_string()].into());
    }
}
