//! `cargo xtask unprivileged`: the containment suites again, as an unprivileged user.
//!
//! Users of the library run it as root and as ordinary users, and the sandbox takes different
//! paths for each (a root host maps each cell to a uid of its own and opens the granted trees
//! itself; an unprivileged one maps the cell to its own uid and binds by path). `cargo xtask
//! test` runs everything as the invoking user; this runs the suites that exercise containment
//! (`code-runtime-sandbox`, `code-runtime-python`, the TypeScript provider's `process`
//! isolation and attacks, and the provider suites of `conformance`), and the Python package's
//! suites against its installed wheel, as the user [`USER`], created when missing. The test
//! binaries are those `cargo xtask test` built: nothing is compiled again.
//! It needs root, to create the user and switch to it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::test_runner::{Job, run_jobs};
use crate::toolchain;

/// The unprivileged account the suites run as: a system user without a home or a shell.
const USER: &str = "code-runtime-ci";

/// The packages whose tests run unprivileged, and the tests of each (all when empty).
const PACKAGES: [(&str, &[&str]); 4] = [
    ("code-runtime-sandbox", &[]),
    ("code-runtime-python", &[]),
    // Its cells, and the attacks that run in both isolation modes; the rest is the same as root.
    ("code-runtime-worker-thread", &["process::", "attacks::"]),
    // The provider suites, which run Python and TypeScript in cells.
    ("conformance", &["providers::"]),
];

/// The PATH of the unprivileged runs: the system's directories only, so `python3` is one every
/// user can execute (a version manager's under `/root` is not).
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub(crate) fn run(extra: &[String]) -> Result<(), String> {
    if toolchain::geteuid() != 0 {
        return Err("`unprivileged` switches to another user and needs root; as an ordinary \
                    user, `cargo xtask test` already is the unprivileged run"
            .to_owned());
    }
    ensure_user()?;
    // The package tests import from python-packages/.venv.
    crate::test_tools::install()?;
    let binaries = test_binaries()?;
    let home = std::env::temp_dir().join(format!("{USER}-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|error| format!("{}: {error}", home.display()))?;
    let (uid, gid) = ids()?;
    std::os::unix::fs::chown(&home, Some(uid), Some(gid))
        .map_err(|error| format!("{}: {error}", home.display()))?;
    let fixture = Submount::make()?;
    let outcome = run_all(&binaries, &home, &fixture.dir, extra).and_then(|()| wheel_suite(&home));
    drop(fixture);
    let _ = std::fs::remove_dir_all(&home);
    outcome
}

/// A directory whose `sub` is a tmpfs anyone may write, for the sandbox's test that a granted
/// path is read-only with every mount beneath it: an unprivileged test cannot mount on the host.
/// Unmounted and removed on drop.
struct Submount {
    dir: PathBuf,
}

impl Submount {
    fn make() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("{USER}-submount-{}", std::process::id()));
        let sub = dir.join("sub");
        std::fs::create_dir_all(&sub).map_err(|error| format!("{}: {error}", sub.display()))?;
        let fixture = Self { dir };
        #[expect(clippy::disallowed_methods, reason = "xtask mounts a test fixture")]
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs"])
            .arg(&sub)
            .status()
            .map_err(|error| format!("cannot run mount: {error}"))?;
        if !status.success() {
            return Err(format!("mounting a tmpfs at {} failed ({status})", sub.display()));
        }
        Ok(fixture)
    }
}

impl Drop for Submount {
    fn drop(&mut self) {
        #[expect(clippy::disallowed_methods, reason = "xtask unmounts its test fixture")]
        let _ = Command::new("umount").arg("--lazy").arg(self.dir.join("sub")).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs each test binary as [`USER`], a few at a time, and totals the results.
fn run_all(
    binaries: &[Binary],
    home: &Path,
    submount: &Path,
    extra: &[String],
) -> Result<(), String> {
    let jobs = binaries
        .iter()
        .map(|Binary { path: binary, package_dir, filters }| {
            #[expect(
                clippy::disallowed_methods,
                reason = "xtask runs test binaries, not a Python child"
            )]
            let mut command = Command::new("setpriv");
            command
                .args([&format!("--reuid={USER}"), &format!("--regid={USER}"), "--clear-groups"])
                .arg("env")
                .arg("-i")
                .arg(format!("PATH={PATH}"))
                .arg(format!("HOME={}", home.display()))
                .arg(format!("CODE_RUNTIME_SUBMOUNT_FIXTURE={}", submount.display()))
                .arg(binary)
                .args(filters.iter().copied())
                .args(extra)
                .current_dir(package_dir);
            Job { name: format!("as {USER}: {}", binary.display()), command }
        })
        .collect();
    let (passed, failed, failures) = run_jobs(jobs);
    println!("unprivileged tests: {passed} passed, {failed} failed");
    if !failures.is_empty() {
        return Err(format!("failed: {}", failures.join("; ")));
    }
    if passed == 0 {
        return Err("no test ran".to_owned());
    }
    Ok(())
}

/// The Python package's API and hostile suites, as [`USER`], against the wheel `cargo xtask
/// wheel` installed (its environment's site-packages on `PYTHONPATH`, run by the system's
/// `python3`: the environment's own interpreter lives under `/root`).
fn wheel_suite(home: &Path) -> Result<(), String> {
    let root = toolchain::project_root();
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let lib = target.join("wheel-venv/lib");
    let site = std::fs::read_dir(&lib)
        .ok()
        .and_then(|mut dirs| dirs.find_map(|dir| dir.ok()))
        .map(|dir| dir.path().join("site-packages"));
    let Some(site) = site.filter(|site| site.is_dir()) else {
        return Err(format!(
            "no wheel environment in {} (`cargo xtask wheel` makes it; .ci/run runs it first)",
            lib.display()
        ));
    };
    let tests = root.join("code-runtime-py/tests");
    println!("== as {USER}: the Python package's suites (installed wheel)");
    #[expect(clippy::disallowed_methods, reason = "xtask runs the wheel's test suite")]
    let status = Command::new("setpriv")
        .args([&format!("--reuid={USER}"), &format!("--regid={USER}"), "--clear-groups"])
        .arg("env")
        .arg("-i")
        .arg(format!("PATH={PATH}"))
        .arg(format!("HOME={}", home.display()))
        .arg(format!("PYTHONPATH={}", site.display()))
        .args(["/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "-q"])
        .arg(tests.join("test_runtime.py"))
        .arg(tests.join("test_hostile.py"))
        .current_dir(&tests)
        .status()
        .map_err(|error| format!("cannot run setpriv: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the Python package's suites failed as {USER} ({status})"))
    }
}

/// Creates [`USER`] unless it exists.
fn ensure_user() -> Result<(), String> {
    if ids().is_ok() {
        return Ok(());
    }
    #[expect(clippy::disallowed_methods, reason = "xtask creates the CI user, not a Python child")]
    let status = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
        .status()
        .map_err(|error| format!("cannot run useradd: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("useradd {USER} failed ({status})")) }
}

/// The uid and gid of [`USER`], from `id`.
fn ids() -> Result<(u32, u32), String> {
    let id = |flag: &str| -> Result<u32, String> {
        #[expect(clippy::disallowed_methods, reason = "xtask looks up the CI user")]
        let output = Command::new("id")
            .args([flag, USER])
            .stderr(Stdio::null())
            .output()
            .map_err(|error| format!("cannot run id: {error}"))?;
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .map_err(|_| format!("no user {USER}"))
    };
    Ok((id("-u")?, id("-g")?))
}

/// A test binary, where cargo would run it (its package's directory), and the tests to run.
struct Binary {
    path: PathBuf,
    package_dir: PathBuf,
    filters: &'static [&'static str],
}

/// The test binaries of [`PACKAGES`], as the workspace's test command built them: the same
/// selection (`--workspace`), so nothing is built again when `cargo xtask test` ran first.
fn test_binaries() -> Result<Vec<Binary>, String> {
    let built = crate::test_runner::test_binaries(&["--workspace", "--locked"])?;
    let binaries: Vec<Binary> = built
        .into_iter()
        .filter_map(|binary| {
            let &(_, filters) =
                PACKAGES.iter().find(|(package, _)| binary.package_dir.ends_with(package))?;
            // The filters name integration tests; a unit-test binary runs whole.
            let filters = if binary.unit { &[][..] } else { filters };
            Some(Binary { path: binary.path, package_dir: binary.package_dir, filters })
        })
        .collect();
    if binaries.is_empty() {
        return Err("no test binary of the containment suites".to_owned());
    }
    Ok(binaries)
}
