//! [`WarmCell`]: one cell started ahead of the next run, its interpreter loaded and waiting for
//! `boot`, so a run does not wait for the interpreter to start.
//!
//! A warm cell is fresh: no program has run in it, and it serves one run, after which another
//! is started for the next ([`Spare`]). Only a run under the provider's own limits takes it (the
//! cell's rlimits and `/tmp` are fixed when it starts); a run with tightened limits starts its
//! own.

use std::sync::Arc;

use code_runtime::Limits;
use code_runtime::provider::{Ending, Spare};
use code_runtime_cell::Launched;

use crate::PythonConfig;
use crate::cell::PythonCell;
use crate::probe::Probe;
use crate::substrate;

/// What starting a cell takes, shared with the tasks that start warm ones: the configuration,
/// what the probe learned of the interpreter, and the cells' plan.
#[derive(Debug)]
pub(crate) struct Launcher(PythonConfig, Probe, PythonCell);

impl Launcher {
    pub(crate) fn new(config: PythonConfig, probe: Probe, cell: PythonCell) -> Self {
        Self(config, probe, cell)
    }

    /// The configuration in force.
    pub(crate) fn config(&self) -> &PythonConfig {
        &self.0
    }

    /// What the probe learned of the interpreter.
    pub(crate) fn probe(&self) -> &Probe {
        &self.1
    }

    /// The plan of the cells.
    pub(crate) fn cell(&self) -> &PythonCell {
        &self.2
    }

    /// Starts a cell for a run under `limits`.
    async fn launch(&self, limits: &Limits) -> Result<Launched, Ending> {
        substrate::launch(self.config(), self.probe(), self.cell(), limits).await
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
        let spare = Spare::new(
            usize::from(launcher.config().warm_cell),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_cell_is_alive_and_closing_ends_the_next_before_it_returns() {
        let config = PythonConfig::default();
        let probe = crate::probe::probe(&config, PythonCell::check).unwrap();
        let cell = PythonCell::new(&probe, &config).unwrap();
        let warm = WarmCell::new(Arc::new(Launcher::new(config, probe, cell)));
        let mut launched =
            futures::executor::block_on(warm.spare.take()).expect("a warm cell started");
        assert!(launched.is_alive());
        let pid = launched.pid();
        futures::executor::block_on(launched.discard());
        // Reaped, not even a zombie.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "{pid} is still there");
        futures::executor::block_on(warm.close());
        assert!(futures::executor::block_on(warm.spare.take()).is_none(), "none after closing");
    }
}
