//! Children an earlier release of a class named otherwise: kept while they serve, then
//! pruned.

use super::*;

/// A make-before-break "certificate" as an earlier release of a class rendered it (one
/// object, versioned as a whole, named `<gateway>-tls`) and as the next one does (per
/// object, named `<gateway>-tls-0`): the same names give the same version, under another
/// name. A reader names the certificate's Secret.
const CERT_BEFORE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-tls\" }}\ndata:\n  names: {{ hostnames.union | join(\",\") }}\n  secret: {{ gateway.metadata.name ~ \"-tls-\" ~ version }}\n";
const CERT_AFTER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-tls-0\" }}\ndata:\n  names: {{ hostnames.union | join(\",\") }}\n  secret: {{ gateway.metadata.name ~ \"-tls-0-\" ~ version }}\n";
const SECRET_READER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-reader\" }}\ndata:\n  secrets: {{ resources.cert | map(attribute=\"data\") | map(attribute=\"secret\") | join(\",\") }}\n";

fn versioned_blueprint(w: &mut World, cert: &str, per_object: bool) {
    let mut rollout = json!({"strategy": "MakeBeforeBreak", "fields": ["data.names"]});
    if per_object {
        rollout["per"] = json!("Object");
    }
    let bp: GatewayClassBlueprint = serde_json::from_value(json!({
        "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
        "metadata": {"name": "bp"},
        "spec": {"gatewayTemplates": [
            {"name": "cert", "template": cert, "rollout": rollout,
             "readyWhen": "dig(object, \"data.ready\", \"\") == \"yes\""},
            {"name": "reader", "template": SECRET_READER},
        ]},
    }))
    .unwrap();
    w.snap.put_blueprint(bp);
}

/// `obj` as it is once applied: a "certificate" ready (issued) or not.
fn applied(obj: &Value, issued: bool) -> Value {
    let mut o = obj.clone();
    if issued && labels::template(&o) == Some("cert") {
        o["data"]["ready"] = json!("yes");
    }
    o
}

/// Issue 42: the old certificate of a class's earlier release, which the new release names
/// otherwise (and versions per object) with the same version, is neither a version the new
/// one replaces nor pruned as "still named" for good: it serves until the new one is ready
/// and the reader has switched, then it goes.
#[test]
fn a_child_an_earlier_release_named_otherwise_serves_until_replaced_then_is_pruned() {
    let mut w = World::new();
    versioned_blueprint(&mut w, CERT_BEFORE, false);
    let gw = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("r", &["a.example.com"], &["gw"]);
    // Converged with the earlier release.
    for _ in 0..3 {
        let p = plan(&w.snap, &gw).unwrap();
        assert!(p.gateway.errors.is_empty(), "{:?}", p.gateway.errors);
        for c in p.children() {
            w.snap.put_child(applied(&c.object, true));
        }
    }
    let p = plan(&w.snap, &gw).unwrap();
    assert!(p.gateway.converged() && p.gateway.prune.is_empty());
    let old = p.children().find(|c| c.template == "cert").unwrap().clone();
    let old_secret = old.object["data"]["secret"].as_str().unwrap().to_owned();
    let version = old.object["metadata"]["labels"][labels::VERSION]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(old.key.name, format!("gw-tls-{version}"));

    // The next release: named per group, versioned per object; same names, same version.
    versioned_blueprint(&mut w, CERT_AFTER, true);
    let reader_of = |p: &crate::plan::Plan| -> (Value, String) {
        let r = p.children().find(|c| c.template == "reader").unwrap();
        let s = r.object["data"]["secrets"].as_str().unwrap().to_owned();
        (Value::clone(&r.object), s)
    };
    let new_name = format!("gw-tls-0-{version}");
    let new_secret = format!("gw-tls-0-{version}");
    let check_kept = |p: &crate::plan::Plan, step: &str| {
        assert!(
            p.gateway.errors.is_empty(),
            "{step}: {:?}",
            p.gateway.errors
        );
        // The old one serves meanwhile: the Gateway stays Programmed.
        let programmed = cond(&p.status.gateway.conditions, types::PROGRAMMED);
        assert!(programmed.status.is_true(), "{step}: {programmed:?}");
        assert!(
            !p.gateway.prune.contains(&old.key),
            "{step}: the old certificate is pruned while the live reader names its Secret"
        );
    };
    // 1. The new certificate is to be created: the reader keeps reading the old one.
    let p = plan(&w.snap, &gw).unwrap();
    check_kept(&p, "new not created");
    let new = p.children().find(|c| c.template == "cert").unwrap().clone();
    assert_eq!(new.key.name, new_name);
    assert_eq!(
        reader_of(&p).1,
        old_secret,
        "the reader keeps the old Secret"
    );
    assert!(
        p.gateway
            .rollouts
            .iter()
            .any(|r| r.phase == crate::plan::ReplacementPhase::WaitingForNew),
        "{:?}",
        p.gateway.rollouts
    );
    // 2. Created, not issued yet: still the old one.
    w.snap.put_child(applied(&new.object, false));
    let p = plan(&w.snap, &gw).unwrap();
    check_kept(&p, "new not ready");
    assert_eq!(reader_of(&p).1, old_secret);
    // 3. Issued: the reader switches; the live reader still names the old Secret.
    w.snap.put_child(applied(&new.object, true));
    let p = plan(&w.snap, &gw).unwrap();
    check_kept(&p, "new ready, reader not switched");
    let (reader, secrets) = reader_of(&p);
    assert_eq!(secrets, new_secret, "the reader switches to the new Secret");
    // 4. The reader applied as rendered: nothing reads the old certificate; it goes.
    w.snap.put_child(reader);
    let p = plan(&w.snap, &gw).unwrap();
    assert!(p.gateway.errors.is_empty(), "{:?}", p.gateway.errors);
    assert_eq!(p.gateway.prune, std::slice::from_ref(&old.key));
    assert_eq!(reader_of(&p).1, new_secret);
    // 5. Once it is gone: converged, nothing more to prune, no replacement under way.
    w.snap.remove_child(&old.key);
    let p = plan(&w.snap, &gw).unwrap();
    assert!(p.gateway.converged(), "{:?}", p.gateway.states);
    assert!(p.gateway.prune.is_empty() && p.gateway.rollouts.is_empty());
}

/// The same for a template versioned as a whole whose object an earlier release named
/// otherwise: the old object is kept while the live reader may read it or something is
/// not ready, then pruned.
#[test]
fn a_renamed_child_of_a_template_versioned_as_a_whole_is_pruned_once_not_read() {
    let mut w = World::new();
    versioned_blueprint(&mut w, CERT_BEFORE, false);
    let gw = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("r", &["a.example.com"], &["gw"]);
    for _ in 0..3 {
        let p = plan(&w.snap, &gw).unwrap();
        for c in p.children() {
            w.snap.put_child(applied(&c.object, true));
        }
    }
    let p = plan(&w.snap, &gw).unwrap();
    let old = p
        .children()
        .find(|c| c.template == "cert")
        .unwrap()
        .key
        .clone();
    versioned_blueprint(&mut w, &CERT_BEFORE.replace("-tls", "-cert"), false);
    let mut reader = None;
    for issued in [false, true] {
        let p = plan(&w.snap, &gw).unwrap();
        assert!(!p.gateway.prune.contains(&old), "issued {issued}");
        let new = p.children().find(|c| c.template == "cert").unwrap();
        assert_ne!(new.key, old);
        w.snap.put_child(applied(&new.object, issued));
        reader = p.children().find(|c| c.template == "reader").cloned();
    }
    // The reader, rendered from the issued certificate, not applied yet: kept.
    let p = plan(&w.snap, &gw).unwrap();
    assert!(!p.gateway.prune.contains(&old));
    let reader = p
        .children()
        .find(|c| c.template == "reader")
        .or(reader.as_ref())
        .unwrap()
        .clone();
    w.snap.put_child(reader.object.into_value());
    let p = plan(&w.snap, &gw).unwrap();
    assert_eq!(p.gateway.prune, [old]);
}
