//! The module graph of one crate, from the `crate::`, `super::` and `self::` paths in its code:
//! tidy's check that no two modules depend on each other, however indirectly.

/// Which modules of one crate use which, at every depth, from the `crate::`, `super::` and
/// `self::` paths in their code.
#[derive(Default)]
pub(super) struct ModuleGraph {
    /// Per module (`a::b`), the paths its code names (segments; items included, resolved to the
    /// longest known module when the graph is read).
    uses: std::collections::BTreeMap<String, Vec<Vec<String>>>,
}

impl ModuleGraph {
    /// Records the paths `module`'s `code` names: every `crate::a::b`, `super::a` and `self::a`
    /// path, and every path in a `use crate::{…}` group. Comments are skipped (a doc link is no
    /// dependency).
    pub(super) fn add(&mut self, module: &str, code: &str) {
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
    pub(super) fn cycles(&self) -> Vec<Vec<String>> {
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
}
