//! Lossless-JSON rules and the iterative walks: docs/reference.md §5.11 (the rules that apply to a Rust
//! value) and §5.12 (byte metering), Appendix A (string costs) and Appendix B (number spelling).

use code_runtime_json as json;
use code_runtime_json::JsonValue;
use code_runtime_json::LossyJson;
use code_runtime_json::Number;
use code_runtime_json::json;

use crate::nested_arrays;

#[track_caller]
fn check_meter(value: &JsonValue, exact: usize) {
    assert_eq!(json::encoded_len(value, exact), Some(exact), "fits at its own size");
    assert_eq!(json::encoded_len(value, usize::MAX), Some(exact));
    assert_eq!(json::encoded_len(value, exact - 1), None, "one byte short is over");
    assert_eq!(json::encode(value).len(), exact, "meter agrees with the encoder");
}

#[test]
fn c132_accepted_scalars() {
    for value in [json!(null), json!(false), json!("text"), json!(1.25)] {
        assert_eq!(json::validate(&value), Ok(()), "{value}");
    }
}

#[test]
fn c132_rejected_numbers() {
    assert_eq!(json::validate(&json!(-0.0)), Err(LossyJson::NegativeZero));
    let parsed: JsonValue = serde_json::from_str("[1, {\"x\": -0}]").unwrap();
    assert_eq!(json::validate(&parsed), Err(LossyJson::NegativeZero));
    assert_eq!(json::number_from_f64(f64::NAN), Err(LossyJson::NonFinite));
    assert_eq!(json::number_from_f64(f64::INFINITY), Err(LossyJson::NonFinite));
    assert_eq!(json::number_from_f64(f64::NEG_INFINITY), Err(LossyJson::NonFinite));
    assert_eq!(json::number_from_f64(-0.0), Err(LossyJson::NegativeZero));
}

#[test]
fn integers_must_be_exact_doubles() {
    let two_pow_53 = 1u64 << 53;
    for exact in [
        json!(two_pow_53),
        json!(1u64 << 60),
        json!(i64::MIN),
        json!(-(1i64 << 53)),
        json!(u64::MAX - 2047),
    ] {
        assert_eq!(json::validate(&exact), Ok(()), "{exact}");
    }
    for inexact in
        [json!(two_pow_53 + 1), json!(u64::MAX), json!(-(1i64 << 53) - 1), json!(i64::MAX)]
    {
        assert!(matches!(json::validate(&inexact), Err(LossyJson::InexactInteger(_))), "{inexact}");
    }
    let nested = json!({"ok": [1, 2], "deep": [{"n": two_pow_53 + 1}]});
    assert_eq!(
        json::validate(&nested),
        Err(LossyJson::InexactInteger("9007199254740993".to_owned()))
    );
}

#[test]
fn number_from_f64_is_canonical() {
    assert_eq!(json::number_from_f64(1.0), Ok(Number::from(1)));
    assert_eq!(JsonValue::Number(json::number_from_f64(1.0).unwrap()), json!(1));
    assert_eq!(json::number_from_f64(-3.0), Ok(Number::from(-3)));
    assert_eq!(json::number_from_f64(2f64.powi(60)), Ok(Number::from(1u64 << 60)));
    assert_eq!(json::number_from_f64(2f64.powi(63)), Ok(Number::from(1u64 << 63)));
    assert_eq!(json::number_from_f64(-(2f64.powi(63))), Ok(Number::from(i64::MIN)));
    assert_eq!(json::number_from_f64(1.25), Ok(Number::from_f64(1.25).unwrap()));
    assert_eq!(json::number_from_f64(1e21).map(|n| n.as_f64()), Ok(Some(1e21)));
}

#[test]
fn lone_surrogates_are_not_lossless() {
    assert_eq!(json::string_from_utf16(&[0x61, 0xD800]), Err(LossyJson::LoneSurrogate));
    assert_eq!(json::string_from_utf16(&[0xDC00, 0x61]), Err(LossyJson::LoneSurrogate));
    assert_eq!(json::string_from_utf16(&[0xD83D, 0xDE00, 0x20AC]).as_deref(), Ok("😀€"));
    // A JSON text that escapes a lone surrogate cannot become a value either.
    assert!(serde_json::from_str::<JsonValue>(r#""\ud800""#).is_err());
}

#[test]
fn c136_deep_values_are_validated_metered_encoded_and_dropped_without_recursion() {
    // 100 000 levels: any recursive walk would overflow the 2 MiB stack of a test thread.
    let depth = 100_000;
    let value = nested_arrays(depth);
    assert_eq!(json::validate(&value), Ok(()));
    assert_eq!(json::encoded_len(&value, usize::MAX), Some(2 * depth + 4));
    let encoded = json::encode(&value);
    assert_eq!(encoded.len(), 2 * depth + 4);
    assert_eq!(&encoded[depth - 1..depth + 5], "[null]");
    drop(value);

    let mut object = json!(1);
    for _ in 0..depth {
        let mut map = code_runtime_json::JsonMap::new();
        map.insert("k".to_owned(), object);
        object = JsonValue::Object(map);
    }
    assert_eq!(json::encoded_len(&object, usize::MAX), Some(6 * depth + 1));
    drop(object);
}

#[test]
fn c148_null_in_5000_arrays_meters_10004_bytes() {
    let value = nested_arrays(5_000);
    check_meter(&value, 10_004);
    drop(value);
}

#[test]
fn c147_object_meters_92_bytes() {
    let value = json!({
        "empty": {}, "nil": null, "yes": true, "no": false, "number": 1.5, "text": "\"\n😀", "array": [1, "x"]
    });
    check_meter(&value, 92);
    assert_eq!(
        json::encode(&value),
        r#"{"empty":{},"nil":null,"yes":true,"no":false,"number":1.5,"text":"\"\n😀","array":[1,"x"]}"#
    );
}

#[test]
fn c147_small_values_over_their_budget() {
    let cases = [
        (json!({}), 1),
        (json!([]), 1),
        (json!(null), 3),
        (json!(10), 1),
        (json!(false), 4),
        (json!([null]), 5),
        (json!([0, 0]), 3),
        (json!({"a": null, "b": null}), 10),
        (json!({"long": null}), 2),
        (json!({"": null}), 4),
        (json!({"a": null}), 9),
    ];
    for (value, budget) in cases {
        assert_eq!(json::encoded_len(&value, budget), None, "{value} at {budget}");
        assert_eq!(
            json::encoded_len(&value, budget + 1).is_some(),
            json::encode(&value).len() == budget + 1
        );
    }
    assert_eq!(json::encoded_len(&json!([]), 2), Some(2));
}

#[test]
fn c144_truncate_and_string_size() {
    assert_eq!(json::truncate("fits", 6), "fits");
    assert_eq!(json::truncate("x", 1), "");
    assert_eq!(json::truncate("x", 0), "");
    assert_eq!(json::string_len("fits"), 6);
    assert_eq!(json::encoded_len(&json!("fits"), 6), Some(6));
    assert_eq!(json::encoded_len(&json!("fits"), 5), None);
}

#[test]
fn c145_escapes_and_code_point_cuts() {
    // The reference prefix minus its lone U+D800, which a Rust string cannot hold (docs/design.md §9.2;
    // covered by `lone_surrogates_are_not_lossless`): 30 bytes as JSON.
    let prefix = "\"\\\u{8}\u{9}\u{a}\u{c}\u{d}\u{0}😀€a";
    assert_eq!(json::string_len(prefix), 30);
    let with_z = format!("{prefix}z");
    assert_eq!(json::truncate(&with_z, 30), prefix);
    assert_eq!(json::encode(&json!(prefix)).len(), 30);
    assert_eq!(json::encode(&json!(prefix)), r#""\"\\\b\t\n\f\r\u0000😀€a""#);
    // Cuts fall on code-point boundaries: one byte short of `a` drops it, one short of `€` drops it
    // whole, and the emoji is never split.
    assert_eq!(json::truncate(&with_z, 29), "\"\\\u{8}\u{9}\u{a}\u{c}\u{d}\u{0}😀€");
    assert_eq!(json::truncate(&with_z, 28), "\"\\\u{8}\u{9}\u{a}\u{c}\u{d}\u{0}😀");
    assert_eq!(json::truncate(&with_z, 25), "\"\\\u{8}\u{9}\u{a}\u{c}\u{d}\u{0}");
}

#[test]
fn c146_truncating_many_quotes() {
    let quotes = "\"".repeat(10_000);
    assert_eq!(json::encoded_len(&json!(quotes), 32), None);
    assert_eq!(json::truncate(&quotes, 32), "\"".repeat(15));
}

#[test]
fn appendix_a_string_costs() {
    let cases: [(&str, usize); 12] = [
        ("\"", 2),
        ("\\", 2),
        ("\u{8}\u{9}\u{a}\u{c}\u{d}", 10),
        ("\u{1}", 6),
        ("\u{1f}", 6),
        (" ~", 2),
        ("\u{7f}", 1),
        ("é", 2),
        ("€", 3),
        ("\u{2028}\u{2029}", 6),
        ("😀", 4),
        ("", 0),
    ];
    for (text, cost) in cases {
        assert_eq!(json::string_len(text), cost + 2, "{text:?}");
        assert_eq!(json::quote(text).len(), cost + 2, "{text:?}");
    }
    assert_eq!(json::quote("\u{1}\u{1f}\u{7f}\u{2028}"), "\"\\u0001\\u001f\u{7f}\u{2028}\"");
}

#[test]
fn appendix_b_number_spelling() {
    let cases = [
        (json!(1e21), "1e+21"),
        (json!(1.5e-7), "1.5e-7"),
        (json!(1.23e-18), "1.23e-18"),
        (json!(1u64 << 60), "1152921504606847000"),
        (json!(2f64.powi(60)), "1152921504606847000"),
        (json!(1e20), "100000000000000000000"),
        (json!(0.000001), "0.000001"),
        (json!(1e-7), "1e-7"),
        (json!(0.1), "0.1"),
        (json!(-1.5), "-1.5"),
        (json!(1.0), "1"),
        (json!(-7), "-7"),
        (json!(5e-324), "5e-324"),
        (json!(f64::MAX), "1.7976931348623157e+308"),
    ];
    for (value, spelling) in cases {
        assert_eq!(json::encode(&value), spelling);
        assert_eq!(json::encoded_len(&value, usize::MAX), Some(spelling.len()));
    }
}

#[test]
fn encode_keeps_insertion_order_and_proto_keys() {
    let value: JsonValue =
        serde_json::from_str(r#"{"b":1,"a":[true,{"__proto__":{"safe":true}}],"":"x"}"#).unwrap();
    assert_eq!(json::encode(&value), r#"{"b":1,"a":[true,{"__proto__":{"safe":true}}],"":"x"}"#);
}

#[test]
fn encoded_len_stops_early_on_huge_values() {
    let huge = JsonValue::from(vec![json!("x".repeat(1_000)); 100_000]);
    assert_eq!(json::encoded_len(&huge, 64), None);
    assert_eq!(json::encoded_len(&huge, usize::MAX), Some(2 + 99_999 + 100_000 * 1_002));
}

#[test]
fn wide_values_drop_without_recursion() {
    // Wide and deep at once: many shallow children, and one deep spine.
    let mut value = JsonValue::Array((0..10_000).map(|i| json!({ "i": i, "a": [i] })).collect());
    if let JsonValue::Array(items) = &mut value {
        items.push(nested_arrays(50_000));
    }
    assert_eq!(json::validate(&value), Ok(()));
    drop(value);
}

#[test]
fn c161_c162_lossless_scans_deep_and_wide() {
    assert_eq!(json::validate(&json!({"a": [0, 1.5, "x", null, true]})), Ok(()));
    assert_eq!(json::validate(&json!({"a": [1, {"b": -0.0}]})), Err(LossyJson::NegativeZero));
    let deep = nested_arrays(100_000);
    assert_eq!(json::validate(&deep), Ok(()));
    drop(deep);

    let mut zeros = JsonValue::from(vec![json!(0); 2_000_000]);
    assert_eq!(json::validate(&zeros), Ok(()));
    if let JsonValue::Array(items) = &mut zeros {
        items.push(json!(-0.0));
    }
    assert_eq!(json::validate(&zeros), Err(LossyJson::NegativeZero));

    let mut keys: code_runtime_json::JsonMap =
        (0..200_000).map(|i| (format!("k{i}"), json!(i))).collect();
    assert_eq!(json::validate(&JsonValue::Object(keys.clone())), Ok(()));
    keys.insert("last".to_owned(), json!(9_007_199_254_740_993u64));
    assert!(matches!(json::validate(&JsonValue::Object(keys)), Err(LossyJson::InexactInteger(_))));
}

#[test]
fn c165_exact_meter_and_encoding() {
    let cases = [
        (json!(null), "null"),
        (json!(true), "true"),
        (json!(false), "false"),
        (json!(0), "0"),
        (json!(-1.5), "-1.5"),
        (json!("a\"b\\"), r#""a\"b\\""#),
        (json!([]), "[]"),
        (json!({}), "{}"),
        (json!([1, "x", null]), r#"[1,"x",null]"#),
        (json!({"a": [1, 2], "b": {"c": "d"}}), r#"{"a":[1,2],"b":{"c":"d"}}"#),
    ];
    for (value, stringified) in cases {
        assert_eq!(json::encode(&value), stringified);
        check_meter(&value, stringified.len());
    }
}

#[test]
fn c166_early_over_budget() {
    assert_eq!(json::encoded_len(&json!({"data": "x".repeat(1_000_000), "tail": "y"}), 1024), None);
    assert_eq!(json::encoded_len(&JsonValue::from(vec![json!(0); 10_000_000]), 1024), None);
    let ten: code_runtime_json::JsonMap = (0..10).map(|i| (format!("k{i}"), json!(i))).collect();
    assert_eq!(json::encoded_len(&JsonValue::Object(ten), 12), None);
}

#[test]
fn c167_string_metering() {
    assert_eq!(json::encoded_len(&json!("\0".repeat(200)), 1024), None);
    assert_eq!(json::string_len(&"\0".repeat(200)), 1_202);
    assert_eq!(json::encoded_len(&json!("\0"), 8), Some(8));
    assert_eq!(json::encoded_len(&json!("\0"), 7), None);
    assert_eq!(json::encoded_len(&json!("é"), 4), Some(4));
    assert_eq!(json::encoded_len(&json!("😀"), 6), Some(6));
    assert_eq!(json::encoded_len(&json!("😀"), 5), None);
    assert_eq!(json::encoded_len(&json!("中"), 5), Some(5));
    assert_eq!(json::encoded_len(&json!({ "\0".repeat(200): 1 }), 1024), None);
    assert_eq!(json::encoded_len(&json!("x"), 1), None);
}

#[test]
fn c171_zero_nested_100_000_deep() {
    let mut value = json!(0);
    for _ in 0..100_000 {
        value = JsonValue::from(vec![value]);
    }
    assert_eq!(json::encoded_len(&value, usize::MAX), Some(200_001));
    let encoded = json::encode(&value);
    assert_eq!(encoded, format!("{}0{}", "[".repeat(100_000), "]".repeat(100_000)));
    drop(value);
}

#[test]
fn c172_large_integers_use_ecmascript_spelling() {
    // The reference's Python meter spells 2^60 with its exact digits; our one ledger uses the
    // ECMAScript spelling everywhere (docs/design.md §3). Both are 19 digits, so the byte count agrees.
    let parsed: JsonValue = serde_json::from_str("[1152921504606846976]").unwrap();
    assert_eq!(json::validate(&parsed), Ok(()));
    assert_eq!(json::encoded_len(&parsed, 100), Some(21));
    assert_eq!(json::encode(&parsed), "[1152921504606847000]");
}

#[test]
fn parse_reads_every_json_shape() {
    let text = r#" {"b":1,"a":[true,false,null,{"__proto__":{"safe":true}}],"s":"q\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00€","n":[-1,0,1.5,-2.5e-3,1E2,1.0]} "#;
    let value = json::parse(text).unwrap();
    assert_eq!(
        value,
        json!({"b": 1, "a": [true, false, null, {"__proto__": {"safe": true}}], "s": "q\"\\/\u{8}\u{c}\n\r\té😀€", "n": [-1, 0, 1.5, -0.0025, 100, 1]})
    );
    assert_eq!(
        json::encode(&value),
        r#"{"b":1,"a":[true,false,null,{"__proto__":{"safe":true}}],"s":"q\"\\/\b\f\n\r\té😀€","n":[-1,0,1.5,-0.0025,100,1]}"#
    );
    assert_eq!(json::parse(r#"{"a":1,"b":2,"a":3}"#).unwrap(), json!({"a": 3, "b": 2}));
}

#[test]
fn parse_refuses_what_is_not_json() {
    for text in [
        "",
        " ",
        "[",
        "[1,]",
        "{\"a\"}",
        "{\"a\":1,}",
        "01",
        "1.",
        ".5",
        "-",
        "+1",
        "tru",
        "nul",
        "NaN",
        "Infinity",
        "[1] x",
        "\"\u{1}\"",
        "\"\\x\"",
        "\"\\u12\"",
        "'a'",
        "{1:2}",
        "\"open",
    ] {
        assert!(matches!(json::parse(text), Err(json::ParseError::Syntax { .. })), "{text:?}");
    }
}

#[test]
fn c164_parse_refuses_lossy_number_tokens_on_the_token() {
    for token in [
        "9007199254740993",
        "-9007199254740993",
        "18446744073709551617",
        "1e400",
        "-1e400",
        "-0",
        "-0.0",
        "-0e5",
    ] {
        assert!(matches!(json::parse(token), Err(json::ParseError::Lossy(_))), "{token}");
        assert!(json::parse(&format!("{{\"v\":{token}}}")).is_err(), "{token} nested");
    }
    let nines = "9".repeat(400);
    assert!(matches!(json::parse(&nines), Err(json::ParseError::Lossy(_))));
    for (token, value) in [
        ("9007199254740992", json!(9_007_199_254_740_992u64)),
        ("9007199254740991", json!(9_007_199_254_740_991u64)),
        ("18446744073709551616", json!(18_446_744_073_709_551_616.0)),
        ("9007199254740993.0", json!(9_007_199_254_740_992u64)),
        ("9e99", json!(9e99)),
        ("\"9007199254740993\"", json!("9007199254740993")),
        ("\"esc\\\"9007199254740993\"", json!("esc\"9007199254740993")),
    ] {
        assert_eq!(json::parse(token).unwrap(), value, "{token}");
    }
    assert_eq!(json::parse(r#""\ud800""#), Err(json::ParseError::Lossy(LossyJson::LoneSurrogate)));
    assert_eq!(json::parse(r#""\udc00x""#), Err(json::ParseError::Lossy(LossyJson::LoneSurrogate)));
    assert_eq!(
        json::parse(r#""\ud800\u0041""#),
        Err(json::ParseError::Lossy(LossyJson::LoneSurrogate))
    );
}

#[test]
fn parse_is_iterative() {
    let depth = 100_000;
    let text = format!("{}\"leaf\"{}", "[".repeat(depth), "]".repeat(depth));
    let value = json::parse(&text).unwrap();
    assert_eq!(json::encode(&value), text);
    drop(value);
    let text = format!("{}1{}", "{\"k\":".repeat(depth), "}".repeat(depth));
    let value = json::parse(&text).unwrap();
    assert_eq!(json::encoded_len(&value, usize::MAX), Some(text.len()));
    drop(value);
}

#[test]
fn exact_integer_spelling_for_python_peers() {
    let value = json!([1u64 << 60, -(1i64 << 60), 1e21, 1.5, u64::MAX - 2047]);
    let mut out = String::new();
    json::encode_with(&value, json::NumberSpelling::ExactIntegers, &mut out);
    assert_eq!(out, "[1152921504606846976,-1152921504606846976,1e+21,1.5,18446744073709549568]");
    assert_eq!(
        json::encode(&value),
        "[1152921504606847000,-1152921504606847000,1e+21,1.5,18446744073709550000]"
    );
}

#[test]
fn strict_parsing_refuses_a_repeated_key() {
    use code_runtime_json::{ParseError, parse, parse_strict};
    let text = r#"{"a": 1, "b": {"c": 2, "c": 3}}"#;
    assert_eq!(parse(text).unwrap()["b"]["c"], 3, "JSON.parse keeps the last");
    let error = parse_strict(text).unwrap_err();
    assert!(matches!(&error, ParseError::DuplicateKey { key, .. } if key == "c"), "{error:?}");
    assert_eq!(error.to_string(), r#"key "c" appears twice in one object (byte 29)"#);
    assert!(parse_strict(r#"{"a": {"c": 1}, "b": {"c": 2}}"#).is_ok(), "one key per object");
}

#[test]
fn a_deep_text_that_fails_late_is_dropped_without_recursion() {
    // The finished deep member sits in an open container when the syntax error comes.
    let text = format!("[{}{}, !", "[".repeat(200_000), "]".repeat(200_000));
    let outcome = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || code_runtime_json::parse(&text).is_err())
        .unwrap()
        .join()
        .unwrap();
    assert!(outcome);
}

/// Runs `check` on a thread with a 256 KiB stack: a walk that recursed once per level of a
/// 1 000 000-deep value would need hundreds of megabytes.
pub(crate) fn on_a_small_stack(check: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(check)
        .expect("a thread")
        .join()
        .expect("the check ran to its end");
}

/// `depth` arrays around an object around `depth` objects, each `{"k": ..}`: both container kinds.
fn deep_mixed(depth: usize) -> JsonValue {
    let mut value = json!("leaf");
    for _ in 0..depth {
        let mut members = code_runtime_json::JsonMap::new();
        members.insert("k", value);
        value = JsonValue::Object(members);
    }
    for _ in 0..depth {
        value = JsonValue::from(vec![value]);
    }
    value
}

#[test]
fn a_million_deep_value_drops_clones_compares_and_prints_without_recursion() {
    on_a_small_stack(|| {
        let depth = 500_000;
        let value = deep_mixed(depth);
        let copy = value.clone();
        assert!(copy == value, "a copy equals its original");
        let mut other = deep_mixed(depth);
        assert!(other == value);
        // One leaf changed, at the bottom: equality finds it.
        let mut cursor = &mut other;
        loop {
            cursor = match cursor {
                JsonValue::Array(items) => &mut items[0],
                JsonValue::Object(members) => &mut members[0],
                leaf => {
                    *leaf = json!("other");
                    break;
                }
            };
        }
        assert!(other != value);
        let shown = format!("{value}");
        assert_eq!(shown.len(), 2 * depth + 6 * depth + 6);
        assert_eq!(format!("{copy:?}"), shown);
        assert_eq!(json::encode(&value), shown);
        // The value built from the text is the same value.
        assert!(json::parse(&shown).unwrap() == value);
        drop((value, copy, other));
    });
}

#[test]
fn a_deep_value_serializes_as_raw_json_past_the_serde_depth() {
    on_a_small_stack(|| {
        let value = nested_arrays(1_000_000);
        let text = serde_json::to_string(&value).expect("serialized");
        assert_eq!(text.len(), 2_000_004);
        assert!(json::parse(&text).unwrap() == value);
        // A shallow value is serialized structurally, as any serializer sees it.
        let shallow = json!({"a": [1, 2.5, "x", null, true], "b": {}});
        assert_eq!(
            serde_json::to_value(&shallow).unwrap(),
            serde_json::json!({"a": [1, 2.5, "x", null, true], "b": {}})
        );
        // Past the serde depth, `to_value` (which parses the raw text back) refuses; nothing crashes.
        assert!(serde_json::to_value(&value).is_err());
        drop(value);
    });
}

#[test]
fn deserializing_refuses_past_the_serde_depth_and_from_value_too() {
    let shallow =
        format!("{}1{}", "[".repeat(json::SERDE_DEPTH - 1), "]".repeat(json::SERDE_DEPTH - 1));
    let value: JsonValue = serde_json::from_str(&shallow).expect("within the depth");
    assert_eq!(json::encode(&value), shallow);
    // `serde_json`'s own limit is the same depth.
    let deep =
        format!("{}{}", "[".repeat(json::SERDE_DEPTH + 1), "]".repeat(json::SERDE_DEPTH + 1));
    assert!(serde_json::from_str::<JsonValue>(&deep).is_err());

    // `from_value` reads a value as another type, and counts its levels too.
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Query {
        q: String,
        limit: Option<u32>,
        tags: Vec<String>,
    }
    let query: Query = json::from_value(&json!({"q": "rust", "tags": ["a", "b"]})).unwrap();
    assert_eq!(query, Query { q: "rust".into(), limit: None, tags: vec!["a".into(), "b".into()] });
    let wrong = json::from_value::<Query>(&json!({"q": 1, "tags": []})).unwrap_err().to_string();
    assert!(wrong.contains("invalid type: integer `1`, expected a string"), "{wrong}");
    on_a_small_stack(|| {
        let deep = nested_arrays(1_000_000);
        let refused = json::from_value::<serde_json::Value>(&deep).unwrap_err().to_string();
        assert!(refused.contains("nests more than 128 levels"), "{refused}");
        let refused = json::from_value::<JsonValue>(&deep).unwrap_err().to_string();
        assert!(refused.contains("nests more than 128 levels"), "{refused}");
        drop(deep);
    });
}

#[test]
fn serde_json_values_cross_without_recursion_and_back_within_the_depth() {
    on_a_small_stack(|| {
        // A deep `serde_json::Value` would crash its own `Drop`; moving it over takes it apart.
        let mut deep = serde_json::Value::Null;
        for _ in 0..1_000_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        let copy = JsonValue::from(&deep);
        let moved = JsonValue::from(deep);
        assert!(moved == copy && moved == nested_arrays(1_000_000));
        assert_eq!(
            moved.to_serde_json().unwrap_err().to_string(),
            "the value nests more than 128 levels deep"
        );
        drop((moved, copy));
    });
    let value = json!({"a": [1, {"b": null}], "c": 1u64 << 60});
    let back = value.to_serde_json().unwrap();
    assert_eq!(back, serde_json::json!({"a": [1, {"b": null}], "c": 1u64 << 60}));
    assert!(JsonValue::from(back) == value);
}

#[test]
fn a_failed_parse_of_a_deep_prefix_drops_it_without_recursion() {
    // The red team's text: a finished deep value followed by garbage. The parser holds the value
    // when it meets the garbage; dropping it then must not recurse.
    on_a_small_stack(|| {
        for depth in [40_000, 130_000, 1_000_000] {
            let text = format!("{}{} x", "[".repeat(depth), "]".repeat(depth));
            assert_eq!(json::parse(&text), Err(json::ParseError::Syntax { offset: 2 * depth + 1 }));
            let open =
                format!("{}{{\"k\":{}1{}", "[".repeat(depth), "[".repeat(depth), "]".repeat(depth));
            assert!(matches!(json::parse(&open), Err(json::ParseError::Syntax { .. })));
            let duplicate =
                format!("{{\"k\":{}1{},\"k\":1}}", "[".repeat(depth), "]".repeat(depth));
            assert!(matches!(
                json::parse_strict(&duplicate),
                Err(json::ParseError::DuplicateKey { .. })
            ));
        }
    });
}

#[test]
fn json_macro_interpolates_deep_values_by_copy() {
    on_a_small_stack(|| {
        let deep = nested_arrays(1_000_000);
        let wrapped =
            json!({ "echoed": deep, "n": [1, 2, deep.clone()], "text": format!("{}", 1 + 1) });
        assert!(wrapped["echoed"] == deep && wrapped["n"][2] == deep);
        assert_eq!(wrapped["text"], "2");
        drop((deep, wrapped));
    });
    // Host types go through their `Serialize` impl.
    #[derive(serde::Serialize)]
    struct Hit {
        title: &'static str,
        score: f64,
    }
    let hits = vec![Hit { title: "a", score: 0.5 }];
    let key = "hits".to_owned();
    assert_eq!(
        json::encode(&json!({ (key): hits, "none": null, "nested": {"x": [true, false, -1]}, })),
        r#"{"hits":[{"title":"a","score":0.5}],"none":null,"nested":{"x":[true,false,-1]}}"#
    );
}

#[test]
fn parse_within_counts_what_the_value_holds_before_making_it() {
    let zeros = format!("[{}0]", "0,".repeat(100_000));
    let value = json::parse(&zeros).unwrap();
    let held = json::held_bytes(&value);
    assert_eq!(held, (100_001 + 1) * json::VALUE_BYTES);
    assert!(json::parse_within(&zeros, held).unwrap() == value);
    assert_eq!(
        json::parse_within(&zeros, held - 1),
        Err(json::ParseError::TooLarge { limit: held - 1 })
    );
    // Strings and members count their bytes.
    let object = json!({"key": "value", "list": ["ab"]});
    let text = json::encode(&object);
    let held = json::held_bytes(&object);
    assert_eq!(
        held,
        4 * json::VALUE_BYTES
            + json::OBJECT_BYTES
            + 2 * json::MEMBER_BYTES
            + "keyvaluelistab".len()
    );
    assert!(json::parse_within(&text, held).is_ok());
    assert!(json::parse_within(&text, held - 1).is_err());
    // Two bytes of text make a 32-byte value: a 120 MB line of `0,` is refused early.
    let flood = format!("[{}0]", "0,".repeat(4_000_000));
    assert_eq!(
        json::parse_within(&flood, 1 << 20),
        Err(json::ParseError::TooLarge { limit: 1 << 20 })
    );
}

#[test]
fn index_and_accessors_read_like_serde_json() {
    let mut value = json!({"a": [1, {"b": "x"}], "n": 2.5});
    assert_eq!(value["a"][1]["b"], "x");
    assert!(value["missing"]["deeper"].is_null());
    assert_eq!(value.pointer("/a/1/b").and_then(JsonValue::as_str), Some("x"));
    assert_eq!(value.pointer("/a/01"), None);
    assert_eq!(value["n"].as_f64(), Some(2.5));
    value["new"]["inner"] = json!(true);
    assert_eq!(json::encode(&value), r#"{"a":[1,{"b":"x"}],"n":2.5,"new":{"inner":true}}"#);
    let members = value.as_object_mut().unwrap();
    assert_eq!(members.remove("a").map(|a| a.as_array().map(|a| a.len())), Some(Some(2)));
    assert_eq!(members.keys().collect::<Vec<_>>(), ["n", "new"]);
    // Objects compare as maps, whatever their order.
    assert!(json!({"x": 1, "y": 2}) == json!({"y": 2, "x": 1}));
    assert!(json!({"x": 1}) != json!({"x": 1, "y": 2}));
    assert!(json!([1, 2]) != json!([2, 1]));
}

#[test]
fn an_over_budget_log_line_is_clipped_to_the_shortest_prefix_over_it() {
    assert_eq!(json::clip_log("abc", 5), "abc");
    assert_eq!(json::clip_log("abcde", 5), "abcde");
    assert_eq!(json::clip_log("abcdef", 5), "abcdef", "six bytes: the shortest over five");
    assert_eq!(json::clip_log("abcdefgh", 5), "abcdef");
    // Quotes cost two bytes each, as the ledger counts them: 40 million of them are 80 MB.
    let quotes = "\"".repeat(40_000_000);
    let clipped = json::clip_log(&quotes, 64 << 20);
    assert_eq!(clipped.len(), (32 << 20) + 1);
    assert_eq!(json::string_len(clipped), (64 << 20) + 4);
    assert_eq!(json::clip_log("ééé", 3), "éé", "cut at a character");
}
