//! The frames between a host and a V8 cell (`process` isolation): a 4-byte big-endian length,
//! then one JSON text, written and read by [`code_runtime::json`], which never recurses (a value
//! a program hands over may be nested 100 000 levels deep).
//!
//! ```text
//! host → cell   {"prepare": {"version": N, ...}}       at once: what the isolate is made with
//!               {"setup": {...}}                       once, when a run takes the cell
//!               {"settle": {"id": N, "value": V}}      a call resolved
//!               {"settle": {"id": N, "error": S, "data": V}}
//! cell → host   {"log": S}
//!               {"call": {"id": N, "function": N, "args": V}}
//!               {"replayed": {"id": N, "function": N, "args": V}}  a call the cell answered
//!                                                      from the setup's `replay`
//!               {"end": E}                             the run's ending, then the cell exits
//!               {"fatal": S}                           V8 gave up: the cell exits next
//! ```
//!
//! The host never sends a stop: it kills the cell. `prepare` carries the protocol's [`VERSION`]:
//! a cell executable from another build (the Python package's `code-runtime` command beside
//! another extension, say) refuses it by name instead of misreading a frame.

use code_runtime::json;
use code_runtime::json::JsonMap as Map;
use code_runtime::json::JsonValue;
use code_runtime::provider::{
    Answer, CallId, Determinism, Ending, Event, FunctionId, ProgramGlobal, Recorded, StopReason,
    ToolIndex,
};
use code_runtime::{BindingArgs, BindingError};

use code_runtime_cell::{Framing, text_frame};

use crate::program::{Program, Shape};
use crate::transform::Positions;

/// How frames spell numbers: integers with their exact digits, as [`json::parse`] reads them
/// back (ECMAScript's spelling of 2^60, `1152921504606847000`, is not that integer).
const EXACT: json::NumberSpelling = json::NumberSpelling::ExactIntegers;

/// The version of these frames; a change to any of them changes it.
pub(crate) const VERSION: u64 = 1;

/// What a cell sends, as the host reads it.
#[derive(Debug)]
pub(crate) enum FromCell {
    Event(Event),
    /// V8 reported a fatal error (or the cell's code panicked); the text says what.
    Fatal(String),
}

/// What the host sends, as the cell reads it.
#[derive(Debug)]
pub(crate) enum ToCell {
    Prepare(Shape),
    Setup(Program),
    Settle { call: CallId, answer: Answer },
}

/// `message` as one frame (the cell layer's length-prefixed framing, the one codec of both
/// sides).
fn frame(message: &JsonValue) -> Vec<u8> {
    text_frame(Framing::LengthPrefixed, |text| json::encode_with(message, EXACT, text))
}

/// An event of the isolate as a frame.
pub(crate) fn event(event: Event) -> Vec<u8> {
    frame(&match event {
        Event::Log(line) => object("log", JsonValue::String(line)),
        Event::Call { id, function, args } => object("call", call_body(id, function, args)),
        Event::Replayed { id, function, args } => object("replayed", call_body(id, function, args)),
        Event::Ended(ending) => object("end", ending_value(ending)),
        // `Event` is non-exhaustive; an isolate sends nothing else.
        _ => json!({ "fatal": "the isolate reported an event the cell cannot send" }),
    })
}

fn call_body(id: CallId, function: FunctionId, args: BindingArgs) -> JsonValue {
    object_of([
        ("id", JsonValue::from(id)),
        ("function", JsonValue::from(function.index())),
        ("args", args.into_value()),
    ])
}

fn ending_value(ending: Ending) -> JsonValue {
    match ending {
        Ending::Completed(None) => json!("undefined"),
        Ending::Completed(Some(value)) => object("value", value),
        Ending::Threw(text) => object("threw", JsonValue::String(text)),
        Ending::InvalidOutput => json!("invalid-output"),
        Ending::ReturnedFunction => json!("returned-function"),
        Ending::Stopped(StopReason::OutputExceeded) => json!("output-limit"),
        Ending::Stopped(StopReason::OutOfMemory { .. }) => json!("out-of-memory"),
        Ending::Failed(text) => object("failed", JsonValue::String(text)),
        other => json!({ "failed": format!("the isolate ended as {other:?}") }),
    }
}

/// The fatal frame, for the cell's last words.
pub(crate) fn fatal(text: &str) -> Vec<u8> {
    frame(&json!({ "fatal": text }))
}

/// The setup frame of a run. The values among its globals are written in place, never cloned
/// (one may nest deeply).
pub(crate) fn setup(program: &Program) -> Vec<u8> {
    let namespaces: Vec<JsonValue> = program
        .namespaces
        .iter()
        .map(|namespace| {
            json!({
                "global": namespace.global,
                "names": namespace.names,
                "parameters": namespace.parameters,
                "error_class": namespace.error_class.as_ref().map(|(name, property)| json!([name, property])),
            })
        })
        .collect();
    let tools = program.tools.as_ref().map(|tools| {
        let names: Vec<JsonValue> =
            tools.names.iter().map(|(name, function)| json!([name, function.index()])).collect();
        json!({ "names": names, "listing": tools.listing })
    });
    let head = json!({
        "body": program.body,
        "positions": program.positions.flat().collect::<Vec<_>>(),
        "parameters": program.parameters,
        "namespaces": namespaces,
        "tools": tools,
        "max_output_bytes": program.max_output_bytes,
        "determinism": program.determinism.map(|determinism| json!({
            "seed": format!("{:016x}", determinism.seed),
            "started_ms": determinism.started_ms,
        })),
        "replay": program.replay.iter().map(recorded_value).collect::<Vec<_>>(),
    });
    text_frame(Framing::LengthPrefixed, |text| {
        text.push_str("{\"setup\":");
        json::encode_with(&head, EXACT, text);
        // The object's closing brace, reopened for the globals.
        text.pop();
        text.push_str(",\"globals\":[");
        for (index, global) in program.globals.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            text.push('{');
            global.write_members(text);
            text.push('}');
        }
        text.push_str("]}}");
    })
}

/// A recorded answer of the setup's `replay`: `{"function", "rank", "clock", "value"}` or
/// `{"function", "rank", "clock", "error", "data"}`; `null` for a call the host answers.
fn recorded_value(recorded: &Option<Recorded>) -> JsonValue {
    let Some(recorded) = recorded else { return JsonValue::Null };
    let mut entry = json!({
        "function": recorded.function.index(),
        "rank": recorded.rank,
        "clock": recorded.answer.clock_ms,
    });
    match &recorded.answer.outcome {
        Ok(value) => entry["value"] = value.clone(),
        Err(rejection) => {
            entry["error"] = json!(rejection.message());
            entry["data"] = rejection.data().cloned().unwrap_or_default();
        }
    }
    entry
}

fn recorded(entry: &JsonValue) -> Option<Option<Recorded>> {
    if entry.is_null() {
        return Some(None);
    }
    let function = FunctionId::new(u32::try_from(entry.get("function")?.as_u64()?).ok()?);
    let rank = entry.get("rank")?.as_u64()?;
    let clock_ms = entry.get("clock").and_then(JsonValue::as_f64);
    let outcome = match (entry.get("value"), entry.get("error").and_then(JsonValue::as_str)) {
        (Some(value), None) => Ok(value.clone()),
        (None, Some(message)) => {
            let rejection = BindingError::new(message);
            Err(match entry.get("data") {
                None | Some(JsonValue::Null) => rejection,
                Some(data) => rejection.with_data(data.clone()),
            })
        }
        _ => return None,
    };
    Some(Some(Recorded::new(function, Answer::new(outcome, clock_ms), rank)))
}

/// The prepare frame of a cell.
pub(crate) fn prepare(shape: Shape) -> Vec<u8> {
    frame(&json!({ "prepare": {
        "version": VERSION,
        "max_memory_mb": shape.max_memory_mb,
        "allow_eval": shape.allow_eval,
        "allow_wasm": shape.allow_wasm,
    }}))
}

/// The settle frame of call `call`. Consumes the value (see [`frame`]).
pub(crate) fn settle(call: CallId, answer: Answer) -> Vec<u8> {
    let clock = answer.clock_ms.map_or(JsonValue::Null, JsonValue::from);
    match answer.outcome {
        Ok(value) => frame(&object(
            "settle",
            object_of([("id", JsonValue::from(call)), ("clock", clock), ("value", value)]),
        )),
        // Written around the rejection's data, which is only borrowed: a clone would recurse.
        Err(rejection) => text_frame(Framing::LengthPrefixed, |text| {
            text.push_str(&format!(
                "{{\"settle\":{{\"id\":{call},\"clock\":{},\"error\":{},\"data\":",
                json::encode(&clock),
                json::quote(rejection.message())
            ));
            json::encode_with(rejection.data().unwrap_or(&JsonValue::Null), EXACT, text);
            text.push_str("}}");
        }),
    }
}

/// `{key: value}`, moving `value` in (`json!` would copy it: a line of the whole output budget
/// would be copied once more).
fn object(key: &str, value: JsonValue) -> JsonValue {
    object_of([(key, value)])
}

fn object_of<const N: usize>(entries: [(&str, JsonValue); N]) -> JsonValue {
    JsonValue::Object(entries.into_iter().map(|(key, value)| (key.to_owned(), value)).collect())
}

/// Why a frame could not be read.
pub(crate) type Malformed = String;

/// Why a frame from the cell was not read.
#[derive(Debug)]
pub(crate) enum Unread {
    /// It is not a frame of this protocol.
    Malformed(Malformed),
    /// Its values would hold more host memory than the run may still make the host hold.
    TooLarge,
}

/// Reads a frame from the cell. `max_memory_mb` is the run's, for an out-of-memory ending.
pub(crate) fn from_cell(payload: &[u8], max_memory_mb: u64) -> Result<FromCell, Malformed> {
    from_cell_within(payload, max_memory_mb, usize::MAX).map_err(|unread| match unread {
        Unread::Malformed(why) => why,
        Unread::TooLarge => "a frame too large to hold".to_owned(),
    })
}

/// [`from_cell`], its values held to `max_held` bytes of host memory
/// ([`json::parse_within`]).
pub(crate) fn from_cell_within(
    payload: &[u8],
    max_memory_mb: u64,
    max_held: usize,
) -> Result<FromCell, Unread> {
    let (key, mut body) = message(payload, max_held)?;
    read_from_cell(&key, &mut body, max_memory_mb).map_err(Unread::Malformed)
}

fn read_from_cell(
    key: &str,
    body: &mut JsonValue,
    max_memory_mb: u64,
) -> Result<FromCell, Malformed> {
    match key {
        "log" => match body.take() {
            JsonValue::String(line) => Ok(FromCell::Event(Event::Log(line))),
            _ => Err("a log frame without a line".to_owned()),
        },
        "fatal" => match body.take() {
            JsonValue::String(text) => Ok(FromCell::Fatal(text)),
            _ => Err("a fatal frame without a text".to_owned()),
        },
        "call" | "replayed" => {
            let args = take(body, "args");
            let id = body.get("id").and_then(JsonValue::as_u64);
            let function = body.get("function").and_then(JsonValue::as_u64);
            match (id, function.and_then(|f| u32::try_from(f).ok()), args) {
                (Some(id), Some(function), Some(args)) => {
                    let (function, args) = (FunctionId::new(function), BindingArgs::new(args));
                    Ok(FromCell::Event(if key == "call" {
                        Event::Call { id, function, args }
                    } else {
                        Event::Replayed { id, function, args }
                    }))
                }
                _ => Err("a call frame without its id, function or arguments".to_owned()),
            }
        }
        "end" => ending(body, max_memory_mb).map(|e| FromCell::Event(Event::Ended(e))),
        other => Err(format!("an unknown frame {}", json::quote(other))),
    }
}

fn ending(body: &mut JsonValue, max_memory_mb: u64) -> Result<Ending, Malformed> {
    if let Some(value) = take(body, "value") {
        return Ok(Ending::Completed(Some(value)));
    }
    let text =
        |body: &JsonValue, key: &str| body.get(key).and_then(JsonValue::as_str).map(str::to_owned);
    match body.as_str() {
        Some("undefined") => return Ok(Ending::Completed(None)),
        Some("invalid-output") => return Ok(Ending::InvalidOutput),
        Some("returned-function") => return Ok(Ending::ReturnedFunction),
        Some("output-limit") => return Ok(Ending::Stopped(StopReason::OutputExceeded)),
        Some("out-of-memory") => {
            return Ok(Ending::Stopped(StopReason::OutOfMemory { max_memory_mb }));
        }
        _ => {}
    }
    if let Some(text) = text(body, "threw") {
        return Ok(Ending::Threw(text));
    }
    if let Some(text) = text(body, "failed") {
        return Ok(Ending::Failed(text));
    }
    Err("an end frame with no ending".to_owned())
}

/// Reads a frame from the host.
pub(crate) fn to_cell(payload: &[u8]) -> Result<ToCell, Malformed> {
    let (key, mut body) = message(payload, usize::MAX).map_err(|unread| match unread {
        Unread::Malformed(why) => why,
        Unread::TooLarge => "a frame too large to hold".to_owned(),
    })?;
    match key.as_str() {
        "setup" => program(&body).map(ToCell::Setup),
        "prepare" => shape(&body).map(ToCell::Prepare),
        "settle" => {
            let value = take(&mut body, "value");
            let data = take(&mut body, "data").filter(|data| !data.is_null());
            let clock = body.get("clock").and_then(JsonValue::as_f64);
            match (body.get("id").and_then(JsonValue::as_u64), value) {
                (Some(call), Some(value)) => {
                    Ok(ToCell::Settle { call, answer: Answer::new(Ok(value), clock) })
                }
                (Some(call), None) => {
                    let message = body.get("error").and_then(JsonValue::as_str).unwrap_or("");
                    let mut rejection = BindingError::new(message);
                    if let Some(data) = data {
                        rejection = rejection.with_data(data);
                    }
                    Ok(ToCell::Settle { call, answer: Answer::new(Err(rejection), clock) })
                }
                (None, _) => Err("a settle frame without an id".to_owned()),
            }
        }
        other => Err(format!("an unknown frame {}", json::quote(other))),
    }
}

fn program(body: &JsonValue) -> Result<Program, Malformed> {
    let missing = |what: &str| format!("a setup frame without {what}");
    let string = |value: &JsonValue| value.as_str().map(str::to_owned);
    let strings = |value: Option<&JsonValue>| -> Option<Vec<String>> {
        value?.as_array()?.iter().map(string).collect()
    };
    let namespaces = body
        .get("namespaces")
        .and_then(JsonValue::as_array)
        .ok_or_else(|| missing("namespaces"))?
        .iter()
        .map(|namespace| {
            let error_class = match namespace.get("error_class") {
                Some(JsonValue::Array(pair)) if pair.len() == 2 => {
                    Some((string(&pair[0])?, string(&pair[1])?))
                }
                _ => None,
            };
            let names = strings(namespace.get("names"))?;
            // One entry per name: `null`, or the positional argument names.
            let parameters = match namespace.get("parameters") {
                None => vec![None; names.len()],
                Some(JsonValue::Array(entries)) if entries.len() == names.len() => entries
                    .iter()
                    .map(|entry| match entry {
                        JsonValue::Null => Some(None),
                        other => strings(Some(other)).map(Some),
                    })
                    .collect::<Option<Vec<_>>>()?,
                Some(_) => return None,
            };
            Some(crate::program::NamespaceSetup {
                global: string(namespace.get("global")?)?,
                names,
                parameters,
                error_class,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| missing("valid namespaces"))?;
    let globals = match body.get("globals") {
        Some(JsonValue::Array(globals)) => globals.iter().map(global).collect::<Option<Vec<_>>>(),
        _ => None,
    }
    .ok_or_else(|| missing("valid globals"))?;
    let tools = match body.get("tools") {
        None | Some(JsonValue::Null) => None,
        Some(tools) => Some(tool_index(tools).ok_or_else(|| missing("valid tools"))?),
    };
    let max_output_bytes = body
        .get("max_output_bytes")
        .and_then(JsonValue::as_u64)
        .ok_or_else(|| missing("max_output_bytes"))?;
    let (determinism, replay) = reproducible(body).map_err(&missing)?;
    Ok(Program {
        determinism,
        replay,
        body: body.get("body").and_then(string).ok_or_else(|| missing("body"))?,
        positions: positions(body.get("positions")).ok_or_else(|| missing("valid positions"))?,
        parameters: strings(body.get("parameters")).ok_or_else(|| missing("parameters"))?,
        namespaces,
        globals,
        tools,
        max_output_bytes: usize::try_from(max_output_bytes).unwrap_or(usize::MAX),
    })
}

/// A setup's `positions` (absent: none).
fn positions(positions: Option<&JsonValue>) -> Option<Positions> {
    let Some(positions) = positions else { return Some(Positions::default()) };
    let numbers = positions
        .as_array()?
        .iter()
        .map(|number| number.as_u64().and_then(|number| u32::try_from(number).ok()))
        .collect::<Option<Vec<u32>>>()?;
    Positions::from_flat(&numbers)
}

/// A setup's `determinism` and `replay`; `Err` names the one that is not valid.
fn reproducible(
    body: &JsonValue,
) -> Result<(Option<Determinism>, Vec<Option<Recorded>>), &'static str> {
    let determinism = match body.get("determinism") {
        None | Some(JsonValue::Null) => None,
        Some(determinism) => {
            let seed = determinism.get("seed").and_then(JsonValue::as_str);
            let seed = seed.and_then(|seed| u64::from_str_radix(seed, 16).ok());
            let started_ms = determinism.get("started_ms").and_then(JsonValue::as_f64);
            match (seed, started_ms) {
                (Some(seed), Some(started_ms)) => Some(Determinism::new(seed, started_ms)),
                _ => return Err("a valid determinism"),
            }
        }
    };
    let replay = match body.get("replay") {
        None => Vec::new(),
        Some(JsonValue::Array(entries)) => {
            entries.iter().map(recorded).collect::<Option<Vec<_>>>().ok_or("a valid replay")?
        }
        Some(_) => return Err("a valid replay"),
    };
    Ok((determinism, replay))
}

/// One global of a setup frame.
fn global(entry: &JsonValue) -> Option<ProgramGlobal> {
    ProgramGlobal::from_members(entry.as_object()?)
}

fn tool_index(tools: &JsonValue) -> Option<ToolIndex> {
    let names = tools
        .get("names")?
        .as_array()?
        .iter()
        .map(|pair| {
            let name = pair.get(0)?.as_str()?.to_owned();
            Some((name, FunctionId::new(u32::try_from(pair.get(1)?.as_u64()?).ok()?)))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(ToolIndex { names, listing: tools.get("listing")?.as_str()?.to_owned() })
}

fn shape(body: &JsonValue) -> Result<Shape, Malformed> {
    let missing = |what: &str| format!("a prepare frame without {what}");
    let flag = |key: &str| body.get(key).and_then(JsonValue::as_bool).ok_or_else(|| missing(key));
    match body.get("version").and_then(JsonValue::as_u64) {
        Some(VERSION) => {}
        Some(other) => {
            return Err(format!(
                "the host speaks version {other} of the cell's frames, this cell version {VERSION} \
                 (the cell executable is from another build)"
            ));
        }
        None => return Err(missing("version")),
    }
    Ok(Shape {
        max_memory_mb: body
            .get("max_memory_mb")
            .and_then(JsonValue::as_u64)
            .ok_or_else(|| missing("max_memory_mb"))?,
        allow_eval: flag("allow_eval")?,
        allow_wasm: flag("allow_wasm")?,
    })
}

/// The one key of a message and its body, its values held to `max_held` bytes.
fn message(payload: &[u8], max_held: usize) -> Result<(String, JsonValue), Unread> {
    let malformed = |why: String| Unread::Malformed(why);
    let text = std::str::from_utf8(payload)
        .map_err(|_| malformed("a frame that is not UTF-8".to_owned()))?;
    let value = match json::parse_within(text, max_held) {
        Ok(value) => value,
        Err(json::ParseError::TooLarge { .. }) => return Err(Unread::TooLarge),
        Err(error) => return Err(malformed(format!("a frame that is not JSON: {error}"))),
    };
    let JsonValue::Object(object) = value else {
        return Err(malformed("a frame that is not an object".to_owned()));
    };
    let mut entries = object.into_iter();
    match (entries.next(), entries.next()) {
        (Some((key, body)), None) => Ok((key, body)),
        _ => Err(malformed("a frame that is not one message".to_owned())),
    }
}

/// Takes `key` out of an object, leaving `null`: the value is moved, not copied.
fn take(body: &mut JsonValue, key: &str) -> Option<JsonValue> {
    body.as_object_mut().and_then(|object: &mut Map| object.get_mut(key)).map(JsonValue::take)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::NamespaceSetup;

    /// The payload of `frame`, read by the cell layer's decoder (which sees it whole).
    fn payload(frame: &[u8]) -> Vec<u8> {
        use tokio_util::codec::Decoder as _;
        let mut bytes = bytes::BytesMut::from(frame);
        let mut frames = code_runtime_cell::Frames::new(Framing::LengthPrefixed, usize::MAX);
        let payload = frames.decode(&mut bytes).unwrap().expect("a whole frame");
        assert!(bytes.is_empty(), "one frame, nothing after it");
        payload.to_vec()
    }

    fn deep(levels: usize) -> JsonValue {
        let mut value = JsonValue::Null;
        for _ in 0..levels {
            value = JsonValue::from(vec![value]);
        }
        value
    }

    #[test]
    fn every_ending_crosses_unchanged() {
        let endings = [
            Ending::Completed(None),
            Ending::Completed(Some(JsonValue::Null)),
            Ending::Completed(Some(json!({"b": 1, "a": [2.5, "x"]}))),
            Ending::Completed(Some(json!([1u64 << 60, -(1i64 << 53), 0.1, 1e300]))),
            Ending::Threw("Error: boom".to_owned()),
            Ending::InvalidOutput,
            Ending::Stopped(StopReason::OutputExceeded),
            Ending::Stopped(StopReason::OutOfMemory { max_memory_mb: 64 }),
            Ending::Failed("why".to_owned()),
        ];
        for ending in endings {
            let expected = format!("{ending:?}");
            let frame = event(Event::Ended(ending));
            let Ok(FromCell::Event(Event::Ended(read))) = from_cell(&payload(&frame), 64) else {
                panic!("{expected} did not cross");
            };
            assert_eq!(format!("{read:?}"), expected);
        }
    }

    #[test]
    fn deep_values_cross_both_ways_without_recursion() {
        let frame = event(Event::Call {
            id: 7,
            function: FunctionId::new(2),
            args: BindingArgs::new(deep(200_000)),
        });
        let Ok(FromCell::Event(Event::Call { id, function, args })) =
            from_cell(&payload(&frame), 1)
        else {
            panic!("the call did not cross");
        };
        assert_eq!((id, function.index()), (7, 2));
        assert_eq!(json::encoded_len(&args, usize::MAX), Some(400_004));
        drop(args.into_value());

        let frame = settle(3, Answer::new(Ok(deep(200_000)), None));
        let Ok(ToCell::Settle { call: 3, answer }) = to_cell(&payload(&frame)) else {
            panic!("the settlement did not cross");
        };
        assert!(answer.outcome.is_ok());
        drop(answer);

        let rejection = BindingError::new("deep").with_data(deep(200_000));
        let frame = settle(4, Answer::new(Err(rejection), None));
        let Ok(ToCell::Settle { call: 4, answer }) = to_cell(&payload(&frame)) else {
            panic!("the rejection did not cross");
        };
        assert_eq!(answer.outcome.unwrap_err().message(), "deep");
    }

    #[test]
    fn rejections_and_setups_cross_unchanged() {
        let rejection = BindingError::new("nope").with_data(json!({"status": 429}));
        let frame = settle(1, Answer::new(Err(rejection), Some(1_700_000_000_001.5)));
        let Ok(ToCell::Settle { call: 1, answer }) = to_cell(&payload(&frame)) else {
            panic!("the rejection did not cross");
        };
        assert_eq!(answer.clock_ms, Some(1_700_000_000_001.5));
        let read = answer.outcome.unwrap_err();
        assert_eq!((read.message(), read.data()), ("nope", Some(&json!({"status": 429}))));
        let frame = settle(2, Answer::new(Ok(json!(1)), Some(5.25)));
        let Ok(ToCell::Settle { call: 2, answer }) = to_cell(&payload(&frame)) else {
            panic!("the settlement did not cross");
        };
        assert_eq!((answer.outcome, answer.clock_ms), (Ok(json!(1)), Some(5.25)));

        let program = Program {
            body: "return 1".to_owned(),
            positions: Positions::from_flat(&[0, 0, 2, 4, 0, 7, 3, 1]).expect("positions"),
            parameters: vec!["console".to_owned(), "tools".to_owned(), "ToolError".to_owned()],
            namespaces: vec![NamespaceSetup {
                global: "tools".to_owned(),
                names: vec!["a".to_owned(), "b".to_owned()],
                parameters: vec![None, Some(vec!["path".to_owned(), "text".to_owned()])],
                error_class: Some(("ToolError".to_owned(), "tool".to_owned())),
            }],
            globals: vec![
                ProgramGlobal::Function(FunctionId::new(1)),
                ProgramGlobal::CallTool,
                ProgramGlobal::Value(json!({"id": "acct-1", "n": [1u64 << 60]})),
            ],
            tools: Some(ToolIndex {
                names: vec![
                    ("tools.a".to_owned(), FunctionId::new(0)),
                    ("b".to_owned(), FunctionId::new(1)),
                ],
                listing: "tools.a, tools.b".to_owned(),
            }),
            max_output_bytes: 1000,
            determinism: Some(Determinism::new(u64::MAX - 1, 1_700_000_000_000.5)),
            replay: vec![
                None,
                Some(Recorded::new(
                    FunctionId::new(1),
                    Answer::new(Ok(json!({"n": [1u64 << 60]})), Some(1.5)),
                    1,
                )),
                Some(Recorded::new(
                    FunctionId::new(0),
                    Answer::new(Err(BindingError::new("no").with_data(json!(1))), None),
                    0,
                )),
            ],
        };
        let read = match to_cell(&payload(&setup(&program))) {
            Ok(ToCell::Setup(read)) => read,
            other => panic!("the setup did not cross: {other:?}"),
        };
        assert_eq!(format!("{read:?}"), format!("{program:?}"));
        let shape = Shape { max_memory_mb: 64, allow_eval: false, allow_wasm: true };
        let Ok(ToCell::Prepare(read)) = to_cell(&payload(&prepare(shape))) else {
            panic!("the shape did not cross");
        };
        assert_eq!(read, shape);
    }

    #[test]
    fn a_cell_of_another_version_refuses_the_host_by_name() {
        let other = br#"{"prepare":{"version":0,"max_memory_mb":64,"allow_eval":false,"allow_wasm":false}}"#;
        let why = to_cell(other).unwrap_err();
        assert!(why.contains("version 0") && why.contains("another build"), "{why}");
        let unversioned =
            br#"{"prepare":{"max_memory_mb":64,"allow_eval":false,"allow_wasm":false}}"#;
        assert!(to_cell(unversioned).unwrap_err().contains("without version"));
    }

    #[test]
    fn malformed_frames_are_refused_with_a_reason() {
        for (frame, why) in [
            (&b"\xff"[..], "not UTF-8"),
            (b"[1]", "not an object"),
            (b"{\"log\":1}", "without a line"),
            (b"{\"log\":\"a\",\"fatal\":\"b\"}", "not one message"),
            (b"{\"call\":{\"id\":1}}", "without its id"),
            (b"{\"end\":{}}", "no ending"),
            (b"{\"boot\":{}}", "unknown frame"),
        ] {
            let error = from_cell(frame, 1).unwrap_err();
            assert!(error.contains(why), "{error}");
        }
    }
}
