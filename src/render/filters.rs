//! The filters and functions blueprint authors call (`to_yaml`, `nindent`, `groups`,
//! `dig`, `sha256`, `safe_name`, `range`, `fail`, ...), registered on every blueprint's
//! environment by [`super::engine`]; each checks its input and fails with a message rather
//! than render something unbounded or malformed.

use base64::Engine as _;
use minijinja::ErrorKind;
use minijinja::value::{Kwargs, Value};
use sha2::{Digest, Sha256};

use super::labels::safe_name;

pub(super) fn to_yaml(value: &Value) -> Result<Value, minijinja::Error> {
    let json: serde_json::Value = serde_json::to_value(value)
        .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
    // No block scalars: a literal block keeps trailing newlines only up to the end of
    // the text, which the trim below and `nindent` cut, so "a\n" would read back as "a".
    let mut options = serde_saphyr::SerializerOptions::default();
    options.prefer_block_scalars = false;
    let text = serde_saphyr::to_string_with_options(&json, options)
        .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
    // The serializer quotes and escapes every scalar, so its output is safe as YAML.
    Ok(Value::from_safe_string(
        text.trim_end_matches('\n').to_owned(),
    ))
}

pub(super) fn to_json(value: &Value) -> Result<Value, minijinja::Error> {
    let text = serde_json::to_string(value)
        .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
    Ok(Value::from_safe_string(yaml_safe_json(text)))
}

/// Characters JSON leaves raw that YAML does not take raw (DEL, the C1 controls,
/// U+FFFE, U+FFFF) or that a YAML 1.1 reader takes for line breaks or a byte order mark.
pub(super) fn yaml_unsafe(c: char) -> bool {
    matches!(
        c,
        '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
    )
}

/// JSON text with the characters of [`yaml_unsafe`] as `\uXXXX` escapes, valid JSON and
/// valid YAML (they can only stand inside strings).
pub(super) fn yaml_safe_json(text: String) -> String {
    use std::fmt::Write as _;
    if !text.chars().any(yaml_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if yaml_unsafe(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a string in `value` (or a map key) holds a character of [`yaml_unsafe`]. Past
/// a nesting of 128 the answer is yes, which only takes the slower, always safe path.
pub(super) fn has_yaml_unsafe(value: &Value, depth: usize) -> bool {
    use minijinja::value::ValueKind;
    if let Some(s) = value.as_str() {
        return s.chars().any(yaml_unsafe);
    }
    if depth > 128 {
        return true;
    }
    match value.kind() {
        ValueKind::Seq => value
            .try_iter()
            .is_ok_and(|mut it| it.any(|v| has_yaml_unsafe(&v, depth + 1))),
        // Pairs, not a lookup per key: maps from JSON enumerate their entries directly.
        ValueKind::Map => match value.as_object().and_then(|o| o.try_iter_pairs()) {
            Some(mut pairs) => {
                pairs.any(|(k, v)| has_yaml_unsafe(&k, depth + 1) || has_yaml_unsafe(&v, depth + 1))
            }
            None => value.try_iter().is_ok_and(|mut it| {
                it.any(|k| {
                    has_yaml_unsafe(&k, depth + 1)
                        || value
                            .get_item(&k)
                            .is_ok_and(|v| has_yaml_unsafe(&v, depth + 1))
                })
            }),
        },
        _ => false,
    }
}

/// Widest indentation `nindent` accepts; YAML never needs more.
pub const MAX_INDENT: usize = 256;

pub(super) fn nindent(value: &Value, width: usize) -> Result<Value, minijinja::Error> {
    let text = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned);
    // The padding is allocated before fuel can pay for it: bound the width, and the
    // output by what a template may render at all.
    if width > MAX_INDENT {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("nindent: width {width} is more than {MAX_INDENT}"),
        ));
    }
    let lines = text.lines().filter(|l| !l.is_empty()).count();
    let size = lines.saturating_mul(width).saturating_add(text.len());
    if size > crate::render::output::MAX_RENDERED_BYTES {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "nindent: the result would be {size} bytes, more than a template may render ({})",
                crate::render::output::MAX_RENDERED_BYTES
            ),
        ));
    }
    let pad = " ".repeat(width);
    let body: Vec<String> = text
        .lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{pad}{l}")
            }
        })
        .collect();
    let out = format!("\n{}", body.join("\n"));
    Ok(if value.is_safe() {
        Value::from_safe_string(out)
    } else {
        Value::from(out)
    })
}

pub(super) fn quote(value: &Value) -> Result<Value, minijinja::Error> {
    let s = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned);
    let text = serde_json::to_string(&s)
        .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
    Ok(Value::from_safe_string(yaml_safe_json(text)))
}

pub(super) fn b64encode(value: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
}

pub(super) fn b64decode(value: &str) -> Result<String, minijinja::Error> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .map_err(|e| {
            minijinja::Error::new(ErrorKind::InvalidOperation, format!("b64decode: {e}"))
        })?;
    String::from_utf8(bytes)
        .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("b64decode: {e}")))
}

pub(super) fn sha256(value: &str) -> String {
    hex(&Sha256::digest(value.as_bytes()))
}

/// The most groups [`groups`] makes: the Gateway API's limit on a listener's
/// `certificateRefs`, where each group's certificate is listed.
pub const MAX_GROUPS: usize = 64;

/// `items | groups(max)`: the strings of `items` in groups of at most `max`, each item's
/// group decided by a stable hash of the item alone, as `[{index, items}]` in index order
/// with the items sorted and empty groups left out. The number of groups is the smallest
/// power of two (at most [`MAX_GROUPS`]) that keeps every group at or under `max`, so
/// adding or removing an item changes one group, and only a change in the number of groups
/// (a doubling or halving) moves items between groups. For certificates: public ACME
/// issuers take at most 100 names per certificate.
pub(super) fn groups(items: Vec<String>, max: usize) -> Result<Value, minijinja::Error> {
    if max == 0 {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "groups(max): max must be at least 1",
        ));
    }
    let mut items = items;
    items.sort();
    items.dedup();
    let hashed: Vec<(u64, String)> = items
        .into_iter()
        .map(|i| {
            let d = Sha256::digest(i.as_bytes());
            let mut head = [0u8; 8];
            head.copy_from_slice(&d[..8]);
            (u64::from_be_bytes(head), i)
        })
        .collect();
    let mut n = 1usize;
    loop {
        let mut out: Vec<Vec<&str>> = vec![Vec::new(); n];
        for (h, i) in &hashed {
            // n is a power of two no larger than 64: the mask keeps the low bits.
            let g = usize::try_from(h & (n as u64 - 1)).unwrap_or_default();
            out[g].push(i);
        }
        if out.iter().all(|g| g.len() <= max) {
            let list: Vec<serde_json::Value> = out
                .into_iter()
                .enumerate()
                .filter(|(_, g)| !g.is_empty())
                .map(|(index, items)| serde_json::json!({ "index": index, "items": items }))
                .collect();
            return Ok(Value::from(minijinja::value::Serde(list)));
        }
        if n >= MAX_GROUPS {
            return Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "groups({max}): {} items do not fit {MAX_GROUPS} groups of at most {max}",
                    hashed.len()
                ),
            ));
        }
        n *= 2;
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

pub(super) fn safe_name_filter(value: &str, max: Option<usize>) -> String {
    safe_name(value, max.unwrap_or(63))
}

/// The GEP-1762 labels of a Gateway's children: `gateway.networking.k8s.io/gateway-name`
/// and `gateway-class-name`, plus `spec.infrastructure.labels`.
pub(super) fn gateway_labels(gateway: &Value) -> Result<Value, minijinja::Error> {
    Ok(Value::from(minijinja::value::Serde(
        super::library::gateway_labels_map(gateway)?,
    )))
}

/// `dig(obj, "status.atProvider.arn", default)`: the value at a dotted path, or `default`
/// (none when not given) when any step is missing. Lets a template read status fields that
/// a downstream controller has not written yet without tripping strict undefined.
pub(super) fn dig(value: &Value, path: &str, default: Option<Value>) -> Value {
    let mut cur = value.clone();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let next = match part.parse::<usize>() {
            Ok(i) if cur.kind() == minijinja::value::ValueKind::Seq => {
                cur.get_item(&Value::from(i)).ok()
            }
            _ => cur.get_attr(part).ok().filter(|v| !v.is_undefined()),
        };
        match next {
            Some(v) if !v.is_undefined() && !v.is_none() => cur = v,
            _ => return default.unwrap_or_else(|| Value::from(())),
        }
    }
    cur
}

/// Most items `range` gives, as minijinja's own.
pub const MAX_RANGE: i128 = 100_000;

/// `range([start,] stop[, step])` as minijinja's own, in checked arithmetic: minijinja's
/// overflows (a panic in a build with overflow checks) for extreme bounds with a negative step.
pub(super) fn range(
    lower: i64,
    upper: Option<i64>,
    step: Option<i64>,
) -> Result<Value, minijinja::Error> {
    let (start, end) = match upper {
        Some(upper) => (i128::from(lower), i128::from(upper)),
        None => (0, i128::from(lower)),
    };
    let step = i128::from(step.unwrap_or(1));
    let len = match step.signum() {
        0 => {
            return Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                "cannot create range with step of 0",
            ));
        }
        1 if end > start => (end - start + step - 1) / step,
        -1 if start > end => (start - end - step - 1) / -step,
        _ => 0,
    };
    if len > MAX_RANGE {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "range has too many elements",
        ));
    }
    // Every item lies between start and end, so it fits an i64.
    Ok(Value::make_iterable(move || {
        (0..len).map(move |i| i64::try_from(start + i * step).unwrap_or_default())
    }))
}

pub(super) fn fail(message: &str, _kw: Kwargs) -> Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(
        ErrorKind::InvalidOperation,
        format!("fail(): {message}"),
    ))
}
