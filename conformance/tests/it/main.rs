//! Runs every conformance case on its provider, snapshots the report, checks the suite's
//! expectation, and checks that cases present in both languages agree, and that every
//! TypeScript case has the same report in both isolation modes. Beside the cases, the provider
//! suites (`providers.rs`): Rust tests of the host API written once and run on every provider.

mod providers;

use std::collections::BTreeMap;

use conformance::{CaseRun, Isolation, cases, check_expectation, parity_view, report};

#[test]
fn every_case_on_both_providers() {
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let provider = std::env::var("CONFORMANCE_PROVIDER").ok();
    let suite = std::env::var("CONFORMANCE_SUITE").ok();
    let cases: Vec<_> = cases()
        .into_iter()
        .filter(|case| provider.as_deref().is_none_or(|p| p == case.language))
        .filter(|case| suite.as_deref().is_none_or(|s| s == case.suite))
        .collect();
    assert!(!cases.is_empty(), "no conformance case found");
    let mut failures = Vec::new();
    let mut outcomes: BTreeMap<(String, String), Vec<(&'static str, CaseRun)>> = BTreeMap::new();
    let cells = Isolation::Process(env!("CARGO_BIN_EXE_conformance-v8-cell").into());
    for case in &cases {
        let outcome = tokio.block_on(conformance::run(case, &Isolation::Thread));
        let rendered = report(case, &outcome);
        if case.language == "typescript" {
            let in_cell = report(case, &tokio.block_on(conformance::run(case, &cells)));
            if in_cell != rendered {
                failures.push(format!(
                    "{}/{} differs between isolation modes:\n--- thread\n{rendered}\n--- process\n{in_cell}",
                    case.suite, case.name
                ));
            }
        }
        if let Err(why) = check_expectation(&case.suite, &outcome) {
            failures.push(format!("{why}:\n{rendered}"));
        }
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(conformance::snapshots_dir().join(case.language));
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_snapshot_suffix(format!("{}-{}", case.suite, case.name));
        settings.bind(|| insta::assert_snapshot!("case", rendered));
        outcomes
            .entry((case.suite.clone(), case.name.clone()))
            .or_default()
            .push((case.language, outcome));
    }
    for ((suite, name), pair) in &outcomes {
        if let [(left_language, left), (right_language, right)] = pair.as_slice() {
            let (left_view, right_view) = (parity_view(left), parity_view(right));
            if left_view != right_view {
                failures.push(format!(
                    "{suite}/{name} differs between languages:\n--- {left_language}\n{left_view}\n--- {right_language}\n{right_view}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} conformance failure(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
