//! The file source of the snapshot: every YAML document under the given files and
//! folders (recursively, `.yaml`/`.yml`), sorted by path so output is stable.
//!
//! Objects carrying our managed-by and parent-uid labels are live children, so
//! `resources.<template>` and readiness can be simulated offline. Namespaces that objects
//! live in get the `kubernetes.io/metadata.name` label the API server would give them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Snapshot;
use crate::render::output::{api_group, parse_documents};

/// Largest input file read.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The input could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A path could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not YAML, or a document is not a valid object of its kind.
    #[error("failed to parse {path}: {message}")]
    Parse {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What loading found besides the objects.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Documents of kinds the planner does not read, as `path: Kind name`.
    pub ignored: Vec<String>,
    /// Blueprint objects in load order, for `gatewright check`.
    pub blueprint_names: Vec<String>,
}

/// Lists the YAML files of `paths`, recursively, sorted within each folder.
///
/// # Errors
/// A path that cannot be read.
pub fn yaml_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for p in paths {
        collect(p, &mut out, true)?;
    }
    Ok(out)
}

fn collect(p: &Path, out: &mut Vec<PathBuf>, explicit: bool) -> Result<(), LoadError> {
    let meta = std::fs::metadata(p).map_err(|source| LoadError::Read {
        path: p.to_owned(),
        source,
    })?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|source| LoadError::Read {
                path: p.to_owned(),
                source,
            })?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for e in entries {
            collect(&e, out, false)?;
        }
    } else if explicit || matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
        out.push(p.to_owned());
    }
    Ok(())
}

/// One document of a file: where it came from, its place in the file, the object (its
/// namespace defaulted to `default` when its kind is namespaced and it names none).
pub struct Document {
    /// The file.
    pub path: PathBuf,
    /// 1-based place in the file.
    pub index: usize,
    /// The object.
    pub object: Value,
}

impl Document {
    /// A parse error about this document.
    fn error(&self, m: &str) -> LoadError {
        LoadError::Parse {
            path: self.path.clone(),
            message: format!("document {}: {m}", self.index),
        }
    }
}

/// Every document of `paths`, checked to be an object with apiVersion and kind.
///
/// # Errors
/// The first path that cannot be read or parsed.
pub fn documents(paths: &[PathBuf]) -> Result<Vec<Document>, LoadError> {
    let mut out = Vec::new();
    for path in yaml_files(paths)? {
        let size = std::fs::metadata(&path)
            .map_err(|source| LoadError::Read {
                path: path.clone(),
                source,
            })?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(LoadError::Parse {
                path,
                message: format!("{size} bytes, more than the limit of {MAX_FILE_BYTES}"),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Read {
            path: path.clone(),
            source,
        })?;
        let docs = parse_documents(&text).map_err(|message| LoadError::Parse {
            path: path.clone(),
            message,
        })?;
        for (i, mut doc) in docs.into_iter().enumerate() {
            let d = Document {
                path: path.clone(),
                index: i + 1,
                object: Value::Null,
            };
            if !doc.is_object() {
                return Err(d.error("not a map"));
            }
            let api_version = doc["apiVersion"].as_str().unwrap_or_default().to_owned();
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            if api_version.is_empty() || kind.is_empty() {
                return Err(d.error("apiVersion and kind are required"));
            }
            if !(doc["metadata"].is_object() || doc["metadata"].is_null()) {
                return Err(d.error("metadata is not a map"));
            }
            let cluster_scoped = matches!(
                (api_group(&api_version), kind.as_str()),
                ("gateway.networking.k8s.io", "GatewayClass")
                    | ("gatewright.dev", "GatewayClassBlueprint")
                    | ("", "Namespace")
                    | ("apiextensions.k8s.io", "CustomResourceDefinition")
            );
            if !cluster_scoped
                && doc["metadata"]["namespace"].as_str().is_none()
                && !super::ingest::is_child(&doc)
            {
                doc["metadata"]["namespace"] = Value::String("default".into());
            }
            out.push(Document { object: doc, ..d });
        }
    }
    Ok(out)
}

/// Loads every document of `paths` into a snapshot.
///
/// # Errors
/// The first path that cannot be read or parsed.
pub fn load(paths: &[PathBuf], controller_namespace: &str) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded {
        snapshot: Snapshot::new(controller_namespace),
        ..Loaded::default()
    };
    // Offline, placed templates render (a preview of placement over the ClusterProfiles
    // among the files).
    loaded.snapshot.allow_placement();
    let mut namespaces: BTreeSet<String> = BTreeSet::new();
    let mut explicit_ns: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for d in documents(paths)? {
        let doc = d.object.clone();
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(ns) = doc["metadata"]["namespace"].as_str() {
            namespaces.insert(ns.to_owned());
        }
        let snap = &mut loaded.snapshot;
        match super::ingest::kind_of(&doc) {
            Some(super::ingest::Kind::Namespace) => {
                let mut l: BTreeMap<String, String> =
                    serde_json::from_value(doc["metadata"]["labels"].clone()).unwrap_or_default();
                l.insert("kubernetes.io/metadata.name".into(), name.clone());
                explicit_ns.insert(name.clone(), l);
            }
            Some(k) => {
                if k == super::ingest::Kind::Blueprint {
                    loaded.blueprint_names.push(name.clone());
                }
                super::ingest::put(snap, doc).map_err(|m| d.error(&m))?;
            }
            None => loaded
                .ignored
                .push(format!("{}: {kind} {name}", d.path.display())),
        }
    }
    for ns in namespaces {
        let labels = explicit_ns.remove(&ns).unwrap_or_else(|| {
            BTreeMap::from([("kubernetes.io/metadata.name".to_owned(), ns.clone())])
        });
        loaded.snapshot.put_namespace(&ns, labels);
    }
    for (ns, labels) in explicit_ns {
        loaded.snapshot.put_namespace(&ns, labels);
    }
    Ok(loaded)
}
