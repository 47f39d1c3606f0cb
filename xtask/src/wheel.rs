//! `cargo xtask wheel [--release] [--no-test] [PYTEST ARGS]`: the Python package
//! (`code-runtime-py/`) built into a wheel with maturin, installed into a fresh virtual
//! environment, and tested there with pytest and `mypy --strict` (never from the source tree).
//!
//! The wheel holds the extension module (`code_runtime._native`) and the `code-runtime` command,
//! which pip installs in the environment's `bin/` and which serves the V8 cells of process
//! isolation. Without `--release` both are built as the test command builds (its profile, `dev`,
//! and, for the extension, the same features: `code-runtime-py/Cargo.toml` says how), so that
//! only the extension itself is compiled; then stripped. The builder, pytest, mypy and FastMCP come from
//! `code-runtime-py/tests/requirements.txt` (pinned, with hashes).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::toolchain::{cargo, offline_v8, project_root};

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let release = args.iter().any(|arg| arg == "--release");
    let pytest_args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|arg| !matches!(*arg, "--release" | "--no-test"))
        .collect();
    let wheel = build(release)?;
    if args.iter().any(|arg| arg == "--no-test") {
        return Ok(());
    }
    // The suite's package test imports from python-packages/.venv.
    crate::test_tools::install()?;
    test(&wheel, &pytest_args)
}

/// The wheel, built (in `target/wheels/`).
#[expect(clippy::disallowed_methods, reason = "xtask runs the build tools")]
fn build(release: bool) -> Result<PathBuf, String> {
    let root = project_root();
    let package = root.join("code-runtime-py");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);

    // The command, first: maturin puts data/scripts/ in the wheel as it finds it. In the dev
    // profile it is the one the test command builds (for the command's integration tests), with
    // the workspace's features: built by any other selection of packages it would be compiled
    // again, V8's link and all.
    if release {
        cargo(&["build", "--locked", "--release", "--package", "code-runtime-cli"])?;
    } else {
        let tests = ["test", "--locked", "--workspace", "--no-run", "--quiet"];
        cargo(&[&tests[..], &crate::toolchain::TEST_PROFILE[..]].concat())?;
    }
    let scripts = package.join("data/scripts");
    std::fs::create_dir_all(&scripts).map_err(|error| format!("{}: {error}", scripts.display()))?;
    let command = scripts.join("code-runtime");
    let built = target.join(if release { "release" } else { "debug" }).join("code-runtime");
    std::fs::copy(&built, &command)
        .map_err(|error| format!("copying {}: {error}", built.display()))?;
    run_tool(Command::new("strip").arg(&command), "strip code-runtime")?;

    let tools = install_tools()?;

    let wheels = target.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    let mut build = Command::new(tools.join("bin/maturin"));
    // maturin runs cargo: with the offline V8 library wired in, as every cargo of xtask.
    offline_v8(&mut build);
    // The test command's profile (`dev`: `test` would build the extension as a test harness): its
    // dependencies are the ones the test command built.
    let profile: &[&str] = if release { &["--release"] } else { &crate::toolchain::TEST_PROFILE };
    build
        .args(["build", "--locked", "--strip", "--compatibility", "linux", "--auditwheel", "skip"])
        .args(profile)
        .arg("--manifest-path")
        .arg(package.join("Cargo.toml"))
        .arg("--interpreter")
        .arg(tools.join("bin/python"))
        .arg("--out")
        .arg(&wheels);
    run_tool(build.current_dir(&root), "maturin build")?;
    let wheel = only_wheel(&wheels)?;
    let size = std::fs::metadata(&wheel).map(|meta| meta.len()).unwrap_or(0);
    println!("wheel: {} ({:.1} MB)", wheel.display(), size as f64 / 1e6);
    Ok(wheel)
}

/// `wheel` installed alone into a fresh environment beside the pinned test tools, then
/// `mypy --strict` over typed_usage.py and over the installed package, and pytest over the
/// suite.
#[expect(clippy::disallowed_methods, reason = "xtask runs the test tools")]
fn test(wheel: &Path, pytest_args: &[&str]) -> Result<(), String> {
    let root = project_root();
    let package = root.join("code-runtime-py");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let venv = target.join("wheel-venv");
    let _ = std::fs::remove_dir_all(&venv);
    install_requirements(&venv, &package.join("tests/requirements.txt"))?;
    run_tool(
        Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--no-deps"]).arg(wheel),
        "pip install the wheel",
    )?;
    let tests = package.join("tests");
    run_tool(
        Command::new(venv.join("bin/python"))
            .args(["-m", "mypy", "--strict", "--no-incremental"])
            .arg(tests.join("typed_usage.py"))
            .current_dir(&venv),
        "mypy --strict typed_usage.py",
    )?;
    // The package's own sources as installed: a user's mypy does not report what is wrong in
    // an installed package, it only trusts it.
    run_tool(
        Command::new(venv.join("bin/python"))
            .args(["-m", "mypy", "--strict", "--no-incremental", "-p", "code_runtime"])
            .current_dir(&venv),
        "mypy --strict -p code_runtime",
    )?;
    run_tool(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir"])
            .arg(&tests)
            .arg(&tests)
            .args(pytest_args)
            .current_dir(&venv)
            // The installed command is the one on PATH, as a user's activated environment has it.
            .env("PATH", path_with(&venv.join("bin")))
            .env("CODE_RUNTIME_WHEEL", wheel),
        "pytest (the installed wheel)",
    )
}

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut dirs = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

/// The wheel's build and test tools (maturin, pytest, mypy, FastMCP), in their environment under
/// the target directory: where they are.
pub(crate) fn install_tools() -> Result<PathBuf, String> {
    let root = project_root();
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let tools = target.join("wheel-tools");
    install_requirements(&tools, &root.join("code-runtime-py/tests/requirements.txt"))?;
    Ok(tools)
}

/// A virtual environment at `venv` with `requirements` installed (hash-checked), made when
/// missing.
#[expect(clippy::disallowed_methods, reason = "xtask installs the tools, not a Python child")]
fn install_requirements(venv: &Path, requirements: &Path) -> Result<(), String> {
    if !venv.join("bin/pip").exists() {
        run_tool(Command::new("python3").args(["-m", "venv"]).arg(venv), "python3 -m venv")?;
    }
    run_tool(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--require-hashes", "--only-binary=:all:", "-r"])
            .arg(requirements),
        &format!("pip install -r {}", requirements.display()),
    )
}

fn only_wheel(dir: &Path) -> Result<PathBuf, String> {
    let mut wheels = std::fs::read_dir(dir)
        .map_err(|error| format!("{}: {error}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "whl"));
    match (wheels.next(), wheels.next()) {
        (Some(wheel), None) => Ok(wheel),
        _ => Err(format!("expected one wheel in {}", dir.display())),
    }
}

fn run_tool(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command.status().map_err(|error| format!("{what}: cannot run it: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("{what} failed ({status})")) }
}
