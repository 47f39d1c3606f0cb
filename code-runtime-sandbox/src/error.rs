//! [`SandboxError`]: why a plan could not be made or a cell not started.

use std::io;

/// Why a cell cannot be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A layer the options require does not hold on this machine.
    #[error(
        "code-runtime-sandbox: this machine cannot contain programs fully (missing: {missing}; \
         found: {findings}); {hint}"
    )]
    Unavailable {
        /// The layers that do not hold, comma-separated.
        missing: String,
        /// What the probe found, e.g. `user namespace: a trial cell failed at writing the uid
        /// map: Operation not permitted`, semicolon-separated.
        findings: String,
        /// What would make them hold, or how to run without them.
        hint: &'static str,
    },
    /// A path the plan names cannot be used.
    #[error("code-runtime-sandbox: {path}: {why}")]
    Path {
        /// The path.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// Starting a cell failed at one step of its set-up.
    #[error("code-runtime-sandbox: starting a cell failed at {step}: {source}")]
    Start {
        /// The step, e.g. `mount /proc`.
        step: &'static str,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The seccomp filter could not be built.
    #[error("code-runtime-sandbox: the seccomp filter could not be built: {0}")]
    Seccomp(String),
}
