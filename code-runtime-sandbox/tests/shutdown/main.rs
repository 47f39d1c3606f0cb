//! The sandbox's threads as a host stops them last: a test binary of its own, as the spawner and
//! the reaper are one each per process.

use std::time::{Duration, Instant};

use code_runtime_sandbox::{CellExit, CellIo, CellLimits, CellPlan, CellSpec, Options};

/// The names of this process's threads.
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

fn null_io() -> CellIo {
    let null = || std::fs::File::options().read(true).write(true).open("/dev/null").unwrap().into();
    CellIo { stdin: null(), stdout: null(), stderr: null(), channel: null() }
}

#[test]
fn shutdown_ends_the_cells_and_joins_the_spawner_and_the_reaper() {
    let python = std::fs::canonicalize("/usr/bin/python3").expect("the system's python3");
    let spec = CellSpec {
        args: vec![python.clone().into(), "-c".into(), "import time; time.sleep(3600)".into()],
        read_only: vec![python.clone()],
        executable: python,
        options: Options::default(),
        machine_cache: None,
    };
    let plan = CellPlan::new(&spec).unwrap();
    let limits = CellLimits::new(256 << 20, 10);
    let mut sleeping = futures::executor::block_on(plan.start(null_io(), limits)).unwrap();
    // A dropped cell goes to the reaper, which starts with it.
    drop(futures::executor::block_on(plan.start(null_io(), limits)).unwrap());
    let running = threads();
    assert!(running.contains(&"code-runtime-sp".to_owned()), "{running:?}");

    code_runtime_sandbox::shutdown();
    let left = threads();
    assert!(!left.iter().any(|name| name.starts_with("code-runtime-")), "{left:?}");
    // The cell went with the thread that started it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = sleeping.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "the cell outlived the spawner");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_ne!(exit, CellExit::Exited(0));
    // No new cell, and a clear reason.
    let refused = futures::executor::block_on(plan.start(null_io(), limits)).unwrap_err();
    assert!(refused.to_string().contains("the spawner thread is gone"), "{refused}");
    code_runtime_sandbox::shutdown();
}
