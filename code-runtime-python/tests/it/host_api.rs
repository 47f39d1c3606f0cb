//! The host API as a Python host meets it: threads that come and go, runtimes shut down mid-run,
//! a cell of its own for every run, and constructing without blocking. What both languages share
//! (per-request limits, the cap on runs in flight, the in-flight call rule, executors that are
//! not tokio) is in the provider suites (`conformance/tests/it/providers/host_api.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use code_runtime::json;
use code_runtime::{RunLimits, binding};

use crate::*;

/// A binding that records when it is called and when its future is dropped, and never settles.
fn hanging(started: &Arc<AtomicUsize>, dropped: &Arc<AtomicBool>) -> code_runtime::BindingFunction {
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let (started, dropped) = (started.clone(), dropped.clone());
    binding(move |_| {
        started.fetch_add(1, Ordering::SeqCst);
        let guard = Guard(dropped.clone());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(JsonValue::Null)
        }
    })
}

#[test]
fn a_run_outlives_the_thread_that_started_it() {
    // The parent-death signal follows the thread that cloned the cell: a run first polled by a
    // thread that then exits (a retired `block_in_place` worker, say) must not die with it.
    let announced = Announced::default();
    let program = format!("{ANNOUNCE}import time\ntime.sleep(0.5)\nreturn 'survived'");
    let request = CodeRunRequest::new(program).binding(announced.namespace());
    let mut run = Box::pin(default_runtime().run(request));
    let polled = announced.clone();
    let run = std::thread::spawn(move || {
        let waker = futures::task::noop_waker();
        let mut context = std::task::Context::from_waker(&waker);
        // Poll until the program runs, then leave with the future.
        for _ in 0..400 {
            assert!(run.as_mut().poll(&mut context).is_pending());
            if polled.get().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        run
    })
    .join()
    .unwrap();
    assert!(announced.get().is_some(), "the program ran while the thread polled it");
    let result = futures::executor::block_on(run).unwrap();
    assert_eq!(value(&result), &json!("survived"));
}

#[test]
fn shutting_down_the_runtime_mid_run_leaves_nothing_behind() {
    let runtime = Arc::new(PythonCodeRuntime::new(PythonConfig::default()).unwrap());
    let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    let host =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let announced = Announced::default();
    host.spawn({
        let runtime = runtime.clone();
        let program = format!("{ANNOUNCE}await tools.hang()");
        let request = CodeRunRequest::new(program)
            .binding(announced.namespace())
            .binding(tools().function("hang", hanging(&started, &dropped)));
        async move { runtime.run(request).await }
    });
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let namespace = announced.get().expect("the program announced its cell");
    // The program and, for a root host, the cell's init (an unprivileged host may not look into
    // an init that is not dumpable).
    let pids = host_pids_in(namespace);
    assert!(!pids.is_empty() && pids.len() <= 2, "{pids:?}");
    host.shutdown_timeout(Duration::from_secs(1));
    // The run future died with its runtime; the provider's reactor tore the cell down.
    futures::executor::block_on(runtime.dispose());
    assert!(dropped.load(Ordering::SeqCst));
    for pid in pids {
        // Not even a zombie: the init was reaped.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "{pid} not reaped");
    }
}

#[test]
fn every_run_gets_a_cell_of_its_own_warm_or_not() {
    // A warm cell serves one run: three runs in a row are three cells. A run with a tighter
    // memory budget does not fit the warm cell (its /tmp is the budget's size) and gets its own.
    let runtime = runtime(Limits::default());
    let program =
        format!("{ANNOUNCE}st = os.statvfs('/tmp')\nreturn st.f_blocks * st.f_frsize // (1 << 20)");
    let mut namespaces = Vec::new();
    let mut tmp_sizes = Vec::new();
    for memory in [None, None, Some(128), None] {
        let announced = Announced::default();
        let request = CodeRunRequest::new(&program)
            .binding(announced.namespace())
            .limits(RunLimits { max_memory_mb: memory, ..RunLimits::default() });
        let result = run_on(&runtime, request);
        tmp_sizes.push(value(&result).as_u64().unwrap());
        namespaces.push(announced.get().unwrap());
    }
    let distinct: std::collections::BTreeSet<_> = namespaces.iter().collect();
    assert_eq!(distinct.len(), 4, "{namespaces:?}");
    assert_eq!(tmp_sizes, [512, 512, 128, 512]);
}

#[test]
fn construction_does_not_block_an_async_host_and_is_cached() {
    let bare = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let runtime = bare.block_on(async {
        // The executor stays free while the probe runs elsewhere.
        let ticks = Arc::new(AtomicUsize::new(0));
        let ticking = tokio::spawn({
            let ticks = ticks.clone();
            async move {
                loop {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
        let config = PythonConfig { probe_cache: ProbeCache::Off, ..PythonConfig::default() };
        let runtime = PythonCodeRuntime::start(config).await.unwrap();
        ticking.abort();
        assert!(ticks.load(Ordering::SeqCst) > 5, "the executor ran while the probe did");
        runtime
    });
    assert!(!runtime.probe_was_cached());
    let dir = std::env::temp_dir().join(format!("code-runtime-probe-cache-{}", std::process::id()));
    let cached =
        PythonConfig { probe_cache: ProbeCache::Dir(dir.clone()), ..PythonConfig::default() };
    assert!(!PythonCodeRuntime::new(cached.clone()).unwrap().probe_was_cached());
    let again = PythonCodeRuntime::new(cached).unwrap();
    assert!(again.probe_was_cached());
    let result = futures::executor::block_on(again.run(CodeRunRequest::new("return 1"))).unwrap();
    assert_eq!(value(&result), &json!(1));
    let _ = std::fs::remove_dir_all(dir);
}
