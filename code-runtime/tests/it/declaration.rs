//! `describe`: declarations and stubs from binding schemas, snapshotted, and checked by the real
//! TypeScript compiler and mypy (installed by `cargo xtask test` from `typecheck/`'s lockfiles).

use std::path::{Path, PathBuf};
use std::process::Command;

use code_runtime::json;
use code_runtime::{
    CodeBindingNamespace, CodeRunRequest, ContractError, binding, describe, describe_request,
};

fn echo() -> code_runtime::BindingFunction {
    binding(|args| async move { Ok(args.into_value()) })
}

/// A catalogue with every schema construct `describe` reads, and names that are not identifiers.
fn catalogue() -> Vec<CodeBindingNamespace> {
    let search = echo()
        .description("Search the web.\nResults are ranked.")
        .input(json!({
            "type": "object",
            "properties": {
                "q": {"type": "string", "description": "The query.", "examples": ["rust"]},
                "limit": {"type": "integer", "default": 10, "title": "Limit"},
                "score": {"type": "number"},
                "since": {"type": ["string", "null"], "format": "date-time"},
                "mode": {"enum": ["fast", "deep", 3]},
                "kind": {"const": "web"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "range": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "items": false},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "content-type": {"type": "string"},
                "filter": {"anyOf": [{"$ref": "#/$defs/Filter"}, {"type": "null"}]},
                "weird": {"not": {"type": "string"}}
            },
            "required": ["q"],
            "additionalProperties": false,
            "$defs": {
                "Filter": {
                    "type": "object",
                    "description": "A filter; filters nest.",
                    "properties": {
                        "field": {"type": "string"},
                        "all": {"type": "array", "items": {"$ref": "#/$defs/Filter"}}
                    },
                    "required": ["field"]
                }
            }
        }))
        .output(json!({
            "type": "object",
            "properties": {
                "hits": {
                    "type": "array",
                    "items": {
                        "allOf": [
                            {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
                            {"type": "object", "properties": {"rank": {"type": "integer"}}}
                        ]
                    }
                },
                "next": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["hits"]
        }));
    let fetch = echo()
        .description("Fetch a page.")
        .input(json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}))
        .output(json!({"type": "string"}));
    let tools = CodeBindingNamespace::new("tools")
        .description("The agent's tools.")
        .function("search", search)
        .function("fetch", fetch)
        .function("ping", echo())
        .error_class("ToolCallError", "toolName");
    let files = CodeBindingNamespace::new("files")
        .function(
            "read-file",
            echo()
                .description("Read a file.")
                .input(json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}))
                .output(json!({"type": "string"})),
        )
        .function("delete", echo().input(json!({"type": "string"})).output(json!({"type": "boolean"})))
        .function(
            "tree",
            echo().output(json!({
                "$ref": "#/definitions/Node",
                "definitions": {"Node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}, "required": ["name", "children"]}}
            })),
        )
        .error_class("FileError", "operation");
    vec![tools, files]
}

#[test]
fn typescript_declarations_of_every_construct() {
    insta::assert_snapshot!(describe(&catalogue(), "typescript").unwrap());
}

#[test]
fn python_stubs_of_every_construct() {
    insta::assert_snapshot!(describe(&catalogue(), "python").unwrap());
}

#[test]
fn describe_is_deterministic_and_refuses_what_run_refuses() {
    assert_eq!(
        describe(&catalogue(), "python").unwrap(),
        describe(&catalogue(), "python").unwrap()
    );
    assert_eq!(
        describe(&catalogue(), "ruby").unwrap_err(),
        ContractError::UnknownLanguage { language: "ruby".to_owned() }
    );
    // A `Language` cannot be wrong, and names the same thing as its name.
    assert_eq!(
        describe(&catalogue(), code_runtime::Language::Python).unwrap(),
        describe(&catalogue(), "python").unwrap()
    );
    let bad = [CodeBindingNamespace::new("$tools")];
    assert!(matches!(describe(&bad, "typescript"), Err(ContractError::UnusableGlobal { .. })));
    // Schemas that are not schemas degrade, they do not fail.
    let odd = CodeBindingNamespace::new("odd")
        .function("a", echo().input(json!(42)).output(json!({"$ref": "https://example.com/x"})))
        .function("b", echo().input(json!({"type": "object", "$ref": "#/$defs/missing"})));
    let text = describe(std::slice::from_ref(&odd), "typescript").unwrap();
    assert!(text.contains("function a(args?: unknown): Promise<unknown>;"), "{text}");
    assert!(
        describe(&[odd], "python")
            .unwrap()
            .contains("async def a(self, args: Any = ..., /) -> Any:")
    );
}

/// The workspace's `typecheck/` directory, where the pinned tools are installed.
fn typecheck_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../typecheck")
}

#[track_caller]
fn tool(path: &Path) -> Command {
    assert!(
        path.exists(),
        "{} is missing: `cargo xtask test` installs the type checkers from typecheck/'s lockfiles",
        path.display()
    );
    #[expect(clippy::disallowed_methods, reason = "the pinned type checker under test")]
    Command::new(path)
}

struct Scratch(PathBuf);

impl Scratch {
    /// A directory of its own: tests run concurrently in one process.
    fn new(name: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir()
            .join(format!("code-runtime-{name}-{}-{serial}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `tsc --strict --noEmit` over the declarations and `program` (wrapped as the runtime wraps it:
/// the body of an async function); the compiler's output when it refuses.
fn tsc(declarations: &str, program: &str) -> Result<(), String> {
    let scratch = Scratch::new("tsc");
    let declarations = scratch.write("bindings.d.ts", declarations);
    // The runtime's own globals a program uses beside the bindings (ES2022 has no `console`).
    let prelude = "declare const console: { log(...data: unknown[]): void };";
    let program = scratch.write(
        "program.ts",
        &format!("{prelude}\nasync function main() {{\n{program}\n}}\nexport {{}};\n"),
    );
    let output = tool(&typecheck_dir().join("node_modules/.bin/tsc"))
        .args(["--noEmit", "--strict", "--target", "es2022", "--lib", "es2022"])
        .arg(&declarations)
        .arg(&program)
        .output()
        .expect("tsc runs");
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// `mypy --strict` over the stubs and `program` (the body of a coroutine, as the runtime runs it).
fn mypy(stubs: &str, program: &str) -> Result<(), String> {
    let scratch = Scratch::new("mypy");
    scratch.write("bindings.pyi", stubs);
    let body: String = program.lines().map(|line| format!("    {line}\n")).collect();
    let program = scratch.write(
        "program.py",
        &format!(
            "from typing import Any\nfrom bindings import *\n\n\nasync def main() -> Any:\n{body}"
        ),
    );
    let output = tool(&typecheck_dir().join(".venv/bin/mypy"))
        .args([
            "--strict",
            "--no-incremental",
            "--cache-dir",
            "/dev/null",
            "--python-version",
            "3.11",
        ])
        .arg(&program)
        .current_dir(&scratch.0)
        .output()
        .expect("mypy runs");
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

#[test]
fn the_typescript_compiler_accepts_the_declarations_and_refuses_a_wrong_argument() {
    let declarations = describe(&catalogue(), "typescript").unwrap();
    let good = r#"
const found = await tools.search({ q: "rust", limit: 3, mode: "deep", range: [1, 2], "content-type": "text/html",
  filter: { field: "lang", all: [{ field: "year" }] }, labels: { a: "b" } });
const first: string = found.hits[0].url;
const rank: number | undefined = found.hits[0].rank;
const page: string = await tools.fetch({ url: first });
await tools.ping();
const text: string = await files["read-file"]({ path: "/a" });
const gone: boolean = await files.delete("/a");
const tree = await files.tree();
const names: string[] = tree.children.map((child) => child.name);
try { await tools.fetch({ url: "x" }); } catch (e) {
  if (e instanceof ToolCallError) { const which: string = e.toolName; console.log(which, e.data, e.message); }
}
return [page, rank, text, gone, names];
"#;
    tsc(&declarations, good).unwrap_or_else(|errors| panic!("{errors}\n{declarations}"));
    for wrong in [
        "await tools.search({ q: 42 });",
        "await tools.search({ limit: 3 });",
        "await tools.search({ q: 'x', mode: 'slow' });",
        "await tools.search({ q: 'x', extra: 1 });",
        "await files['read-file']({ path: 1 });",
        "const n: number = await tools.fetch({ url: 'x' });",
    ] {
        let errors = tsc(&declarations, wrong).expect_err(wrong);
        assert!(errors.contains("error TS"), "{wrong}: {errors}");
    }
}

#[test]
fn mypy_accepts_the_stubs_and_refuses_a_wrong_argument() {
    let stubs = describe(&catalogue(), "python").unwrap();
    let good = r#"
found = await tools.search({"q": "rust", "limit": 3, "mode": "deep", "range": (1, 2), "content-type": "text/html",
    "filter": {"field": "lang", "all": [{"field": "year"}]}, "labels": {"a": "b"}})
first: str = found["hits"][0]["url"]
page: str = await tools.fetch({"url": first})
await tools.ping()
text: str = await files["read-file"]({"path": "/a"})
gone: bool = await files["delete"]("/a")
tree = await files.tree()
names: list[str] = [child["name"] for child in tree["children"]]
try:
    await tools.fetch({"url": "x"})
except ToolCallError as e:
    which: str = e.toolName
    print(which, e.data)
return [page, text, gone, names]
"#;
    mypy(&stubs, good).unwrap_or_else(|errors| panic!("{errors}\n{stubs}"));
    for wrong in [
        "await tools.search({\"q\": 42})",
        "await tools.search({\"limit\": 3})",
        "await tools.search({\"q\": \"x\", \"mode\": \"slow\"})",
        "await files[\"read-file\"]({\"path\": 1})",
        "n: int = await tools.fetch({\"url\": \"x\"})",
    ] {
        let errors = mypy(&stubs, wrong).expect_err(wrong);
        assert!(errors.contains("error:"), "{wrong}: {errors}");
    }
}

/// A request whose program also sees bare functions, `call_tool` and values.
fn with_globals() -> CodeRunRequest {
    let get = echo()
        .description("Reads a key.")
        .input(json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}))
        .output(json!({"type": "string"}));
    let kv = CodeBindingNamespace::new("kv").function("get", get).functions_as_globals();
    CodeRunRequest::new("")
        .binding(kv)
        .call_tool()
        .value("accountId", json!("acct-1"))
        .value("spec", json!({"paths": {"/a": {}}, "version": 3}))
        .value("limits", json!([1, 2]))
}

#[test]
fn declarations_of_bare_functions_call_tool_and_values() {
    let request = with_globals();
    insta::assert_snapshot!(
        "globals_typescript",
        describe_request(&request, "typescript").unwrap()
    );
    insta::assert_snapshot!("globals_python", describe_request(&request, "python").unwrap());
    let unusable = CodeRunRequest::new("").value("print", json!(1));
    assert!(describe_request(&unusable, "python").is_err());
}

#[test]
fn the_type_checkers_accept_the_globals_and_refuse_misuse() {
    let declarations = describe_request(&with_globals(), "typescript").unwrap();
    let good = r#"
const value: string = await get({ key: "a" });
const same: string = await kv.get({ key: "a" });
const any: unknown = await call_tool("kv.get", { key: "a" });
const id: string = accountId;
const keys: string[] = Object.keys(spec);
const first: unknown = limits[0];
return [value, same, any, id, keys, first];
"#;
    tsc(&declarations, good).unwrap_or_else(|errors| panic!("{errors}\n{declarations}"));
    for wrong in [
        "await get({ key: 1 });",
        "accountId = 'b';",
        "const n: number = accountId;",
        "await call_tool(1, {});",
    ] {
        let errors = tsc(&declarations, wrong).expect_err(wrong);
        assert!(errors.contains("error TS"), "{wrong}: {errors}");
    }
    let stubs = describe_request(&with_globals(), "python").unwrap();
    let good = r#"
value: str = await get({"key": "a"})
same: str = await kv.get({"key": "a"})
anything = await call_tool("kv.get", {"key": "a"})
ident: str = accountId
keys: list[str] = list(spec)
return [value, same, anything, ident, keys, limits[0]]
"#;
    mypy(&stubs, good).unwrap_or_else(|errors| panic!("{errors}\n{stubs}"));
    for wrong in ["await get({\"key\": 1})", "n: int = accountId", "await call_tool(1, {})"] {
        let errors = mypy(&stubs, wrong).expect_err(wrong);
        assert!(errors.contains("error:"), "{wrong}: {errors}");
    }
}

#[test]
fn a_function_that_needs_approval_says_so_in_both_languages() {
    let tools = CodeBindingNamespace::new("tools")
        .function(
            "remove",
            echo()
                .description("Deletes a repository.")
                .approval(code_runtime::ApprovalRule::Always),
        )
        .function(
            "push",
            echo().approval(code_runtime::ApprovalRule::When(json!({"required": ["force"]}))),
        )
        .function("read", echo());
    for language in ["typescript", "python"] {
        let text = describe(std::slice::from_ref(&tools), language).unwrap();
        assert!(
            text.contains("Deletes a repository.")
                && text.contains("Each call waits for the user's approval; a denied call fails with the namespace's error, message `denied: <reason>`.")
                && text.contains("A call with some arguments waits for the user's approval"),
            "{language}: {text}"
        );
        assert_eq!(text.matches("approval").count(), 2, "{language}: only the marked functions");
    }
}
