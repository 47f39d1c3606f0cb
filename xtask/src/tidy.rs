//! `cargo xtask tidy`: conventions of ARCHITECTURE.md that no compiler checks.
//!
//! - every Rust file starts with a `//!` comment saying what it is for;
//! - every crate opts into the workspace lints;
//! - no module is named `utils` (module names are nouns for the things in them);
//! - no function in a crate's sources (its tests aside) is longer than 80 lines (a function that
//!   needs a scroll bar is two functions);
//! - no two modules of a crate depend on each other, however indirectly (module cycles hide which
//!   one is the leaf; plain data goes in a module of its own that both use);
//! - every file docs/conformance.md names exists, and every test it names is in that file.

use std::fs;
use std::path::{Path, PathBuf};

use crate::toolchain::project_root;

/// The longest function a crate's sources may have, in lines, signature and closing brace
/// included.
const MAX_FUNCTION_LINES: usize = 80;

/// The `members` of the workspace's `Cargo.toml`, as written (paths relative to the root).
fn workspace_members(root: &Path) -> Result<Vec<String>, String> {
    let manifest =
        fs::read_to_string(root.join("Cargo.toml")).map_err(|e| format!("Cargo.toml: {e}"))?;
    let start = manifest.find("members = [").ok_or("Cargo.toml: no workspace members")?;
    let list = &manifest[start + "members = [".len()..];
    let list = &list[..list.find(']').ok_or("Cargo.toml: unterminated members")?];
    Ok(list
        .split(',')
        .map(|member| member.trim().trim_matches('"').to_owned())
        .filter(|member| !member.is_empty())
        .collect())
}

pub(crate) fn run() -> Result<(), String> {
    let root = project_root();
    let mut problems = Vec::new();
    // Every member of the workspace: a new crate is checked the day it is added.
    let members = workspace_members(&root)?;
    if members.len() < 2 {
        return Err(format!(
            "the workspace lists {} member(s); tidy reads it wrong",
            members.len()
        ));
    }
    for krate in &members {
        let krate = krate.as_str();
        let dir = root.join(krate);
        let manifest = fs::read_to_string(dir.join("Cargo.toml"))
            .map_err(|e| format!("{krate}/Cargo.toml: {e}"))?;
        if !manifest.contains("[lints]\nworkspace = true") {
            problems.push(format!("{krate}/Cargo.toml: missing `[lints] workspace = true`"));
        }
        let mut files = Vec::new();
        collect_rust_files(&dir, &mut files).map_err(|e| format!("{krate}: {e}"))?;
        let mut modules = ModuleGraph::default();
        for file in files {
            let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
            let text = fs::read_to_string(&file).map_err(|e| format!("{shown}: {e}"))?;
            if !text.starts_with("//!") {
                problems.push(format!("{shown}: does not start with a `//!` comment"));
            }
            if file.file_stem().is_some_and(|stem| stem == "utils") {
                problems.push(format!("{shown}: name modules after what they hold, not `utils`"));
            }
            if file.starts_with(dir.join("src")) {
                let code = without_tests(&text);
                for (line, name, length) in long_functions(code) {
                    problems.push(format!(
                        "{shown}:{line}: fn {name} is {length} lines (at most {MAX_FUNCTION_LINES})"
                    ));
                }
                if let Some(module) = module_path(&dir.join("src"), &file) {
                    modules.add(&module, code);
                }
            }
        }
        for cycle in modules.cycles() {
            problems.push(format!(
                "{krate}: modules {} depend on each other (a cycle; move what they share into a \
                 module of its own)",
                cycle.join(", ")
            ));
        }
    }
    problems.extend(conformance_map(&root));
    if problems.is_empty() {
        println!("tidy: ok");
        Ok(())
    } else {
        for problem in &problems {
            eprintln!("tidy: {problem}");
        }
        Err(format!("{} tidy problem(s)", problems.len()))
    }
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if !path.ends_with("target") && !path.ends_with("snapshots") {
                collect_rust_files(&path, files)?;
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// Functions longer than [`MAX_FUNCTION_LINES`]: `(first line, name, length)`. A function starts
/// at a line whose first word after the visibility and qualifiers is `fn`, and ends at the first
/// line after it that closes a brace at the same indentation.
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let words: Vec<&str> = line.split_whitespace().collect();
        let qualifiers = ["pub", "pub(crate)", "async", "unsafe", "const", "extern", "\"C\""];
        let Some(position) = words.iter().position(|word| !qualifiers.contains(word)) else {
            continue;
        };
        if words[position] != "fn" || line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = words
            .get(position + 1)
            .map(|word| word.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
            .unwrap_or_default();
        let closing = " ".repeat(indent) + "}";
        let end = lines[index..].iter().position(|line| line.trim_end() == closing);
        if let Some(length) = end.map(|offset| offset + 1) {
            if length > MAX_FUNCTION_LINES {
                found.push((index + 1, name, length));
            }
        }
    }
    found
}

/// `text` up to its unit tests (`#[cfg(test)]`, which this workspace puts last in a file).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |end| &text[..end])
}

/// The module a source file is (`json/value.rs` is `json::value`, `mcp.rs` and `mcp/mod.rs` are
/// `mcp`); `None` for a crate root (`lib.rs`, `main.rs`, `bin/*`), which declares the modules
/// rather than using them.
fn module_path(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let mut segments: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_str().map(|name| name.trim_end_matches(".rs").to_owned()))
        .collect::<Option<_>>()?;
    if segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    let first = segments.first()?;
    (!["lib", "main", "bin"].contains(&first.as_str())).then(|| segments.join("::"))
}

/// Which modules of one crate use which, at every depth, from the `crate::`, `super::` and
/// `self::` paths in their code.
#[derive(Default)]
struct ModuleGraph {
    /// Per module (`a::b`), the paths its code names (segments; items included, resolved to the
    /// longest known module when the graph is read).
    uses: std::collections::BTreeMap<String, Vec<Vec<String>>>,
}

impl ModuleGraph {
    /// Records the paths `module`'s `code` names: every `crate::a::b`, `super::a` and `self::a`
    /// path, and every path in a `use crate::{…}` group. Comments are skipped (a doc link is no
    /// dependency).
    fn add(&mut self, module: &str, code: &str) {
        let here: Vec<String> = module.split("::").map(str::to_owned).collect();
        let used = self.uses.entry(module.to_owned()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or_default();
            for (at, _) in line.match_indices(['c', 's']) {
                if at > 0 && is_ident(line[..at].chars().next_back().unwrap_or(' ')) {
                    continue;
                }
                let rest = &line[at..];
                let (base, after) = if let Some(after) = rest.strip_prefix("crate::") {
                    (Vec::new(), after)
                } else if rest.starts_with("super::") {
                    let mut base = here.clone();
                    let mut after = rest;
                    while let Some(next) = after.strip_prefix("super::") {
                        base.pop();
                        after = next;
                    }
                    (base, after)
                } else if let Some(after) = rest.strip_prefix("self::") {
                    (here.clone(), after)
                } else {
                    continue;
                };
                for path in paths_after(after) {
                    let mut full = base.clone();
                    full.extend(path);
                    used.push(full);
                }
            }
        }
    }

    /// Groups of sibling modules that depend on each other, each sorted (strongly connected
    /// components of more than one module among the children of one module, a module standing
    /// for everything inside it).
    fn cycles(&self) -> Vec<Vec<String>> {
        let known: std::collections::BTreeSet<Vec<String>> =
            self.uses.keys().map(|name| name.split("::").map(str::to_owned).collect()).collect();
        // Per parent, the edges between its children.
        let mut levels: std::collections::BTreeMap<Vec<String>, SiblingGraph> = Default::default();
        for (name, paths) in &self.uses {
            let from: Vec<String> = name.split("::").map(str::to_owned).collect();
            for path in paths {
                let Some(to) =
                    (1..=path.len()).rev().map(|n| &path[..n]).find(|p| known.contains(*p))
                else {
                    continue;
                };
                let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
                if common < from.len() && common < to.len() {
                    let level = levels.entry(from[..common].to_vec()).or_default();
                    level.edge(&from[common], &to[common]);
                }
            }
        }
        let mut cycles = Vec::new();
        for (parent, level) in levels {
            for group in level.cycles() {
                cycles.push(
                    group
                        .into_iter()
                        .map(|child| {
                            parent.iter().chain([&child]).cloned().collect::<Vec<_>>().join("::")
                        })
                        .collect(),
                );
            }
        }
        cycles
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The module paths named after a `crate::` (or `super::`, `self::`): `a::b::Thing` gives
/// `[a, b, Thing]`, a group `a::{b::X, c}` gives `[a, b, X]` and `[a, c]` (nested groups keep
/// their first names), read up to the group's closing brace.
fn paths_after(text: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut rest = text;
    loop {
        let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        prefix.push(name);
        match rest.strip_prefix("::") {
            Some(after) => rest = after,
            None => return vec![prefix],
        }
    }
    let Some(group) = rest.strip_prefix('{') else { return vec![prefix] };
    group_items(group)
        .into_iter()
        .map(|item| prefix.iter().cloned().chain(item).collect())
        .collect()
}

/// The items of a `{…}` group as paths (`b::X, c::{d, e}, f` gives `[b, X]`, `[c]`, `[f]`), read
/// up to the group's closing brace.
fn group_items(group: &str) -> Vec<Vec<String>> {
    let mut items = Vec::new();
    let (mut depth, mut item) = (0usize, String::new());
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => items.push(std::mem::take(&mut item)),
            c if depth == 0 => item.push(c),
            _ => {}
        }
    }
    items.push(item);
    items
        .iter()
        .map(|item| {
            item.trim()
                .split("::")
                .map(str::trim)
                .take_while(|segment| !segment.is_empty() && segment.chars().all(is_ident))
                .filter(|segment| *segment != "self")
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|path| !path.is_empty())
        .collect()
}

/// The edges among the children of one module.
#[derive(Default)]
struct SiblingGraph {
    uses: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl SiblingGraph {
    fn edge(&mut self, from: &str, to: &str) {
        self.uses.entry(from.to_owned()).or_default().insert(to.to_owned());
        self.uses.entry(to.to_owned()).or_default();
    }

    /// Strongly connected components of more than one child, each sorted.
    fn cycles(&self) -> Vec<Vec<String>> {
        let names: Vec<&String> = self.uses.keys().collect();
        let index = |name: &str| names.iter().position(|known| *known == name);
        let edges: Vec<Vec<usize>> = names
            .iter()
            .map(|name| self.uses[*name].iter().filter_map(|used| index(used)).collect())
            .collect();
        // Which children each reaches, by a walk from each (a few dozen nodes at most).
        let reach: Vec<Vec<bool>> = (0..names.len())
            .map(|start| {
                let mut seen = vec![false; names.len()];
                let mut pending = edges[start].clone();
                while let Some(next) = pending.pop() {
                    if !seen[next] {
                        seen[next] = true;
                        pending.extend(&edges[next]);
                    }
                }
                seen
            })
            .collect();
        let mut grouped = vec![false; names.len()];
        let mut cycles = Vec::new();
        for a in 0..names.len() {
            if grouped[a] || !reach[a][a] {
                continue;
            }
            let group: Vec<usize> =
                (0..names.len()).filter(|&b| reach[a][b] && reach[b][a]).collect();
            for &member in &group {
                grouped[member] = true;
            }
            cycles.push(group.into_iter().map(|member| names[member].clone()).collect());
        }
        cycles
    }
}

/// The references of docs/conformance.md that do not hold: a row names a file (`` `path.rs` ``)
/// followed directly (separated by spaces and commas only) by the tests in it
/// (`` `test_name` ``).
fn conformance_map(root: &Path) -> Vec<String> {
    let Ok(map) = fs::read_to_string(root.join("docs/conformance.md")) else {
        return vec!["docs/conformance.md: missing".to_owned()];
    };
    let mut problems = Vec::new();
    for row in map.lines().filter(|line| line.starts_with("| C")) {
        let case = row.split('|').nth(1).unwrap_or_default().trim();
        // Odd pieces are quoted, even ones the text between quotes.
        let pieces: Vec<&str> = row.split('`').collect();
        let mut file: Option<String> = None;
        for (index, item) in pieces.iter().enumerate().skip(1).step_by(2) {
            let joined_to_previous = pieces[index - 1].chars().all(|c| c == ' ' || c == ',');
            if item.contains('/') && item.contains('.') {
                file = fs::read_to_string(root.join(item)).ok();
                if file.is_none() {
                    problems
                        .push(format!("docs/conformance.md: {case} names a missing file {item}"));
                }
            } else if !joined_to_previous {
                file = None;
            } else if let Some(text) = &file {
                if !text.contains(&format!("fn {item}(")) {
                    problems
                        .push(format!("docs/conformance.md: {case} names a missing test {item}"));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    #[test]
    fn module_cycles_are_found_and_comments_are_no_dependency() {
        let mut graph = super::ModuleGraph::default();
        graph.add("a", "use crate::b::Thing;\n/// [`c`](crate::c)\n");
        graph.add("b", "use crate::{c::X, json::{self, Y}};\n");
        graph.add("c", "fn f() { crate::a::g() }\n");
        graph.add("d", "use crate::a;\n");
        assert_eq!(
            super::paths_after("{c::X, json::{self, Y}};"),
            [vec!["c".to_owned(), "X".to_owned()], vec!["json".to_owned()]]
        );
        assert_eq!(graph.cycles(), vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]);
        let mut acyclic = super::ModuleGraph::default();
        acyclic.add("a", "use crate::b;\n// crate::c\n");
        acyclic.add("c", "use crate::a;\n");
        assert!(acyclic.cycles().is_empty());
    }

    #[test]
    fn cycles_between_nested_modules_are_found_whatever_the_path() {
        let mut graph = super::ModuleGraph::default();
        graph.add("mcp", "mod config;\nmod authorization;\nuse self::config::Server;\n");
        graph.add("mcp::config", "use super::authorization::OAuth;\n");
        graph.add("mcp::authorization", "use crate::mcp::{config::Server, metrics};\n");
        graph.add("mcp::authorization::callback", "use super::super::config;\n");
        graph.add("mcp::metrics", "use crate::run;\n");
        graph.add("run", "use crate::mcp::metrics::Metrics;\n");
        let cycles = graph.cycles();
        assert!(
            cycles.contains(&vec!["mcp::authorization".to_owned(), "mcp::config".to_owned()]),
            "{cycles:?}"
        );
        // `mcp` (through its child `metrics`) and `run` use each other: a cycle at the top.
        assert!(cycles.contains(&vec!["mcp".to_owned(), "run".to_owned()]), "{cycles:?}");
        assert_eq!(cycles.len(), 2, "{cycles:?}");
        // A child using its parent, and `self::` paths down, are no cycle.
        let mut tree = super::ModuleGraph::default();
        tree.add("a", "use self::b::X;\n");
        tree.add("a::b", "use super::Y;\nuse crate::a::Z;\n");
        assert!(tree.cycles().is_empty(), "{:?}", tree.cycles());
    }

    #[test]
    fn module_paths_follow_the_files() {
        let src = std::path::Path::new("/c/src");
        let path = |file: &str| super::module_path(src, &src.join(file));
        assert_eq!(path("json/value.rs").as_deref(), Some("json::value"));
        assert_eq!(path("mcp.rs").as_deref(), Some("mcp"));
        assert_eq!(path("mcp/mod.rs").as_deref(), Some("mcp"));
        assert_eq!(path("lib.rs"), None);
        assert_eq!(path("bin/cell.rs"), None);
    }

    /// The workspace as it is: `cargo test` fails on what `cargo xtask tidy` would report.
    #[test]
    fn the_workspace_is_tidy() {
        if let Err(problems) = super::run() {
            panic!("{problems} (each printed above)");
        }
    }

    #[test]
    fn long_functions_are_found() {
        let body = "    x += 1;\n".repeat(85);
        let text = format!(
            "//! A file.\n\npub(crate) fn short() {{\n    1\n}}\n\nasync fn long() {{\n{body}}}\n\nimpl X {{\n    fn inner() {{\n{body}    }}\n}}\n"
        );
        let found = super::long_functions(&text);
        assert_eq!(found, vec![(7, "long".to_owned(), 87), (96, "inner".to_owned(), 87)]);
    }
}
