//! The spawner: one long-lived thread that starts every cell; and the reaper, one long-lived
//! thread that reaps abandoned ones.
//!
//! A cell's parent-death signal (`PR_SET_PDEATHSIG`) fires when the *thread* that cloned it exits,
//! not the process. Cloning from whatever thread polls a run (a tokio worker, a `block_in_place`
//! thread that tokio retires after ten idle seconds) would kill the cells of live runs; cloning
//! from one thread that lives as long as the process ties them to the process.
//!
//! Both start with the first cell and live until [`shutdown`].
//!
//! Reaping a killed cell waits for the kernel to end every process of its pid namespace and
//! unmount its file system (tens of milliseconds when the machine is busy): on the spawner, every
//! cell started meanwhile, and so every run, would wait for it. The reaper waits instead.

use std::sync::mpsc::{Sender, SyncSender, channel, sync_channel};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::SandboxError;

/// Work for the spawner thread: start a cell (or fork one from a zygote) and hand it over.
struct Job(Box<dyn FnOnce() + Send>);

/// Blocking work nobody waits for (reaping an abandoned cell).
type Detached = Box<dyn FnOnce() + Send>;

/// A long-lived thread's queue (`None` once it was shut down) and the thread, to join.
struct Worker<T> {
    queue: Mutex<Option<T>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl<T> Worker<T> {
    fn new(queue: T, thread: std::thread::JoinHandle<()>) -> Self {
        Self { queue: Mutex::new(Some(queue)), thread: Mutex::new(Some(thread)) }
    }

    /// Closes the queue (the thread ends once it has done what was queued) and joins the thread.
    fn stop(&self) {
        drop(self.queue.lock().unwrap_or_else(PoisonError::into_inner).take());
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(thread) = thread {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

static SPAWNER: OnceLock<Result<Worker<SyncSender<Job>>, String>> = OnceLock::new();

/// Runs `start` on the spawner thread and hands back what it made (a cell, a zygote).
///
/// # Cancel safety
///
/// Dropping the future before the cell arrives drops the cell on the spawner thread, which kills
/// it (see [`Cell`](crate::Cell)'s `Drop`): nothing is left behind.
pub(crate) async fn run<T: Send + 'static>(
    start: impl FnOnce() -> Result<T, SandboxError> + Send + 'static,
) -> Result<T, SandboxError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = move || drop(reply.send(start()));
    let queue = SPAWNER.get_or_init(start_spawner).as_ref().map_err(|why| SandboxError::Start {
        step: "starting the spawner thread",
        source: std::io::Error::other(why.clone()),
    })?;
    // Sent outside the lock: the queue is bounded, and a full one blocks its sender.
    let queue = queue.queue.lock().unwrap_or_else(PoisonError::into_inner).clone();
    queue.ok_or_else(gone)?.send(Job(Box::new(job))).map_err(|_| gone())?;
    answer.await.map_err(|_| gone())?
}

/// The reaper's queue: unbounded, so handing it work never blocks (a `Drop` hands it work, on
/// whatever thread drops a cell).
static REAPER: OnceLock<Option<Worker<Sender<Detached>>>> = OnceLock::new();

/// Runs `work` on the reaper thread, without waiting for it; right here when the reaper cannot be
/// had (the process is out of threads).
pub(crate) fn detach(work: impl FnOnce() + Send + 'static) {
    let reaper = REAPER.get_or_init(|| {
        let (queue, incoming) = channel::<Detached>();
        std::thread::Builder::new()
            .name("code-runtime-reaper".to_owned())
            .spawn(move || incoming.into_iter().for_each(|work| work()))
            .ok()
            .map(|thread| Worker::new(queue, thread))
    });
    let work: Detached = Box::new(work);
    let queue = reaper
        .as_ref()
        .and_then(|reaper| reaper.queue.lock().unwrap_or_else(PoisonError::into_inner).clone());
    let refused = match queue {
        Some(queue) => queue.send(work).err(),
        None => Some(std::sync::mpsc::SendError(work)),
    };
    if let Some(std::sync::mpsc::SendError(work)) = refused {
        work();
    }
}

fn gone() -> SandboxError {
    SandboxError::Start {
        step: "reaching the spawner thread",
        source: std::io::Error::other("the spawner thread is gone"),
    }
}

fn start_spawner() -> Result<Worker<SyncSender<Job>>, String> {
    // A few jobs may wait while a cell starts; senders block beyond that.
    let (jobs, incoming) = sync_channel::<Job>(64);
    let thread = std::thread::Builder::new()
        .name("code-runtime-spawner".to_owned())
        .spawn(move || {
            // A cell whose run was dropped meanwhile is dropped here: killed, and handed to the
            // reaper.
            for Job(job) in incoming {
                job();
            }
        })
        .map_err(|error| format!("cannot start the spawner thread: {error}"))?;
    Ok(Worker::new(jobs, thread))
}

/// Stops the spawner and the reaper and joins them, for a host's last act (or a test's): every
/// provider disposed first. The cells the spawner started end with it (their parent-death
/// signal); the reaper finishes what it was given first. A later cell cannot start (`the
/// spawner thread is gone`), and abandoned cells are reaped where they are dropped. Idempotent.
pub fn shutdown() {
    if let Some(Ok(spawner)) = SPAWNER.get() {
        spawner.stop();
    }
    if let Some(Some(reaper)) = REAPER.get() {
        reaper.stop();
    }
}
