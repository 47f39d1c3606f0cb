//! Lossless-JSON rules and the iterative walks: REFERENCE.md §5.11 (the rules that apply to a Rust
//! value) and §5.12 (byte metering), Appendix A (string costs) and Appendix B (number spelling).

use code_runtime::JsonValue;
use code_runtime::json::{self, LossyJson};
use serde_json::{Number, json};

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
    json::drop_value(value);

    // Not `json!({"k": object})`: the macro serializes an interpolated value, recursively.
    let mut object = json!(1);
    for _ in 0..depth {
        let mut map = serde_json::Map::new();
        map.insert("k".to_owned(), object);
        object = JsonValue::Object(map);
    }
    assert_eq!(json::encoded_len(&object, usize::MAX), Some(6 * depth + 1));
    json::drop_value(object);
}

#[test]
fn c148_null_in_5000_arrays_meters_10004_bytes() {
    let value = nested_arrays(5_000);
    check_meter(&value, 10_004);
    json::drop_value(value);
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
    // The reference prefix minus its lone U+D800, which a Rust string cannot hold (DESIGN.md §9.2;
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
    let huge = JsonValue::Array(vec![json!("x".repeat(1_000)); 100_000]);
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
    json::drop_value(value);
}

#[test]
fn c161_c162_lossless_scans_deep_and_wide() {
    assert_eq!(json::validate(&json!({"a": [0, 1.5, "x", null, true]})), Ok(()));
    assert_eq!(json::validate(&json!({"a": [1, {"b": -0.0}]})), Err(LossyJson::NegativeZero));
    let deep = nested_arrays(100_000);
    assert_eq!(json::validate(&deep), Ok(()));
    json::drop_value(deep);

    let mut zeros = JsonValue::Array(vec![json!(0); 2_000_000]);
    assert_eq!(json::validate(&zeros), Ok(()));
    if let JsonValue::Array(items) = &mut zeros {
        items.push(json!(-0.0));
    }
    assert_eq!(json::validate(&zeros), Err(LossyJson::NegativeZero));

    let mut keys: serde_json::Map<String, JsonValue> =
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
    assert_eq!(json::encoded_len(&JsonValue::Array(vec![json!(0); 10_000_000]), 1024), None);
    let ten: serde_json::Map<String, JsonValue> =
        (0..10).map(|i| (format!("k{i}"), json!(i))).collect();
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
        value = JsonValue::Array(vec![value]);
    }
    assert_eq!(json::encoded_len(&value, usize::MAX), Some(200_001));
    let encoded = json::encode(&value);
    assert_eq!(encoded, format!("{}0{}", "[".repeat(100_000), "]".repeat(100_000)));
    json::drop_value(value);
}

#[test]
fn c172_large_integers_use_ecmascript_spelling() {
    // The reference's Python meter spells 2^60 with its exact digits; our one ledger uses the
    // ECMAScript spelling everywhere (DESIGN.md §3). Both are 19 digits, so the byte count agrees.
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
    json::drop_value(value);
    let text = format!("{}1{}", "{\"k\":".repeat(depth), "}".repeat(depth));
    let value = json::parse(&text).unwrap();
    assert_eq!(json::encoded_len(&value, usize::MAX), Some(text.len()));
    json::drop_value(value);
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
    use code_runtime::json::{ParseError, parse, parse_strict};
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
        .spawn(move || code_runtime::json::parse(&text).is_err())
        .unwrap()
        .join()
        .unwrap();
    assert!(outcome);
}
