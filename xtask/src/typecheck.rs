//! The type checkers the declaration tests run (`typecheck/`): the TypeScript compiler from npm
//! and mypy from PyPI, installed from committed lockfiles. A missing `npm` or `python3` is an
//! error: the tests need both, and a skipped check would look like a passed one.

use std::path::Path;
use std::process::Command;

use crate::toolchain::project_root;

/// Installs what is not installed yet: `typecheck/node_modules` (`npm ci`) and `typecheck/.venv`
/// (`pip install --require-hashes`).
#[expect(clippy::disallowed_methods, reason = "xtask installs the tools, not a Python child")]
pub(crate) fn install() -> Result<(), String> {
    let dir = project_root().join("typecheck");
    if !dir.join("node_modules/.bin/tsc").exists() {
        run(
            Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix"]).arg(&dir),
            "npm ci (the TypeScript compiler)",
        )?;
    }
    let venv = dir.join(".venv");
    if !venv.join("bin/mypy").exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv")?;
        run(
            Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "--require-hashes", "--only-binary=:all:", "-r"])
                .arg(dir.join("requirements.txt")),
            "pip install (mypy)",
        )?;
    }
    for tool in ["node_modules/.bin/tsc", ".venv/bin/mypy"] {
        if !Path::new(&dir.join(tool)).exists() {
            return Err(format!("typecheck/{tool} is missing after its install"));
        }
    }
    Ok(())
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command.status().map_err(|error| format!("{what}: cannot run it: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("{what} failed ({status})")) }
}
