//! [`PythonCell`]: the sandbox cell every run's interpreter executes in, planned once per
//! provider from what the probe learned of the interpreter.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::time::Duration;

use code_runtime::Limits;
use code_runtime_sandbox::{
    CellExit, CellIo, CellLimits, CellPlan, CellSpec, Containment, SandboxError, Zygote,
};

use crate::command;
use crate::probe::Probe;
use crate::{PythonConfig, PythonError};

/// The cell plan of one provider: the interpreter's files granted read-only, the loader as its
/// program, the layers configured.
#[derive(Clone, Debug)]
pub(crate) struct PythonCell {
    plan: CellPlan,
    max_processes: u32,
    /// What the zygote runs before its fork server (see [`command::packages`]).
    zygote_prefix: String,
}

impl PythonCell {
    /// Plans the cells of runs of `probe`'s interpreter.
    pub(crate) fn new(probe: &Probe, config: &PythonConfig) -> Result<Self, PythonError> {
        let packages = command::packages(&probe.site, (&config.preload, &[]), true);
        Self::with_script(probe, config, &format!("{packages}{}", command::loader()))
    }

    fn with_script(
        probe: &Probe,
        config: &PythonConfig,
        script: &str,
    ) -> Result<Self, PythonError> {
        let spec = CellSpec {
            executable: probe.executable.clone(),
            args: command::cell_args(&probe.executable, script),
            read_only: probe.files.clone(),
            options: config.sandbox,
            machine_cache: config.probe_cache.dir(),
        };
        let plan = CellPlan::new(&spec)?;
        let standard = if config.standard_preload { crate::STANDARD_PRELOAD } else { &[] };
        let zygote_prefix = command::packages(&probe.site, (&config.preload, standard), false);
        Ok(Self { plan, max_processes: config.max_processes, zygote_prefix })
    }

    /// The layers that hold for every run.
    pub(crate) fn containment(&self) -> Containment {
        self.plan.containment()
    }

    /// The cell's limits for a run under `limits` (see [`code_runtime_cell::cell_limits`]), with
    /// the configured process count.
    pub(crate) fn limits(&self, limits: &Limits) -> CellLimits {
        CellLimits {
            processes: u64::from(self.max_processes),
            ..code_runtime_cell::cell_limits(limits)
        }
    }

    /// The plan every run's cell is started from.
    pub(crate) fn plan(&self) -> &CellPlan {
        &self.plan
    }

    /// Starts a zygote of this plan's cells: the interpreter running the fork server, handed
    /// the bootstrap.
    pub(crate) async fn zygote(&self, probe: &Probe) -> Result<Zygote, SandboxError> {
        let source = format!("{}{}", self.zygote_prefix, command::ZYGOTE);
        let args = command::zygote_args(&probe.executable, &source);
        Zygote::start(&self.plan, &args, probe.bootstrap.prelude.clone()).await
    }

    /// Starts the interpreter in a cell as a run would be, under the configured memory budget,
    /// and checks that it gets as far as importing what the bootstrap imports: a build that needs
    /// a file the probe did not find fails here, at construction, not in every run.
    pub(crate) fn check(probe: &Probe, config: &PythonConfig) -> Result<(), PythonError> {
        // The host's packages as a run's cell readies them: a module that cannot be preloaded
        // is found here.
        let script = format!(
            "{}import json, marshal, posix, sys\nsys.stdout.write('ok')",
            command::packages(&probe.site, (&config.preload, &[]), true)
        );
        let invalid = |why: String| PythonError::Interpreter {
            interpreter: config.interpreter.clone(),
            why: format!("it does not start in its sandbox cell: {why}"),
        };
        let cell = Self::with_script(probe, config, &script)?;
        let (stdout_read, stdout_write) =
            code_runtime_sandbox::pipe(false).map_err(|error| invalid(error.to_string()))?;
        let (stderr_read, stderr_write) =
            code_runtime_sandbox::pipe(false).map_err(|error| invalid(error.to_string()))?;
        let null = || -> std::io::Result<OwnedFd> { Ok(std::fs::File::open("/dev/null")?.into()) };
        let io = CellIo {
            stdin: null().map_err(|error| invalid(error.to_string()))?,
            stdout: stdout_write,
            stderr: stderr_write,
            channel: null().map_err(|error| invalid(error.to_string()))?,
        };
        let limits = Limits { compute_ms: 10_000, ..config.limits };
        let mut running = futures::executor::block_on(cell.plan.start(io, cell.limits(&limits)))
            .map_err(|error| invalid(error.to_string()))?;
        // The end first, within the time; the pipes are read after it. What the check prints
        // fits a pipe's buffer, and an interpreter that printed more (or hangs) is killed at the
        // deadline with the start of its stderr kept.
        let exit = running.wait_timeout(Duration::from_secs(10)).or_else(|| {
            running.kill();
            running.wait().ok()
        });
        let mut stdout = String::new();
        let mut stderr = String::new();
        // Both pipes are at their end once the cell is (the host's write ends went into it).
        let _ = std::fs::File::from(stdout_read).read_to_string(&mut stdout);
        let _ = std::fs::File::from(stderr_read).read_to_string(&mut stderr);
        if stdout == "ok" && exit == Some(CellExit::Exited(0)) {
            return Ok(());
        }
        let last = stderr.lines().last().unwrap_or("no output");
        Err(invalid(format!("{exit:?}: {last}")))
    }
}
