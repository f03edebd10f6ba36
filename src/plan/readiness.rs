//! Whether a live child is ready: its template's `readyWhen` expression when it has one;
//! otherwise kstatus-like rules: a `Ready` condition decides; else `status.observedGeneration`
//! must have caught up with `metadata.generation`; else the child is ready once it exists.

use std::sync::Arc;

use serde_json::Value;

use crate::api::TemplateEntry;
use crate::render::{Compiled, RenderError};

/// Ready or not, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready.
    Ready,
    /// Exists but not ready; the reason.
    NotReady(String),
    /// Not in the cluster yet.
    Missing,
}

impl Readiness {
    /// Whether ready.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }
}

/// Judges a live child.
///
/// # Errors
/// The template's `readyWhen` expression failed to evaluate.
pub fn judge(
    compiled: &Compiled,
    entry: &TemplateEntry,
    live: Option<&Arc<Value>>,
) -> Result<Readiness, RenderError> {
    let Some(obj) = live else {
        return Ok(Readiness::Missing);
    };
    if let Some(expr) = &entry.ready_when {
        return Ok(if compiled.eval_ready(&entry.name, expr, obj)? {
            Readiness::Ready
        } else {
            Readiness::NotReady(match conditions_not_true(obj) {
                Some(said) => format!("readyWhen `{expr}` is not true yet; it says {said}"),
                None => format!("readyWhen `{expr}` is not true yet"),
            })
        });
    }
    Ok(default_rules(obj))
}

/// What the object's own conditions say when some are not True (its controller's reason
/// and message: cert-manager's "Issuing certificate as Secret does not exist", say), the
/// `Ready` condition first, at most 3 and 400 characters.
fn conditions_not_true(obj: &Value) -> Option<String> {
    let conds = obj["status"]["conditions"].as_array()?;
    let mut not_true: Vec<&Value> = conds
        .iter()
        .filter(|c| c["status"] != "True" && c["type"].is_string())
        .collect();
    not_true.sort_by_key(|c| c["type"] != "Ready");
    let parts: Vec<String> = not_true
        .iter()
        .take(3)
        .map(|c| {
            let mut p = format!(
                "{}={}",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or("Unknown")
            );
            if let Some(r) = c["reason"].as_str().filter(|r| !r.is_empty()) {
                p.push_str(&format!(" ({r})"));
            }
            if let Some(m) = c["message"].as_str().filter(|m| !m.is_empty()) {
                p.push_str(&format!(": {m}"));
            }
            p
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    let mut said = parts.join("; ");
    if said.chars().count() > 400 {
        said = said.chars().take(399).collect::<String>() + "…";
    }
    Some(said)
}

/// The rules used when a template has no `readyWhen`.
#[must_use]
pub fn default_rules(obj: &Value) -> Readiness {
    let status = &obj["status"];
    if let Some(conds) = status["conditions"].as_array()
        && let Some(ready) = conds.iter().find(|c| c["type"] == "Ready")
    {
        return if ready["status"] == "True" {
            Readiness::Ready
        } else {
            let why = ready["message"]
                .as_str()
                .or(ready["reason"].as_str())
                .unwrap_or("Ready is not True");
            Readiness::NotReady(format!(
                "Ready={}: {why}",
                ready["status"].as_str().unwrap_or("Unknown")
            ))
        };
    }
    if let (Some(observed), Some(generation)) = (
        status["observedGeneration"].as_i64(),
        obj["metadata"]["generation"].as_i64(),
    ) && observed < generation
    {
        return Readiness::NotReady(format!(
            "observedGeneration {observed} < generation {generation}"
        ));
    }
    Readiness::Ready
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::GatewayClassBlueprintSpec;
    use serde_json::json;

    #[test]
    fn ready_condition_decides() {
        let r = default_rules(
            &json!({"status": {"conditions": [{"type": "Ready", "status": "False", "message": "issuing"}]}}),
        );
        assert_eq!(r, Readiness::NotReady("Ready=False: issuing".into()));
        assert!(
            default_rules(
                &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
            )
            .is_ready()
        );
    }

    #[test]
    fn observed_generation_must_catch_up() {
        assert!(
            !default_rules(
                &json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 2}})
            )
            .is_ready()
        );
        assert!(
            default_rules(
                &json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 3}})
            )
            .is_ready()
        );
        assert!(default_rules(&json!({"metadata": {"name": "cm"}, "data": {}})).is_ready());
    }

    /// [`judge`] of an object given as JSON.
    fn judge_json(
        c: &Compiled,
        entry: &TemplateEntry,
        live: Option<&Value>,
    ) -> Result<Readiness, RenderError> {
        judge(c, entry, live.cloned().map(Arc::new).as_ref())
    }

    #[test]
    fn ready_when_expression() {
        let entry = TemplateEntry {
            name: "lb".into(),
            template: "x: 1".into(),
            ready_when: Some("object.status.atProvider.dnsName is defined and object.status.atProvider.dnsName != ''".into()),
            rollout: None,
            drain: None,
            placement: None,
            kinds: Vec::new(),
            adopt: None,
        };
        let spec = GatewayClassBlueprintSpec {
            gateway_templates: vec![entry.clone()],
            ..Default::default()
        };
        let c = Compiled::compile("bp", &spec).unwrap();
        assert_eq!(judge(&c, &entry, None).unwrap(), Readiness::Missing);
        assert!(
            !judge_json(&c, &entry, Some(&json!({"status": {}})))
                .unwrap()
                .is_ready()
        );
        assert!(!judge_json(&c, &entry, Some(&json!({}))).unwrap().is_ready());
        // What the object's own conditions say comes with it, Ready first.
        let said = judge_json(
            &c,
            &entry,
            Some(&json!({"status": {"conditions": [
                {"type": "Issuing", "status": "False", "reason": "Failed", "message": "the issuer refused"},
                {"type": "Synced", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "DoesNotExist", "message": "Issuing certificate as Secret does not exist"},
            ]}})),
        )
        .unwrap();
        let Readiness::NotReady(why) = said else {
            panic!("{said:?}")
        };
        assert!(
            why.ends_with("; it says Ready=False (DoesNotExist): Issuing certificate as Secret does not exist; Issuing=False (Failed): the issuer refused"),
            "{why}"
        );
        assert!(
            judge_json(
                &c,
                &entry,
                Some(&json!({"status": {"atProvider": {"dnsName": "lb.aws"}}}))
            )
            .unwrap()
            .is_ready()
        );
    }
}
