//! The reactor thread as a host configures and stops it: a test binary of its own, as the
//! reactor is one per process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use code_runtime::provider::reactor::{self, ReactorConfig};

/// The names of this process's threads.
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

/// Sets `flag` when dropped: a task's state, dropped with the task.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_configured_reactor_runs_under_its_name_and_shutdown_ends_it_and_its_tasks() {
    let config = ReactorConfig::named("cr-test-reactor");
    reactor::configure(config.clone()).unwrap();
    assert!(!threads().contains(&"cr-test-reactor".to_owned()), "started before its first use");
    reactor::handle().unwrap();
    // The new thread names itself: wait for it to have.
    let named = || threads().contains(&"cr-test-reactor".to_owned());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !named() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(named(), "{:?}", threads());
    // Too late now.
    let error = reactor::configure(config).unwrap_err();
    assert_eq!(error.key(), "reactor");

    let dropped = Arc::new(AtomicBool::new(false));
    let guard = Dropped(dropped.clone());
    reactor::spawn(async move {
        let _guard = guard;
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    reactor::shutdown();
    assert!(dropped.load(Ordering::SeqCst), "the reactor's tasks go with it");
    // Joined; the kernel drops the thread's /proc/self/task entry a moment after the join
    // returns (the entry goes when the task is released, not when it clears its tid), so look
    // for a while before calling it left behind.
    let gone = (0..200).any(|_| {
        let gone = !threads().contains(&"cr-test-reactor".to_owned());
        if !gone {
            std::thread::sleep(Duration::from_millis(10));
        }
        gone
    });
    assert!(gone, "its thread is joined: {:?}", threads());
    assert_eq!(reactor::handle().unwrap_err(), "the reactor was shut down");
    reactor::shutdown();

    // What needs the reactor afterwards still works where it can: a task runs on the caller's
    // thread, and code that would make tokio resources runs outside any runtime.
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    reactor::spawn(async move { flag.store(true, Ordering::SeqCst) });
    assert!(ran.load(Ordering::SeqCst));
    assert!(reactor::enter(|| tokio::runtime::Handle::try_current().is_err()));
}
