//! Node as the reference implementation: a program's value as Node computes it, for the
//! differential tests (`web.rs`, `contract.rs`). Node and the pinned TypeScript compiler are
//! test tools (`.ci/run` installs them; `cargo xtask test` installs `typecheck/`): a machine
//! without them fails here, naming what is missing.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use code_runtime::JsonValue;
use code_runtime::json;

/// `program` (the body of an async function, plain JavaScript) run by Node: its value as JSON.
pub(crate) fn in_node(program: &str) -> JsonValue {
    node(program, None)
}

/// `program` (TypeScript, the body of an async function) compiled by the pinned `tsc`
/// (`typecheck/`; `transpileModule`, ES2022; TC39 decorators, or `experimentalDecorators` when
/// `legacy_decorators`) and run by Node: its value as JSON.
pub(crate) fn compiled_by_tsc(program: &str, legacy_decorators: bool) -> JsonValue {
    let compiler = typecheck_dir().join("node_modules/typescript/lib/typescript.js");
    assert!(
        compiler.exists(),
        "{} is missing: `cargo xtask test` installs the TypeScript compiler from typecheck/'s lockfile",
        compiler.display()
    );
    node(program, Some((&compiler, legacy_decorators)))
}

fn typecheck_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../typecheck")
}

/// Reads the program from stdin (a program of any size, any characters); compiles it when
/// given a compiler (whose module output may end in `export {};`, not valid in a function body).
const RUNNER: &str = r#"
const [compiler, legacy] = process.argv.slice(1);
let body = require("fs").readFileSync(0, "utf8");
if (compiler) {
  const ts = require(compiler);
  const options = { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, experimentalDecorators: legacy === "legacy" };
  body = ts.transpileModule(body, { compilerOptions: options }).outputText.replace(/^export \{\};$/m, "");
}
const AsyncFunction = (async () => {}).constructor;
new AsyncFunction(body)().then(
  (v) => process.stdout.write(JSON.stringify(v)),
  (e) => { console.error(e); process.exit(1); });
"#;

#[expect(clippy::disallowed_methods, reason = "Node, the reference implementation")]
fn node(program: &str, compiler: Option<(&Path, bool)>) -> JsonValue {
    let mut command = std::process::Command::new("node");
    command.arg("-e").arg(RUNNER);
    if let Some((compiler, legacy_decorators)) = compiler {
        command.arg(compiler).arg(if legacy_decorators { "legacy" } else { "tc39" });
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (the differential tests need it)");
    let mut stdin = child.stdin.take().expect("a pipe");
    stdin.write_all(program.as_bytes()).expect("node reads the program");
    drop(stdin);
    let out = child.wait_with_output().expect("node ends");
    assert!(out.status.success(), "node failed: {}", String::from_utf8_lossy(&out.stderr));
    json::parse(&String::from_utf8_lossy(&out.stdout)).expect("node printed JSON")
}
