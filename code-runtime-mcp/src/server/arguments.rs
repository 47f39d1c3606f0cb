//! The tools' arguments as the client sends them, read by serde: a missing or mistyped argument
//! is refused with its name before a tool runs. `resume_run`'s decisions are made here too.

use code_runtime::Decisions;
use serde::Deserialize;

/// `run_code`'s arguments.
#[derive(Deserialize)]
pub(super) struct RunCode {
    pub(super) code: String,
    /// One of the config's languages; the first when absent.
    pub(super) language: Option<String>,
    /// The client's session the run belongs to, if any.
    #[serde(default)]
    pub(super) session: Option<String>,
}

/// `resume_run`'s arguments.
#[derive(Deserialize)]
pub(super) struct ResumeRun {
    /// The paused result's checkpoint, as it came (an object, or its JSON text).
    pub(super) checkpoint: serde_json::Value,
    /// Ids of pending calls the user allows.
    #[serde(default)]
    allow: Option<Vec<u64>>,
    /// Pending calls the user denies.
    #[serde(default)]
    deny: Option<Vec<Denial>>,
}

/// A denial of `resume_run`: a call id, or `{id, reason}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Denial {
    Id(u64),
    Reasoned { id: u64, reason: Option<String> },
}

impl ResumeRun {
    /// `allow` and `deny` as decisions.
    pub(super) fn decisions(&self) -> Decisions {
        let mut decisions = Decisions::new();
        for id in self.allow.iter().flatten() {
            decisions = decisions.allow(*id);
        }
        for denial in self.deny.iter().flatten() {
            let (id, reason) = match denial {
                Denial::Id(id) => (*id, None),
                Denial::Reasoned { id, reason } => (*id, reason.as_deref()),
            };
            decisions = decisions.deny(id, reason.unwrap_or("denied by the user"));
        }
        decisions
    }
}

/// `search_tools`' arguments.
#[derive(Deserialize)]
pub(super) struct SearchTools {
    pub(super) query: String,
}

/// `describe_tools`' arguments.
#[derive(Deserialize)]
pub(super) struct DescribeTools {
    /// `"namespace.function"` or namespace names.
    pub(super) names: Vec<String>,
    pub(super) language: Option<String>,
}

#[cfg(test)]
mod tests {
    use code_runtime::Decision;

    use super::*;

    fn arguments<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
        serde_json::from_value(value).map_err(|error| error.to_string())
    }

    #[test]
    fn resume_run_takes_ids_and_reasoned_denials() {
        let resume: ResumeRun = arguments(serde_json::json!({
            "checkpoint": {},
            "allow": [1],
            "deny": [2, {"id": 3, "reason": "not today"}, {"id": 4}],
        }))
        .unwrap();
        let decisions = resume.decisions();
        assert_eq!(decisions.get(1), Some(&Decision::Allow));
        assert_eq!(decisions.get(2), Some(&Decision::deny("denied by the user")));
        assert_eq!(decisions.get(3), Some(&Decision::deny("not today")));
        assert_eq!(decisions.get(4), Some(&Decision::deny("denied by the user")));
        let none: ResumeRun =
            arguments(serde_json::json!({"checkpoint": "{}", "allow": null})).unwrap();
        assert_eq!(none.decisions(), Decisions::new());
        let wrong = arguments::<ResumeRun>(serde_json::json!({"checkpoint": {}, "allow": ["1"]}));
        assert!(wrong.is_err());
        let missing = arguments::<ResumeRun>(serde_json::json!({"allow": [1]})).err().unwrap();
        assert!(missing.contains("checkpoint"), "{missing}");
    }

    #[test]
    fn a_missing_or_mistyped_argument_is_named() {
        let missing = arguments::<RunCode>(serde_json::json!({"language": "python"})).err();
        assert!(missing.unwrap().contains("`code`"));
        let mistyped = arguments::<DescribeTools>(serde_json::json!({"names": "tools"})).err();
        assert!(mistyped.unwrap().contains("sequence"));
        let query = arguments::<SearchTools>(serde_json::json!({"query": 7})).err();
        assert!(query.unwrap().contains("string"));
    }
}
