//! [`WarmCell`]: one cell started ahead of the next run, its interpreter loaded and waiting for
//! `boot`, so a run does not wait for the interpreter to start.
//!
//! A warm cell is fresh: no program has run in it, and it serves one run, after which another
//! is started for the next. Only a run under the provider's own limits takes it (the cell's
//! rlimits and `/tmp` are fixed when it starts); a run with tightened limits starts its own.

use std::sync::{Arc, Mutex, PoisonError};

use code_runtime::Limits;
use code_runtime::provider::reactor;
use tokio::sync::oneshot;

use crate::PythonConfig;
use crate::cell::PythonCell;
use crate::probe::Probe;
use crate::substrate::{self, Launched};

/// What starting a cell takes, shared with the tasks that start warm ones.
#[derive(Debug)]
pub(crate) struct Launcher {
    pub(crate) config: PythonConfig,
    pub(crate) probe: Probe,
    pub(crate) cell: PythonCell,
}

/// The provider's warm cell, if it keeps one.
#[derive(Debug)]
pub(crate) struct WarmCell {
    launcher: Arc<Launcher>,
    slot: Mutex<Slot>,
}

#[derive(Debug)]
enum Slot {
    /// The provider keeps no warm cell.
    Off,
    /// Taken; the next one is not asked for yet.
    Empty,
    /// Being started, or started and waiting.
    Starting(oneshot::Receiver<Option<Launched>>),
    /// The provider is disposed: no more.
    Closed,
}

impl std::fmt::Debug for Launched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launched").finish_non_exhaustive()
    }
}

impl WarmCell {
    /// Starts the first warm cell when the configuration asks for one.
    pub(crate) fn new(launcher: Arc<Launcher>) -> Self {
        let slot = if launcher.config.warm_cell { Slot::Empty } else { Slot::Off };
        let warm = Self { launcher, slot: Mutex::new(slot) };
        warm.refill();
        warm
    }

    /// The launcher the provider starts cells with.
    pub(crate) fn launcher(&self) -> &Launcher {
        &self.launcher
    }

    /// A cell for a run under `limits`: the warm one when it fits and is alive (waiting for it
    /// if it is still starting), else a new one. Asks for the next warm cell either way.
    ///
    /// Cancel safety: dropping the future while it waits for the warm cell drops the cell, which
    /// kills it.
    pub(crate) async fn take(
        &self,
        limits: &Limits,
    ) -> Result<Launched, code_runtime::provider::Ending> {
        let launcher = &self.launcher;
        let wanted = launcher.cell.limits(limits);
        let fits = wanted == launcher.cell.limits(&launcher.config.limits);
        let waiting = if fits { self.take_slot() } else { None };
        self.refill();
        if let Some(Ok(Some(mut launched))) = match waiting {
            Some(receiver) => Some(receiver.await),
            None => None,
        } {
            if launched.fits(&wanted) && launched.is_alive() {
                return Ok(launched);
            }
            reactor::spawn(launched.discard());
        }
        substrate::launch(&launcher.config, &launcher.probe, &launcher.cell, limits).await
    }

    fn take_slot(&self) -> Option<oneshot::Receiver<Option<Launched>>> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *slot, Slot::Empty) {
            Slot::Starting(receiver) => Some(receiver),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Starts the next warm cell if the slot is empty.
    fn refill(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(*slot, Slot::Empty) {
            return;
        }
        let (sender, receiver) = oneshot::channel();
        *slot = Slot::Starting(receiver);
        let launcher = self.launcher.clone();
        reactor::spawn(async move {
            let launched = substrate::launch(
                &launcher.config,
                &launcher.probe,
                &launcher.cell,
                &launcher.config.limits,
            )
            .await;
            // Nobody will take it (the taker was dropped, or the provider disposed): end it.
            if let Err(Some(launched)) = sender.send(launched.ok()) {
                launched.discard().await;
            }
        });
    }

    /// No more warm cells; the one there is (or being started) is killed and reaped before this
    /// returns.
    pub(crate) async fn close(&self) {
        let waiting = {
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            match std::mem::replace(&mut *slot, Slot::Closed) {
                Slot::Starting(receiver) => Some(receiver),
                Slot::Off | Slot::Empty | Slot::Closed => None,
            }
        };
        if let Some(Ok(Some(launched))) = match waiting {
            Some(receiver) => Some(receiver.await),
            None => None,
        } {
            launched.discard().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_ends_the_warm_cell_before_it_returns() {
        let config = PythonConfig::default();
        let probe = crate::probe::probe(&config).unwrap();
        let cell = PythonCell::new(&probe, &config).unwrap();
        let warm = WarmCell::new(Arc::new(Launcher { config, probe, cell }));
        // Look at the warm cell, then put it back.
        let receiver = warm.take_slot().expect("a warm cell is being started");
        let launched = futures::executor::block_on(receiver).unwrap().expect("it started");
        let pid = launched.pid();
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        let (sender, receiver) = oneshot::channel();
        let _ = sender.send(Some(launched));
        *warm.slot.lock().unwrap() = Slot::Starting(receiver);
        futures::executor::block_on(warm.close());
        // Reaped, not even a zombie.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "{pid} is still there");
        assert!(warm.take_slot().is_none(), "no warm cell after closing");
    }
}
