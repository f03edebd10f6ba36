//! Template fuzzing through the real planner: blueprints made of generated templates,
//! rendered for a Gateway and a route whose values and fields hold odd user data.
//!
//! - Round trip: a user value printed by a template (`{{ v }}`, `quote`, `to_json`,
//!   `to_yaml | nindent`, inside flow collections, as a key, concatenated) reads back from
//!   the rendered YAML as exactly that value, or the template fails with a clear error.
//! - Placement: whatever namespace, kind and labels a template writes, every child lands
//!   in the parent's namespace or is a cluster-scoped kind the blueprint lists, and carries
//!   our ownership labels with the right values; a template that names another namespace
//!   fails.
//! - Hostile programs: loops, recursion, doubling strings, huge repeats and widths,
//!   self-includes, garbage sources and readiness expressions: never a panic, always done
//!   within [`WALL_CLOCK_BOUND`] (fuel and recursion limits stop them first).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gatewright::plan::{GatewayPlan, plan_gateway, plan_route};
use gatewright::render::labels;
use gatewright::snapshot::Snapshot;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

use crate::strings::{SPECIAL, deep_value, user_string, user_value};

/// No plan of one Gateway and its route may take longer than this, whatever its templates
/// do. Fuel (2,000,000 units, which also pay for every byte a template builds) and the
/// recursion limit (64) stop a hostile template long before: the slowest case seen takes
/// about 4 s in a debug build on a quiet machine (printed by the test). The bound is wide
/// so that it tells a template that never ends from a slow machine, not a speed target: a
/// 20 s bound was once passed by a 100 MB string repeat while every test ran in parallel
/// on a loaded 2-core machine.
pub const WALL_CLOCK_BOUND: Duration = Duration::from_secs(120);

/// The slowest plan seen, in microseconds.
pub static SLOWEST_PLAN_US: AtomicU64 = AtomicU64::new(0);

pub const NS: &str = "team";
const GW_UID: &str = "11111111-0000-4000-8000-000000000001";
const ROUTE_UID: &str = "11111111-0000-4000-8000-000000000002";

/// One template of a generated blueprint.
#[derive(Clone, Debug)]
pub struct Tpl {
    pub name: String,
    pub source: String,
    pub ready_when: Option<String>,
}

/// A snapshot with the blueprint `fuzz` made of `gateway` and `route` templates, a
/// Gateway `team/gw` of its class with `infra_labels`, an attached route whose first rule
/// carries `route_text`, and a GatewayConfig giving `values`.
pub fn world(
    gateway: &[Tpl],
    route: &[Tpl],
    cluster_scoped: &[(&str, &str)],
    values: &Value,
    infra_labels: &BTreeMap<String, String>,
    route_text: &str,
) -> Snapshot {
    let entries = |ts: &[Tpl]| -> Vec<Value> {
        ts.iter()
            .map(|t| {
                let mut e = json!({"name": t.name, "template": t.source});
                if let Some(r) = &t.ready_when {
                    e["readyWhen"] = json!(r);
                }
                e
            })
            .collect()
    };
    let mut snap = Snapshot::new("gatewright-system");
    snap.put_namespace(
        NS,
        BTreeMap::from([("kubernetes.io/metadata.name".to_owned(), NS.to_owned())]),
    );
    snap.put_blueprint(
        serde_json::from_value(json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "fuzz"},
            "spec": {
                "gatewayTemplates": entries(gateway),
                "routeTemplates": entries(route),
                "clusterScopedKinds": cluster_scoped.iter().map(|(g, k)| json!({"group": g, "kind": k})).collect::<Vec<_>>(),
            },
        }))
        .unwrap(),
    );
    snap.put_class(
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "fuzz"},
            "spec": {"controllerName": gatewright::gateway::CONTROLLER_NAME,
                     "parametersRef": {"group": "gatewright.dev", "kind": "GatewayClassBlueprint", "name": "fuzz"}},
        }))
        .unwrap(),
    );
    snap.put_gateway_config(
        serde_json::from_value(json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayConfig",
            "metadata": {"name": "values", "namespace": NS},
            "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}, "default": values},
        }))
        .unwrap(),
    );
    let mut gw = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": NS, "uid": GW_UID, "generation": 1},
        "spec": {"gatewayClassName": "fuzz", "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]},
    });
    if !infra_labels.is_empty() {
        gw["spec"]["infrastructure"] = json!({"labels": infra_labels});
    }
    snap.put_gateway(serde_json::from_value(gw).unwrap());
    snap.put_route_json(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": NS, "uid": ROUTE_UID, "generation": 1},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": route_text}}]}]},
    }));
    snap
}

/// Plans the Gateway and its route, timed; the wall-clock bound is checked here.
pub fn plan(
    snap: &Snapshot,
) -> Result<(GatewayPlan, Option<gatewright::plan::RoutePlan>), TestCaseError> {
    let start = Instant::now();
    let key = gatewright::snapshot::Key::new(NS, "gw");
    let p =
        plan_gateway(snap, &key).map_err(|e| TestCaseError::fail(format!("not planned: {e:?}")))?;
    let rp = p.context.routes.first().map(|r| plan_route(snap, &p, r));
    let took = start.elapsed();
    SLOWEST_PLAN_US.fetch_max(
        u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    prop_assert!(
        took < WALL_CLOCK_BOUND,
        "a plan took {took:?}, past the bound of {WALL_CLOCK_BOUND:?}"
    );
    Ok((p, rp))
}

/// Errors of a plan: each must name the blueprint and have a message and a category.
fn check_errors(
    p: &GatewayPlan,
    rp: Option<&gatewright::plan::RoutePlan>,
) -> Result<(), TestCaseError> {
    for e in p
        .errors
        .iter()
        .chain(rp.into_iter().flat_map(|r| r.errors.iter()))
    {
        prop_assert_eq!(&e.blueprint, "fuzz");
        prop_assert!(
            !e.message.is_empty() && !e.category.is_empty(),
            "unclear error {:?}",
            e
        );
        prop_assert!(
            e.to_string().len() < 64 * 1024,
            "an error message of {} bytes",
            e.to_string().len()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- round trip

const ROUND_TRIP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: rt
data:
  plain: {{ values.s }}
  quoted: {{ values.s | quote }}
  json: {{ values.v | to_json }}
  yaml: {{ values.v | to_yaml | nindent(4) }}
  inline: {{ values.v }}
  seq: [{{ values.s }}, {{ values.v }}]
  map: {k: {{ values.v }}, l: {{ values.s }}}
  keyed:
    {{ values.s }}: key
  concat: {{ "pre-" ~ values.s ~ "-post" }}
  blockseq:
  - {{ values.s }}
  - {{ values.v }}
  deep: {{ values.deep }}
  path: {{ route.spec.rules[0].matches[0].path.value }}
  rules: {{ route.spec.rules }}
"#;

/// Characters a string takes printed as a JSON string with YAML's unsafe characters escaped.
fn printed_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' => 2,
            c if c < ' ' || ('\u{7f}'..='\u{9f}').contains(&c) => 6,
            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}' => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The longest map key in `v`, as printed.
fn longest_key(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.iter().map(longest_key).max().unwrap_or(0),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| printed_len(k).max(longest_key(v)))
            .max()
            .unwrap_or(0),
        _ => 0,
    }
}

fn json_depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(json_depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn round_trip_case(s: &str, v: &Value, deep: &Value, path: &str) -> Result<(), TestCaseError> {
    let values = json!({"s": s, "v": v, "deep": deep});
    let snap = world(
        &[],
        &[Tpl {
            name: "rt".into(),
            source: ROUND_TRIP.into(),
            ready_when: None,
        }],
        &[],
        &values,
        &BTreeMap::new(),
        path,
    );
    let (p, rp) = plan(&snap)?;
    check_errors(&p, rp.as_ref())?;
    prop_assert!(p.errors.is_empty(), "{:?}", p.errors);
    let rp = rp.ok_or_else(|| TestCaseError::fail("the route is not attached"))?;
    if let Some(e) = rp.errors.first() {
        // The only acceptable failures: output past a size limit, or nested deeper than
        // the YAML parser's budget (64 levels), said so.
        let nested = json_depth(deep).max(json_depth(v) + 2);
        prop_assert!(
            e.category == "InvalidOutput"
                && (e.message.contains("limit")
                    || (nested > 60 && e.message.contains("budget breached: Depth"))
                    // YAML allows implicit keys of at most 1024 characters: `{{ s }}: key`,
                    // and the keys of maps printed as flow maps.
                    || (longest_key(&json!({"s": s, "v": v})).max(printed_len(s)) > 1024
                        && e.message.contains("not valid YAML"))),
            "the round-trip template failed: {}",
            e.to_string().chars().take(2000).collect::<String>()
        );
        return Ok(());
    }
    prop_assert_eq!(rp.children.len(), 1);
    let d = &rp.children[0].object["data"];
    let route_rules = snap
        .route(&gatewright::snapshot::RouteKey::new("HTTPRoute", NS, "r"))
        .unwrap()
        .json()["spec"]["rules"]
        .clone();
    let expect = [
        ("plain", json!(s)),
        ("quoted", json!(s)),
        ("json", v.clone()),
        ("yaml", v.clone()),
        ("inline", v.clone()),
        ("seq", json!([s, v])),
        ("map", json!({"k": v, "l": s})),
        (
            "keyed",
            Value::Object(std::iter::once((s.to_owned(), json!("key"))).collect()),
        ),
        ("concat", json!(format!("pre-{s}-post"))),
        ("blockseq", json!([s, v])),
        ("deep", deep.clone()),
        ("path", json!(path)),
        ("rules", route_rules),
    ];
    for (field, want) in expect {
        prop_assert!(
            d[field] == want,
            "data.{} reads back as {} instead of {}",
            field,
            d[field],
            want
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- placement

const KINDS: &[(&str, &str)] = &[
    ("v1", "ConfigMap"),
    ("v1", "Namespace"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("elbv2.aws.upbound.io/v1beta1", "LB"),
    ("example.com/v1", "Widget"),
    ("gateway.networking.k8s.io/v1", "Gateway"),
];

#[derive(Clone, Debug)]
pub struct Placed {
    pub kind: usize,
    /// 0 unset, 1 the parent's, 2 another, 3 empty, 4 a user string.
    pub namespace: u8,
    pub other_ns: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

fn placed() -> impl Strategy<Value = Placed> {
    let label_key = prop_oneof![
        Just(labels::MANAGED_BY.to_owned()),
        Just(labels::PARENT_UID.to_owned()),
        Just(labels::GATEWAY_UID.to_owned()),
        Just(labels::TEMPLATE.to_owned()),
        Just(labels::GATEWAY_NAME.to_owned()),
        "[a-z]{1,6}",
    ];
    (
        0..KINDS.len(),
        0u8..5,
        user_string(),
        prop_oneof![
            Just("obj".to_owned()),
            "[a-z0-9][a-z0-9.-]{0,20}[a-z0-9]",
            user_string()
        ],
        prop::collection::btree_map(label_key, user_string(), 0..4),
    )
        .prop_map(|(kind, namespace, other_ns, name, labels)| Placed {
            kind,
            namespace,
            other_ns,
            name,
            labels,
        })
}

fn placement_case(
    objs: &[Placed],
    cluster_scoped: &[(&str, &str)],
    infra: &BTreeMap<String, String>,
    in_route: bool,
) -> Result<(), TestCaseError> {
    let mut values = serde_json::Map::new();
    let mut source = String::new();
    for (i, o) in objs.iter().enumerate() {
        let (api, kind) = KINDS[o.kind];
        values.insert(format!("name{i}"), json!(format!("{}{i}", o.name)));
        values.insert(format!("ns{i}"), json!(o.other_ns));
        values.insert(format!("labels{i}"), json!(o.labels));
        let ns_line = match o.namespace {
            0 => String::new(),
            1 => format!("  namespace: {NS}\n"),
            2 => "  namespace: kube-system\n".to_owned(),
            3 => "  namespace: \"\"\n".to_owned(),
            _ => format!("  namespace: {{{{ values.ns{i} }}}}\n"),
        };
        source.push_str(&format!(
            "---\napiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {{{{ values.name{i} }}}}\n{ns_line}  labels: {{{{ values.labels{i} }}}}\n"
        ));
    }
    let t = [Tpl {
        name: "objs".into(),
        source,
        ready_when: None,
    }];
    let (g, r): (&[Tpl], &[Tpl]) = if in_route { (&[], &t) } else { (&t, &[]) };
    let snap = world(g, r, cluster_scoped, &Value::Object(values), infra, "/");
    let (p, rp) = plan(&snap)?;
    check_errors(&p, rp.as_ref())?;
    let accepted = p.accepted;
    let (children, errors, parent_uid) = if in_route {
        let rp = rp.ok_or_else(|| TestCaseError::fail("the route is not attached"))?;
        (rp.children, rp.errors, ROUTE_UID)
    } else {
        (p.children.as_ref().clone(), p.errors, GW_UID)
    };
    let listed = |api: &str, kind: &str| {
        let group = gatewright::render::output::api_group(api);
        cluster_scoped
            .iter()
            .any(|(g, k)| *g == group && *k == kind)
    };
    // A template naming another namespace for a namespaced kind must fail as a whole.
    let escapes = objs.iter().any(|o| {
        let (api, kind) = KINDS[o.kind];
        let ns = match o.namespace {
            0 | 1 => NS,
            2 => "kube-system",
            3 => "",
            _ => o.other_ns.as_str(),
        };
        let cluster = listed(api, kind);
        (!cluster && o.namespace >= 2 && ns != NS)
            || (cluster && !ns.is_empty() && o.namespace != 0)
    });
    // A kind whose real scope the blueprint contradicts (a cluster-scoped kind it does not
    // list, a namespaced kind it lists as cluster-scoped) must fail too: when the template
    // names the kind literally the whole blueprint is refused (its Gateways are not
    // accepted), else the template fails when it renders.
    let forbidden = objs.iter().any(|o| {
        let (api, kind) = KINDS[o.kind];
        let group = gatewright::render::output::api_group(api);
        match gatewright::render::scope::builtin(group, kind) {
            Some(gatewright::render::scope::Scope::Cluster) => !listed(api, kind),
            Some(gatewright::render::scope::Scope::Namespaced) => listed(api, kind),
            None => false,
        }
    });
    if escapes || forbidden {
        prop_assert!(
            children.is_empty() && (!errors.is_empty() || !accepted),
            "an object outside its place was not refused: {:?}",
            children
        );
    }
    for c in &children {
        let o = &c.object;
        let api = o["apiVersion"].as_str().unwrap_or_default();
        let kind = o["kind"].as_str().unwrap_or_default();
        let ns = &o["metadata"]["namespace"];
        if listed(api, kind) {
            prop_assert!(ns.is_null(), "cluster-scoped {kind} got namespace {ns}");
            prop_assert!(o["metadata"].get("ownerReferences").is_none());
        } else {
            prop_assert_eq!(ns, &json!(NS), "{} landed in {}", kind, ns);
            prop_assert_eq!(
                &o["metadata"]["ownerReferences"][0]["uid"],
                &json!(parent_uid)
            );
        }
        let l = &o["metadata"]["labels"];
        prop_assert_eq!(&l[labels::MANAGED_BY], &json!(labels::MANAGED_BY_VALUE));
        prop_assert_eq!(&l[labels::PARENT_UID], &json!(parent_uid));
        prop_assert_eq!(&l[labels::GATEWAY_UID], &json!(GW_UID));
        prop_assert_eq!(&l[labels::TEMPLATE], &json!("objs"));
        prop_assert_eq!(&l[labels::GATEWAY_NAME], &json!("gw"));
        prop_assert_eq!(&l[labels::GATEWAY_CLASS_NAME], &json!("fuzz"));
        // The name is a valid DNS subdomain.
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        prop_assert!(
            !name.is_empty()
                && name.len() <= 253
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'),
            "bad name {:?}",
            name
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- hostile programs

/// Snippets of template code that try to run long, allocate much or recurse deep; `N` and
/// `M` are replaced by generated numbers.
const HOSTILE: &[&str] = &[
    "{% for i in range(N) %}{% for j in range(M) %}x{% endfor %}{% endfor %}",
    "{% set ns = namespace(s=\"ab\") %}{% for i in range(N) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    "{% macro d(s, n) %}{% if n > 0 %}{{ d(s ~ s, n - 1) }}{% else %}{{ s | length }}{% endif %}{% endmacro %}{{ d(\"xy\", N) }}",
    "{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(N) }}",
    "{% macro deep(n) %}{{ deep(n + 1) }}{% endmacro %}{{ deep(0) }}",
    "{{ \"x\" * N }}",
    "{{ \"xyz\" * N * M }}",
    "{{ range(N) | join(\",\") }}",
    "{{ (range(N) | list) * M }}",
    "{{ range(N) | list | sort | reverse | unique | list | length }}",
    "{{ values.s * N }}",
    "{{ values.s | nindent(N) }}",
    "{{ values.s | nindent(N * M) }}",
    "{{ values.s | indent(N) }}",
    "{{ (\"a\" * N) | replace(\"a\", \"b\" * M) }}",
    "{{ (\"a\\n\" * N) | indent(M) }}",
    "{{ values.s | center(N * M) }}",
    "{{ \"%s\" | format(values.s * N) }}",
    "{{ values.s | b64encode | b64decode }}",
    "{{ values.s | b64decode }}",
    "{{ values.s | sha256 }}",
    "{{ safe_name(values.s, N) }}",
    "{{ dig(values, values.s) }}",
    "{{ dig(values, \"a.b.c\", N) }}",
    "{{ fail(values.s) }}",
    "{{ values.deep | to_yaml }}",
    "{{ values.deep | to_json }}",
    "{{ values.deep | tojson }}",
    "{{ values | pprint }}",
    "{{ values.s | to_yaml | nindent(N) }}",
    "{% for x in values.deep recursive %}{{ loop(x) if x is sequence else x }}{% endfor %}",
    "{% include \"gateway/hostile.yaml\" %}",
    "{% import \"gatewright/lib.yaml\" as lib %}{{ lib.name(gateway, values.s * N) }}",
    "{% import \"gatewright/lib.yaml\" as lib %}{{ lib.labels(gateway, {\"a\": values.s}) }}",
    "{{ gateway_labels(values) }}",
    "{{ gateway_labels(gateway) | items | list * N }}",
    "{{ values.s ~ values.s ~ values.s }}",
    "{{ values.s[N:M] }}{{ values.s[-N] if values.s else \"\" }}",
    "{{ values.s | int }}{{ values.s | float }}",
    "{{ N ** M }}",
    "{{ N // 0 }}",
    "{{ N % 0 }}",
    "{{ (2 ** 62) * (2 ** 62) }}",
    "{{ -9223372036854775808 // -1 }}",
    "{{ range(N, -N, -1) | list | length }}",
    "{{ values.s | urlencode }}{{ values.s | escape }}{{ values.s | title }}",
    "{{ values.s | split(\"\") | list | length }}",
    "{{ values.s | wordcount }}{{ values.s | lines | list }}",
    "{{ dict(a=values.s) | dictsort }}",
    "{{ namespace() }}{{ debug() | length }}",
];

fn hostile_source() -> impl Strategy<Value = String> {
    let num = prop_oneof![
        3 => 0i64..70,
        2 => 0i64..200_000,
        1 => prop::sample::select(vec![1_000_000i64, 100_000_000, 1_000_000_000, i64::from(i32::MAX), 1i64 << 40, i64::MAX, -1, i64::MIN]),
    ];
    let snippet = (prop::sample::select(HOSTILE), num.clone(), num).prop_map(|(s, n, m)| {
        s.replace('N', &format!("({n})"))
            .replace('M', &format!("({m})"))
    });
    prop::collection::vec(snippet, 1..4).prop_map(|v| v.join("\n"))
}

/// Garbage: tokens of the template language, YAML and odd characters, in any order.
fn garbage_source() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        3 => prop::sample::select(vec![
            "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "for", "in", "endfor", "if", "else", "endif",
            "macro", "endmacro", "set", "include", "import", "from", "extends", "block", "endblock", "call",
            "filter", "with", "raw", "endraw", "loop", "super()", "caller()", "range(9)", "values", "values.s",
            "gateway", "route", "resources", "resources.x", "self", "x", "=", "~", "*", "**", "|", "(", ")",
            "[", "]", "{", "}", ".", ",", ":", "'", "\"", "\n", " ", "-", "1", "0", "None", "none", "true",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: g}\n", "---\n", "...\n", "&a", "*a", "!!map",
        ]).prop_map(str::to_owned),
        1 => prop::sample::select(SPECIAL).prop_map(str::to_owned),
        1 => user_string(),
    ];
    prop::collection::vec(token, 0..40).prop_map(|v| v.concat())
}

fn hostile_case(
    gateway_src: &str,
    route_src: &str,
    ready_when: Option<&str>,
    s: &str,
) -> Result<(), TestCaseError> {
    let values = json!({"s": s, "deep": deep_value(40, s)});
    let snap = world(
        &[Tpl {
            name: "hostile".into(),
            source: gateway_src.into(),
            ready_when: ready_when.map(str::to_owned),
        }],
        &[Tpl {
            name: "rhostile".into(),
            source: route_src.into(),
            ready_when: None,
        }],
        &[],
        &values,
        &BTreeMap::new(),
        s,
    );
    if let Some(bp) = snap.blueprint("fuzz")
        && let Err(errors) = &bp.prepared
    {
        for e in errors {
            prop_assert!(
                !e.message.is_empty() && !e.category.is_empty(),
                "unclear blueprint error {:?}",
                e
            );
        }
    }
    let (p, rp) = plan(&snap)?;
    check_errors(&p, rp.as_ref())?;
    // With a live child, readiness expressions run too.
    if let Some(c) = p.children.first() {
        let mut snap = snap;
        snap.put_child(gatewright::simulate::as_ready(&c.object));
        plan(&snap)?;
    }
    Ok(())
}

// ---------------------------------------------------------------- the tests

#[test]
fn user_values_round_trip_through_templates() {
    let mut runner = TestRunner::new(crate::config(
        128,
        "proptest-regressions/prop-round-trip.txt",
    ));
    let deep = (0usize..100, user_string()).prop_map(|(d, s)| deep_value(d, &s));
    let huge = prop_oneof![
        9 => user_string(),
        1 => (prop::sample::select(SPECIAL), 100_000usize..700_000).prop_map(|(s, n)| {
            let unit = if s.is_empty() { "y" } else { s };
            unit.repeat(n / unit.len() + 1)
        }),
    ];
    let result = runner.run(
        &(huge, user_value(), deep, user_string()),
        |(s, v, deep, path)| round_trip_case(&s, &v, &deep, &path),
    );
    crate::finish("round trip of user values", &runner, result);
}

#[test]
fn children_stay_in_their_place_whatever_templates_write() {
    let mut runner = TestRunner::new(crate::config(
        160,
        "proptest-regressions/prop-placement.txt",
    ));
    let cs = prop::sample::subsequence(
        vec![
            ("elbv2.aws.upbound.io", "LB"),
            ("", "Namespace"),
            ("rbac.authorization.k8s.io", "ClusterRole"),
        ],
        0..3,
    );
    let infra = prop::collection::btree_map(
        prop_oneof![
            Just(labels::MANAGED_BY.to_owned()),
            Just(labels::PARENT_UID.to_owned()),
            "[a-z]{1,6}"
        ],
        "[a-z0-9]{0,10}",
        0..3,
    );
    let result = runner.run(
        &(
            prop::collection::vec(placed(), 1..4),
            cs,
            infra,
            any::<bool>(),
        ),
        |(objs, cs, infra, in_route)| placement_case(&objs, &cs, &infra, in_route),
    );
    crate::finish("placement of rendered objects", &runner, result);
}

#[test]
fn hostile_and_garbage_templates_end_in_bounded_time_without_panic() {
    let mut runner = TestRunner::new(crate::config(96, "proptest-regressions/prop-hostile.txt"));
    let src = prop_oneof![3 => hostile_source(), 1 => garbage_source()];
    let ready = prop::option::weighted(
        0.3,
        prop_oneof![
            hostile_source(),
            garbage_source(),
            Just("object.status.x == 1".to_owned())
        ],
    );
    let result = runner.run(
        &(src.clone(), src, ready, user_string()),
        |(g, r, ready, s)| hostile_case(&g, &r, ready.as_deref(), &s),
    );
    crate::finish("hostile and garbage templates", &runner, result);
    println!(
        "slowest plan of one Gateway and its route: {:?} (bound {WALL_CLOCK_BOUND:?})",
        Duration::from_micros(SLOWEST_PLAN_US.load(Ordering::Relaxed))
    );
}

/// Every hostile snippet with extreme numbers, deterministically. Found by the property
/// above: `nindent` with a width of 2^37 allocated its padding (131 GB) before fuel could
/// stop it, and the process aborted.
#[test]
fn every_hostile_snippet_with_extreme_numbers_is_bounded() {
    let extremes = [0i64, 64, 200_000, 1 << 31, 1 << 37, i64::MAX, -1, i64::MIN];
    for snippet in HOSTILE {
        for (n, m) in extremes.iter().zip(extremes.iter().rev()) {
            let src = snippet
                .replace('N', &format!("({n})"))
                .replace('M', &format!("({m})"));
            hostile_case(&src, &src, None, "a\nb").unwrap_or_else(|e| panic!("{src}: {e}"));
        }
    }
    println!(
        "slowest plan of one Gateway and its route: {:?} (bound {WALL_CLOCK_BOUND:?})",
        Duration::from_micros(SLOWEST_PLAN_US.load(Ordering::Relaxed))
    );
}
