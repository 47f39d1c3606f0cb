//! The frames of the fd-3 protocol (docs/python-frame-protocol.md): what the child may send,
//! validated and rebuilt field by field, and what the host sends, built as text.
//!
//! Every inbound line is hostile: it comes from a process that runs model-written code with full
//! access to fd 3. [`ChildFrame::parse`] therefore accepts only the exact shapes below and drops
//! everything else, including valid JSON with one wrong field. Values are parsed by
//! `code_runtime::json::parse`, which refuses lossy numbers on the raw token (an integer a double
//! cannot hold, `-0`, `1e400`) and lone surrogates, so a frame that holds one is dropped whole.

use code_runtime::json::JsonMap as Map;
use code_runtime::json::{self, JsonValue, NumberSpelling};
use code_runtime::provider::{
    Answer, CallId, Determinism, MAX_VALUE_DEPTH, PROGRAM_WRAPPER_NAME, ProgramGlobals, Recorded,
    catalogue,
};
use code_runtime::{BindingError, CodeBindingNamespace};

/// A frame from the child, rebuilt from only the fields the protocol defines.
#[derive(Debug, PartialEq)]
pub(crate) enum ChildFrame {
    /// Boot frame received; the child is ready for `run`.
    BootAck,
    /// One line the program printed.
    Log {
        /// The line, without its newline.
        text: String,
    },
    /// The program called a binding.
    Call {
        /// The child's correlation id, echoed in the reply: a non-negative integer.
        id: CallId,
        /// The namespace global.
        global: String,
        /// The member name.
        name: String,
        /// The argument (present; `null` allowed).
        args: JsonValue,
        /// `"replayed": true`: the child answered it itself from the boot frame's `replay`.
        replayed: bool,
    },
    /// What carries to the session's next run, before `done`.
    State(code_runtime::Capture),
    /// The program settled.
    Done(Done),
}

/// The message of an `invalid-output` `done` that says the program returned a function
/// (`bootstrap.py`'s `_done_error("invalid-output", "function")`).
const FUNCTION: &str = "function";

/// How the child says the program settled.
#[derive(Debug, PartialEq)]
pub(crate) enum Done {
    /// Completed, with its value (`None`: the program returned nothing).
    Completed(Option<JsonValue>),
    /// The program raised (`exception`): the child's rendering of it, its traceback.
    Threw(String),
    /// The program returned a function (`invalid-output` whose message is `function`).
    ReturnedFunction,
    /// What the program returned is not lossless JSON (any other `invalid-output`).
    InvalidOutput,
    /// The program's output outgrew the budget inside the child (`output-limit`).
    OutputExceeded,
}

impl ChildFrame {
    /// [`parse_within`](ChildFrame::parse_within) without a bound.
    #[cfg(test)]
    pub(crate) fn parse(line: &[u8]) -> Option<ChildFrame> {
        Self::parse_within(line, usize::MAX).ok().flatten()
    }

    /// Validates one line from fd 3 (`Ok(None)`: drop it, never a panic), with the frame's
    /// values held to `max_held` bytes of host memory ([`json::parse_within`]): `Err` when the
    /// line would make more.
    pub(crate) fn parse_within(
        line: &[u8],
        max_held: usize,
    ) -> Result<Option<ChildFrame>, TooLarge> {
        if crate::session_frame::is_binary(line) {
            return crate::session_frame::capture(line, max_held)
                .map(|capture| capture.map(ChildFrame::State))
                .map_err(|limit| TooLarge { limit });
        }
        let Ok(text) = std::str::from_utf8(line) else { return Ok(None) };
        let mut fields = match json::parse_within(text, max_held) {
            Ok(JsonValue::Object(fields)) => fields,
            Err(json::ParseError::TooLarge { limit }) => return Err(TooLarge { limit }),
            Ok(_) | Err(_) => return Ok(None),
        };
        Ok(Self::rebuild(&mut fields))
    }

    fn rebuild(fields: &mut Map) -> Option<ChildFrame> {
        let kind = match fields.get("type") {
            Some(JsonValue::String(kind)) => kind.clone(),
            _ => return None,
        };
        match kind.as_str() {
            "boot-ack" => Some(ChildFrame::BootAck),
            "log" => match fields.remove("text") {
                Some(JsonValue::String(text)) => Some(ChildFrame::Log { text }),
                _ => None,
            },
            "call" => {
                let id = match fields.get("id") {
                    Some(JsonValue::Number(id)) => id.as_u64()?,
                    _ => return None,
                };
                let (Some(JsonValue::String(global)), Some(JsonValue::String(name))) =
                    (fields.get("global"), fields.get("name"))
                else {
                    return None;
                };
                let (global, name) = (global.clone(), name.clone());
                // An absent `args` is dropped rather than passed on as `null`.
                let args = fields.remove("args")?;
                let replayed = matches!(fields.get("replayed"), Some(JsonValue::Bool(true)));
                Some(ChildFrame::Call { id, global, name, args, replayed })
            }
            "done" => {
                let value = fields.remove("value");
                match fields.get("error") {
                    None => Some(ChildFrame::Done(Done::Completed(value))),
                    // A done carrying both settles as its error; the value is discarded.
                    Some(error) => Self::failure(error).map(ChildFrame::Done),
                }
            }
            _ => None,
        }
    }

    /// A `done` frame's `error`, one of the three kinds a child may report, with its message
    /// (the one place the wire's spellings, `function` included, are read).
    fn failure(error: &JsonValue) -> Option<Done> {
        let JsonValue::Object(error) = error else { return None };
        let kind = error.get("kind")?.as_str()?;
        let message = error.get("message")?.as_str()?;
        match kind {
            "exception" => Some(Done::Threw(message.to_owned())),
            "invalid-output" if message == FUNCTION => Some(Done::ReturnedFunction),
            "invalid-output" => Some(Done::InvalidOutput),
            "output-limit" => Some(Done::OutputExceeded),
            _ => None,
        }
    }
}

/// A line whose values would hold more host memory than the run may: the run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a frame whose values would hold more than {limit} bytes")]
pub(crate) struct TooLarge {
    /// The bound.
    pub limit: usize,
}

/// The version of the fd-3 frames (docs/python-frame-protocol.md), in `boot`: the bootstrap
/// refuses another. A change to any frame changes it, here and in `bootstrap.py`'s `_VERSION`.
pub(crate) const VERSION: u64 = 1;

/// The first frame: the namespaces to materialise, the limits the child enforces on itself before
/// anything reaches fd 3, the name of the program's wrapper, and the messages the child shows the
/// program (`code_runtime::provider::catalogue`), so each is written once.
pub(crate) fn boot(
    namespaces: &[CodeBindingNamespace],
    globals: &ProgramGlobals,
    (determinism, replay): (Option<Determinism>, &[Option<Recorded>]),
    session: Option<(&code_runtime::SessionState, u64)>,
    (max_output_bytes, max_frame_bytes): (u64, usize),
) -> String {
    let mut out = format!("{{\"type\":\"boot\",\"version\":{VERSION},\"namespaces\":[");
    for (index, namespace) in namespaces.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        boot_namespace(namespace, &mut out);
    }
    out.push(']');
    boot_globals(globals, &mut out);
    if let Some(Determinism { seed, started_ms, .. }) = determinism {
        out.push_str(&format!(",\"replay\":{{\"seed\":\"{seed:016x}\",\"startedMs\":"));
        json::encode_into(&JsonValue::from(started_ms), &mut out);
        if !replay.is_empty() {
            out.push_str(",\"answers\":[");
            for (index, recorded) in replay.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                recorded_answer(recorded.as_ref(), &mut out);
            }
            out.push(']');
        }
        out.push('}');
    }
    if let Some((state, max_bytes)) = session {
        crate::session_frame::boot_session(state, max_bytes, &mut out);
    }
    out.push_str(&format!(
        ",\"maxOutputBytes\":{max_output_bytes},\"maxFrameBytes\":{max_frame_bytes},\"wrapper\":{},\"messages\":{{",
        json::quote(PROGRAM_WRAPPER_NAME)
    ));
    for (index, (key, text)) in catalogue::SUBSTRATE_MESSAGES.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&json::quote(key));
        out.push(':');
        out.push_str(&json::quote(text));
    }
    out.push_str("}}");
    out
}

/// One namespace of the boot frame: its global, its functions' names, their positional
/// parameter names (for the functions whose input schema has them), and its error class.
fn boot_namespace(namespace: &CodeBindingNamespace, out: &mut String) {
    out.push_str("{\"global\":");
    out.push_str(&json::quote(&namespace.global));
    out.push_str(",\"names\":[");
    for (index, name) in namespace.functions.keys().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&json::quote(name));
    }
    out.push(']');
    // Positional parameter names, for the functions whose input schema has them.
    let mut parameters = namespace
        .functions
        .iter()
        .filter_map(|(name, function)| Some((name, function.parameters()?)))
        .peekable();
    if parameters.peek().is_some() {
        out.push_str(",\"parameters\":{");
        for (index, (name, names)) in parameters.enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(&json::quote(name));
            out.push_str(":[");
            for (index, parameter) in names.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&json::quote(parameter));
            }
            out.push(']');
        }
        out.push('}');
    }
    if let Some(class) = &namespace.error_class {
        out.push_str(",\"errorClass\":{\"name\":");
        out.push_str(&json::quote(&class.name));
        out.push_str(",\"memberNameProperty\":");
        out.push_str(&json::quote(&class.member_name_property));
        out.push('}');
    }
    out.push('}');
}

/// One of `replay.answers`: `[function, rank, t, true, value]`, `[function, rank, t, false,
/// message, data]`, or `null` for a call the host answers (as is one whose value nests more
/// deeply than the child's parser goes: the host answers it, as it did the first time).
fn recorded_answer(recorded: Option<&Recorded>, out: &mut String) {
    let deep = |value: &JsonValue| json::nests_deeper_than(value, MAX_VALUE_DEPTH);
    let Some(recorded) = recorded.filter(|recorded| match &recorded.answer.outcome {
        Ok(value) => !deep(value),
        Err(rejection) => !rejection.data().is_some_and(deep),
    }) else {
        out.push_str("null");
        return;
    };
    out.push_str(&format!("[{},{},", recorded.function.index(), recorded.rank));
    let clock = recorded.answer.clock_ms.map_or(JsonValue::Null, JsonValue::from);
    json::encode_into(&clock, out);
    match &recorded.answer.outcome {
        Ok(value) => {
            out.push_str(",true,");
            json::encode_with(value, NumberSpelling::ExactIntegers, out);
        }
        Err(rejection) => {
            out.push_str(",false,");
            out.push_str(&json::quote(rejection.message()));
            out.push(',');
            let data = rejection.data().unwrap_or(&JsonValue::Null);
            json::encode_with(data, NumberSpelling::ExactIntegers, out);
        }
    }
    out.push(']');
}

/// The boot frame's `globals` (each `{"name", "function": N}`, `{"name", "callTool": true}` or
/// `{"name", "value": V}`, `N` a function's position across the namespaces) and `tools` (the
/// names `call_tool` takes, as `[name, N]` pairs, and their listing), when there are any.
fn boot_globals(globals: &ProgramGlobals, out: &mut String) {
    if globals.installed.is_empty() {
        return;
    }
    out.push_str(",\"globals\":[");
    for (index, (name, global)) in globals.installed.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        out.push_str(&json::quote(name));
        out.push(',');
        global.write_members(out);
        out.push('}');
    }
    out.push(']');
    if let Some(tools) = &globals.tools {
        out.push_str(",\"tools\":{\"names\":[");
        for (index, (name, function)) in tools.names.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push('[');
            out.push_str(&json::quote(name));
            out.push_str(&format!(",{}]", function.index()));
        }
        out.push_str("],\"listing\":");
        out.push_str(&json::quote(&tools.listing));
        out.push('}');
    }
}

/// The second frame: the program, and nothing else.
pub(crate) fn run(program: &str) -> String {
    format!("{{\"type\":\"run\",\"program\":{}}}", json::quote(program))
}

/// A resolution. Integers keep their exact digits, so Python sees `2**60` as the int it is.
/// The answer to call `id`: [`reply_ok`] or [`reply_error`], with the program's clock reading
/// (`"t"`) in a reproducible run.
pub(crate) fn reply(id: CallId, answer: &Answer) -> String {
    let mut out = match &answer.outcome {
        Ok(value) => reply_ok(id, value),
        Err(rejection) => reply_error(id, rejection),
    };
    if let Some(clock_ms) = answer.clock_ms {
        out.pop();
        out.push_str(",\"t\":");
        json::encode_into(&JsonValue::from(clock_ms), &mut out);
        out.push('}');
    }
    out
}

pub(crate) fn reply_ok(id: CallId, value: &JsonValue) -> String {
    let mut out = format!("{{\"type\":\"reply\",\"id\":{id},\"ok\":true,\"value\":");
    json::encode_with(value, NumberSpelling::ExactIntegers, &mut out);
    out.push('}');
    out
}

/// A rejection: the message the program sees, and the host's data (`e.data`) when there is any.
pub(crate) fn reply_error(id: CallId, rejection: &BindingError) -> String {
    let mut out = format!(
        "{{\"type\":\"reply\",\"id\":{id},\"ok\":false,\"message\":{}",
        json::quote(rejection.message())
    );
    if let Some(data) = rejection.data() {
        out.push_str(",\"data\":");
        json::encode_with(data, NumberSpelling::ExactIntegers, &mut out);
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use code_runtime::json;

    use super::*;

    /// The transcript block of docs/python-frame-protocol.md: `host> ` and `child> ` lines.
    fn transcript() -> Vec<String> {
        let doc = include_str!("../../docs/python-frame-protocol.md");
        let start = doc.find("```transcript\n").expect("a transcript block") + 14;
        let end = start + doc[start..].find("```").unwrap();
        doc[start..end].lines().filter(|line| !line.is_empty()).map(str::to_owned).collect()
    }

    #[test]
    fn c173_the_documented_host_lines_are_what_the_builders_write_and_child_lines_parse() {
        // The run of tests/wire/main.rs: one namespace `tools` with `echo`, under a 64 KiB
        // output budget.
        let program = "print(\"hello\")\nr = await tools.echo({\"n\": 2**60})\ntry:\n    await tools.echo(None)\nexcept ToolCallError as e:\n    print(e.toolName, e)\nreturn r";
        let echo = code_runtime::binding(|args| async move { Ok(args.into()) });
        let tools = code_runtime::CodeBindingNamespace::new("tools")
            .error_class("ToolCallError", "toolName")
            .function("echo", echo);
        let documented = transcript();
        assert_eq!(documented[0], "host> (prelude)");
        let globals = code_runtime::provider::ProgramGlobals::default();
        assert_eq!(
            documented[1],
            format!("host> {}", boot(&[tools], &globals, (None, &[]), None, (65_536, 1_179_648)))
        );
        assert_eq!(documented[3], format!("host> {}", run(program)));
        let ok = format!("host> {}", reply_ok(1, &json!({"n": 1u64 << 60})));
        assert!(documented.contains(&ok), "{ok}");
        let denied = format!("host> {}", reply_error(2, &BindingError::new("denied")));
        assert!(documented.contains(&denied), "{denied}");
        for line in documented.iter().filter_map(|line| line.strip_prefix("child> ")) {
            assert!(parse(line).is_some(), "the host refuses a documented frame: {line}");
        }
    }

    fn parse(text: &str) -> Option<ChildFrame> {
        ChildFrame::parse(text.as_bytes())
    }

    fn call(id: u64, args: JsonValue) -> Option<ChildFrame> {
        Some(ChildFrame::Call {
            id,
            global: "tools".into(),
            name: "echo".into(),
            args,
            replayed: false,
        })
    }

    #[test]
    fn c151_boot_ack_extra_fields_are_discarded() {
        assert_eq!(parse(r#"{"type":"boot-ack"}"#), Some(ChildFrame::BootAck));
        assert_eq!(parse(r#"{"type":"boot-ack","extra":"x"}"#), Some(ChildFrame::BootAck));
    }

    #[test]
    fn c152_c153_log_needs_string_text() {
        assert_eq!(
            parse(r#"{"type":"log","text":"hi"}"#),
            Some(ChildFrame::Log { text: "hi".into() })
        );
        assert_eq!(parse(r#"{"type":"log","text":42}"#), None);
        assert_eq!(parse(r#"{"type":"log"}"#), None);
        // There is no in-band truncation marker (docs/design.md §9.1): a `truncated` flag means nothing.
        assert_eq!(
            parse(r#"{"type":"log","text":"x","truncated":true}"#),
            Some(ChildFrame::Log { text: "x".into() })
        );
    }

    #[test]
    fn c154_call_shape() {
        assert_eq!(
            parse(r#"{"type":"call","id":1,"global":"tools","name":"echo","args":{"x":1}}"#),
            call(1, json!({"x": 1}))
        );
        assert_eq!(
            parse(r#"{"type":"call","id":1,"global":"tools","name":"echo"}"#),
            None,
            "absent args"
        );
        assert_eq!(
            parse(r#"{"type":"call","id":1,"global":"tools","name":"echo","args":null}"#),
            call(1, JsonValue::Null)
        );
        assert_eq!(
            parse(r#"{"type":"call","id":"1","global":"tools","name":"echo","args":1}"#),
            None
        );
        assert_eq!(parse(r#"{"type":"call","id":1,"global":7,"name":"echo","args":1}"#), None);
        assert_eq!(parse(r#"{"type":"call","id":1,"global":"tools","args":1}"#), None);
    }

    #[test]
    fn c155_c156_done_shapes() {
        assert_eq!(parse(r#"{"type":"done"}"#), Some(ChildFrame::Done(Done::Completed(None))));
        assert_eq!(
            parse(r#"{"type":"done","value":42}"#),
            Some(ChildFrame::Done(Done::Completed(Some(json!(42)))))
        );
        assert_eq!(
            parse(r#"{"type":"done","value":null}"#),
            Some(ChildFrame::Done(Done::Completed(Some(JsonValue::Null))))
        );
        for (kind, message, expected) in [
            ("exception", "boom", Done::Threw("boom".into())),
            ("invalid-output", "boom", Done::InvalidOutput),
            ("invalid-output", "function", Done::ReturnedFunction),
            ("output-limit", "boom", Done::OutputExceeded),
        ] {
            let text =
                format!(r#"{{"type":"done","error":{{"kind":"{kind}","message":"{message}"}}}}"#);
            assert_eq!(parse(&text), Some(ChildFrame::Done(expected)));
        }
        let both = r#"{"type":"done","value":1,"error":{"kind":"exception","message":"boom"}}"#;
        assert_eq!(parse(both), Some(ChildFrame::Done(Done::Threw("boom".into()))));
        for error in [
            r#"{"message":"boom"}"#,
            r#"{"kind":"timeout","message":"x"}"#,
            r#""boom""#,
            "null",
            "{}",
            r#"{"kind":"exception","message":42}"#,
        ] {
            assert_eq!(parse(&format!(r#"{{"type":"done","error":{error}}}"#)), None, "{error}");
        }
    }

    #[test]
    fn c157_junk_is_dropped() {
        for text in [
            "null",
            "42",
            "\"str\"",
            "{}",
            r#"{"type":"unknown"}"#,
            "[]",
            r#"{"type":"boot"}"#,
            r#"{"type":"reply","id":1,"ok":true,"value":1}"#,
            "",
            "not json",
            r#"{"type":"log","text":"x"} trailing"#,
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn c158_c159_call_numbers_must_be_lossless() {
        assert_eq!(
            parse(r#"{"type":"call","id":1,"global":"tools","name":"echo","args":{"n":1e400}}"#),
            None
        );
        assert_eq!(
            parse(r#"{"type":"call","id":1e400,"global":"tools","name":"echo","args":1}"#),
            None
        );
        assert_eq!(
            parse(r#"{"type":"call","id":1,"global":"tools","name":"echo","args":[0,1.5]}"#),
            call(1, json!([0, 1.5]))
        );
        assert_eq!(
            parse(r#"{"type":"call","id":-0,"global":"tools","name":"echo","args":1}"#),
            None
        );
        assert_eq!(
            parse(r#"{"type":"call","id":0,"global":"tools","name":"echo","args":1}"#),
            call(0, json!(1))
        );
        assert_eq!(
            parse(
                r#"{"type":"call","id":1,"global":"tools","name":"echo","args":{"a":[1,{"b":-0}]}}"#
            ),
            None
        );
        assert_eq!(
            parse(
                r#"{"type":"call","id":1,"global":"tools","name":"echo","args":9007199254740993}"#
            ),
            None
        );
    }

    #[test]
    fn call_ids_are_non_negative_integers() {
        for id in ["1.5", "-1", "18446744073709551616", "\"1\"", "null"] {
            let text =
                format!(r#"{{"type":"call","id":{id},"global":"tools","name":"echo","args":1}}"#);
            assert_eq!(parse(&text), None, "{id}");
        }
        assert_eq!(
            parse(
                r#"{"type":"call","id":9007199254740992,"global":"tools","name":"echo","args":1}"#
            ),
            call(1 << 53, json!(1))
        );
    }

    #[test]
    fn deep_lines_that_are_not_objects_are_dropped_without_recursion() {
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        // The test thread's stack is small enough that a recursive drop would overflow it.
        assert_eq!(parse(&deep), None);
    }

    #[test]
    fn deep_forged_frames_are_parsed_and_dropped_without_recursion() {
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        let frame = format!(
            r#"{{"type":"call","id":1,"global":"tools","name":"echo","args":{deep},"junk":{deep}}}"#
        );
        let Some(ChildFrame::Call { args, .. }) = parse(&frame) else {
            panic!("a deep call is valid")
        };
        drop(args);
    }

    #[test]
    fn a_reproducible_run_boots_with_its_seed_and_clock_and_replies_carry_the_clock() {
        let determinism = Determinism::new(0xabc, 1_700_000_000_000.5);
        let recorded = Recorded::new(
            code_runtime::provider::FunctionId::new(1),
            Answer::new(
                Err(BindingError::new("no").with_data(code_runtime::json!([1]))),
                Some(2.5),
            ),
            0,
        );
        let replay = [None, Some(recorded)];
        let boot =
            boot(&[], &ProgramGlobals::default(), (Some(determinism), &replay), None, (64, 65_536));
        let parsed = json::parse(&boot).unwrap();
        assert_eq!(
            parsed["replay"],
            code_runtime::json!({
                "seed": "0000000000000abc",
                "startedMs": 1_700_000_000_000.5,
                "answers": [null, [1, 0, 2.5, false, "no", [1]]],
            })
        );
        let answer = Answer::new(Ok(code_runtime::json!(1)), Some(1_700_000_000_001.25));
        assert_eq!(
            reply(7, &answer),
            r#"{"type":"reply","id":7,"ok":true,"value":1,"t":1700000000001.25}"#
        );
        let answer = Answer::new(Err(BindingError::new("no")), None);
        assert_eq!(reply(7, &answer), r#"{"type":"reply","id":7,"ok":false,"message":"no"}"#);
    }

    #[test]
    fn host_frames() {
        let tools = CodeBindingNamespace::new("tools")
            .function("echo", code_runtime::binding(|args| async move { Ok(args.into()) }))
            .function("my-tool", code_runtime::binding(|args| async move { Ok(args.into()) }))
            .error_class("ToolCallError", "toolName");
        let boot = boot(
            &[tools, CodeBindingNamespace::new("empty")],
            &ProgramGlobals::default(),
            (None, &[]),
            None,
            (64, 65_536),
        );
        assert!(
            boot.starts_with(r#"{"type":"boot","version":1,"namespaces":[{"global":"tools","names":["echo","my-tool"],"errorClass":{"name":"ToolCallError","memberNameProperty":"toolName"}},{"global":"empty","names":[]}],"maxOutputBytes":64,"maxFrameBytes":65536,"wrapper":"__code_runtime_main__","messages":{"unrenderable":"program threw an unrenderable value","lossyArguments":"#),
            "{boot}"
        );
        let parsed = json::parse(&boot).unwrap();
        assert_eq!(
            parsed["messages"].as_object().map(|messages| messages.len()),
            Some(catalogue::SUBSTRATE_MESSAGES.len())
        );
        assert_eq!(run("return \"x\"\n"), r#"{"type":"run","program":"return \"x\"\n"}"#);
        assert_eq!(
            reply_ok(3, &json!([1u64 << 60, 1.5])),
            r#"{"type":"reply","id":3,"ok":true,"value":[1152921504606846976,1.5]}"#
        );
        assert_eq!(
            reply_error(4, &BindingError::new("nope \"x\"")),
            r#"{"type":"reply","id":4,"ok":false,"message":"nope \"x\""}"#
        );
        assert_eq!(
            reply_error(5, &BindingError::new("limited").with_data(json!({"status": 429}))),
            r#"{"type":"reply","id":5,"ok":false,"message":"limited","data":{"status":429}}"#
        );
    }
}
