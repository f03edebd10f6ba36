//! What the snapshot keeps of each object: the key of any object, the entries of its maps
//! (Gateways, routes and live children as JSON text, blueprints with what compiling them
//! gave), and the stamps that tell one version of an object from another.

use std::sync::Arc;

use gateway_api::apis::standard::gateways::Gateway;
use serde_json::Value;

use crate::api::GatewayClassBlueprint;
use crate::gateway::routes::RouteView;
use crate::render::RenderError;
use crate::render::labels;
use crate::render::prepared::Prepared;

/// Identity of any object: apiVersion, kind, namespace ("" when cluster-scoped), name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// `apiVersion`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The member cluster it lives in, for an object a placed template rendered (its
    /// `gatewright.dev/cluster` annotation); empty: the parent's own cluster.
    pub cluster: String,
}

impl ObjectKey {
    /// The key of a JSON object.
    #[must_use]
    pub fn of(obj: &Value) -> Self {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        Self {
            api_version: s(&obj["apiVersion"]),
            kind: s(&obj["kind"]),
            namespace: s(&obj["metadata"]["namespace"]),
            name: s(&obj["metadata"]["name"]),
            cluster: s(&obj["metadata"]["annotations"][crate::render::labels::CLUSTER]),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)?;
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)?;
        }
        if !self.cluster.is_empty() {
            write!(f, " in cluster {}", self.cluster)?;
        }
        Ok(())
    }
}

/// A blueprint and what compiling it gave.
#[derive(Debug)]
pub struct BlueprintEntry {
    /// The object.
    pub object: GatewayClassBlueprint,
    /// Compiled templates and graphs, or every error found.
    pub prepared: Result<Arc<Prepared>, Vec<RenderError>>,
    /// The hash of its spec as a revision holds it
    /// ([`crate::api::GatewayClassBlueprintSpec::revision_hash`]).
    pub hash: String,
    /// What the previous release shipped in its place
    /// ([`crate::api::PREVIOUS_RELEASE_ANNOTATION`]), compiled, or why it cannot be read.
    pub previous: Option<Result<Arc<PreviousEntry>, String>>,
}

/// The spec a previous release shipped for a blueprint, and what compiling it gave: what
/// the Gateways that release converged render until the rollout reaches them.
#[derive(Debug)]
pub struct PreviousEntry {
    /// The release, for people and logs.
    pub release: String,
    /// The spec (its `rolloutPolicy` dropped: a revision has none).
    pub spec: crate::api::GatewayClassBlueprintSpec,
    /// The spec's revision hash.
    pub hash: String,
    /// Compiled templates and graphs, or every error found.
    pub prepared: Result<Arc<Prepared>, Vec<RenderError>>,
}

/// A blueprint revision and what compiling its template gave (under its blueprint's name,
/// so what it renders reads the same as what the blueprint renders).
#[derive(Debug)]
pub struct RevisionEntry {
    /// The object.
    pub object: crate::api::GatewayClassBlueprintRevision,
    /// Compiled templates and graphs, or every error found.
    pub prepared: Result<Arc<Prepared>, Vec<RenderError>>,
}

impl RevisionEntry {
    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or_default()
    }
}

/// A Gateway, typed and as JSON text (templates read the JSON; a plan parses it once:
/// see [`ChildEntry`] for why text).
#[derive(Debug)]
pub struct GatewayEntry {
    /// Typed.
    pub typed: Gateway,
    /// As the API returns it, minified.
    pub(super) text: Box<str>,
    /// `metadata.uid`, or a stable stand-in offline (see
    /// [`offline_uid`](super::offline_uid)), read once.
    pub uid: String,
}

impl GatewayEntry {
    /// The Gateway as the API returns it.
    #[must_use]
    pub fn json(&self) -> Value {
        parse(&self.text)
    }
}

/// A route of any supported kind, as the semantics see it and as JSON text (parsed when a
/// plan reads it: see [`ChildEntry`] for why text).
#[derive(Debug)]
pub struct RouteEntry {
    /// Route-kind independent view.
    pub view: RouteView,
    /// As the API returns it, minified.
    pub(super) text: Arc<str>,
    /// `metadata.uid`, or a stable stand-in offline, read once.
    pub uid: String,
    /// `apiVersion` as the text has it (what its children's owner reference names).
    pub api_version: Option<Box<str>>,
    /// Whether the text holds the route's `status` exactly as the API server sent it (the
    /// typed model dropped no field of it), so a status write may start from it.
    pub status_exact: bool,
}

impl RouteEntry {
    /// The route as the API returns it, as minified JSON text.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }
    /// The route as the API returns it.
    #[must_use]
    pub fn json(&self) -> Value {
        parse(&self.text)
    }
    /// The route as a template value that is parsed only if a template reads it.
    #[must_use]
    pub fn lazy_value(&self) -> minijinja::Value {
        crate::render::lazy::LazyJson::value(Arc::clone(&self.text))
    }
}

/// A ListenerSet, as the semantics see it and as the API returned it.
#[derive(Debug)]
pub struct ListenerSetEntry {
    /// The view the evaluation reads.
    pub view: crate::gateway::listenersets::ListenerSetView,
    /// As the API returns it.
    pub json: Value,
}

/// An object the snapshot keeps as text, parsed. It was serialized from a `Value`, so it
/// parses; `Null` stands for the impossible.
pub(super) fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// A live child as the snapshot keeps it: its minified JSON text, and what the indexes
/// and the write path read without parsing it. A parsed `serde_json::Value` of a
/// Kubernetes object takes 8 to 20 times its text (every map is a B-tree node of 11
/// slots), and a fleet's children are most of what the controller holds; a plan parses
/// the few it reads. The children of a Gateway with many routes are parsed once per
/// version and kept beside the text (shared, `Arc`) while a plan reads them: its own
/// children, which its remembered plan holds parsed anyway, and a route's until the
/// route's remembered plan is found applied, which then holds their text alone
/// ([`LiveText`]) and lets the parse go ([`ChildEntry::forget_parse`]; see "Memory" in
/// docs/architecture.md).
#[derive(Debug)]
pub(super) struct ChildEntry {
    pub(super) text: Arc<str>,
    /// The text parsed, once a plan that keeps it read it ([`ChildEntry::object_kept`]),
    /// until it is let go.
    parsed: std::sync::Mutex<Option<Arc<Value>>>,
    pub(super) parent_uid: Option<String>,
    pub(super) gateway_uid: Option<String>,
    pub(super) resource_version: Option<String>,
    /// Unique to this version of the object in this process (see [`next_stamp`]).
    pub(super) stamp: u64,
    /// This version is the answer to our own write, and no plan reads it back: its watch
    /// echo wakes no one (see [`super::Snapshot::put_own_write`]).
    pub(super) quiet: bool,
}

/// A number no object version held by any snapshot of this process had before: what a
/// memo of a plan records to know, without comparing objects, that what it read is
/// still what the snapshot holds (offline objects have no resourceVersion).
pub(super) fn next_stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl ChildEntry {
    pub(super) fn new(obj: &Value) -> Self {
        let s = |v: Option<&str>| v.map(str::to_owned);
        Self {
            text: serde_json::to_string(obj).unwrap_or_default().into(),
            parsed: std::sync::Mutex::new(None),
            parent_uid: s(labels::parent_uid(obj)),
            gateway_uid: s(labels::gateway_uid(obj)),
            resource_version: s(obj["metadata"]["resourceVersion"].as_str()),
            stamp: next_stamp(),
            quiet: false,
        }
    }

    /// The object, parsed (it was serialized from a `Value`, so it parses): the kept
    /// parse when there is one, else parsed anew.
    pub(super) fn object(&self) -> Arc<Value> {
        self.kept()
            .as_ref()
            .map_or_else(|| Arc::new(parse(&self.text)), Arc::clone)
    }

    /// The object, parsed once and kept for every later read of this version (until
    /// [`ChildEntry::forget_parse`]).
    pub(super) fn object_kept(&self) -> Arc<Value> {
        Arc::clone(
            self.kept()
                .get_or_insert_with(|| Arc::new(parse(&self.text))),
        )
    }

    /// Lets the kept parse go: the next read parses anew.
    pub(super) fn forget_parse(&self) {
        self.kept().take();
    }

    /// Whether it holds a kept parse.
    #[cfg(test)]
    pub(super) fn is_kept(&self) -> bool {
        self.kept().is_some()
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Option<Arc<Value>>> {
        self.parsed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The object's text, shared.
    pub(super) fn live_text(&self) -> LiveText {
        LiveText(Arc::clone(&self.text))
    }
}

/// A live child as a remembered plan holds it: the snapshot's text of the version the plan
/// read (shared with the snapshot, so holding it costs nothing), parsed when read. Two are
/// equal when their texts are (the same object serialized the same way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveText(Arc<str>);

impl LiveText {
    /// The object, parsed anew.
    #[must_use]
    pub fn parse(&self) -> Arc<Value> {
        Arc::new(parse(&self.0))
    }
}

/// A live child as one pass reads it: parsed at most once in the pass, and dropped with it.
#[derive(Debug)]
pub struct Live {
    text: Option<LiveText>,
    parsed: std::sync::OnceLock<Arc<Value>>,
}

impl Live {
    /// One already parsed.
    #[must_use]
    pub fn parsed(object: Arc<Value>) -> Self {
        Self {
            text: None,
            parsed: std::sync::OnceLock::from(object),
        }
    }
    /// One to parse from its text, if it is read.
    #[must_use]
    pub fn text(text: LiveText) -> Self {
        Self {
            text: Some(text),
            parsed: std::sync::OnceLock::new(),
        }
    }
    /// The object (parsed on the first read).
    #[must_use]
    pub fn object(&self) -> &Arc<Value> {
        self.parsed.get_or_init(|| {
            self.text
                .as_ref()
                .map_or_else(|| Arc::new(Value::Null), LiveText::parse)
        })
    }
    /// [`Live::object`], borrowed.
    #[must_use]
    pub fn value(&self) -> &Value {
        self.object()
    }
}
