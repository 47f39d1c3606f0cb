//! [`ProviderSpec`]: a provider named by what a host chooses (its language, its isolation, its
//! limits, the Python interpreter and what it preloads, how long the host lives), and
//! [`ProviderSpec::build`], the one place a spec becomes a provider.
//!
//! The `code-runtime` command, the MCP gateway, the Python package and the conformance suite
//! build their providers here, so a choice no provider serves (thread isolation for Python,
//! preloaded modules for TypeScript) is refused once, with one message, whoever asks
//! ([`ProviderSpec::check`]), and an error says whether the spec or this machine is at fault
//! ([`ProviderError::is_invalid`]).

use std::path::PathBuf;
use std::sync::Arc;

use code_runtime::{CodeRuntime, Isolation, Language, Limits};
use code_runtime_python::{PythonCodeRuntime, PythonConfig, PythonError};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig, WorkerThreadError};

/// A provider as a host chooses it. [`ProviderSpec::new`] gives a language's defaults: `process`
/// isolation, the default limits, `python3`, nothing preloaded, a host that runs many programs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSpec {
    /// The language of its programs.
    pub language: Language,
    /// Where each run's program runs; `None` is [`Isolation::Process`], every language's default
    /// here. [`Isolation::Thread`] is TypeScript's only.
    pub isolation: Option<Isolation>,
    /// The budgets of every run.
    pub limits: Limits,
    /// Python: the interpreter and what it preloads.
    pub python: PythonSetup,
    /// TypeScript in `process` isolation: the executable each cell runs (it must call
    /// `code_runtime_worker_thread::serve_cell_if_asked` first); `None` is this executable.
    pub cell_executable: Option<PathBuf>,
    /// TypeScript: decorators compiled as `experimentalDecorators` does.
    pub legacy_decorators: bool,
    /// A substrate started ahead of each run (a cell, an isolate): for a host whose runs come
    /// one after another; one that runs a single program gains nothing from it.
    pub warm: bool,
    /// The host runs many programs: Python's cells fork from a zygote, TypeScript's start from a
    /// spawner process. Each costs a process's start before the first run, which a command that
    /// runs one program and exits should not pay.
    pub resident: bool,
}

/// The Python interpreter and the modules it preloads (`--python`, `--preload`, the MCP
/// config's `"python"`, the package's `python=` and `preload=`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonSetup {
    /// The interpreter, possibly a virtual environment's; `None` is `python3` on `PATH`.
    pub interpreter: Option<PathBuf>,
    /// Modules imported before each program starts (in the zygote, when there is one).
    pub preload: Vec<String>,
}

impl PythonSetup {
    /// Whether the host named an interpreter or a module.
    pub fn given(&self) -> bool {
        self.interpreter.is_some() || !self.preload.is_empty()
    }
}

/// Why a [`ProviderSpec`] built no provider.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The spec asks its language's provider for what it does not do.
    #[error("{0}")]
    Spec(&'static str),
    /// The TypeScript provider did not start: an invalid setting, or a sandbox or cell
    /// executable this machine cannot give.
    #[error(transparent)]
    TypeScript(#[from] WorkerThreadError),
    /// The Python provider did not start: an invalid setting, an interpreter that cannot run
    /// programs, or a sandbox this machine cannot give.
    #[error(transparent)]
    Python(#[from] PythonError),
}

impl ProviderError {
    /// Whether the spec is at fault (a choice no provider serves, a setting a provider refuses)
    /// rather than this machine.
    pub fn is_invalid(&self) -> bool {
        matches!(
            self,
            ProviderError::Spec(_)
                | ProviderError::TypeScript(WorkerThreadError::Config(_))
                | ProviderError::Python(PythonError::Config(_))
        )
    }

    /// Whether an interpreter did not start: the host's fault when it named one, this
    /// machine's when it is the default.
    pub fn is_interpreter(&self) -> bool {
        matches!(self, ProviderError::Python(PythonError::Interpreter { .. }))
    }
}

/// A provider [`ProviderSpec::build`] started.
#[derive(Clone)]
pub struct Built {
    /// The provider.
    pub runtime: Arc<dyn CodeRuntime>,
    /// Python's: the distributions of its interpreter's virtual environment, `(name, version)`
    /// sorted by name ([`PythonCodeRuntime::packages`]); empty otherwise.
    pub python_packages: Vec<(String, String)>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built")
            .field("language", &self.runtime.language())
            .field("isolation", &self.runtime.isolation())
            .field("python_packages", &self.python_packages.len())
            .finish()
    }
}

impl ProviderSpec {
    /// `language`'s defaults.
    pub fn new(language: Language) -> Self {
        Self {
            language,
            isolation: None,
            limits: Limits::default(),
            python: PythonSetup::default(),
            cell_executable: None,
            legacy_decorators: false,
            warm: true,
            resident: true,
        }
    }

    /// The isolation in force.
    pub fn isolation(&self) -> Isolation {
        self.isolation.unwrap_or(Isolation::Process)
    }

    /// Whether its language's provider serves every choice of the spec.
    ///
    /// # Errors
    ///
    /// [`ProviderError::Spec`] naming the first choice it does not.
    pub fn check(&self) -> Result<(), ProviderError> {
        let refusal = match self.language {
            Language::Python if self.isolation() != Isolation::Process => Some(
                "thread isolation is for TypeScript only: Python always runs in a sandbox cell",
            ),
            Language::Python if self.legacy_decorators => {
                Some("legacy_decorators is for TypeScript runs")
            }
            Language::Python => None,
            _ if self.python.given() => {
                Some("an interpreter or preloaded modules are for Python runs")
            }
            _ => None,
        };
        refusal.map_or(Ok(()), |why| Err(ProviderError::Spec(why)))
    }

    /// The Python provider's configuration: the spec's choices over
    /// [`PythonConfig::default`] (a host may change what the spec does not choose, a
    /// benchmark its sandbox layers, say).
    pub fn python_config(&self) -> PythonConfig {
        let defaults = PythonConfig::default();
        PythonConfig {
            limits: self.limits,
            warm_cell: self.warm,
            zygote: self.resident,
            interpreter: self.python.interpreter.clone().unwrap_or(defaults.interpreter.clone()),
            preload: self.python.preload.clone(),
            ..defaults
        }
    }

    /// The TypeScript provider's configuration: the spec's choices over
    /// [`WorkerThreadConfig::default`].
    pub fn worker_thread_config(&self) -> WorkerThreadConfig {
        WorkerThreadConfig {
            limits: self.limits,
            isolation: self.isolation(),
            cell_executable: self.cell_executable.clone(),
            warm: self.warm,
            spawner_process: self.resident,
            legacy_decorators: self.legacy_decorators,
            // What this machine's kernel gives the sandbox, probed once per user, not per start.
            machine_cache: code_runtime_sandbox::cache::user_dir(),
            ..WorkerThreadConfig::default()
        }
    }

    /// The provider: checked ([`check`](Self::check)), then started (a warm one may start a
    /// cell and wait for it, tens of milliseconds: not on an async reactor's thread).
    ///
    /// # Errors
    ///
    /// [`ProviderError`]: [`is_invalid`](ProviderError::is_invalid) when the spec is at fault.
    pub fn build(&self) -> Result<Built, ProviderError> {
        self.check()?;
        match self.language {
            Language::Python => {
                let runtime = PythonCodeRuntime::new(self.python_config())?;
                let python_packages = runtime.packages().to_vec();
                Ok(Built { runtime: Arc::new(runtime), python_packages })
            }
            _ => {
                let runtime = WorkerThreadCodeRuntime::new(self.worker_thread_config())?;
                Ok(Built { runtime: Arc::new(runtime), python_packages: Vec::new() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_no_provider_serves_is_refused_by_name() {
        let python = ProviderSpec::new(Language::Python);
        let typescript = ProviderSpec::new(Language::TypeScript);
        let preload = PythonSetup { interpreter: None, preload: vec!["json".to_owned()] };
        let interpreter = PythonSetup { interpreter: Some("python3".into()), preload: Vec::new() };
        for (spec, expected) in [
            (
                ProviderSpec { isolation: Some(Isolation::Thread), ..python.clone() },
                "TypeScript only",
            ),
            (ProviderSpec { legacy_decorators: true, ..python.clone() }, "legacy_decorators"),
            (ProviderSpec { python: preload, ..typescript.clone() }, "for Python runs"),
            (ProviderSpec { python: interpreter, ..typescript.clone() }, "for Python runs"),
        ] {
            let error = spec.check().expect_err(expected);
            assert!(error.to_string().contains(expected), "{error}");
            assert!(error.is_invalid());
            // `build` checks first: nothing starts.
            assert!(matches!(spec.build(), Err(ProviderError::Spec(_))));
        }
        for spec in [
            python,
            ProviderSpec { isolation: Some(Isolation::Process), ..typescript.clone() },
            ProviderSpec { isolation: Some(Isolation::Thread), ..typescript },
        ] {
            assert!(spec.check().is_ok(), "{spec:?}");
        }
    }

    #[test]
    fn a_setting_a_provider_refuses_is_the_specs_fault() {
        for language in Language::ALL {
            let limits = Limits { max_wall_ms: 0, ..Limits::default() };
            let error = ProviderSpec { limits, ..ProviderSpec::new(language) }.build().unwrap_err();
            assert!(error.is_invalid(), "{error}");
            assert!(error.to_string().contains("max_wall_ms"), "{error}");
        }
    }

    #[test]
    fn the_spec_chooses_and_the_defaults_fill_the_rest() {
        let spec = ProviderSpec {
            isolation: Some(Isolation::Thread),
            warm: false,
            resident: false,
            legacy_decorators: true,
            ..ProviderSpec::new(Language::TypeScript)
        };
        let config = spec.worker_thread_config();
        assert_eq!(config.isolation, Isolation::Thread);
        assert!(!config.warm && !config.spawner_process && config.legacy_decorators);
        assert_eq!(ProviderSpec::new(Language::TypeScript).isolation(), Isolation::Process);
        let python = ProviderSpec { warm: false, ..ProviderSpec::new(Language::Python) };
        let config = python.python_config();
        assert!(!config.warm_cell && config.zygote);
        assert_eq!(config.interpreter, PythonConfig::default().interpreter);
        // A thread-isolated TypeScript provider starts here (no cell, no sandbox needed).
        let built = spec.build().expect("a thread provider starts");
        assert_eq!(built.runtime.isolation(), Isolation::Thread);
        assert!(built.python_packages.is_empty());
    }
}
