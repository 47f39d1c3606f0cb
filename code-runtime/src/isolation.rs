//! [`Isolation`]: where a run's program runs, a type as [`Language`](crate::Language) is; the
//! lowercase labels (`"worker-thread"`, `"process"`) where one crosses a boundary.

use std::fmt;
use std::str::FromStr;

use crate::json;

/// Where a provider runs each program: what [`CodeRuntime::isolation`](crate::CodeRuntime::isolation)
/// answers. A diagnostic label, not a security claim: what a substrate contains is its provider's
/// documentation.
///
/// ```
/// use code_runtime::Isolation;
///
/// assert_eq!(Isolation::Thread.as_str(), "worker-thread");
/// assert_eq!("thread".parse::<Isolation>(), Ok(Isolation::Thread));
/// assert_eq!("process".parse::<Isolation>(), Ok(Isolation::Process));
/// assert!(Isolation::Process == "process");
/// assert!("sandbox".parse::<Isolation>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Isolation {
    /// On a thread of the host's process (an isolate of its own, no process of its own): the
    /// lowest latency, for trusted programs.
    Thread,
    /// In a process of its own, a sandbox cell.
    Process,
}

impl Isolation {
    /// Every isolation, in the order messages list them.
    pub const ALL: [Isolation; 2] = [Isolation::Thread, Isolation::Process];

    /// Its label, lowercase: `"worker-thread"` or `"process"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Isolation::Thread => "worker-thread",
            Isolation::Process => "process",
        }
    }

    /// The name a host chooses it by (a flag's value, a keyword argument): `"thread"` or
    /// `"process"`.
    pub const fn option_name(self) -> &'static str {
        match self {
            Isolation::Thread => "thread",
            Isolation::Process => "process",
        }
    }
}

/// A name that is not an [`Isolation`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown isolation {} (thread or process)", json::quote(.0))]
pub struct UnknownIsolation(pub String);

impl FromStr for Isolation {
    type Err = UnknownIsolation;

    /// Its option name or its label.
    fn from_str(name: &str) -> Result<Self, UnknownIsolation> {
        Isolation::ALL
            .into_iter()
            .find(|isolation| isolation.option_name() == name || isolation.as_str() == name)
            .ok_or_else(|| UnknownIsolation(name.to_owned()))
    }
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for Isolation {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Isolation {
    fn eq(&self, name: &str) -> bool {
        self.as_str() == name
    }
}

impl PartialEq<&str> for Isolation {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl PartialEq<Isolation> for str {
    fn eq(&self, isolation: &Isolation) -> bool {
        self == isolation.as_str()
    }
}

impl PartialEq<Isolation> for &str {
    fn eq(&self, isolation: &Isolation) -> bool {
        *self == isolation.as_str()
    }
}
