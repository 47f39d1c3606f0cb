//! The spawner: one long-lived thread that starts every cell and reaps abandoned ones.
//!
//! A cell's parent-death signal (`PR_SET_PDEATHSIG`) fires when the *thread* that cloned it exits,
//! not the process. Cloning from whatever thread polls a run (a tokio worker, a `block_in_place`
//! thread that tokio retires after ten idle seconds) would kill the cells of live runs; cloning
//! from one thread that lives as long as the process ties them to the process.

use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::{Cell, SandboxError};

/// Work for the spawner thread.
enum Job {
    /// Start a cell and hand it over.
    Start(Box<dyn FnOnce() -> Result<Cell, SandboxError> + Send>, Reply),
    /// Anything else that blocks and must not block the caller (reaping an abandoned cell).
    Detached(Box<dyn FnOnce() + Send>),
}

/// Where a started cell goes.
type Reply = tokio::sync::oneshot::Sender<Result<Cell, SandboxError>>;

/// The spawner's queue.
type Queue = Mutex<SyncSender<Job>>;

static SPAWNER: OnceLock<Result<Queue, String>> = OnceLock::new();

/// Runs `start` on the spawner thread and hands back the cell.
///
/// # Cancel safety
///
/// Dropping the future before the cell arrives drops the cell on the spawner thread, which kills
/// it (see [`Cell`]'s `Drop`): nothing is left behind.
pub(crate) async fn run(
    start: impl FnOnce() -> Result<Cell, SandboxError> + Send + 'static,
) -> Result<Cell, SandboxError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    send(Job::Start(Box::new(start), reply))?;
    answer.await.map_err(|_| gone())?
}

thread_local! {
    /// Set on the spawner thread, which must not queue work for itself (the queue is bounded).
    static ON_SPAWNER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `work` on the spawner thread, without waiting for it; right here on the spawner thread
/// itself, or when the spawner cannot be had.
pub(crate) fn detach(work: impl FnOnce() + Send + 'static) {
    if ON_SPAWNER.with(std::cell::Cell::get) {
        return work();
    }
    let job = Job::Detached(Box::new(work));
    if let Err((Job::Detached(work), _)) = send_job(job) {
        work();
    }
}

fn send(job: Job) -> Result<(), SandboxError> {
    send_job(job).map_err(|(_, error)| error)
}

fn send_job(job: Job) -> Result<(), (Job, SandboxError)> {
    let queue = match SPAWNER.get_or_init(start) {
        Ok(queue) => queue,
        Err(why) => {
            let error = SandboxError::Start {
                step: "starting the spawner thread",
                source: std::io::Error::other(why.clone()),
            };
            return Err((job, error));
        }
    };
    queue
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send(job)
        .map_err(|rejected| (rejected.0, gone()))
}

fn gone() -> SandboxError {
    SandboxError::Start {
        step: "reaching the spawner thread",
        source: std::io::Error::other("the spawner thread is gone"),
    }
}

fn start() -> Result<Queue, String> {
    // A few jobs may wait while a cell starts; senders block beyond that.
    let (jobs, incoming) = sync_channel::<Job>(64);
    std::thread::Builder::new()
        .name("code-runtime-spawner".to_owned())
        .spawn(move || {
            ON_SPAWNER.with(|flag| flag.set(true));
            for job in incoming {
                match job {
                    // A cell whose run was dropped meanwhile is dropped here: killed, and reaped
                    // by the next job.
                    Job::Start(start, reply) => drop(reply.send(start())),
                    Job::Detached(work) => work(),
                }
            }
        })
        .map_err(|error| format!("cannot start the spawner thread: {error}"))?;
    Ok(Mutex::new(jobs))
}
