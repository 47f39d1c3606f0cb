//! The interpreter's command line: the flags every Python process of this crate gets, the loader
//! a run's interpreter starts with, and the one place the host itself starts the interpreter.
//!
//! Programs run in sandbox cells (`cell.rs`); the host starts the configured interpreter itself
//! only to learn about it (`probe.rs`: resolve a shim, list its files, compile the bootstrap),
//! never with a program's code. Those starts go through [`python_command`] (clippy's
//! `disallowed-methods` bans `Command::new` elsewhere).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The frame protocol's channel: the child's fd 3.
const PROTOCOL_FD: i32 = 3;

/// The child bootstrap, compiled by the probe and loaded by [`loader`]: the session functions
/// first, which the bootstrap's `_main` calls in a run in a session.
pub(crate) const BOOTSTRAP: &str =
    concat!(include_str!("../python/session.py"), include_str!("../python/bootstrap.py"));

/// The zygote's program: a fork server whose forks run the bootstrap. Run by [`ZYGOTE_START`].
pub(crate) const ZYGOTE: &str = include_str!("../python/zygote.py");

/// What `-c` runs in the zygote's interpreter: it measures the interpreter's address space as
/// `_BARE` before anything else is compiled, then runs its one argument, the zygote's source
/// (taken out of `sys.argv`, which every fork would otherwise show). As `-c` itself, the source's
/// compilation (30 kB) grew the heap by 2.6 MB before its first line could measure: counted as
/// the interpreter's own, it was taken from every program's room (see `_OVERHEAD` there).
const ZYGOTE_START: &str = "import sys\n\
    with open('/proc/self/status', 'rb') as status:\n    \
        _BARE = next((int(line.split()[1]) * 1024 for line in status\n        \
            if line.startswith(b'VmSize:')), 0)\n\
    exec(compile(sys.argv.pop(), '<zygote>', 'exec'))\n";

/// `-I`: no PYTHON* variables, no user site, no script directory on sys.path. `-S`: no `site`
/// (it costs several times the bare start). `-B`: no bytecode files. `-X utf8`: UTF-8
/// everywhere, whatever the (empty) locale says.
const FLAGS: [&str; 5] = ["-I", "-S", "-B", "-X", "utf8"];

/// A command for the host to start the interpreter with: [`FLAGS`], stdin from `/dev/null`, and
/// an empty environment unless the caller resolves a version-manager shim (which needs the
/// host's).
pub(crate) fn python_command(interpreter: &Path, environment: Environment) -> Command {
    #[expect(clippy::disallowed_methods, reason = "the host's own starts of the interpreter")]
    let mut command = Command::new(interpreter);
    command.args(FLAGS).stdin(Stdio::null());
    if environment == Environment::Cleared {
        command.env_clear();
    }
    command
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Environment {
    Cleared,
    /// Only to resolve the interpreter: a shim such as pyenv's picks the real one from the
    /// environment. Nothing of the program's runs this way.
    Inherited,
}

/// The argument vector of a run's interpreter in its cell: `executable` with [`FLAGS`] and
/// `-c` `script`.
pub(crate) fn cell_args(executable: &Path, script: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![executable.into()];
    args.extend(FLAGS.iter().map(OsString::from));
    args.extend(["-c".into(), script.into()]);
    args
}

/// The zygote's argument vector: [`cell_args`] of [`ZYGOTE_START`], and `source` (the zygote's,
/// with what precedes it) as its one argument.
pub(crate) fn zygote_args(executable: &Path, source: &str) -> Vec<OsString> {
    let mut args = cell_args(executable, ZYGOTE_START);
    args.push(source.into());
    args
}

/// The program run with `-c`: reads the bootstrap's bytecode from the frame channel (a 10-digit
/// length, then the marshalled code object: the prelude of docs/python-frame-protocol.md), runs
/// it, and hands it the channel's number as `_FD` and the bytes that followed the prelude (the
/// start of the first frame) as `_PRELUDE`.
pub(crate) fn loader() -> String {
    format!(
        "import marshal, posix\n\
         b = b''\n\
         while len(b) < 10 or len(b) < 10 + int(b[:10]):\n    \
         chunk = posix.read({PROTOCOL_FD}, 1 << 20)\n    \
         if not chunk: posix._exit(70)\n    \
         b += chunk\n\
         n = 10 + int(b[:10])\n\
         exec(marshal.loads(b[10:n]), {{'__name__': '__main__', '_FD': {PROTOCOL_FD}, '_PRELUDE': b[n:]}})"
    )
}

/// Python that readies a process for the host's packages before anything else runs in it: a
/// virtual environment's `site` directories added to `sys.path` as `site` would (`.pth` files
/// included; the interpreter runs with `-S`, which skips them), the math libraries held to one
/// thread each (they read these variables once, as they load), then the `preload` modules
/// imported, or, for the zygote, named in `_PRELOAD` (empty or not) for it to import once it has
/// measured itself, with the `standard` ones in `_STANDARD`, imported where they can be. Empty
/// for a cell when there is nothing to do.
pub(crate) fn packages(
    site: &[PathBuf],
    (preload, standard): (&[String], &[&str]),
    import_now: bool,
) -> String {
    let mut code = String::new();
    if !site.is_empty() {
        let dirs: Vec<String> = site.iter().map(|dir| python_str(&dir.to_string_lossy())).collect();
        code.push_str("import posix\n");
        code.push_str(
            "for _name in (b'OPENBLAS_NUM_THREADS', b'OMP_NUM_THREADS', b'MKL_NUM_THREADS'):\n",
        );
        code.push_str("    posix.putenv(_name, b'1')\n");
        code.push_str("import site\n");
        code.push_str(&format!("for _dir in [{}]:\n", dirs.join(", ")));
        code.push_str("    site.addsitedir(_dir)\n");
    }
    let modules: Vec<String> = preload.iter().map(|module| python_str(module)).collect();
    if !import_now {
        code.push_str(&format!("_PRELOAD = [{}]\n", modules.join(", ")));
        let standard: Vec<String> = standard.iter().map(|module| python_str(module)).collect();
        code.push_str(&format!("_STANDARD = [{}]\n", standard.join(", ")));
    } else if !modules.is_empty() {
        code.push_str(&format!("for _name in [{}]:\n", modules.join(", ")));
        code.push_str("    __import__(_name)\n");
    }
    code
}

/// `text` as a Python string literal: JSON's escapes are Python's.
fn python_str(text: &str) -> String {
    code_runtime::json::encode(&code_runtime::json::JsonValue::from(text))
}
