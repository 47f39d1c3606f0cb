//! The interpreter probe: what a provider learns of its interpreter once, at construction (the
//! real executable behind a name or a shim, its version, the files it needs, whether it starts in
//! a sandbox cell, and the bootstrap compiled to its bytecode), and the on-disk cache that makes
//! it cost a file read on the next construction, in this process or another.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use code_runtime::json;

use crate::command::{self, BOOTSTRAP, Environment};
use crate::{PythonConfig, PythonError};

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
    /// What the interpreter reads: its executable, its standard library, the directories of the
    /// shared libraries it maps. Granted read-only to its cells.
    pub(crate) files: Vec<PathBuf>,
    /// A virtual environment's `site-packages` directories (none for an interpreter that is not
    /// a virtual environment's): granted read-only, and added to every run's `sys.path`.
    pub(crate) site: Vec<PathBuf>,
    /// The distributions installed there, `(name, version)`, sorted by name.
    pub(crate) packages: Vec<(String, String)>,
    pub(crate) bootstrap: Bootstrap,
    /// Whether this came from the cache.
    pub(crate) cached: bool,
}

/// Probes the interpreter of `config`, or reads the probe its cache holds for it. A new probe is
/// remembered only once `check` accepts it (the caller's test that the interpreter starts in its
/// cell).
pub(crate) fn probe(
    config: &PythonConfig,
    check: impl FnOnce(&Probe, &PythonConfig) -> Result<(), PythonError>,
) -> Result<Probe, PythonError> {
    let entry = config
        .probe_cache
        .dir()
        .and_then(|dir| Entry::for_interpreter(dir, &config.interpreter, &key_settings(config)));
    if let Some(probe) = entry.as_ref().and_then(Entry::read) {
        return Ok(probe);
    }
    let probe = probe_now(config)?;
    check(&probe, config)?;
    if let Some(entry) = entry {
        // A cache that cannot be written is only a slower next start.
        let _ = entry.write(&probe);
    }
    Ok(probe)
}

/// The settings a probe's outcome depends on besides the interpreter: whether it starts in a
/// cell depends on the cell's layers and memory.
fn key_settings(config: &PythonConfig) -> String {
    format!(
        "sandbox {:?}
memory {}
preload {:?}",
        config.sandbox,
        config.limits.memory_bytes(),
        config.preload
    )
}

fn probe_now(config: &PythonConfig) -> Result<Probe, PythonError> {
    let interpreter = &config.interpreter;
    let invalid = |why: String| PythonError::Interpreter { interpreter: interpreter.clone(), why };
    let Resolved { executable, site, packages } = resolve(interpreter).map_err(invalid)?;
    let (version, mut files) = describe(&executable).map_err(invalid)?;
    files.extend(site.iter().cloned());
    files.sort();
    files.dedup();
    if version < 309 {
        return Err(invalid(format!(
            "{} is Python {}.{}; 3.9 or newer is needed",
            executable.display(),
            version / 100,
            version % 100
        )));
    }
    let bootstrap = compile_bootstrap(&executable).map_err(invalid)?;
    Ok(Probe { executable, files, site, packages, bootstrap, cached: false })
}

/// What [`resolve`] runs with the configured interpreter.
const RESOLVE: &str = r#"import json, os, posix, sys
found, packages = [], []
here = os.path.dirname(sys.executable)
for root in (here, os.path.dirname(here)):
    if os.path.isfile(os.path.join(root, "pyvenv.cfg")):
        import importlib.metadata, sysconfig
        # The layout a venv installs into (a distribution's own `site` may say otherwise of
        # its system directories, as Debian's does).
        scheme = "venv" if "venv" in sysconfig.get_scheme_names() else "posix_prefix"
        paths = sysconfig.get_paths(scheme, vars={"base": root, "platbase": root,
                                                  "installed_base": root, "installed_platbase": root})
        found = sorted({p for p in (paths["purelib"], paths["platlib"]) if os.path.isdir(p)})
        for dist in importlib.metadata.distributions(path=found):
            if dist.metadata["Name"]:
                packages.append([dist.metadata["Name"], dist.version])
        packages.sort(key=lambda package: package[0].lower())
        break
sys.stdout.write(json.dumps({
    "exe": posix.readlink("/proc/self/exe"), "site": found, "packages": packages}))"#;

/// What [`describe`] runs with the real executable.
const DESCRIBE: &str = r#"import sys, json
for name in ("_ssl", "_hashlib", "_sqlite3", "_ctypes", "_decimal", "zlib", "_lzma", "_bz2",
             "pyexpat", "_json", "_socket", "select", "math", "_datetime", "unicodedata",
             "_uuid", "_zoneinfo", "_asyncio", "_multiprocessing", "_posixshmem", "readline"):
    try:
        __import__(name)
    except Exception:
        pass
mapped = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/") and not fields[5].endswith(" (deleted)\n"):
            mapped.add(fields[5].rstrip("\n").rsplit("/", 1)[0] or "/")
sys.stdout.write(json.dumps({
    "version": sys.version_info[0] * 100 + sys.version_info[1],
    "path": [p for p in sys.path if p],
    "mapped": sorted(mapped),
}))"#;

/// The interpreter's own binary, `/proc/self/exe` as it sees it (a shim started by a bare name
/// would report an empty `sys.executable` once the environment is cleared), and, when it is a
/// virtual environment's (a `pyvenv.cfg` beside `sys.executable` or one directory up, which
/// `site` would read; the probe runs with `-S`), that environment's `site-packages` directories
/// and what is installed there. Cells run the binary itself, which knows nothing of the
/// environment: the loader adds those directories.
fn resolve(interpreter: &Path) -> Result<Resolved, String> {
    let mut command = command::python_command(interpreter, Environment::Inherited);
    command.args(["-c", RESOLVE]);
    let output = command.output().map_err(|error| format!("cannot start it: {error}"))?;
    let answer = json::parse(&String::from_utf8_lossy(&output.stdout)).ok();
    let path = answer.as_ref().and_then(|answer| answer["exe"].as_str()).unwrap_or_default();
    if !output.status.success() || path.is_empty() {
        return Err(format!("it failed ({}): {}", output.status, last_line(&output.stderr)));
    }
    let site = answer.as_ref().map(|answer| strings(&answer["site"])).unwrap_or_default();
    let packages = answer.as_ref().map(|answer| pairs(&answer["packages"])).unwrap_or_default();
    Ok(Resolved { executable: PathBuf::from(path), site, packages })
}

/// What [`resolve`] learns: the real executable, and a virtual environment's `site-packages`
/// directories and distributions.
struct Resolved {
    executable: PathBuf,
    site: Vec<PathBuf>,
    packages: Vec<(String, String)>,
}

/// The `[name, version]` pairs of a JSON array.
fn pairs(list: &json::JsonValue) -> Vec<(String, String)> {
    let pair =
        |item: &json::JsonValue| Some((item[0].as_str()?.to_owned(), item[1].as_str()?.to_owned()));
    list.as_array().map(|items| items.iter().filter_map(pair).collect()).unwrap_or_default()
}

/// The strings of a JSON array, as paths.
fn strings(list: &json::JsonValue) -> Vec<PathBuf> {
    list.as_array()
        .map(|items| items.iter().filter_map(|item| item.as_str()).map(PathBuf::from).collect())
        .unwrap_or_default()
}

/// The interpreter's version (`major * 100 + minor`) and the files it reads: its executable,
/// the entries of its `sys.path`, and the directories of every shared library it maps once the
/// standard library's extension modules are loaded (a build under a version manager keeps
/// `libpython` and its dependencies beside itself). The sandbox adds the system's library
/// directories itself.
fn describe(executable: &Path) -> Result<(u32, Vec<PathBuf>), String> {
    let mut command = command::python_command(executable, Environment::Cleared);
    command.args(["-c", DESCRIBE]);
    let output = command
        .output()
        .map_err(|error| format!("{} does not start: {error}", executable.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} fails ({}): {}",
            executable.display(),
            output.status,
            last_line(&output.stderr)
        ));
    }
    let answer = json::parse(&String::from_utf8_lossy(&output.stdout))
        .map_err(|error| format!("{} answers oddly: {error}", executable.display()))?;
    let version = answer["version"].as_u64().and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    let listed = |key: &str| strings(&answer[key]);
    let mut files = vec![executable.to_owned()];
    files.extend(listed("path").into_iter().chain(listed("mapped")).filter(|path| path.exists()));
    files.sort();
    files.dedup();
    Ok((version, files))
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

/// One cache entry: a file named by the hash of its key, holding the key (so a hash collision is
/// a miss), the probe, and the identity of the executable it found.
struct Entry {
    path: PathBuf,
    key: String,
}

impl Entry {
    /// The entry for `interpreter` as it resolves now, or `None` when it cannot be found on disk
    /// (the probe then reports why).
    fn for_interpreter(dir: PathBuf, interpreter: &Path, settings: &str) -> Option<Self> {
        let found = locate(interpreter)?;
        let metadata = std::fs::metadata(&found).ok()?;
        let mut key = format!(
            "code-runtime {}\ninterpreter {}\nfound {} {}\n{settings}\nuid {}\nbootstrap {:016x}\nprobe {:016x}\n",
            env!("CARGO_PKG_VERSION"),
            interpreter.display(),
            found.display(),
            identity(&metadata),
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() },
            hash(BOOTSTRAP),
            // What the probe asks changes what an entry holds.
            hash(&format!("{RESOLVE}{DESCRIBE}")),
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
        // Only a file of ours that nobody else may write: the probe decides which executable
        // every run starts, and what its cells may read.
        let bytes = code_runtime_sandbox::cache::read_private(&self.path)?;
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
        let files: Vec<PathBuf> = header["files"]
            .as_array()?
            .iter()
            .map(|file| file.as_str().map(PathBuf::from))
            .collect::<Option<_>>()?;
        // An entry written before the environment's directories were remembered is a miss.
        let site = header.get("site").filter(|site| site.as_array().is_some()).map(strings)?;
        // A package installed or removed since changes its directory.
        if header["siteIdentity"].as_str() != Some(site_identity(&site).as_str()) {
            return None;
        }
        let packages = pairs(header.get("packages")?);
        let prelude = bytes[newline + 1..].to_vec();
        let bootstrap = Bootstrap { prelude };
        Some(Probe { executable, files, site, packages, bootstrap, cached: true })
    }

    fn write(&self, probe: &Probe) -> std::io::Result<()> {
        let identity = identity(&std::fs::metadata(&probe.executable)?);
        let header = json!({
            "key": self.key,
            "executable": probe.executable.to_string_lossy(),
            "executableIdentity": identity,
            "files": probe.files.iter().map(|file| file.to_string_lossy()).collect::<Vec<_>>(),
            "site": probe.site.iter().map(|dir| dir.to_string_lossy()).collect::<Vec<_>>(),
            "siteIdentity": site_identity(&probe.site),
            "packages": probe.packages.iter().map(|(name, version)| json!([name, version])).collect::<Vec<_>>(),
        });
        let header = json::encode(&header);
        code_runtime_sandbox::cache::write_private(
            &self.path,
            &[header.as_bytes(), b"\n", &probe.bootstrap.prelude],
        )
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

/// The identities of a virtual environment's `site-packages` directories (an install or an
/// uninstall changes them).
fn site_identity(site: &[PathBuf]) -> String {
    let each = site.iter().map(|dir| std::fs::metadata(dir).map(|metadata| identity(&metadata)));
    each.map(|identity| identity.unwrap_or_default()).collect::<Vec<_>>().join(" ")
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
    use crate::config::ProbeCache;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("code-runtime-probe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A probe checked as the provider checks it.
    fn probed(config: &PythonConfig) -> Result<Probe, PythonError> {
        probe(config, crate::cell::PythonCell::check)
    }

    fn config(cache: &ProbeCache) -> PythonConfig {
        PythonConfig { probe_cache: cache.clone(), ..PythonConfig::default() }
    }

    #[test]
    fn a_probe_is_remembered_and_reused() {
        let dir = scratch("reuse");
        let cache = ProbeCache::Dir(dir.clone());
        let first = probed(&config(&cache)).unwrap();
        assert!(!first.cached);
        assert!(first.files.contains(&first.executable), "{:?}", first.files);
        let second = probed(&config(&cache)).unwrap();
        assert!(second.cached, "the second construction reads the cache");
        assert_eq!(second.executable, first.executable);
        assert_eq!(second.files, first.files);
        assert_eq!(second.bootstrap.prelude, first.bootstrap.prelude);
        // A different memory limit is a different entry.
        let mut other = config(&cache);
        other.limits.max_memory_mb = 256;
        assert!(!probed(&other).unwrap().cached);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn an_entry_that_is_not_ours_or_is_stale_is_not_used() {
        let dir = scratch("stale");
        let cache = ProbeCache::Dir(dir.clone());
        probed(&config(&cache)).unwrap();
        let settings = key_settings(&config(&cache));
        let entry = Entry::for_interpreter(dir.clone(), Path::new("python3"), &settings).unwrap();
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
        probed(&config(&ProbeCache::Off)).unwrap();
        std::fs::write(&entry.path, &bytes).unwrap();
        assert!(entry.read().is_some());
        std::fs::set_permissions(&entry.path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        assert!(entry.read().is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
