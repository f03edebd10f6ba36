//! The minijinja environment of one blueprint: strict undefined, fuel and recursion
//! limits, templates held in memory only, JSON-escaped output (so a value a user wrote
//! cannot change the YAML structure), and the filters and functions blueprint authors use.
//!
//! In: a blueprint's template sources. Out: a [`Compiled`] blueprint that renders a
//! template with a context into text, evaluates readiness expressions, and reports what
//! each template reads.

use std::collections::BTreeSet;

use minijinja::value::Value;
use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior};

#[allow(
    clippy::wildcard_imports,
    reason = "the filter library, registered by name below"
)]
use super::filters::*;
pub use super::filters::{MAX_GROUPS, MAX_INDENT, MAX_RANGE};
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
