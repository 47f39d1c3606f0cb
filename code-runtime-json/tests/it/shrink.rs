//! `json::shrink`: values cut to a byte budget, same shape, explicit markers, no recursion.

use code_runtime_json as json;
use code_runtime_json::JsonMap;
use code_runtime_json::JsonValue;
use code_runtime_json::json;

use crate::nested_arrays;

/// A tool result as an upstream search returns it: `rows` records with a title, a long body and
/// a few numbers.
fn search_result(rows: usize) -> JsonValue {
    let hits: Vec<JsonValue> = (0..rows)
        .map(|i| {
            json!({
                "id": i,
                "title": format!("Result number {i}"),
                "body": "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(3),
                "score": 0.5,
                "tags": ["a", "b", "c"],
            })
        })
        .collect();
    json!({"query": "rust sandboxes", "total": rows, "hits": hits})
}

fn shrunk_one(value: &JsonValue, budget: usize) -> JsonValue {
    let mut shrunk = json::shrink(&[value], budget).expect("it fits");
    assert_eq!(shrunk.len(), 1);
    let shrunk = shrunk.remove(0);
    let size = json::encoded_len(&shrunk, usize::MAX).unwrap();
    assert!(size <= budget, "{size} bytes over a budget of {budget}");
    shrunk
}

#[test]
fn a_value_that_fits_comes_back_whole() {
    let value = search_result(3);
    let size = json::encoded_len(&value, usize::MAX).unwrap();
    assert_eq!(shrunk_one(&value, size), value);
    assert_eq!(shrunk_one(&json!(null), 4), json!(null));
}

#[test]
fn a_300_kb_tool_result_keeps_its_shape_and_says_what_was_left_out() {
    let value = search_result(1_500);
    let size = json::encoded_len(&value, usize::MAX).unwrap();
    assert!(size > 300_000, "{size}");
    let budget = 24_000; // 6 000 tokens
    let shrunk = shrunk_one(&value, budget);
    // Used well: not far under the budget.
    let used = json::encoded_len(&shrunk, usize::MAX).unwrap();
    assert!(used > budget / 2, "{used}");
    // The same shape: the scalars untouched, the keys all there.
    assert_eq!(shrunk["query"], json!("rust sandboxes"));
    assert_eq!(shrunk["total"], json!(1_500));
    let hits = shrunk["hits"].as_array().unwrap();
    let (last, kept) = hits.split_last().unwrap();
    let marker = last.as_str().expect("the last item is the marker");
    let more: usize = marker
        .strip_prefix("… ")
        .and_then(|rest| rest.strip_suffix(" more items"))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("{marker}"));
    assert_eq!(kept.len() + more, 1_500);
    assert!(kept.len() >= 10, "{}", kept.len());
    for (i, hit) in kept.iter().enumerate() {
        assert_eq!(hit["id"], json!(i));
        assert_eq!(hit["score"], json!(0.5));
        assert_eq!(hit.as_object().unwrap().len(), 5);
        let body = hit["body"].as_str().unwrap();
        let original = value["hits"][i]["body"].as_str().unwrap();
        assert!(body == original || body.contains("…[truncated "), "{body}");
    }
}

#[test]
fn long_strings_are_cut_at_a_character_and_count_what_went() {
    let text = "é😀x".repeat(10_000); // 2 + 4 + 1 bytes, 3 characters, each time
    let value = JsonValue::String(text.clone());
    let shrunk = shrunk_one(&value, 200);
    let shrunk = shrunk.as_str().unwrap();
    let (kept, marker) = shrunk.split_once("…[truncated ").unwrap();
    assert!(text.starts_with(kept) && !kept.is_empty());
    let removed: usize = marker.strip_suffix(" chars]").unwrap().parse().unwrap();
    assert_eq!(kept.chars().count() + removed, 30_000);
    // A string whose marker would be longer than it stays whole, whatever the knob.
    let short = json!(["abcdefghij", "x".repeat(5_000)]);
    let shrunk = shrunk_one(&short, 120);
    assert_eq!(shrunk[0], json!("abcdefghij"));
}

#[test]
fn wide_objects_keep_their_first_keys_and_count_the_rest() {
    let mut members = JsonMap::new();
    for i in 0..5_000 {
        members.insert(format!("key{i:05}"), json!(i));
    }
    let value = JsonValue::Object(members);
    let shrunk = shrunk_one(&value, 1_000);
    let object = shrunk.as_object().unwrap();
    let (key, marker) = object.last().unwrap();
    assert_eq!(key, "…");
    let more: usize = marker.as_str().unwrap().strip_suffix(" more keys").unwrap().parse().unwrap();
    assert_eq!(object.len() - 1 + more, 5_000);
    for (i, (key, item)) in object.iter().take(object.len() - 1).enumerate() {
        assert_eq!((key.as_str(), item), (format!("key{i:05}").as_str(), &json!(i)));
    }
}

#[test]
fn several_values_share_one_budget() {
    let logs = JsonValue::from((0..2_000).map(|i| json!(format!("line {i}"))).collect::<Vec<_>>());
    let value = search_result(200);
    let shrunk = json::shrink(&[&logs, &value], 4_000).expect("it fits");
    let total: usize = shrunk.iter().map(|part| json::encoded_len(part, usize::MAX).unwrap()).sum();
    assert!(total <= 4_000, "{total}");
    assert!(shrunk[0].is_array() && shrunk[1].is_object());
}

#[test]
fn a_budget_below_the_smallest_cut_is_none() {
    let value = JsonValue::String("x".repeat(10_000));
    assert!(json::shrink(&[&value], 10).is_none());
    assert!(json::shrink(&[&json!(123456)], 3).is_none());
    // The smallest cut of a big array is its marker alone.
    let array = JsonValue::from((0..100).map(|i| json!(i)).collect::<Vec<_>>());
    assert_eq!(shrunk_one(&array, 22), json!(["… 100 more items"]));
    assert_eq!(shrunk_one(&array, 25), json!([0, 1, "… 98 more items"]));
}

#[test]
fn a_key_named_like_the_marker_is_kept_and_not_replaced() {
    let mut members = JsonMap::new();
    members.insert("…", json!("mine"));
    for i in 0..100 {
        members.insert(format!("k{i}"), json!(i));
    }
    let shrunk = shrunk_one(&JsonValue::Object(members), 60);
    assert_eq!(shrunk["…"], json!("mine"));
}

#[test]
fn a_million_deep_value_shrinks_without_recursion() {
    crate::json::on_a_small_stack(|| {
        let value = nested_arrays(1_000_000);
        let shrunk = shrunk_one(&value, 100);
        // The outer levels kept, the rest one marker that counts what it held.
        let mut levels = 0;
        let mut cursor = &shrunk;
        while let JsonValue::Array(items) = cursor {
            assert_eq!(items.len(), 1);
            levels += 1;
            cursor = &items[0];
        }
        let marker = cursor.as_str().unwrap();
        let values: usize = marker
            .strip_prefix("…[truncated ")
            .and_then(|rest| rest.strip_suffix(" values]"))
            .unwrap()
            .parse()
            .unwrap();
        assert!(levels > 10, "{levels}");
        assert_eq!(levels + values, 1_000_001);
        // Room for some of the nesting: cut lower down, still valid and within budget.
        let mut wide = nested_arrays(1_000_000);
        if let JsonValue::Array(items) = &mut wide {
            items.push(JsonValue::String("y".repeat(100_000)));
        }
        shrunk_one(&wide, 1_000_000);
    });
}

#[test]
fn random_values_always_fit_their_budget_when_they_can() {
    // A small deterministic generator: the same cases on every machine.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    for case in 0..300 {
        let mut stack = vec![JsonValue::Null];
        for _ in 0..next(400) {
            let item = match next(6) {
                0 => json!(next(1_000_000)),
                1 => JsonValue::String("ab\"é\n".repeat(next(300) as usize)),
                2 => json!(true),
                3 => JsonValue::from(std::mem::take(&mut stack)),
                4 => {
                    let mut members = JsonMap::new();
                    for (i, item) in std::mem::take(&mut stack).into_iter().enumerate() {
                        members.insert(format!("k{}", i % 7), item);
                    }
                    JsonValue::Object(members)
                }
                _ => json!(null),
            };
            stack.push(item);
        }
        let value = JsonValue::from(stack);
        let size = json::encoded_len(&value, usize::MAX).unwrap();
        let budget = next(size as u64 + 1) as usize;
        match json::shrink(&[&value], budget) {
            Some(shrunk) => {
                let used = json::encoded_len(&shrunk[0], usize::MAX).unwrap();
                assert!(used <= budget, "case {case}: {used} > {budget}");
                if size <= budget {
                    assert_eq!(shrunk[0], value, "case {case}: it fitted");
                }
            }
            // Only when not even the marker of the whole array fits.
            None => assert!(budget < 40, "case {case}: {budget} of {size}"),
        }
    }
}
