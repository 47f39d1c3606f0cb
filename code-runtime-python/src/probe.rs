//! The interpreter probe: what a provider learns of its interpreter once, at construction (the
//! real executable behind a name or a shim, its version, whether it starts contained, and the
//! bootstrap compiled to its bytecode), and the on-disk cache that makes it cost a file read on
//! the next construction, in this process or another.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use code_runtime::json;
use serde_json::json;

use crate::command::{self, BOOTSTRAP, Environment, Rlimits};
use crate::config::ProbeCache;
use crate::{Containment, PythonError};

/// The bootstrap, compiled once by the run's own interpreter: compiling the source costs a run
/// about 4 ms, loading the bytecode about 0.1 ms. It reaches each child on its frame channel ahead
/// of the first frame, as a 10-digit length and the marshalled code object (the prelude of
/// docs/python-frame-protocol.md; passing it as an argument instead costs the exec about 1.5 ms).
#[derive(Clone, Debug)]
pub(crate) struct Bootstrap {
    pub(crate) prelude: Vec<u8>,
}

/// What the probe learned.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    pub(crate) executable: PathBuf,
    pub(crate) containment: Containment,
    pub(crate) bootstrap: Bootstrap,
    /// Whether this came from the cache.
    pub(crate) cached: bool,
}

/// Probes `interpreter` under `rlimits`, or reads the probe `cache` holds for it.
pub(crate) fn probe(
    interpreter: &Path,
    rlimits: Rlimits,
    cache: &ProbeCache,
) -> Result<Probe, PythonError> {
    let entry = cache_dir(cache).and_then(|dir| Entry::for_interpreter(dir, interpreter, rlimits));
    if let Some(probe) = entry.as_ref().and_then(Entry::read) {
        return Ok(probe);
    }
    let probe = probe_now(interpreter, rlimits)?;
    if let Some(entry) = entry {
        // A cache that cannot be written is only a slower next start.
        let _ = entry.write(&probe);
    }
    Ok(probe)
}

fn probe_now(interpreter: &Path, rlimits: Rlimits) -> Result<Probe, PythonError> {
    let invalid =
        |why: String| PythonError::Interpreter { interpreter: interpreter.to_owned(), why };
    let executable = resolve(interpreter).map_err(invalid)?;
    let (version, containment) = check_contained(&executable, rlimits).map_err(invalid)?;
    if version < 309 {
        return Err(invalid(format!(
            "{} is Python {}.{}; 3.9 or newer is needed",
            executable.display(),
            version / 100,
            version % 100
        )));
    }
    let bootstrap = compile_bootstrap(&executable).map_err(invalid)?;
    Ok(Probe { executable, containment, bootstrap, cached: false })
}

/// The interpreter's own binary, `/proc/self/exe` as it sees it: a shim started by a bare name
/// would report an empty `sys.executable` once the environment is cleared.
fn resolve(interpreter: &Path) -> Result<PathBuf, String> {
    let mut command = command::python_command(interpreter, Environment::Inherited);
    command.args(["-c", "import posix, sys\nsys.stdout.write(posix.readlink('/proc/self/exe'))"]);
    let output = command.output().map_err(|error| format!("cannot start it: {error}"))?;
    let path = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() || path.is_empty() {
        return Err(format!("it failed ({}): {}", output.status, last_line(&output.stderr)));
    }
    Ok(PathBuf::from(path))
}

/// Starts the executable contained as a run is, and reports its version and the containment.
fn check_contained(executable: &Path, rlimits: Rlimits) -> Result<(u32, Containment), String> {
    const SCRIPT: &str = "import sys, posix\n\
        sys.stdout.write('%d\\n%d\\n' % (sys.version_info[0] * 100 + sys.version_info[1], posix.getpid()))";
    let output = command::run_contained(executable, SCRIPT, rlimits)
        .map_err(|error| format!("{} does not start: {error}", executable.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let (Some(version), Some(pid)) = (lines.next(), lines.next()) else {
        return Err(format!(
            "{} does not start contained ({}): {}",
            executable.display(),
            output.status,
            last_line(&output.stderr)
        ));
    };
    let containment =
        if pid == "1" { Containment::PidNamespace } else { Containment::SubreaperSweep };
    Ok((version.parse().unwrap_or(0), containment))
}

fn compile_bootstrap(executable: &Path) -> Result<Bootstrap, String> {
    const COMPILE: &str = "import marshal, sys\nsys.stdout.write(marshal.dumps(compile(sys.stdin.read(), '<bootstrap>', 'exec')).hex())";
    let mut command = command::python_command(executable, Environment::Cleared);
    command
        .args(["-c", COMPILE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| format!("{} does not start: {error}", executable.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(BOOTSTRAP.as_bytes()).map_err(|error| error.to_string())?;
    }
    let output = child.wait_with_output().map_err(|error| error.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "{}: the bootstrap does not compile: {}",
            executable.display(),
            last_line(&output.stderr)
        ));
    }
    let code = decode_hex(output.stdout.trim_ascii())
        .ok_or("the bootstrap compiled to something unreadable")?;
    let mut prelude = format!("{:010}", code.len()).into_bytes();
    prelude.extend_from_slice(&code);
    Ok(Bootstrap { prelude })
}

fn decode_hex(hex: &[u8]) -> Option<Vec<u8>> {
    let digit = |byte: u8| char::from(byte).to_digit(16);
    hex.chunks(2)
        .map(|pair| Some((digit(*pair.first()?)? * 16 + digit(*pair.get(1)?)?) as u8))
        .collect()
}

fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).lines().last().unwrap_or("no output").to_owned()
}

fn cache_dir(cache: &ProbeCache) -> Option<PathBuf> {
    match cache {
        ProbeCache::Off => None,
        ProbeCache::Dir(dir) => Some(dir.clone()),
        ProbeCache::UserCache => std::env::var_os("XDG_CACHE_HOME")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
            .map(|dir| dir.join("code-runtime")),
    }
}

/// One cache entry: a file named by the hash of its key, holding the key (so a hash collision is
/// a miss), the probe, and the identity of the executable it found.
struct Entry {
    path: PathBuf,
    key: String,
}

impl Entry {
    /// The entry for `interpreter` as it resolves now, or `None` when it cannot be found on disk
    /// (the probe then reports why).
    fn for_interpreter(dir: PathBuf, interpreter: &Path, rlimits: Rlimits) -> Option<Self> {
        let found = locate(interpreter)?;
        let metadata = std::fs::metadata(&found).ok()?;
        let mut key = format!(
            "code-runtime {}\ninterpreter {}\nfound {} {}\nrlimits {rlimits:?}\nuid {}\nbootstrap {:016x}\n",
            env!("CARGO_PKG_VERSION"),
            interpreter.display(),
            found.display(),
            identity(&metadata),
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() },
            hash(BOOTSTRAP),
        );
        // A script in front of the interpreter (a version manager's shim) may choose it from the
        // environment and the working directory: both become part of the key.
        if !is_elf(&found) {
            let environment: Vec<_> = std::env::vars_os().collect();
            key.push_str(&format!(
                "environment {:016x}\ncwd {:?}\n",
                hash(&format!("{environment:?}")),
                std::env::current_dir().ok()
            ));
        }
        let path = dir.join(format!("python-probe-{:016x}", hash(&key)));
        Some(Self { path, key })
    }

    fn read(&self) -> Option<Probe> {
        let metadata = std::fs::symlink_metadata(&self.path).ok()?;
        // Only a regular file of ours that nobody else may write: the probe decides which
        // executable every run starts.
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        if !metadata.is_file() || metadata.uid() != uid || metadata.mode() & 0o022 != 0 {
            return None;
        }
        let bytes = std::fs::read(&self.path).ok()?;
        let newline = bytes.iter().position(|&byte| byte == b'\n')?;
        let header = json::parse(std::str::from_utf8(&bytes[..newline]).ok()?).ok()?;
        if header["key"].as_str() != Some(self.key.as_str()) {
            return None;
        }
        let executable = PathBuf::from(header["executable"].as_str()?);
        // The interpreter behind a shim or a symlink may have been replaced.
        let now = identity(&std::fs::metadata(&executable).ok()?);
        if header["executableIdentity"].as_str() != Some(now.as_str()) {
            return None;
        }
        let containment = match header["containment"].as_str()? {
            "pid-namespace" => Containment::PidNamespace,
            "subreaper-sweep" => Containment::SubreaperSweep,
            _ => return None,
        };
        let prelude = bytes[newline + 1..].to_vec();
        Some(Probe { executable, containment, bootstrap: Bootstrap { prelude }, cached: true })
    }

    fn write(&self, probe: &Probe) -> std::io::Result<()> {
        let dir = self.path.parent().ok_or(std::io::ErrorKind::InvalidInput)?;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let identity = identity(&std::fs::metadata(&probe.executable)?);
        let containment = match probe.containment {
            Containment::PidNamespace => "pid-namespace",
            Containment::SubreaperSweep => "subreaper-sweep",
        };
        let header = json!({
            "key": self.key,
            "executable": probe.executable.to_string_lossy(),
            "executableIdentity": identity,
            "containment": containment,
        });
        // Written aside and renamed into place, so a reader never sees half an entry.
        let partial = self.path.with_extension(format!("partial-{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&partial)?;
        file.write_all(json::encode(&header).as_bytes())?;
        file.write_all(b"\n")?;
        file.write_all(&probe.bootstrap.prelude)?;
        drop(file);
        std::fs::rename(&partial, &self.path)
    }
}

/// `interpreter` as `execvp` would find it: a path as it is, a bare name in `PATH`.
fn locate(interpreter: &Path) -> Option<PathBuf> {
    if interpreter.components().count() > 1 {
        return Some(interpreter.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(interpreter))
        .find(|candidate| std::fs::metadata(candidate).is_ok_and(|meta| meta.is_file()))
}

/// A file's identity and version: device, inode, size and modification time.
fn identity(metadata: &std::fs::Metadata) -> String {
    format!(
        "{}:{}:{}:{}.{}",
        metadata.dev(),
        metadata.ino(),
        metadata.size(),
        metadata.mtime(),
        metadata.mtime_nsec()
    )
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut magic)).is_ok()
        && magic == *b"\x7fELF"
}

fn hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Reads a header field of a cache entry (for the tests of this module).
#[cfg(test)]
fn header_field(bytes: &[u8], field: &str) -> Option<json::JsonValue> {
    let newline = bytes.iter().position(|&byte| byte == b'\n')?;
    let header = json::parse(std::str::from_utf8(&bytes[..newline]).ok()?).ok()?;
    header.get(field).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("code-runtime-probe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn rlimits() -> Rlimits {
        Rlimits { address_space: 512 << 20, cpu_seconds: 61, pid_namespace: true }
    }

    #[test]
    fn a_probe_is_remembered_and_reused() {
        let dir = scratch("reuse");
        let cache = ProbeCache::Dir(dir.clone());
        let first = probe(Path::new("python3"), rlimits(), &cache).unwrap();
        assert!(!first.cached);
        let second = probe(Path::new("python3"), rlimits(), &cache).unwrap();
        assert!(second.cached, "the second construction reads the cache");
        assert_eq!(second.executable, first.executable);
        assert_eq!(second.bootstrap.prelude, first.bootstrap.prelude);
        // A different memory limit is a different entry.
        let other = Rlimits { address_space: 256 << 20, ..rlimits() };
        assert!(!probe(Path::new("python3"), other, &cache).unwrap().cached);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn an_entry_that_is_not_ours_or_is_stale_is_not_used() {
        let dir = scratch("stale");
        let cache = ProbeCache::Dir(dir.clone());
        probe(Path::new("python3"), rlimits(), &cache).unwrap();
        let entry = Entry::for_interpreter(dir.clone(), Path::new("python3"), rlimits()).unwrap();
        let bytes = std::fs::read(&entry.path).unwrap();
        assert!(header_field(&bytes, "executable").is_some());
        // The executable it names changed (here: its identity does not match any more).
        let text = String::from_utf8_lossy(&bytes).replacen(
            "executableIdentity\":\"",
            "executableIdentity\":\"0",
            1,
        );
        std::fs::write(&entry.path, text.as_bytes()).unwrap();
        assert!(entry.read().is_none());
        // Writable by others: not trusted.
        probe(Path::new("python3"), rlimits(), &ProbeCache::Off).unwrap();
        std::fs::write(&entry.path, &bytes).unwrap();
        assert!(entry.read().is_some());
        std::fs::set_permissions(&entry.path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        assert!(entry.read().is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
