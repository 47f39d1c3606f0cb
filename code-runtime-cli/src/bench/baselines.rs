//! The baselines the providers' figures are compared with, each measured outside the providers:
//! a bare interpreter's start, a Node worker's start, and the whole `code-runtime run` process.

use std::path::Path;
use std::time::Instant;

use crate::bench::{ms, percentiles};

/// The whole `code-runtime run one.ts|one.py` process, start to exit, p50 in ms (the first
/// runs, which fill the interpreter probe's cache, are not counted).
pub(super) fn cli_oneshot(language: &str, samples: usize) -> Option<f64> {
    let (extension, program) = match language {
        "python" => ("py", "print('one')\nreturn 1\n"),
        _ => ("ts", "console.log('one');\nreturn 1;\n"),
    };
    let dir = std::env::temp_dir().join(format!("code-runtime-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(format!("one.{extension}"));
    std::fs::write(&path, program).ok()?;
    let executable = std::env::current_exe().ok()?;
    let mut times = Vec::with_capacity(samples);
    for round in 0..samples + 3 {
        #[expect(clippy::disallowed_methods, reason = "the whole command is what is measured")]
        let mut command = std::process::Command::new(&executable);
        command.arg("run").arg(&path).stdout(std::process::Stdio::null());
        let start = Instant::now();
        let status = command.status().ok()?;
        if round >= 3 {
            times.push(start.elapsed());
        }
        if !status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Some(ms(percentiles(&mut times).0))
}

/// `python3 -I -S -c pass` on the provider's interpreter, p50 in ms.
pub(super) fn bare_python(executable: &Path, samples: usize) -> f64 {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        #[expect(
            clippy::disallowed_methods,
            reason = "the baseline is the bare interpreter, outside the provider"
        )]
        let mut command = std::process::Command::new(executable);
        command.args(["-I", "-S", "-c", "pass"]).env_clear();
        let start = Instant::now();
        let _ = command.status();
        times.push(start.elapsed());
    }
    ms(percentiles(&mut times).0)
}

/// Node `worker_threads` spawn-to-first-message, p50 in ms; `None` without `node`.
pub(super) fn node_worker_spawn(samples: usize) -> Option<f64> {
    const SCRIPT: &str = "const { Worker } = require('worker_threads');\n\
        const n = Number(process.argv[1]); const times = [];\n\
        (async () => { for (let i = 0; i < n; i++) { const t = process.hrtime.bigint();\n\
          await new Promise(r => { const w = new Worker(\"require('worker_threads').parentPort.postMessage(1)\", { eval: true });\n\
            w.once('message', () => { times.push(Number(process.hrtime.bigint() - t) / 1e6); w.terminate().then(r); }); }); }\n\
          times.sort((a, b) => a - b); console.log(times[Math.floor(times.length / 2)]); })();";
    #[expect(clippy::disallowed_methods, reason = "the baseline is Node itself")]
    let output = std::process::Command::new("node")
        .args(["-e", SCRIPT, &samples.to_string()])
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}
