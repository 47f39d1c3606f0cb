//! The deployment recipes against the binary they deploy: the Helm chart (linted and rendered by
//! Helm, validated against the Kubernetes API schema) and the Containerfile, checked by
//! `deploy/tests/chart.py` with the tools `cargo xtask test` installs from `deploy/`.

use std::path::PathBuf;
use std::process::Command;

use crate::{stderr, stdout};

#[test]
fn the_chart_validates_and_agrees_with_the_gateway_and_the_image() {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let python = root.join("deploy/.venv/bin/python");
    assert!(
        python.exists(),
        "deploy/ is not installed: `cargo xtask test` installs it from its lockfile"
    );
    #[expect(clippy::disallowed_methods, reason = "the pinned deployment tools")]
    let output = Command::new(python)
        .arg(root.join("deploy/tests/chart.py"))
        .arg(env!("CARGO_BIN_EXE_code-runtime"))
        .output()
        .expect("the script runs");
    let shown = format!("{}\n{}", stdout(&output), stderr(&output));
    assert!(output.status.success() && shown.contains("all deployment checks passed"), "{shown}");
}
