//! The spawner: one long-lived thread that forks every child.
//!
//! A child's parent-death signal (`PR_SET_PDEATHSIG`) fires when the *thread* that forked it
//! exits, not the process. Forking from whatever thread polls a run (a tokio worker, a
//! `block_in_place` thread that tokio retires after ten idle seconds) would kill children of live
//! runs; forking from one thread that lives as long as the process ties them to the process.

use std::process::Child;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Forks one child on the spawner thread.
type Job = Box<dyn FnOnce() -> std::io::Result<Child> + Send>;

/// Where the child goes once forked.
type Reply = tokio::sync::oneshot::Sender<std::io::Result<Child>>;

/// The spawner's queue of jobs.
type Queue = Mutex<SyncSender<(Job, Reply)>>;

static SPAWNER: OnceLock<Result<Queue, String>> = OnceLock::new();

/// Runs `spawn` on the spawner thread and hands back the child.
///
/// # Cancel safety
///
/// Dropping the future before the child arrives kills and reaps the child on the spawner thread:
/// nothing is left behind.
pub(crate) async fn spawn(
    spawn: impl FnOnce() -> std::io::Result<Child> + Send + 'static,
) -> std::io::Result<Child> {
    let spawner =
        SPAWNER.get_or_init(start).as_ref().map_err(|why| std::io::Error::other(why.clone()))?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    spawner
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send((Box::new(spawn), reply))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    answer.await.map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

fn start() -> Result<Queue, String> {
    // A few requests may wait while a fork is under way; senders block beyond that.
    let (requests, incoming) = sync_channel::<(Job, Reply)>(16);
    std::thread::Builder::new()
        .name("code-runtime-spawner".to_owned())
        .spawn(move || {
            for (job, reply) in incoming {
                if let Err(Ok(mut orphan)) = reply.send(job()) {
                    // The run was dropped while its child was being made.
                    let _ = orphan.kill();
                    let _ = orphan.wait();
                }
            }
        })
        .map_err(|error| format!("cannot start the spawner thread: {error}"))?;
    Ok(Mutex::new(requests))
}
