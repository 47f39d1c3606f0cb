//! [`WarmCell`]: cells started ahead of the next run (one, or two forked from the zygote), their
//! interpreter loaded and waiting for `boot`, so a run does not wait for the interpreter to
//! start; and the [`Launcher`] that starts them, from the zygote or from scratch.
//!
//! A warm cell is fresh: no program has run in it, and it serves one run, after which another
//! is started for the next ([`Spare`]). Only a run under the provider's own limits takes it (the
//! cell's rlimits and `/tmp` are fixed when it starts); a run with tightened limits starts its
//! own.

use std::sync::Arc;

use code_runtime::Limits;
use code_runtime::provider::{Ending, Spare};
use code_runtime_cell::{Launched, Origin};
use code_runtime_sandbox::{Containment, Zygote};

use crate::PythonConfig;
use crate::cell::PythonCell;
use crate::probe::Probe;
use crate::substrate;

/// What starting a cell takes, shared with the tasks that start warm ones: the configuration,
/// what the probe learned of the interpreter, the cells' plan, and the zygote.
#[derive(Debug)]
pub(crate) struct Launcher {
    config: PythonConfig,
    probe: Probe,
    cell: PythonCell,
    zygote: tokio::sync::Mutex<Zygotes>,
    /// The layers that hold for runs and the zygote's host pid, as the zygote's state changes.
    seen: std::sync::Mutex<(Containment, Option<libc::pid_t>)>,
}

/// The provider's zygote: the running one, or why there is none.
#[derive(Debug)]
enum Zygotes {
    Running(Arc<Zygote>),
    /// The configuration asks for none, it could not be started, or the provider is closed.
    None,
}

impl Zygotes {
    /// The layers that hold for runs of `cell`'s plan started this way, and the zygote's pid.
    fn seen(&self, cell: &PythonCell) -> (Containment, Option<libc::pid_t>) {
        match self {
            Zygotes::Running(zygote) => (zygote.containment(), Some(zygote.pid())),
            Zygotes::None => (cell.containment(), None),
        }
    }
}

impl Launcher {
    /// The launcher of `cell`'s runs, with its zygote started (blocking) when `config` asks for
    /// one and the machine gives it.
    pub(crate) fn new(config: PythonConfig, probe: Probe, cell: PythonCell) -> Self {
        let zygote = if config.zygote {
            match futures::executor::block_on(cell.zygote(&probe)) {
                Ok(zygote) => Zygotes::Running(Arc::new(zygote)),
                Err(error) => {
                    tracing::debug!(%error, "no zygote: cells start from scratch");
                    Zygotes::None
                }
            }
        } else {
            Zygotes::None
        };
        let seen = std::sync::Mutex::new(zygote.seen(&cell));
        Self { config, probe, cell, zygote: tokio::sync::Mutex::new(zygote), seen }
    }

    /// The configuration in force.
    pub(crate) fn config(&self) -> &PythonConfig {
        &self.config
    }

    /// What the probe learned of the interpreter.
    pub(crate) fn probe(&self) -> &Probe {
        &self.probe
    }

    /// The plan of the cells.
    pub(crate) fn cell(&self) -> &PythonCell {
        &self.cell
    }

    /// The layers that hold for runs: the plan's, and whether they fork from a zygote.
    pub(crate) fn containment(&self) -> Containment {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0
    }

    /// The host pid of the zygote's cell, while there is one.
    pub(crate) fn zygote_pid(&self) -> Option<libc::pid_t> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1
    }

    /// Starts a cell for a run under `limits`: forked from the zygote when there is one (started
    /// again first if it died), else from scratch, as also when the fork fails.
    async fn launch(&self, limits: &Limits) -> Result<Launched, Ending> {
        if let Some(zygote) = self.zygote().await {
            let origin = Origin::Zygote(&zygote);
            match substrate::launch(&self.config, &self.probe, (&self.cell, origin), limits).await {
                Ok(launched) => return Ok(launched),
                Err(ending) => tracing::debug!(?ending, "the zygote's fork failed"),
            }
        }
        let origin = Origin::Plan(self.cell.plan());
        substrate::launch(&self.config, &self.probe, (&self.cell, origin), limits).await
    }

    /// The running zygote, started again if it died; `None` when there is none, or it cannot be
    /// started again (then never again).
    async fn zygote(&self) -> Option<Arc<Zygote>> {
        let mut zygote = self.zygote.lock().await;
        let Zygotes::Running(running) = &*zygote else { return None };
        if running.is_alive() {
            return Some(running.clone());
        }
        *zygote = match self.cell.zygote(&self.probe).await {
            Ok(started) => Zygotes::Running(Arc::new(started)),
            Err(error) => {
                tracing::warn!(%error, "the zygote died and cannot be started again");
                Zygotes::None
            }
        };
        *self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            zygote.seen(&self.cell);
        match &*zygote {
            Zygotes::Running(running) => Some(running.clone()),
            Zygotes::None => None,
        }
    }

    /// Ends the zygote (and with it every cell forked from it) and waits until it is reaped.
    async fn close(&self) {
        let zygote = std::mem::replace(&mut *self.zygote.lock().await, Zygotes::None);
        *self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Zygotes::None.seen(&self.cell);
        if let Zygotes::Running(zygote) = zygote {
            zygote.close().await;
        }
    }
}

/// The provider's warm cell, if it keeps one.
#[derive(Debug)]
pub(crate) struct WarmCell {
    launcher: Arc<Launcher>,
    spare: Spare<Launched>,
}

impl WarmCell {
    /// Starts the first warm cell when the configuration asks for one.
    pub(crate) fn new(launcher: Arc<Launcher>) -> Self {
        let starter = launcher.clone();
        // Forks of the zygote are cheap (under a megabyte each, milliseconds to make): two ahead
        // let runs back to back find one ready while the next is forked.
        let ahead = if launcher.zygote_pid().is_some() { 2 } else { 1 };
        let spare = Spare::new(
            usize::from(launcher.config().warm_cell) * ahead,
            move || {
                let launcher = starter.clone();
                Box::pin(async move { launcher.launch(&launcher.config().limits).await.ok() })
            },
            |launched| Box::pin(launched.discard()),
        );
        Self { launcher, spare }
    }

    /// The launcher the provider starts cells with.
    pub(crate) fn launcher(&self) -> &Launcher {
        &self.launcher
    }

    /// A cell for a run under `limits`: the warm one when it fits and is alive (waiting for it
    /// if it is still starting), else a new one.
    ///
    /// Cancel safety: dropping the future while it waits for the warm cell drops the cell, which
    /// kills it.
    pub(crate) async fn take(&self, limits: &Limits) -> Result<Launched, Ending> {
        let launcher = &self.launcher;
        let wanted = launcher.cell().limits(limits);
        let default = wanted == launcher.cell().limits(&launcher.config().limits);
        let launch = launcher.launch(limits);
        code_runtime_cell::take_or_launch(&self.spare, default, &wanted, launch).await
    }

    /// No more warm cells; the one there is (or being started) is killed and reaped before this
    /// returns.
    pub(crate) async fn close(&self) {
        self.spare.close().await;
        self.launcher.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_cell_is_alive_and_closing_ends_the_next_before_it_returns() {
        for zygote in [false, true] {
            let config = PythonConfig { zygote, ..PythonConfig::default() };
            let probe = crate::probe::probe(&config, PythonCell::check).unwrap();
            let cell = PythonCell::new(&probe, &config).unwrap();
            let launcher = Arc::new(Launcher::new(config, probe, cell));
            let zygote_pid = launcher.zygote_pid();
            assert_eq!(zygote_pid.is_some(), zygote);
            let warm = WarmCell::new(launcher);
            let mut launched =
                futures::executor::block_on(warm.spare.take()).expect("a warm cell started");
            assert!(launched.is_alive());
            let pid = launched.pid();
            futures::executor::block_on(launched.discard());
            let gone = |pid: libc::pid_t| !std::path::Path::new(&format!("/proc/{pid}")).exists();
            if zygote {
                // A fork's init is the zygote's cell's to reap: it is, within moments.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while !gone(pid) && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            // Reaped, not even a zombie.
            assert!(gone(pid), "{pid} is still there");
            futures::executor::block_on(warm.close());
            assert!(futures::executor::block_on(warm.spare.take()).is_none(), "none after closing");
            // The zygote too, before `close` returned.
            assert!(zygote_pid.is_none_or(gone), "the zygote {zygote_pid:?} is still there");
        }
    }
}
