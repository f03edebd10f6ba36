//! The minijinja environment of one blueprint: strict undefined, fuel and recursion
//! limits, templates held in memory only, JSON-escaped output (so a value a user wrote
//! cannot change the YAML structure), and the filters and functions blueprint authors use.
//!
//! In: a blueprint's template sources. Out: a [`Compiled`] blueprint that renders a
//! template with a context into text, evaluates readiness expressions, and reports what
//! each template reads.

use std::collections::BTreeSet;

use base64::Engine as _;
use minijinja::value::{Kwargs, Value};
use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior};
use sha2::{Digest, Sha256};

use super::labels::safe_name;
use super::{RECURSION_LIMIT, RenderError};
use crate::api::GatewayClassBlueprintSpec;

/// Instructions one render may execute before it is stopped.
pub const FUEL: u64 = 2_000_000;
/// Name under which the built-in library is importable.
pub const LIBRARY_NAME: &str = "gatewright/lib.yaml";
const LIBRARY_SOURCE: &str = include_str!("../../templates/lib.yaml");
/// Name of the status template inside the environment.
pub const STATUS_TEMPLATE: &str = "status";

/// The variables a template may read (ARCHITECTURE.md, "The template contract").
pub const CONTEXT_VARIABLES: &[&str] = &[
    "gateway",
    "route",
    "attachment",
    "class",
    "values",
    "listeners",
    "routes",
    "hostnames",
    "resources",
    "pending",
    "version",
    "cluster",
];
/// Functions we add, and minijinja's own global functions.
const FUNCTIONS: &[&str] = &[
    "safe_name",
    "gateway_labels",
    "fail",
    "dig",
    "range",
    "dict",
    "namespace",
    "debug",
];

/// Which list of a blueprint a template comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TemplateSet {
    /// `gatewayTemplates`.
    Gateway,
    /// `routeTemplates`.
    Route,
    /// The `status` template.
    Status,
}

impl TemplateSet {
    fn prefix(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Route => "route",
            Self::Status => "status",
        }
    }

    /// The environment's name of a template of this set.
    #[must_use]
    pub fn env_name(self, template: &str) -> String {
        format!("{}/{template}.yaml", self.prefix())
    }
}

/// A blueprint whose templates compiled.
pub struct Compiled {
    /// Blueprint name, for messages.
    pub blueprint: String,
    env: Environment<'static>,
    /// Readiness verdicts by expression and live object version ([`ready_key`]): a
    /// plan judges every child it renders, most of them unchanged since the last plan,
    /// and an expression's evaluation converts the whole object (a DNS record listing a
    /// thousand hostnames) into template values.
    ready: std::sync::Mutex<std::collections::HashMap<String, bool>>,
}

/// The most readiness verdicts [`Compiled`] keeps; past it, it starts again.
const READY_KEPT: usize = 8192;

/// The key of a readiness verdict: the expression and the object's UID and
/// `resourceVersion` (which change with its content); `None` for an object without them
/// (read from files), judged every time.
fn ready_key(expr: &str, object: &serde_json::Value) -> Option<String> {
    let meta = &object["metadata"];
    let uid = meta["uid"].as_str().filter(|u| !u.is_empty())?;
    let rv = meta["resourceVersion"].as_str().filter(|v| !v.is_empty())?;
    Some(format!("{uid}\u{0}{rv}\u{0}{expr}"))
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("blueprint", &self.blueprint)
            .finish_non_exhaustive()
    }
}

/// The environment rollout gates are evaluated in: every blueprint's functions and
/// filters, no template.
static GATE_ENV: std::sync::LazyLock<Environment<'static>> =
    std::sync::LazyLock::new(base_environment);

/// Checks that a rollout gate (an expression, the language of `readyWhen`) compiles.
///
/// # Errors
/// What the expression parser says.
pub fn check_gate(expr: &str) -> Result<(), String> {
    GATE_ENV
        .compile_expression(expr)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Evaluates a rollout gate with `vars` (a JSON object: each of its keys a variable).
/// A field that is not there (strict undefined) makes it false, as `readyWhen` does.
///
/// # Errors
/// The expression does not compile, or failed otherwise (a bad filter input, out of
/// fuel, `fail()`).
pub fn eval_gate(expr: &str, vars: &serde_json::Value) -> Result<bool, String> {
    let compiled = GATE_ENV
        .compile_expression(expr)
        .map_err(|e| e.to_string())?;
    match compiled.eval(Value::from(minijinja::value::Serde(vars))) {
        Ok(v) => Ok(v.is_true()),
        Err(e) if e.kind() == ErrorKind::UndefinedError => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// Builds the environment every blueprint shares, without templates.
pub(super) fn base_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(RECURSION_LIMIT);
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    // Every template is YAML: values are emitted as JSON, which is valid YAML and cannot
    // break out of the scalar it stands in.
    env.set_auto_escape_callback(|_| AutoEscape::Json);
    // JSON leaves a few characters raw that YAML refuses (DEL, C1 controls, U+FFFE) or a
    // YAML 1.1 reader takes for line breaks: a value holding one is written with them
    // escaped, so a user's string still reads back as itself.
    env.set_formatter(|out, state, value| {
        if matches!(state.auto_escape(), AutoEscape::Json)
            && !value.is_safe()
            && has_yaml_unsafe(value, 0)
        {
            let text = serde_json::to_string(value)
                .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
            return out
                .write_str(&yaml_safe_json(text))
                .map_err(|_| minijinja::Error::from(ErrorKind::WriteFailure));
        }
        minijinja::escape_formatter(out, state, value)
    });
    // No path loader: a template can only include what the blueprint holds.
    env.add_filter("to_yaml", to_yaml);
    env.add_filter("to_json", to_json);
    env.add_filter("nindent", nindent);
    env.add_filter("quote", quote);
    env.add_filter("b64encode", b64encode);
    env.add_filter("b64decode", b64decode);
    env.add_filter("sha256", sha256);
    env.add_filter("safe_name", safe_name_filter);
    env.add_function("safe_name", safe_name_filter);
    env.add_function("gateway_labels", gateway_labels);
    env.add_function("fail", fail);
    env.add_function("dig", dig);
    env.add_function("range", range);
    env.add_filter("groups", groups);
    env.add_global(super::library::GLOBAL, super::library::global());
    env
}

impl Compiled {
    /// Compiles every template of `spec`. All errors are returned, not just the first.
    ///
    /// # Errors
    /// One [`RenderError`] per template that does not parse or has a duplicate name.
    pub fn compile(
        blueprint: &str,
        spec: &GatewayClassBlueprintSpec,
    ) -> Result<Self, Vec<RenderError>> {
        let mut env = base_environment();
        let mut errors = Vec::new();
        if let Err(e) = env.add_template_owned(LIBRARY_NAME, LIBRARY_SOURCE) {
            errors.push(RenderError::from_minijinja(blueprint, LIBRARY_NAME, &e));
        }
        for (set, entries) in [
            (TemplateSet::Gateway, &spec.gateway_templates),
            (TemplateSet::Route, &spec.route_templates),
        ] {
            let mut seen = BTreeSet::new();
            for entry in entries {
                if !seen.insert(entry.name.as_str()) {
                    errors.push(RenderError::new(
                        blueprint,
                        &entry.name,
                        None,
                        format!("duplicate template name {:?}", entry.name),
                    ));
                    continue;
                }
                if !is_template_name(&entry.name) {
                    errors.push(RenderError::new(
                        blueprint,
                        &entry.name,
                        None,
                        "template names must be letters, digits, '_' or '-', and start with a letter".into(),
                    ));
                    continue;
                }
                if let Err(e) =
                    env.add_template_owned(set.env_name(&entry.name), entry.template.clone())
                {
                    errors.push(RenderError::from_minijinja(blueprint, &entry.name, &e));
                }
                if let Some(expr) = &entry.ready_when
                    && let Err(e) = env.compile_expression(expr)
                {
                    let mut err = RenderError::from_minijinja(blueprint, &entry.name, &e);
                    err.message = format!("readyWhen: {}", err.message);
                    errors.push(err);
                }
            }
        }
        if let Some(status) = &spec.status
            && let Err(e) = env.add_template_owned(
                TemplateSet::Status.env_name(STATUS_TEMPLATE),
                status.template.clone(),
            )
        {
            errors.push(RenderError::from_minijinja(blueprint, STATUS_TEMPLATE, &e));
        }
        if errors.is_empty() {
            Ok(Self {
                blueprint: blueprint.to_owned(),
                env,
                ready: std::sync::Mutex::default(),
            })
        } else {
            Err(errors)
        }
    }

    /// Whether the environment holds template `name` of `set`.
    #[must_use]
    pub fn has(&self, set: TemplateSet, name: &str) -> bool {
        self.env.get_template(&set.env_name(name)).is_ok()
    }

    /// Renders template `name` of `set` with `ctx`.
    ///
    /// # Errors
    /// The template failed: undefined variable, out of fuel, `fail()`, bad filter input...
    pub fn render(&self, set: TemplateSet, name: &str, ctx: &Value) -> Result<String, RenderError> {
        let tmpl = self
            .env
            .get_template(&set.env_name(name))
            .map_err(|e| RenderError::from_minijinja(&self.blueprint, name, &e))?;
        tmpl.render(ctx)
            .map_err(|e| RenderError::from_minijinja(&self.blueprint, name, &e))
    }

    /// Evaluates a readiness expression with `object` bound to the live child.
    ///
    /// # Errors
    /// The expression failed to evaluate.
    pub fn eval_ready(
        &self,
        template: &str,
        expr: &str,
        object: &std::sync::Arc<serde_json::Value>,
    ) -> Result<bool, RenderError> {
        let key = ready_key(expr, object);
        if let Some(k) = &key
            && let Some(ready) = self.ready.lock().ok().and_then(|r| r.get(k).copied())
        {
            return Ok(ready);
        }
        let compiled = self
            .env
            .compile_expression(expr)
            .map_err(|e| RenderError::from_minijinja(&self.blueprint, template, &e))?;
        let ctx = minijinja::context! { object => crate::render::view::JsonView::value(std::sync::Arc::clone(object)) };
        let verdict = match compiled.eval(ctx) {
            Ok(v) => v.is_true(),
            // A field that is not there yet means "not ready", not a broken blueprint.
            Err(e) if e.kind() == ErrorKind::UndefinedError => false,
            Err(e) => {
                let mut err = RenderError::from_minijinja(&self.blueprint, template, &e);
                err.message = format!("readyWhen: {}", err.message);
                return Err(err);
            }
        };
        if let Some(k) = key
            && let Ok(mut r) = self.ready.lock()
        {
            if r.len() >= READY_KEPT {
                r.clear();
            }
            r.insert(k, verdict);
        }
        Ok(verdict)
    }

    /// The variables template `name` of `set` reads, as dotted paths (`resources.LB`).
    #[must_use]
    pub fn reads(&self, set: TemplateSet, name: &str, source: &str) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self
            .env
            .get_template(&set.env_name(name))
            .map(|t| t.undeclared_variables(true).into_iter().collect())
            .unwrap_or_default();
        // `resources["X"]` and `resources['X']` are not reported as nested paths.
        for quote in ['"', '\''] {
            let pat = format!("resources[{quote}");
            let mut rest = source;
            while let Some(i) = rest.find(&pat) {
                rest = &rest[i + pat.len()..];
                if let Some(end) = rest.find(quote) {
                    out.insert(format!("resources.{}", &rest[..end]));
                }
            }
        }
        out
    }
}

/// Whether a variable a template reads is one we provide.
#[must_use]
pub fn is_known_variable(path: &str) -> bool {
    let top = path.split('.').next().unwrap_or(path);
    CONTEXT_VARIABLES.contains(&top) || FUNCTIONS.contains(&top)
}

fn is_template_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= 63
}

fn to_yaml(value: &Value) -> Result<Value, minijinja::Error> {
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

fn to_json(value: &Value) -> Result<Value, minijinja::Error> {
    let text = serde_json::to_string(value)
        .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
    Ok(Value::from_safe_string(yaml_safe_json(text)))
}

/// Characters JSON leaves raw that YAML does not take raw (DEL, the C1 controls,
/// U+FFFE, U+FFFF) or that a YAML 1.1 reader takes for line breaks or a byte order mark.
fn yaml_unsafe(c: char) -> bool {
    matches!(
        c,
        '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
    )
}

/// JSON text with the characters of [`yaml_unsafe`] as `\uXXXX` escapes, valid JSON and
/// valid YAML (they can only stand inside strings).
fn yaml_safe_json(text: String) -> String {
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
fn has_yaml_unsafe(value: &Value, depth: usize) -> bool {
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

fn nindent(value: &Value, width: usize) -> Result<Value, minijinja::Error> {
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

fn quote(value: &Value) -> Result<Value, minijinja::Error> {
    let s = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned);
    let text = serde_json::to_string(&s)
        .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
    Ok(Value::from_safe_string(yaml_safe_json(text)))
}

fn b64encode(value: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
}

fn b64decode(value: &str) -> Result<String, minijinja::Error> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .map_err(|e| {
            minijinja::Error::new(ErrorKind::InvalidOperation, format!("b64decode: {e}"))
        })?;
    String::from_utf8(bytes)
        .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("b64decode: {e}")))
}

fn sha256(value: &str) -> String {
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
fn groups(items: Vec<String>, max: usize) -> Result<Value, minijinja::Error> {
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

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn safe_name_filter(value: &str, max: Option<usize>) -> String {
    safe_name(value, max.unwrap_or(63))
}

/// The GEP-1762 labels of a Gateway's children: `gateway.networking.k8s.io/gateway-name`
/// and `gateway-class-name`, plus `spec.infrastructure.labels`.
fn gateway_labels(gateway: &Value) -> Result<Value, minijinja::Error> {
    Ok(Value::from(minijinja::value::Serde(
        super::library::gateway_labels_map(gateway)?,
    )))
}

/// `dig(obj, "status.atProvider.arn", default)`: the value at a dotted path, or `default`
/// (none when not given) when any step is missing. Lets a template read status fields that
/// a downstream controller has not written yet without tripping strict undefined.
fn dig(value: &Value, path: &str, default: Option<Value>) -> Value {
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
fn range(lower: i64, upper: Option<i64>, step: Option<i64>) -> Result<Value, minijinja::Error> {
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

fn fail(message: &str, _kw: Kwargs) -> Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(
        ErrorKind::InvalidOperation,
        format!("fail(): {message}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group_of(groups: &Value) -> std::collections::BTreeMap<String, usize> {
        let json: serde_json::Value = serde_json::to_value(groups).unwrap();
        let mut out = std::collections::BTreeMap::new();
        for g in json.as_array().unwrap() {
            for i in g["items"].as_array().unwrap() {
                out.insert(
                    i.as_str().unwrap().to_owned(),
                    usize::try_from(g["index"].as_u64().unwrap()).unwrap(),
                );
            }
        }
        out
    }

    #[test]
    fn the_documented_rollout_gates_evaluate() {
        let gw = |approved: &str, attached: u64| {
            serde_json::json!({
                "metadata": {"name": "a", "annotations": {"rollout/approved": approved}},
                "status": {"listeners": [{"name": "http", "attachedRoutes": attached}]},
            })
        };
        // The two gates of docs/rollout.md.
        let approved = r#"gateways | rejectattr("metadata.annotations.rollout/approved", "eq", "yes") | list | length == 0"#;
        let routes = r#"gateways | selectattr("status.listeners.0.attachedRoutes", "lt", 1) | list | length == 0"#;
        let vars = |gws: Vec<serde_json::Value>| serde_json::json!({"gateways": gws});
        assert_eq!(eval_gate(approved, &vars(vec![gw("yes", 1)])), Ok(true));
        assert_eq!(
            eval_gate(approved, &vars(vec![gw("yes", 1), gw("no", 1)])),
            Ok(false)
        );
        assert_eq!(
            eval_gate(routes, &vars(vec![gw("no", 1), gw("no", 3)])),
            Ok(true)
        );
        assert_eq!(
            eval_gate(routes, &vars(vec![gw("no", 1), gw("no", 0)])),
            Ok(false)
        );
        // Not there yet: false; a wrong type: an error; a syntax error: an error.
        assert_eq!(
            eval_gate("gateways[0].status.nothing > 1", &vars(vec![gw("no", 1)])),
            Ok(false)
        );
        assert!(eval_gate("gateways + 1", &vars(vec![])).is_err());
        assert!(check_gate("gateways |").is_err());
        assert!(check_gate(approved).is_ok());
    }

    #[test]
    fn a_readiness_verdict_is_kept_per_object_version() {
        let c = Compiled::compile("b", &GatewayClassBlueprintSpec::default()).unwrap();
        let expr = r#"dig(object, "status.ready", false)"#;
        let at = |rv: &str, ready: bool| {
            std::sync::Arc::new(
                serde_json::json!({"metadata": {"uid": "u1", "resourceVersion": rv}, "status": {"ready": ready}}),
            )
        };
        assert!(c.eval_ready("t", expr, &at("1", true)).unwrap());
        // The same version is not judged again (its content cannot differ on a server).
        assert!(c.eval_ready("t", expr, &at("1", false)).unwrap());
        assert!(
            !c.eval_ready("t", expr, &at("2", false)).unwrap(),
            "a new version is"
        );
        // Another expression, its own verdict.
        assert!(c.eval_ready("t", "true", &at("2", false)).unwrap());
        // An object without a version (read from files) is judged every time.
        let file =
            |ready: bool| std::sync::Arc::new(serde_json::json!({"status": {"ready": ready}}));
        assert!(c.eval_ready("t", expr, &file(true)).unwrap());
        assert!(!c.eval_ready("t", expr, &file(false)).unwrap());
    }

    #[test]
    fn groups_are_bounded_stable_and_a_power_of_two() {
        let names =
            |n: usize| -> Vec<String> { (0..n).map(|i| format!("h{i}.example.com")).collect() };
        assert_eq!(
            group_of(&groups(names(3), 100).unwrap()).values().max(),
            Some(&0)
        );
        let a = group_of(&groups(names(1000), 100).unwrap());
        assert_eq!(a.len(), 1000, "every name in one group");
        let count = |m: &std::collections::BTreeMap<String, usize>| {
            let mut sizes = std::collections::BTreeMap::new();
            for g in m.values() {
                *sizes.entry(*g).or_insert(0usize) += 1;
            }
            sizes
        };
        let sizes = count(&a);
        assert!(sizes.values().all(|s| *s <= 100), "{sizes:?}");
        let n = sizes.keys().max().unwrap() + 1;
        assert!(n.is_power_of_two() && n <= MAX_GROUPS, "{n}");
        // One more name: every other name stays in its group.
        let mut more = names(1000);
        more.push("new.example.com".into());
        let b = group_of(&groups(more, 100).unwrap());
        assert_eq!(count(&b).len(), sizes.len());
        assert!(a.iter().all(|(k, g)| b[k] == *g));
        // Order and duplicates of the input do not matter.
        let mut shuffled = names(1000);
        shuffled.reverse();
        shuffled.push("h1.example.com".into());
        assert_eq!(group_of(&groups(shuffled, 100).unwrap()), a);
        // Too many for 64 groups, and max 0: errors, not a panic.
        assert!(groups(names(100), 1).is_err());
        assert!(groups(names(3), 0).is_err());
    }
}
