//! A session's state on the fd-3 channel (docs/python-frame-protocol.md, *Sessions*): the boot
//! frame's `session`, whose values' bytes follow the boot line raw, and the child's binary `state`
//! frame, which says what carries to the next run. Values cross as the bytes the child's `pickle`
//! made, never encoded, and the host never reads them.

use code_runtime::json::{self, JsonMap as Map, JsonValue};
use code_runtime::{Capture, Definition, Dropped, SessionState, SessionValue};
use code_runtime_cell::{BINARY_MARK, LENGTH_BYTES};

/// The boot frame's `session` member: `,"session":{"definitions":[{names, kind, source}],
/// "values":[{name, type, bytes}],"maxBytes":N}`; the values' bytes follow the boot line, one
/// after the other ([`boot_values`]).
pub(crate) fn boot_session(state: &SessionState, max_bytes: u64, out: &mut String) {
    out.push_str(",\"session\":{\"definitions\":[");
    for (index, definition) in state.definitions.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str("{\"names\":[");
        for (index, name) in definition.names.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(&json::quote(name));
        }
        out.push_str("],\"kind\":");
        out.push_str(&json::quote(&definition.kind));
        out.push_str(",\"source\":");
        out.push_str(&json::quote(&definition.source));
        out.push('}');
    }
    out.push_str("],\"values\":[");
    for (index, value) in state.values.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        out.push_str(&json::quote(&value.name));
        out.push_str(",\"type\":");
        out.push_str(&json::quote(&value.type_name));
        out.push_str(&format!(",\"bytes\":{}}}", value.bytes.len()));
    }
    out.push_str(&format!("],\"maxBytes\":{max_bytes}}}"));
}

/// The values' bytes, one after the other: what follows the boot line raw. `None` when there
/// are none.
pub(crate) fn boot_values(state: &SessionState) -> Option<Vec<u8>> {
    let total = state.values.iter().map(|value| value.bytes.len()).sum();
    if total == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(total);
    for value in &state.values {
        out.extend_from_slice(&value.bytes);
    }
    Some(out)
}

/// Whether `frame` is a binary frame (the only binary frame of the protocol is `state`).
pub(crate) fn is_binary(frame: &[u8]) -> bool {
    frame.first() == Some(&BINARY_MARK)
}

/// A binary `state` frame's capture: after its mark and length, a JSON header
/// `{"type":"state","over","definitions":[{names, kind, source}],"values":[{name, type,
/// bytes}],"dropped":[{name, why}]}`, a `\n`, then the values' bytes one after the other, as
/// many as the header says. `Ok(None)` for a frame of another shape (dropped, as every malformed
/// frame is); `Err` with the bound when its header would hold more than `max_held`.
pub(crate) fn capture(frame: &[u8], max_held: usize) -> Result<Option<Capture>, usize> {
    let Some(payload) = frame.get(1 + LENGTH_BYTES..) else { return Ok(None) };
    let Some(end) = payload.iter().position(|&byte| byte == b'\n') else { return Ok(None) };
    let (header, raw) = (&payload[..end], &payload[end + 1..]);
    let Ok(header) = std::str::from_utf8(header) else { return Ok(None) };
    let mut fields = match json::parse_within(header, max_held) {
        Ok(JsonValue::Object(fields)) => fields,
        Err(json::ParseError::TooLarge { limit }) => return Err(limit),
        Ok(_) | Err(_) => return Ok(None),
    };
    if fields.get("type").and_then(JsonValue::as_str) != Some("state") {
        return Ok(None);
    }
    Ok(rebuild(&mut fields, raw))
}

fn rebuild(fields: &mut Map, mut raw: &[u8]) -> Option<Capture> {
    let mut capture = Capture {
        over_budget: matches!(fields.get("over"), Some(JsonValue::Bool(true))),
        ..Capture::default()
    };
    for mut definition in objects(fields.remove("definitions")?)? {
        let names = match definition.remove("names")? {
            JsonValue::Array(names) => names
                .into_iter()
                .map(|name| match name {
                    JsonValue::String(name) => Some(name),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?,
            _ => return None,
        };
        let kind = string(&mut definition, "kind")?;
        let source = string(&mut definition, "source")?;
        capture.definitions.push(Definition { names, kind, source });
    }
    for mut value in objects(fields.remove("values")?)? {
        let name = string(&mut value, "name")?;
        let type_name = string(&mut value, "type")?;
        let length = usize::try_from(value.get("bytes")?.as_u64()?).ok()?;
        let (bytes, rest) = raw.split_at_checked(length)?;
        raw = rest;
        capture.values.push(SessionValue { name, type_name, bytes: bytes.to_vec() });
    }
    if !raw.is_empty() {
        return None;
    }
    for mut dropped in objects(fields.remove("dropped")?)? {
        let dropped = Dropped::new(string(&mut dropped, "name")?, string(&mut dropped, "why")?);
        capture.dropped.push(dropped);
    }
    Some(capture)
}

fn objects(value: JsonValue) -> Option<Vec<Map>> {
    let JsonValue::Array(items) = value else { return None };
    items
        .into_iter()
        .map(|item| match item {
            JsonValue::Object(fields) => Some(fields),
            _ => None,
        })
        .collect()
}

fn string(fields: &mut Map, key: &str) -> Option<String> {
    match fields.remove(key)? {
        JsonValue::String(text) => Some(text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(header: &str, raw: &[u8]) -> Vec<u8> {
        let mut payload = header.as_bytes().to_vec();
        payload.push(b'\n');
        payload.extend_from_slice(raw);
        let mut frame = vec![BINARY_MARK];
        frame.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
        frame.extend_from_slice(&payload);
        frame
    }

    #[test]
    fn a_state_frame_reads_back_and_a_malformed_one_is_dropped() {
        let frame = binary(
            r#"{"type":"state","definitions":[{"names":["f"],"kind":"function","source":"def f(): pass"}],"values":[{"name":"x","type":"int","bytes":5}],"dropped":[{"name":"fh","why":"an open file"}]}"#,
            &[0x80, 5, 0x4b, 1, 0x2e],
        );
        let read = capture(&frame, usize::MAX).unwrap().unwrap();
        assert_eq!(read.definitions[0].names, ["f"]);
        assert_eq!(read.values[0].bytes, [0x80, 5, 0x4b, 1, 0x2e]);
        assert_eq!(read.dropped, [Dropped::new("fh", "an open file")]);
        assert!(!read.over_budget);
        let value = r#"[{"name":"x","type":"int","bytes":5}]"#;
        for (header, raw) in [
            // Fewer bytes than the header says, and more.
            (format!(r#"{{"type":"state","definitions":[],"values":{value},"dropped":[]}}"#), &[1u8, 2][..]),
            (format!(r#"{{"type":"state","definitions":[],"values":{value},"dropped":[]}}"#), &[0u8; 6][..]),
            (r#"{"type":"state","definitions":[{"names":[1],"kind":"f","source":""}],"values":[],"dropped":[]}"#.to_owned(), &[][..]),
            (r#"{"type":"state","definitions":[],"values":[],"dropped":[{"name":"x"}]}"#.to_owned(), &[][..]),
            (r#"{"type":"state","definitions":[],"values":[]}"#.to_owned(), &[][..]),
            (r#"{"type":"log","definitions":[],"values":[],"dropped":[]}"#.to_owned(), &[][..]),
            (r#"{"type":"state","definitions":[],"values":[{"name":"x","type":"int","bytes":-1}],"dropped":[]}"#.to_owned(), &[][..]),
        ] {
            assert_eq!(capture(&binary(&header, raw), usize::MAX).unwrap(), None, "{header}");
        }
        assert_eq!(capture(&[BINARY_MARK, 0, 0], usize::MAX).unwrap(), None);
        assert!(capture(&frame, 8).is_err());
    }

    #[test]
    fn the_boot_member_names_the_lengths_and_the_bytes_follow() {
        let state = SessionState {
            values: vec![
                SessionValue { name: "x".into(), type_name: "int".into(), bytes: vec![1, 2] },
                SessionValue { name: "y".into(), type_name: "str".into(), bytes: vec![3] },
            ],
            ..SessionState::empty("python")
        };
        let mut out = String::new();
        boot_session(&state, 100, &mut out);
        assert_eq!(
            out,
            r#","session":{"definitions":[],"values":[{"name":"x","type":"int","bytes":2},{"name":"y","type":"str","bytes":1}],"maxBytes":100}"#
        );
        assert_eq!(boot_values(&state), Some(vec![1, 2, 3]));
        assert_eq!(boot_values(&SessionState::empty("python")), None);
    }
}
