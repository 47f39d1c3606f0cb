//! The cell-server protocol: how the host asks a *cell server* for cells. Two servers speak it:
//! a [`Zygote`](crate::Zygote) (a language's fork server, in a cell of its own; its side is
//! `code-runtime-python/python/zygote.py`) and the spawner process (the plan's own executable,
//! outside any cell; its side is `spawner_server.rs`). Both are reached on their fd 3, a
//! `SOCK_SEQPACKET` socket, one message each:
//!
//! 1. host → server: a [`Hello`]: the host's [`BUILD`] and what the server plans its cells from
//!    (the spawner process: the [`CellSpec`]; a zygote: its [`Recipe`], after its language's
//!    bootstrap, which the language's own crate writes).
//! 2. server → host: an [`Answer`]: `ready`, with the server's build and (the spawner process)
//!    the layers its cells have, or `failed` and why. The spawner process refuses a host of
//!    another build; a zygote, whose every file the host wrote, says the host's build back. The
//!    host uses no server of another build, or whose machine plans other cells.
//! 3. host → server, per cell: a request ([`SpawnerCell`] or [`ZygoteCell`]) with five
//!    descriptors: stdin, stdout, stderr, channel, and the cell's end of a report socket.
//! 4. On that report socket: [`Report`]s, `ready` with pidfds of the cell's init and of its
//!    program's process, or `failed <why>`; later `exit <status>` or `killed <signal>`.
//!
//! Messages 1 to 3 are JSON (serde types below). Reports are text, because the run's init that
//! writes `exit` in a zygote's cells is a few hundred bytes of assembly (`run_init.S`).

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::cell_io::{CellExit, CellIo};
use crate::message::{millis, pid_of, readable, receive, send, seqpacket};
use crate::{CellLimits, CellSpec, Containment, Options};

/// The build this library is part of: a hash of the sources of the crates whose code runs on
/// either side of a cell server (written by `build.rs`). A server of another build refuses the
/// host's hello, and the host refuses a server that answers with another.
pub(crate) const BUILD: &str = env!("CODE_RUNTIME_CELL_SERVER_BUILD");

/// The descriptor a cell server reads the host on.
pub(crate) const CONTROL_FD: libc::c_int = 3;

/// Step 1: what a server plans its cells from, and the build of the host that asks.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Hello<Plan> {
    pub(crate) build: String,
    pub(crate) plan: Plan,
}

impl<Plan: Serialize> Hello<Plan> {
    pub(crate) fn new(plan: Plan) -> Self {
        Self { build: BUILD.to_owned(), plan }
    }
}

/// Step 2: the server's answer to the hello.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Answer {
    Ready {
        build: String,
        /// The layers of the server's cells (a zygote's cells are the host's plan's, so it
        /// says none).
        containment: Option<Containment>,
    },
    Failed {
        why: String,
    },
}

impl Answer {
    /// Whether this answer says the server is of this build and its cells have `containment`.
    pub(crate) fn accepts(&self, containment: Option<Containment>) -> bool {
        matches!(self, Answer::Ready { build, containment: theirs }
            if build == BUILD && *theirs == containment)
    }
}

/// Step 3 for the spawner process: the cell's limits, and the uid a root host maps its user to.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SpawnerCell {
    pub(crate) limits: CellLimits,
    pub(crate) outer: u32,
}

/// Step 3 for a zygote, whose forks apply the layers themselves: the limits as `setrlimit`
/// takes them, and the options of the cell's `/tmp` and its work directory.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ZygoteCell {
    pub(crate) rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    pub(crate) tmp: String,
    pub(crate) work: String,
}

/// Step 1 for a zygote: the layers its forks apply, as numbers and programs, so that the
/// zygote (a Python program) hard-codes no ABI: the cell user's id, the system call numbers and
/// flags the forks need (from the host's C library), the seccomp programs (each the hex of its
/// `struct sock_filter` array), the Landlock ruleset (or none), and the options of `/proc` (or
/// none). Where this machine has one, the run's init (`run_init.rs`) comes with it as an
/// executable `memfd`.
#[derive(Debug, Serialize)]
pub(crate) struct Recipe {
    pub(crate) uid: u32,
    pub(crate) syscalls: serde_json::Map<String, serde_json::Value>,
    pub(crate) flags: serde_json::Map<String, serde_json::Value>,
    pub(crate) seccomp: Vec<Hex>,
    pub(crate) landlock: Option<LandlockRecipe>,
    pub(crate) proc: Option<String>,
}

/// The Landlock ruleset of a zygote's forks: the access each kind handles, and the rules as
/// `[path, access]`.
#[derive(Debug, Serialize)]
pub(crate) struct LandlockRecipe {
    pub(crate) fs: u64,
    pub(crate) net: u64,
    pub(crate) scoped: u64,
    pub(crate) rules: Vec<(String, u64)>,
}

/// Step 4: what the report socket of one cell says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// The cell's every layer holds; its pidfds come with this.
    Ready,
    Failed(String),
    Ended(CellExit),
}

impl Report {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        match self {
            Report::Ready => b"ready".to_vec(),
            Report::Failed(why) => format!("failed {why}").into_bytes(),
            Report::Ended(CellExit::Exited(status)) => format!("exit {status}").into_bytes(),
            Report::Ended(CellExit::Killed(signal)) => format!("killed {signal}").into_bytes(),
        }
    }

    /// The report `message` is, or `None` for anything else (an empty message is the end of
    /// the socket: every writer gone).
    pub(crate) fn parse(message: &[u8]) -> Option<Report> {
        let number = |text: &[u8]| std::str::from_utf8(text).ok()?.parse().ok();
        if message == b"ready" {
            Some(Report::Ready)
        } else if let Some(why) = message.strip_prefix(b"failed ") {
            Some(Report::Failed(String::from_utf8_lossy(why).into_owned()))
        } else if let Some(status) = message.strip_prefix(b"exit ") {
            number(status).map(|status| Report::Ended(CellExit::Exited(status)))
        } else {
            let signal = message.strip_prefix(b"killed ")?;
            number(signal).map(|signal| Report::Ended(CellExit::Killed(signal)))
        }
    }
}

/// A message of this protocol as it goes on the socket. (These types, strings, numbers and maps
/// with string keys, always serialize; an error is still an error, never an empty message, which
/// a server reads as its host gone.)
pub(crate) fn encode(message: &impl Serialize) -> io::Result<Vec<u8>> {
    serde_json::to_vec(message).map_err(io::Error::other)
}

/// At most this much of what a server says is kept in an error.
const SAID_BYTES: usize = 200;

/// `said` (a server's words), cut to [`SAID_BYTES`] at a character boundary.
fn cut(said: &str) -> String {
    let mut end = said.len().min(SAID_BYTES);
    while !said.is_char_boundary(end) {
        end -= 1;
    }
    said[..end].to_owned()
}

/// A message of this protocol from the socket, or why it is not one.
pub(crate) fn decode<T: DeserializeOwned>(message: &[u8]) -> Result<T, String> {
    serde_json::from_slice(message).map_err(|error| format!("not a cell-server message: {error}"))
}

/// How a request for a cell went, as the host sees it.
pub(crate) enum Asked {
    /// The cell runs: its init's pidfd and host pid, its program's pidfd (a server that made
    /// its worker with `fork` may not have one), and the report socket.
    Ready { init: (OwnedFd, libc::pid_t), worker: Option<OwnedFd>, report: OwnedFd },
    /// The request could not be sent (the server is gone, or stuck with a full socket):
    /// nothing was started with these descriptors.
    NotSent(io::Error),
    /// No report within the time: the server is stuck.
    TimedOut,
    /// The server said why it started no cell.
    Failed(String),
    /// The report socket ended with nothing said: the server is gone.
    Gone,
    /// The report was unreadable, or not one of this protocol's: the server is broken.
    Broken(String),
    /// The cell was ready but has already ended and been reaped (its pidfd names no process):
    /// this cell's failure, not the server's.
    Ended,
}

/// Asks the server on `control` for a cell with `io` as its program's descriptors and waits at
/// most `within` for its report. The caller keeps `io` (and closes it once the cell runs, or
/// starts the cell itself when the request was not sent). Blocking: on the spawner thread.
pub(crate) fn ask_for_cell(
    control: &OwnedFd,
    request: &impl Serialize,
    io: &CellIo,
    within: Duration,
) -> io::Result<Asked> {
    let request = encode(request)?;
    let (report, cell_end) = seqpacket()?;
    let fds = [&io.stdin, &io.stdout, &io.stderr, &io.channel, &cell_end].map(AsRawFd::as_raw_fd);
    if let Err(error) = send(control.as_fd(), &request, &fds) {
        return Ok(Asked::NotSent(error));
    }
    drop(cell_end);
    if !readable(&report, millis(within)) {
        return Ok(Asked::TimedOut);
    }
    let (message, mut pidfds) = match receive(report.as_fd(), 2) {
        Ok(received) => received,
        Err(error) => return Ok(Asked::Broken(format!("its report is unreadable: {error}"))),
    };
    match Report::parse(&message) {
        Some(Report::Ready) if !pidfds.is_empty() => {
            let worker = (pidfds.len() > 1).then(|| pidfds.remove(1));
            let init = pidfds.remove(0);
            let Some(pid) = pid_of(&init) else { return Ok(Asked::Ended) };
            Ok(Asked::Ready { init: (init, pid), worker, report })
        }
        Some(Report::Failed(why)) => Ok(Asked::Failed(cut(&why))),
        _ if message.is_empty() => Ok(Asked::Gone),
        _ => {
            Ok(Asked::Broken(format!("it reported {:?}", cut(&String::from_utf8_lossy(&message)))))
        }
    }
}

/// The cell spec as the spawner process's hello carries it: every path and argument as the hex
/// of its bytes, so that what is not UTF-8 crosses unchanged.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireSpec {
    executable: Hex,
    args: Vec<Hex>,
    read_only: Vec<Hex>,
    options: Options,
    machine_cache: Option<Hex>,
}

impl From<&CellSpec> for WireSpec {
    fn from(spec: &CellSpec) -> Self {
        let path = |path: &std::path::Path| Hex(path.as_os_str().as_bytes().to_vec());
        Self {
            executable: path(&spec.executable),
            args: spec.args.iter().map(|arg| Hex(arg.as_bytes().to_vec())).collect(),
            read_only: spec.read_only.iter().map(|read| path(read)).collect(),
            options: spec.options,
            machine_cache: spec.machine_cache.as_deref().map(path),
        }
    }
}

impl From<WireSpec> for CellSpec {
    fn from(wire: WireSpec) -> Self {
        let path = |hex: Hex| PathBuf::from(OsString::from_vec(hex.0));
        CellSpec {
            executable: path(wire.executable),
            args: wire.args.into_iter().map(|arg| OsString::from_vec(arg.0)).collect(),
            read_only: wire.read_only.into_iter().map(path).collect(),
            options: wire.options,
            machine_cache: wire.machine_cache.map(path),
        }
    }
}

/// Bytes in JSON as a string of hexadecimal digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hex(pub(crate) Vec<u8>);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let digits: String = self.0.iter().map(|byte| format!("{byte:02x}")).collect();
        serializer.serialize_str(&digits)
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let digits = String::deserialize(deserializer)?;
        if digits.len() % 2 != 0 {
            return Err(D::Error::custom("an odd number of hex digits"));
        }
        // Each digit on its own: `from_str_radix` would take a sign ("+a").
        let digit = |byte: u8| char::from(byte).to_digit(16);
        digits
            .as_bytes()
            .chunks(2)
            .map(|pair| u8::try_from(digit(pair[0])? << 4 | digit(pair[1])?).ok())
            .collect::<Option<Vec<u8>>>()
            .map(Hex)
            .ok_or_else(|| D::Error::custom("not hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_crosses_to_the_spawner_process_byte_for_byte() {
        let odd = OsString::from_vec(b"/tmp/not \xff utf-8/\"x\"".to_vec());
        let spec = CellSpec {
            executable: PathBuf::from("/usr/bin/cell"),
            args: vec![OsString::from("cell"), odd.clone(), OsString::new()],
            read_only: vec![PathBuf::from(&odd), PathBuf::from("/opt/a b")],
            options: Options { namespaces: true, landlock: false, seccomp: true, require: false },
            machine_cache: Some(PathBuf::from(&odd)),
        };
        let hello = encode(&Hello::new(WireSpec::from(&spec))).unwrap();
        let back: Hello<WireSpec> = decode(&hello).unwrap();
        assert_eq!(back.build, BUILD);
        let back = CellSpec::from(back.plan);
        assert_eq!(back.executable, spec.executable);
        assert_eq!(back.args, spec.args);
        assert_eq!(back.read_only, spec.read_only);
        assert_eq!(back.machine_cache, spec.machine_cache);
        assert_eq!(back.options, spec.options);
        let none = CellSpec { machine_cache: None, ..spec };
        let back: WireSpec = decode(&encode(&WireSpec::from(&none)).unwrap()).unwrap();
        assert_eq!(CellSpec::from(back).machine_cache, None);
    }

    #[test]
    fn a_malformed_hello_is_refused() {
        let options =
            json!({"namespaces": true, "landlock": true, "seccomp": true, "require": true});
        for bad in [
            json!({}),
            json!({"build": BUILD}),
            json!({"build": BUILD, "plan": {"executable": "2f7", "args": [], "read_only": [], "options": options, "machine_cache": null}}),
            json!({"build": BUILD, "plan": {"executable": "zz", "args": [], "read_only": [], "options": options, "machine_cache": null}}),
            json!({"build": BUILD, "plan": {"executable": "+a", "args": [], "read_only": [], "options": options, "machine_cache": null}}),
            json!({"build": BUILD, "plan": {"executable": "2f", "args": [], "read_only": [], "options": {"namespaces": true}, "machine_cache": null}}),
        ] {
            assert!(decode::<Hello<WireSpec>>(bad.to_string().as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_server_of_another_build_or_other_layers_is_not_used() {
        let ours = Containment { seccomp: true, ..Containment::default() };
        let ready =
            |build: &str, containment| Answer::Ready { build: build.to_owned(), containment };
        assert!(ready(BUILD, Some(ours)).accepts(Some(ours)));
        assert!(!ready("0123", Some(ours)).accepts(Some(ours)));
        assert!(!ready(BUILD, Some(Containment::default())).accepts(Some(ours)));
        assert!(!Answer::Failed { why: "no".to_owned() }.accepts(Some(ours)));
        let zygote: Answer = decode(br#"{"ready": {"build": "x", "containment": null}}"#).unwrap();
        assert_eq!(zygote, ready("x", None));
        assert_ne!(BUILD, "0.0.0");
        assert!(BUILD.len() >= 16 && BUILD.bytes().all(|byte| byte.is_ascii_hexdigit()), "{BUILD}");
    }

    #[test]
    fn reports_read_back_as_they_were_written() {
        for report in [
            Report::Ready,
            Report::Failed("mounting /tmp: EPERM".to_owned()),
            Report::Ended(CellExit::Exited(3)),
            Report::Ended(CellExit::Killed(9)),
        ] {
            assert_eq!(Report::parse(&report.to_bytes()), Some(report));
        }
        for other in [&b""[..], b"exit", b"exit x", b"killed ", b"readyy"] {
            assert_eq!(Report::parse(other), None, "{other:?}");
        }
    }
}
