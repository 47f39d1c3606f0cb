//! Approvals in `code-runtime mcp` (docs/design.md §13): which upstream tools need the user's
//! approval ([`Policy`]), and the client's user deciding each call through an MCP elicitation
//! ([`ClientApprover`]), or the configured [`Fallback`] when the client cannot ask.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use code_runtime::provider::async_trait;
use code_runtime::{ApprovalRequest, Approver, Decision};
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, Tool};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use serde::Deserialize;
use serde::de::value::SeqAccessDeserializer;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// Which tools of a server need approval: `"none"`, `"destructive"` (every tool whose
/// annotations do not say `readOnlyHint: true`; an unannotated tool is destructive, as the MCP
/// spec's defaults make it), `"all"`, or a list of names where `*` matches any run of
/// characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    None,
    Destructive,
    All,
    Named(Vec<String>),
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PolicyVisitor)
    }
}

/// Reads `approval`: one of the words, or an array of names.
struct PolicyVisitor;

impl<'de> Visitor<'de> for PolicyVisitor {
    type Value = Policy;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"none\", \"destructive\", \"all\" or an array of tool names or globs")
    }

    fn visit_str<E: de::Error>(self, word: &str) -> Result<Policy, E> {
        match word {
            "none" => Ok(Policy::None),
            "destructive" => Ok(Policy::Destructive),
            "all" => Ok(Policy::All),
            _ => Err(E::invalid_value(de::Unexpected::Str(word), &self)),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, names: A) -> Result<Policy, A::Error> {
        Vec::deserialize(SeqAccessDeserializer::new(names)).map(Policy::Named)
    }
}

impl Policy {
    /// Whether calls of `tool` need approval.
    pub(crate) fn covers(&self, tool: &Tool) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Destructive => {
                tool.annotations.as_ref().and_then(|hints| hints.read_only_hint) != Some(true)
            }
            Self::Named(patterns) => patterns.iter().any(|pattern| glob(pattern, &tool.name)),
        }
    }
}

/// Whether `name` matches `pattern`, in which `*` matches any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// What a call that needs approval gets when the client has no elicitation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Fallback {
    /// It is denied; the program sees the denial.
    #[default]
    Deny,
    /// The run pauses: `run_code` returns the paused result, and `resume_run` continues it.
    Pause,
}

/// The choices the user is offered.
const ALLOW: &str = "allow";
const ALLOW_REST: &str = "allow for the rest of this run";
const DENY: &str = "deny";

/// One run's approver: the client's user, asked through `elicitation/create`.
pub(crate) struct ClientApprover {
    peer: Peer<RoleServer>,
    fallback: Fallback,
    allow_rest: AtomicBool,
}

impl ClientApprover {
    pub(crate) fn new(peer: Peer<RoleServer>, fallback: Fallback) -> Self {
        Self { peer, fallback, allow_rest: AtomicBool::new(false) }
    }
}

#[async_trait]
impl Approver for ClientApprover {
    async fn decide(&self, request: &ApprovalRequest) -> Decision {
        if self.allow_rest.load(Ordering::Relaxed) {
            return Decision::Allow;
        }
        if !self.peer.supported_elicitation_modes().contains(&ElicitationMode::Form) {
            return match self.fallback {
                Fallback::Deny => Decision::deny(
                    "the client cannot ask its user (it has no elicitation); approvalFallback is deny",
                ),
                Fallback::Pause => Decision::Pause,
            };
        }
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!("The program wants to call {}. Allow it?", request.summary),
            requested_schema: schema(),
        };
        // The approval's own timeout bounds the wait; rmcp's default would end it sooner.
        match self.peer.create_elicitation_with_timeout(params, None).await {
            Ok(answer) => match answer.action {
                ElicitationAction::Accept => {
                    let choice =
                        answer.content.as_ref().and_then(|content| content.get("decision"));
                    match choice.and_then(serde_json::Value::as_str) {
                        Some(ALLOW) => Decision::Allow,
                        Some(ALLOW_REST) => {
                            self.allow_rest.store(true, Ordering::Relaxed);
                            Decision::Allow
                        }
                        _ => Decision::deny("declined by the user"),
                    }
                }
                _ => Decision::deny("declined by the user"),
            },
            Err(error) => Decision::deny(format!("the client could not ask its user: {error}")),
        }
    }

    fn name(&self) -> &str {
        "client"
    }
}

/// `{"decision": "allow" | "allow for the rest of this run" | "deny"}`.
fn schema() -> ElicitationSchema {
    let schema = code_runtime::json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "enum": [ALLOW, ALLOW_REST, DENY],
            },
        },
        "required": ["decision"],
    });
    let object = match schema.to_serde_json() {
        Ok(serde_json::Value::Object(object)) => object,
        _ => serde_json::Map::new(),
    };
    ElicitationSchema::from_json_schema(object)
        .unwrap_or_else(|_| ElicitationSchema::new(Default::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names() {
        for (pattern, name, matches) in [
            ("delete_*", "delete_repo", true),
            ("delete_*", "undelete_repo", false),
            ("*_repo", "delete_repo", true),
            ("*", "anything", true),
            ("get", "get", true),
            ("get", "get_all", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXcYb", false),
            ("a*a", "a", false),
        ] {
            assert_eq!(glob(pattern, name), matches, "{pattern} {name}");
        }
    }

    #[test]
    fn the_policy_reads_the_annotations() {
        let tool = |read_only: Option<bool>| {
            let mut tool = Tool::new("delete_repo", "", serde_json::Map::new());
            if let Some(read_only) = read_only {
                tool.annotations = Some(rmcp::model::ToolAnnotations::new().read_only(read_only));
            }
            tool
        };
        assert!(Policy::Destructive.covers(&tool(None)));
        assert!(Policy::Destructive.covers(&tool(Some(false))));
        assert!(!Policy::Destructive.covers(&tool(Some(true))));
        assert!(Policy::All.covers(&tool(Some(true))));
        assert!(!Policy::None.covers(&tool(None)));
        assert!(Policy::Named(vec!["delete_*".into()]).covers(&tool(Some(true))));
        assert!(!Policy::Named(vec!["get".into()]).covers(&tool(None)));
        let read = |value: serde_json::Value| Policy::deserialize(value).map_err(|e| e.to_string());
        assert_eq!(read(serde_json::json!("all")), Ok(Policy::All));
        assert_eq!(
            read(serde_json::json!(["a", "b*"])),
            Ok(Policy::Named(vec!["a".into(), "b*".into()]))
        );
        for value in [serde_json::json!("sometimes"), serde_json::json!([1]), serde_json::json!(1)]
        {
            assert!(read(value.clone()).unwrap_err().contains("expected"), "{value}");
        }
    }
}
