//! The session figures (docs/sessions.md), Python's: what a run in a session costs beside the
//! same run in none, measured alternately so both share the machine's moment. A session holding
//! 10 small variables (the bar: within 1 ms), and one holding a 10 MB numpy array, saved and
//! restored by every run (the bar: within 20 ms; skipped when the interpreter has no numpy).

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runtime::json;
use code_runtime::json::JsonValue;
use code_runtime::{CodeRunRequest, CodeRuntime, SessionId};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};

use crate::bench::{ms, percentiles};

const SMALL: &str = "a0, a1, a2, a3, a4 = 0, 1, 2, 3, 4\n\
    b0, b1, b2 = 'x', 'y', 'z'\nc0, c1 = [1, 2], {'k': 1.5}";
const NUMPY: &str = "import numpy as np\narr = np.arange(10 * 2**20 // 8, dtype=np.float64)";

pub(super) async fn session_figures(base: &PythonConfig, samples: usize) -> JsonValue {
    let runtime: Arc<dyn CodeRuntime> = match PythonCodeRuntime::new(base.clone()) {
        Ok(runtime) => Arc::new(runtime),
        Err(error) => return json!({"skipped": error.to_string()}),
    };
    let small = SessionId::new("bench-small");
    let mut figures = json!({});
    figures["small"] = match setup(&runtime, &small, SMALL).await {
        Ok(()) => {
            let (plain, session) = alternating(&runtime, "return 1", &small, samples).await;
            json!({
                "plain_run_ms": {"p50": ms(plain), "n": samples},
                "session_run_ms": {"p50": ms(session), "n": samples},
                "over_plain_ms": ms(session) - ms(plain),
                "mode": "10 small variables restored and saved by each run, beside the same run in no session",
            })
        }
        Err(why) => json!({"skipped": why}),
    };
    let numpy = SessionId::new("bench-numpy");
    figures["numpy_10mb"] = match setup(&runtime, &numpy, NUMPY).await {
        Ok(()) => {
            let samples = samples.div_ceil(3);
            let plain = "import numpy as np\nreturn 1";
            let (plain, session) = alternating(&runtime, plain, &numpy, samples).await;
            json!({
                "plain_run_ms": {"p50": ms(plain), "n": samples},
                "session_run_ms": {"p50": ms(session), "n": samples},
                "over_plain_ms": ms(session) - ms(plain),
                "mode": "a 10 MB numpy array restored and saved by each run, beside a run that imports numpy in no session",
            })
        }
        Err(why) => json!({"skipped": why}),
    };
    runtime.dispose().await;
    figures
}

/// The session's first run, which leaves what the measured runs restore and save.
async fn setup(
    runtime: &Arc<dyn CodeRuntime>,
    id: &SessionId,
    program: &str,
) -> Result<(), String> {
    let result = runtime.run(CodeRunRequest::new(program).session(id.clone())).await;
    match result {
        Ok(result) if result.is_ok() => Ok(()),
        Ok(result) => Err(result.error().map_or_else(String::new, |e| {
            e.message().lines().last().unwrap_or_default().to_owned()
        })),
        Err(error) => Err(error.to_string()),
    }
}

/// `program` alone and `return 1` in session `id`, alternately: their p50s.
async fn alternating(
    runtime: &Arc<dyn CodeRuntime>,
    program: &str,
    id: &SessionId,
    samples: usize,
) -> (Duration, Duration) {
    let (mut plain, mut session) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for round in 0..samples + 3 {
        let start = Instant::now();
        let result = runtime.run(CodeRunRequest::new(program)).await;
        let took = start.elapsed();
        assert!(result.is_ok_and(|r| r.is_ok()), "a plain run of the bench failed");
        let start = Instant::now();
        let result = runtime.run(CodeRunRequest::new("return 1").session(id.clone())).await;
        let took_in_session = start.elapsed();
        assert!(result.is_ok_and(|r| r.is_ok()), "a session run of the bench failed");
        // The first rounds warm both paths.
        if round >= 3 {
            plain.push(took);
            session.push(took_in_session);
        }
    }
    (percentiles(&mut plain).0, percentiles(&mut session).0)
}
