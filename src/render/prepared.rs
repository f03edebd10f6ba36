//! A blueprint made ready to plan with: compiled templates and their dependency graphs,
//! built once per blueprint change.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{GatewayClassBlueprintSpec, TemplateEntry};
use crate::render::graph::Graph;
use crate::render::{Compiled, RenderError, TemplateSet};

/// See the module docs.
#[derive(Debug)]
pub struct Prepared {
    /// Blueprint name.
    pub name: String,
    /// The compiled environment.
    pub compiled: Compiled,
    /// The spec it was built from.
    pub spec: GatewayClassBlueprintSpec,
    /// Order of the Gateway templates.
    pub gateway_graph: Graph,
    /// Order of the route templates.
    pub route_graph: Graph,
    /// Gateway templates the status template reads.
    pub status_deps: BTreeSet<String>,
    /// The kinds each template names literally, with their lines (see
    /// [`crate::render::output::literal_kinds`]), judged against kinds' scopes by
    /// [`Prepared::scope_errors`].
    pub literal_kinds: Vec<(String, usize, crate::api::GroupKind)>,
    /// The context variables (top-level names) the route templates read, or `None` when
    /// that cannot be told from their text: a route template includes, extends or
    /// imports a template other than the library (see [`crate::plan::memo`]).
    pub route_reads: Option<BTreeSet<String>>,
    /// The same for the Gateway templates and the status template.
    pub gateway_reads: Option<BTreeSet<String>>,
    /// The Gateway templates by name.
    gateway_entries: BTreeMap<String, TemplateEntry>,
    /// The route templates by name.
    route_entries: BTreeMap<String, TemplateEntry>,
    parsed: std::sync::Mutex<ParsedOutputs>,
    /// The route templates whose text is a function of the route and of the Gateway's
    /// part of the context route templates read (see [`super::remembered`]).
    keyed_route_templates: BTreeSet<String>,
    /// Their rendered texts by the hash of their inputs.
    renders: super::remembered::Renders,
    /// Set once a template of this blueprint read a Gateway's `status` (see
    /// [`Prepared::reads_gateway_status`]).
    gateway_status_read: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Parsed outputs remembered per blueprint (rendered text -> objects): re-plans of an
/// unchanged parent render the same text, and parsing YAML is most of a plan's cost.
/// They are kept as JSON text, parsed again on a hit (several times faster than the
/// YAML, and a fraction of the memory a parsed object holds).
const PARSED_CACHE_ENTRIES: usize = 4096;

/// The most text the parsed outputs of one blueprint hold: a Gateway template that lists
/// every hostname (a DNSEndpoint) renders a new text of a few hundred kilobytes for each
/// route added, and counting entries alone let 3,000 of them hold 600 MB.
const PARSED_CACHE_BYTES: usize = 16 << 20;

/// An output larger than this is not remembered: a text that large changes with the
/// routes, and would push out many small ones.
const PARSED_CACHE_LARGEST: usize = PARSED_CACHE_BYTES / 16;

/// See [`PARSED_CACHE_ENTRIES`].
#[derive(Debug, Default)]
struct ParsedOutputs {
    texts: std::collections::HashMap<u64, Box<str>>,
    bytes: usize,
}

impl ParsedOutputs {
    /// Remembers `json` for `key`, within [`PARSED_CACHE_ENTRIES`] and
    /// [`PARSED_CACHE_BYTES`] (forgetting everything when full: re-plans of unchanged
    /// parents fill it again with what they read).
    fn put(&mut self, key: u64, json: String) {
        if json.len() > PARSED_CACHE_LARGEST {
            return;
        }
        if self.texts.len() >= PARSED_CACHE_ENTRIES || self.bytes + json.len() > PARSED_CACHE_BYTES
        {
            self.texts.clear();
            self.bytes = 0;
        }
        self.bytes += json.len();
        if let Some(old) = self.texts.insert(key, json.into_boxed_str()) {
            self.bytes -= old.len();
        }
    }
}

impl Prepared {
    /// Whether any template is replaced make-before-break.
    #[must_use]
    pub fn has_make_before_break(&self) -> bool {
        self.all_entries().any(|e| {
            e.rollout
                .as_ref()
                .is_some_and(crate::api::Rollout::make_before_break)
        })
    }

    /// Whether any template is placed in member clusters (`placement`).
    #[must_use]
    pub fn places(&self) -> bool {
        self.all_entries().any(|e| e.placement.is_some())
    }

    /// Every template entry, the Gateway's then the routes'.
    fn all_entries(&self) -> impl Iterator<Item = &TemplateEntry> {
        self.gateway_entries
            .values()
            .chain(self.route_entries.values())
    }

    /// Whether any route template drains its objects (`drain`).
    #[must_use]
    pub fn route_drains(&self) -> bool {
        self.route_entries.values().any(|e| e.drain.is_some())
    }

    /// Whether any template drains its objects (`drain`).
    #[must_use]
    pub fn has_drains(&self) -> bool {
        self.all_entries().any(|e| e.drain.is_some())
    }

    /// Compiles and orders a blueprint's templates.
    ///
    /// # Errors
    /// Every syntax error, unknown variable, unknown template and cycle found.
    pub fn new(name: &str, spec: &GatewayClassBlueprintSpec) -> Result<Self, Vec<RenderError>> {
        let compiled = Compiled::compile(name, spec)?;
        let mut errors = Vec::new();
        let gateway_graph = Graph::build(&compiled, TemplateSet::Gateway, &spec.gateway_templates)
            .unwrap_or_else(|e| {
                errors.extend(e);
                Graph::default()
            });
        let route_graph = Graph::build(&compiled, TemplateSet::Route, &spec.route_templates)
            .unwrap_or_else(|e| {
                errors.extend(e);
                Graph::default()
            });
        let status_deps = match &spec.status {
            Some(s) => Graph::status_deps(&compiled, &s.template, &spec.gateway_templates)
                .unwrap_or_else(|e| {
                    errors.extend(e);
                    BTreeSet::new()
                }),
            None => BTreeSet::new(),
        };
        for e in spec.gateway_templates.iter().chain(&spec.route_templates) {
            if let Some(r) = &e.rollout {
                errors.extend(rollout_errors(name, &e.name, r));
            }
        }
        errors.extend(route_kind_errors(name, spec));
        errors.extend(placement_errors(name, spec));
        errors.extend(adopt_errors(name, spec));
        if !errors.is_empty() {
            return Err(errors);
        }
        let by_name = |t: &[TemplateEntry]| -> BTreeMap<String, TemplateEntry> {
            t.iter().map(|e| (e.name.clone(), e.clone())).collect()
        };
        let gateway_entries = by_name(&spec.gateway_templates);
        let route_entries = by_name(&spec.route_templates);
        let route_reads = reads_of(&compiled, TemplateSet::Route, &spec.route_templates);
        let gateway_reads = reads_of(&compiled, TemplateSet::Gateway, &spec.gateway_templates)
            .and_then(|mut r| {
                let status = spec.status.as_ref().map_or("", |s| s.template.as_str());
                reads_itself_only(status).then(|| {
                    r.extend(
                        compiled
                            .reads(
                                TemplateSet::Status,
                                crate::render::engine::STATUS_TEMPLATE,
                                status,
                            )
                            .into_iter()
                            .map(|p| p.split('.').next().unwrap_or_default().to_owned()),
                    );
                    r
                })
            });
        let keyed_route_templates =
            super::remembered::keyed_route_templates(&compiled, spec, route_reads.as_ref());
        Ok(Self {
            name: name.to_owned(),
            compiled,
            spec: spec.clone(),
            gateway_graph,
            route_graph,
            status_deps,
            literal_kinds: literal_kinds_of(spec),
            route_reads,
            gateway_reads,
            gateway_entries,
            route_entries,
            parsed: std::sync::Mutex::new(ParsedOutputs::default()),
            keyed_route_templates,
            renders: super::remembered::Renders::default(),
            gateway_status_read: std::sync::Arc::default(),
        })
    }

    /// Whether route template `name`'s text is remembered by its inputs (see
    /// [`Self::remembered_render`]).
    #[must_use]
    pub fn keys_route_render(&self, name: &str) -> bool {
        self.keyed_route_templates.contains(name)
    }

    /// Whether any route template's text is remembered by its inputs.
    #[must_use]
    pub fn keys_route_renders(&self) -> bool {
        !self.keyed_route_templates.is_empty()
    }

    /// A hash of `parts` in this blueprint's keyed hasher.
    #[must_use]
    pub fn render_key(&self, parts: impl std::hash::Hash) -> u64 {
        self.renders.key(parts)
    }

    /// Whether a template of this blueprint read a Gateway's `status` (or the metadata a
    /// status write changes: `resourceVersion`, `managedFields`) since it was prepared.
    /// Until one does, a route plan does not depend on them (they change with every
    /// route that attaches): the route memo and remembered renders leave them out. The first read is seen during that render, so the plans made
    /// in that pass are made again in the next one, with the status.
    #[must_use]
    pub fn reads_gateway_status(&self) -> bool {
        self.gateway_status_read
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What a Gateway's template value reports its `status` reads to (see
    /// [`Prepared::reads_gateway_status`]).
    #[must_use]
    pub fn gateway_status_watch(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        std::sync::Arc::clone(&self.gateway_status_read)
    }

    /// A hasher of this blueprint's keyed kind, to hash values part by part.
    #[must_use]
    pub fn render_hasher(&self) -> std::hash::DefaultHasher {
        self.renders.hasher()
    }

    /// The objects a keyed route template rendered for the inputs hashed as `key` (see
    /// [`crate::plan::route`]), parsed from the JSON they were remembered as: a route whose
    /// template inputs did not change is not rendered again, while its readiness,
    /// ownership and pruning are judged anew.
    #[must_use]
    pub fn remembered_render(&self, key: u64) -> Option<Vec<serde_json::Value>> {
        self.renders
            .get(key)
            .and_then(|json| serde_json::from_str(&json).ok())
    }

    /// Remembers the objects rendered for `key`, as JSON (see [`Self::remembered_render`]).
    pub fn remember_render(&self, key: u64, objects: &[serde_json::Value]) {
        if let Ok(json) = serde_json::to_string(objects) {
            self.renders.put(key, json.into());
        }
    }

    /// The templates that name, literally, a kind the blueprint may not create: a
    /// cluster-scoped kind missing from `clusterScopedKinds`, or a listed kind that is
    /// namespaced. Kinds of unknown scope pass here (rendering reports them).
    #[must_use]
    pub fn scope_errors(&self, scopes: &crate::render::scope::KindScopes) -> Vec<RenderError> {
        scope_errors(&self.name, &self.spec, &self.literal_kinds, scopes)
    }

    /// A template entry.
    #[must_use]
    pub fn entry(&self, set: TemplateSet, name: &str) -> Option<&TemplateEntry> {
        match set {
            TemplateSet::Gateway => self.gateway_entries.get(name),
            TemplateSet::Route => self.route_entries.get(name),
            TemplateSet::Status => None,
        }
    }

    /// The checked objects of a rendered text, parsed once per distinct (template,
    /// document): a text of several documents (a template's `for` loop: one DNSEndpoint
    /// per group of names) is looked up document by document, so a change of one
    /// document parses that one alone. A text whose documents do not all parse on their
    /// own is parsed whole, for its error to name the line of the whole text.
    ///
    /// # Errors
    /// See [`crate::render::output::objects_from_render`].
    pub fn objects(
        &self,
        text: &str,
        at: crate::render::output::Placement<'_>,
    ) -> Result<Vec<serde_json::Value>, RenderError> {
        let documents = split_documents(text);
        if documents.len() < 2 || text.len() > crate::render::output::MAX_RENDERED_BYTES {
            return self.document_objects(text, at);
        }
        let mut out = Vec::new();
        for d in documents {
            match self.document_objects(d, at) {
                Ok(o) => out.extend(o),
                Err(_) => return crate::render::output::objects_from_render(text, at),
            }
        }
        if out.len() > crate::render::output::MAX_OBJECTS_PER_TEMPLATE {
            return crate::render::output::objects_from_render(text, at);
        }
        Ok(out)
    }

    /// [`Prepared::objects`] of one text, remembered whole.
    fn document_objects(
        &self,
        text: &str,
        at: crate::render::output::Placement<'_>,
    ) -> Result<Vec<serde_json::Value>, RenderError> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (at.template, at.namespace, text).hash(&mut h);
        let key = h.finish();
        let hit = self.parsed.lock().ok().and_then(|c| {
            c.texts
                .get(&key)
                .and_then(|json| serde_json::from_str::<Vec<serde_json::Value>>(json).ok())
        });
        if let Some(objects) = hit {
            return Ok(objects);
        }
        let objects = crate::render::output::objects_from_render(text, at)?;
        if let (Ok(json), Ok(mut c)) = (serde_json::to_string(&objects), self.parsed.lock()) {
            c.put(key, json);
        }
        Ok(objects)
    }

    /// The graph of a set.
    #[must_use]
    pub fn graph(&self, set: TemplateSet) -> &Graph {
        match set {
            TemplateSet::Route => &self.route_graph,
            _ => &self.gateway_graph,
        }
    }
}

/// `text` cut before each line that is a bare document start (`---` alone at the start
/// of a line: in YAML always a document marker, even where a block scalar was open), the
/// pieces blank or holding only comments left out; anchors do not cross documents, so
/// each piece parses as it would in the whole text.
fn split_documents(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if at > start && line.trim_end() == "---" {
            out.push(&text[start..at]);
            start = at;
        }
        at += line.len();
    }
    out.push(&text[start..]);
    out.retain(|d| {
        d.lines()
            .any(|l| !matches!(l.trim(), "" | "---") && !l.trim_start().starts_with('#'))
    });
    out
}

/// See [`Prepared::route_reads`].
fn reads_of(
    compiled: &Compiled,
    set: TemplateSet,
    templates: &[TemplateEntry],
) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for t in templates {
        if !reads_itself_only(&t.template) {
            return None;
        }
        out.extend(
            compiled
                .reads(set, &t.name, &t.template)
                .into_iter()
                .map(|p| p.split('.').next().unwrap_or_default().to_owned()),
        );
    }
    Some(out)
}

/// Whether a template's text reads no other template than the library: no `include`,
/// `extends`, `from` or `import` tag but `import` of the library.
fn reads_itself_only(source: &str) -> bool {
    let mut rest = source;
    while let Some(i) = rest.find("{%") {
        rest = &rest[i + 2..];
        let tag = rest
            .split("%}")
            .next()
            .unwrap_or_default()
            .trim_start_matches(['-', '+'])
            .trim_start();
        let word = tag.split_whitespace().next().unwrap_or_default();
        let library = [
            format!("\"{}\"", crate::render::engine::LIBRARY_NAME),
            format!("'{}'", crate::render::engine::LIBRARY_NAME),
        ];
        match word {
            "include" | "extends" | "from" => return false,
            "import" => {
                let what = tag["import".len()..].trim_start();
                if !library.iter().any(|l| what.starts_with(l.as_str())) {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// `adopt` where it cannot apply: on a route template (a route's children are not moved
/// between kinds), or with a `release` that is not a JSON object.
fn adopt_errors(blueprint: &str, spec: &GatewayClassBlueprintSpec) -> Vec<RenderError> {
    let err = |template: &str, m: &str| {
        RenderError::new(blueprint, template, None, m.to_owned()).with_category("InvalidAdopt")
    };
    let on_routes = spec
        .route_templates
        .iter()
        .filter(|e| e.adopt.is_some())
        .map(|e| err(&e.name, "adopt: only a Gateway template adopts objects"));
    let bad_release = spec
        .gateway_templates
        .iter()
        .filter(|e| e.adopt.as_ref().is_some_and(|a| !a.release.is_object()))
        .map(|e| err(&e.name, "adopt.release: a JSON merge patch, an object"));
    on_routes.chain(bad_release).collect()
}

impl Prepared {
    /// The kinds Gateway templates adopt objects of (`adopt.from`): `(apiVersion, kind)`.
    pub fn adopted_kinds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.gateway_entries
            .values()
            .filter_map(|e| e.adopt.as_ref())
            .flat_map(|a| &a.from)
            .map(|k| (k.api_version.as_str(), k.kind.as_str()))
    }
}

/// Placements whose selector cannot be evaluated: an expression whose operator is unknown,
/// or whose values do not fit the operator. (Gateway and route templates alike.)
fn placement_errors(blueprint: &str, spec: &GatewayClassBlueprintSpec) -> Vec<RenderError> {
    let err = |template: &str, m: String| {
        RenderError::new(blueprint, template, None, m).with_category("InvalidPlacement")
    };
    let mut out = Vec::new();
    for e in spec.gateway_templates.iter().chain(&spec.route_templates) {
        let Some(p) = &e.placement else { continue };
        for x in p.clusters.match_expressions.iter().flatten() {
            let needs_values = matches!(x.operator.as_str(), "In" | "NotIn");
            let has_values = x.values.as_ref().is_some_and(|v| !v.is_empty());
            if !matches!(
                x.operator.as_str(),
                "In" | "NotIn" | "Exists" | "DoesNotExist"
            ) {
                out.push(err(
                    &e.name,
                    format!(
                        "placement.clusters: operator {:?} of key {:?} is not In, NotIn, Exists or DoesNotExist",
                        x.operator, x.key
                    ),
                ));
            } else if needs_values != has_values {
                out.push(err(
                    &e.name,
                    format!(
                        "placement.clusters: key {:?}: operator {} {} values",
                        x.key,
                        x.operator,
                        if needs_values { "needs" } else { "takes no" }
                    ),
                ));
            }
        }
    }
    out
}

/// What is wrong with a template's rollout policy: `fields` or `timeoutSeconds` without
/// `MakeBeforeBreak` (they would be ignored), or a field path with an empty segment.
/// Route kinds named where they cannot apply: on a Gateway template, a kind we do not
/// implement, or a route template's kind the class does not accept (`routeKinds`).
fn route_kind_errors(blueprint: &str, spec: &GatewayClassBlueprintSpec) -> Vec<RenderError> {
    let err = |template: &str, m: String| {
        RenderError::new(blueprint, template, None, m).with_category("InvalidRouteKinds")
    };
    let known = |k: &str| crate::api::ROUTE_KIND_NAMES.contains(&k);
    let mut out = Vec::new();
    for e in &spec.gateway_templates {
        if !e.kinds.is_empty() {
            out.push(err(
                &e.name,
                "kinds applies to route templates only: a Gateway template renders once per Gateway".to_owned(),
            ));
        }
    }
    for k in spec.route_kinds.iter().filter(|k| !known(k)) {
        out.push(err(
            "routeKinds",
            format!(
                "routeKinds: {k:?} is not a route kind; use {}",
                crate::api::ROUTE_KIND_NAMES.join(", ")
            ),
        ));
    }
    let accepted = spec.accepted_route_kinds();
    for e in &spec.route_templates {
        for k in e.route_kinds() {
            if !known(k) {
                out.push(err(
                    &e.name,
                    format!(
                        "kinds: {k:?} is not a route kind; use {}",
                        crate::api::ROUTE_KIND_NAMES.join(", ")
                    ),
                ));
            } else if !accepted.contains(&k) {
                out.push(err(
                    &e.name,
                    format!("kinds: {k} is not in spec.routeKinds, so no Gateway of the class accepts a route this template would render for"),
                ));
            }
        }
    }
    out
}

fn rollout_errors(blueprint: &str, template: &str, r: &crate::api::Rollout) -> Vec<RenderError> {
    let mut out = Vec::new();
    let err =
        |m: String| RenderError::new(blueprint, template, None, m).with_category("InvalidRollout");
    if !r.make_before_break()
        && (!r.fields.is_empty() || r.timeout_seconds.is_some() || r.per.is_some())
    {
        out.push(err(
            "rollout.fields, rollout.per and rollout.timeoutSeconds take effect only with strategy MakeBeforeBreak".to_owned(),
        ));
    }
    for f in &r.fields {
        if f.split('.').any(str::is_empty) {
            out.push(err(format!(
                "rollout.fields: {f:?} is not a dotted path such as spec.dnsNames"
            )));
        }
    }
    out
}

/// Every template's literal kinds, in blueprint order.
#[must_use]
pub fn literal_kinds_of(
    spec: &GatewayClassBlueprintSpec,
) -> Vec<(String, usize, crate::api::GroupKind)> {
    spec.gateway_templates
        .iter()
        .chain(&spec.route_templates)
        .flat_map(|e| {
            crate::render::output::literal_kinds(&e.template)
                .into_iter()
                .map(|(line, gk)| (e.name.clone(), line, gk))
        })
        .collect()
}

/// See [`Prepared::scope_errors`]; also for a blueprint that did not compile.
#[must_use]
pub fn scope_errors(
    blueprint: &str,
    spec: &GatewayClassBlueprintSpec,
    literal: &[(String, usize, crate::api::GroupKind)],
    scopes: &crate::render::scope::KindScopes,
) -> Vec<RenderError> {
    literal
        .iter()
        .filter_map(|(template, line, gk)| {
            crate::render::output::scope_problem(gk, &spec.cluster_scoped_kinds, scopes)
                .err()
                .map(|m| {
                    RenderError::new(blueprint, template, Some(*line), m)
                        .with_category("ClusterScopedKind")
                })
        })
        .collect()
}

#[cfg(test)]
mod parsed_outputs_tests {
    use super::*;

    #[test]
    fn documents_are_cut_at_bare_document_starts() {
        let text =
            "# a comment\n\n---\na: 1\n---\nb: |\n  x\n  ---\n--- # not bare\nc: 3\n---   \n\n";
        assert_eq!(
            split_documents(text),
            [
                "---\na: 1\n",
                "---\nb: |\n  x\n  ---\n--- # not bare\nc: 3\n"
            ]
        );
        assert_eq!(split_documents("a: 1\n"), ["a: 1\n"]);
        assert!(split_documents("\n---\n").is_empty());
    }

    #[test]
    fn a_text_of_documents_parses_as_a_whole_and_document_by_document() {
        let spec: crate::api::GatewayClassBlueprintSpec =
            serde_saphyr::from_str("gatewayTemplates:\n- name: t\n  template: \"\"\n").unwrap();
        let p = Prepared::new("bp", &spec).unwrap();
        let at = crate::render::output::Placement {
            blueprint: "bp",
            template: "t",
            namespace: "ns",
            cluster_scoped: &[],
        };
        let doc = |name: &str, n: usize| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{n: \"{n}\"}}\n"
            )
        };
        let whole = |t: &str| crate::render::output::objects_from_render(t, at).unwrap();
        let first = format!("{}{}{}", doc("a", 1), doc("b", 1), doc("c", 1));
        assert_eq!(p.objects(&first, at).unwrap(), whole(&first));
        // One document changed: the others come from what was parsed before.
        let second = format!("{}{}{}", doc("a", 1), doc("b", 2), doc("c", 1));
        let remembered = p.parsed.lock().unwrap().texts.len();
        assert_eq!(p.objects(&second, at).unwrap(), whole(&second));
        assert_eq!(p.parsed.lock().unwrap().texts.len(), remembered + 1);
        // A document that does not parse on its own: the whole text's error, its line.
        let broken = format!(
            "{}{}---\napiVersion: v1\nkind: [\n",
            doc("a", 1),
            doc("b", 2)
        );
        let err = p.objects(&broken, at).unwrap_err();
        let expected = crate::render::output::objects_from_render(&broken, at).unwrap_err();
        assert_eq!(err.message, expected.message);
        // More objects than a template may render, counted over every document.
        let many: String = (0..=crate::render::output::MAX_OBJECTS_PER_TEMPLATE)
            .map(|i| doc(&format!("m{i}"), i))
            .collect();
        assert!(p.objects(&many, at).is_err());
    }

    #[test]
    fn parsed_outputs_stay_within_their_bytes() {
        let mut c = ParsedOutputs::default();
        let big = "x".repeat(PARSED_CACHE_LARGEST / 2);
        for k in 0..200 {
            c.put(k, big.clone());
            assert!(c.bytes <= PARSED_CACHE_BYTES, "{} bytes after {k}", c.bytes);
            assert_eq!(c.bytes, c.texts.values().map(|t| t.len()).sum::<usize>());
        }
        c.put(1000, "y".repeat(PARSED_CACHE_LARGEST + 1));
        assert!(!c.texts.contains_key(&1000), "too large to remember");
        c.put(7, "small".into());
        c.put(7, "small again".into());
        assert_eq!(c.texts.get(&7).map(|t| t.len()), Some(11));
        assert_eq!(c.bytes, c.texts.values().map(|t| t.len()).sum::<usize>());
    }
}
