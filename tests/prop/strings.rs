//! Strings and values a user may write into any field the templates read: YAML's special
//! scalars and indicators, template delimiters, odd Unicode, control characters, huge text.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Scalars that a YAML parser would read as something other than the string, were they
/// printed unquoted, and other text that tests escaping.
pub const SPECIAL: &[&str] = &[
    "",
    " ",
    "null",
    "Null",
    "~",
    "true",
    "False",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "0",
    "-0",
    "007",
    "0x1F",
    "0o17",
    "1e3",
    "1_000",
    "3.14",
    ".inf",
    "-.Inf",
    ".nan",
    "2001-12-14t21:59:43.10-05:00",
    "- a",
    "-",
    "? a",
    "a: b",
    "a:b",
    ": a",
    "{a: b}",
    "[1, 2]",
    "}",
    "]",
    "#comment",
    "a #b",
    "&anchor",
    "*alias",
    "!tag",
    "!!str x",
    "!!binary aGk=",
    "|",
    "|-\n  x",
    ">",
    "%YAML 1.2",
    "---",
    "...",
    "--- a",
    "'",
    "''",
    "\"",
    "\\",
    "\\n",
    "@",
    "`",
    ",",
    "<<",
    "=",
    "\n",
    "\t",
    "\r",
    "\r\n",
    "a\nb",
    "a\n\nb",
    "  leading",
    "trailing  ",
    "a\u{0}b",
    "\u{7}",
    "\u{1b}[31m",
    "\u{7f}",
    "\u{80}",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "\u{feff}a",
    "\u{fffd}",
    "\u{fffe}",
    "\u{ffff}",
    "\u{d7ff}",
    "\u{e000}",
    "\u{10ffff}",
    "\u{1f600}",
    "e\u{301}",
    "\u{202e}abc",
    "bücher.example",
    "日本語",
    "{{ gateway.metadata.name }}",
    "{% raw %}",
    "{#",
    "}}",
    "%}",
    "</script>",
    "${HOME}",
    "$(id)",
];

/// Any Unicode scalar value, weighted towards the ranges that need escaping.
fn odd_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => proptest::char::range(' ', '~'),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => proptest::char::range('\u{7f}', '\u{a0}'),
        1 => proptest::char::range('\u{a1}', '\u{d7ff}'),
        1 => proptest::char::range('\u{e000}', '\u{ffff}'),
        1 => proptest::char::range('\u{10000}', '\u{10ffff}'),
        1 => prop::sample::select(vec!['\u{2028}', '\u{2029}', '\u{85}', '\u{feff}', '\u{fffe}', '\u{ffff}', '"', '\'', '\\', ':', '#', '{', '}', '[', ']', ',', '&', '*', '!', '|', '>', '%', '@', '`', '-', '?']),
    ]
}

/// A string a user could write.
pub fn user_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(SPECIAL).prop_map(str::to_owned),
        3 => prop::collection::vec(odd_char(), 0..24).prop_map(|v| v.into_iter().collect()),
        2 => (prop::sample::select(SPECIAL), prop::sample::select(SPECIAL), "[a-z0-9.-]{0,8}")
            .prop_map(|(a, b, c)| format!("{a}{c}{b}")),
        1 => "[a-z][a-z0-9-]{0,20}",
        // Long text: past the 63/253 character limits of names, and past line lengths
        // where printers fold.
        1 => (prop::sample::select(SPECIAL), 60usize..3000).prop_map(|(s, n)| {
            let unit = if s.is_empty() { "x" } else { s };
            unit.repeat(n / unit.len().max(1) + 1)
        }),
    ]
}

/// A JSON value a user could put into values (GatewayConfig, GatewayClassConfig): nested
/// maps and lists of odd strings and numbers.
pub fn user_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => user_string().prop_map(Value::String),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => prop::sample::select(vec![0.5f64, -1.25, 1e-7, 3.0e20, 0.1, 1.0]).prop_map(|f| json!(f)),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(user_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// A value nested `depth` levels deep (maps and lists alternating).
pub fn deep_value(depth: usize, leaf: &str) -> Value {
    let mut v = Value::String(leaf.to_owned());
    for i in 0..depth {
        v = if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            json!({ "k": v })
        };
    }
    v
}
