//! The tenancy boundary, proven by requests through Traefik and by the API server refusing
//! (docs/security.md). One parent Gateway in the platform's namespace, as an app team
//! shares it:
//!
//! - listener `admin` (`admin-<run>.<zone>`, routes from its own namespace only), `apps`
//!   (`*.apps-<run>.<zone>`, every namespace), `gold` (`gold-<run>.<zone>`, namespaces
//!   labelled `gatewright.dev/tier: <run>`), and a ListenerSet of namespace `<run>-team`
//!   adding `team-<run>.<zone>` for routes of that namespace only (`from: Same`);
//! - the platform's route on `admin`, the gold team's on `gold`, the team's on its set;
//! - the tenant's routes (namespace `<run>-tenant`, its own backend): one with the hostnames
//!   `foo.apps-…` and `admin-…` and no sectionName (`/login`), one with no hostname
//!   (`/steal`), one to `gold`, one to the team's set, one to a backend of the platform's
//!   namespace without a ReferenceGrant, and one naming the child Gateway gatewright
//!   renders directly (`/direct`).
//!
//! Each restricted hostname is asked [`PROBES`] times per path once Traefik serves every
//! legitimate route (and the direct one where the child allows it): the tenant's backend
//! must never answer there, while its own hostnames keep working. Then the admission policy
//! (config/admission/policy.yaml) is bound in the platform's namespace: the API server
//! refuses the tenant's route naming the child Gateway, and still admits the tenant's route
//! to the parent, whose copy gatewright writes and Traefik serves.

use std::time::Instant;

use kube::api::{DeleteParams, DynamicObject, PostParams};

use super::{
    Backends, SERIAL, T, admin, apply_yaml, backend_yaml, common, downstream, dynamic, http,
    start_with_traefik_class, unique_name, wait_for,
};

/// Requests sent to each restricted (hostname, path).
const PROBES: usize = 20;

/// An HTTPRoute `ns/name` attached to `parent` (a YAML flow map), for `hostnames`, sending
/// `path` to the Service `backend` (`namespace/name` or `name`).
fn route_yaml(
    ns: &str,
    name: &str,
    parent: &str,
    hostnames: &[&str],
    path: &str,
    backend: &str,
) -> String {
    let backend = match backend.split_once('/') {
        Some((bns, b)) => format!(
            "{{name: {b}, namespace: {bns}, port: {}}}",
            super::BACKEND_PORT
        ),
        None => format!("{{name: {backend}, port: {}}}", super::BACKEND_PORT),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  parentRefs: [{parent}]\n  hostnames: {hostnames:?}\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n    backendRefs: [{backend}]\n"
    )
}

/// The `Accepted` condition of a route's status entry for a parent.
fn accepted_of(entry: &serde_json::Value) -> Option<&serde_json::Value> {
    entry["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Accepted")
}

#[tokio::test(flavor = "multi_thread")]
async fn tenancy_through_traefik() {
    let _serial = SERIAL.lock().await;
    let began = Instant::now();
    let d = downstream();
    let infra = d.namespace.as_str();
    let zone = d.zone.as_str();
    let client = admin().await;
    let run = unique_name("ten");
    let tenant = format!("{run}-tenant");
    let gold_ns = format!("{run}-gold");
    let team = format!("{run}-team");
    let tier = run.clone();
    apply_yaml(
        &client,
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {tenant}}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {gold_ns}, labels: {{gatewright.dev/tier: {tier}}}}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {team}}}\n"
        ),
    )
    .await;

    // One backend per party, each answering with its name.
    let mut backends = Backends::create(&d.netns_dir);
    let svc = |role: &str| format!("{run}-{role}");
    for (i, (ns, role)) in [
        (infra, "admin"),
        (tenant.as_str(), "tenant"),
        (gold_ns.as_str(), "gold"),
        (team.as_str(), "team"),
    ]
    .into_iter()
    .enumerate()
    {
        let addr = backends.start(&svc(role), u8::try_from(i).unwrap());
        apply_yaml(&client, &backend_yaml(ns, &svc(role), addr)).await;
    }

    let (ctl, class) = start_with_traefik_class(&client, &d, (infra, infra), "tenancy").await;

    let gw = unique_name("shared");
    let admin_host = format!("admin-{run}.{zone}");
    let apps = format!("apps-{run}.{zone}");
    let gold_host = format!("gold-{run}.{zone}");
    let team_host = format!("team-{run}.{zone}");
    let foo = format!("foo.{apps}");
    apply_yaml(
        &client,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {gw}, namespace: {infra}}}\nspec:\n  gatewayClassName: {class}\n  allowedListeners: {{namespaces: {{from: All}}}}\n  listeners:\n  - {{name: admin, port: 80, protocol: HTTP, hostname: {admin_host}, allowedRoutes: {{namespaces: {{from: Same}}}}}}\n  - {{name: apps, port: 80, protocol: HTTP, hostname: \"*.{apps}\", allowedRoutes: {{namespaces: {{from: All}}}}}}\n  - {{name: gold, port: 80, protocol: HTTP, hostname: {gold_host}, allowedRoutes: {{namespaces: {{from: Selector, selector: {{matchLabels: {{gatewright.dev/tier: {tier}}}}}}}}}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata: {{name: set, namespace: {team}}}\nspec:\n  parentRef: {{name: {gw}, namespace: {infra}}}\n  listeners:\n  - {{name: web, port: 80, protocol: HTTP, hostname: {team_host}, allowedRoutes: {{namespaces: {{from: Same}}}}}}\n"
        ),
    )
    .await;
    let to_gw = format!("{{name: {gw}, namespace: {infra}}}");
    let child = format!("{gw}-traefik");
    let routes = [
        // The platform's, the gold team's and the team's own routes.
        route_yaml(
            infra,
            "admin",
            &format!("{{name: {gw}, sectionName: admin}}"),
            &[],
            "/",
            &svc("admin"),
        ),
        route_yaml(
            &gold_ns,
            "gold",
            &format!("{{name: {gw}, namespace: {infra}, sectionName: gold}}"),
            &[],
            "/",
            &svc("gold"),
        ),
        route_yaml(
            &team,
            "team",
            "{kind: ListenerSet, name: set}",
            &[],
            "/",
            &svc("team"),
        ),
        // The tenant's.
        route_yaml(
            &tenant,
            "hijack",
            &to_gw,
            &[&foo, &admin_host],
            "/login",
            &svc("tenant"),
        ),
        route_yaml(&tenant, "steal", &to_gw, &[], "/steal", &svc("tenant")),
        route_yaml(
            &tenant,
            "gold",
            &format!("{{name: {gw}, namespace: {infra}, sectionName: gold}}"),
            &[],
            "/",
            &svc("tenant"),
        ),
        route_yaml(
            &tenant,
            "team",
            &format!("{{kind: ListenerSet, name: set, namespace: {team}}}"),
            &[],
            "/",
            &svc("tenant"),
        ),
        route_yaml(
            &tenant,
            "nogrant",
            &to_gw,
            &[&format!("nogrant.{apps}")],
            "/",
            &format!("{infra}/{}", svc("admin")),
        ),
        route_yaml(
            &tenant,
            "direct",
            &format!("{{name: {child}, namespace: {infra}}}"),
            &[],
            "/direct",
            &svc("tenant"),
        ),
    ];
    for r in &routes {
        apply_yaml(&client, r).await;
    }

    // Traefik serves every legitimate route, and the direct one where the child allows it
    // (`apps` admits every namespace, as the parent's does).
    let p = d.web_port;
    let serves = |host: String, path: &'static str, who: String| async move {
        wait_for(&format!("{host}{path} answered by {who}"), T, || async {
            let a = http(p, &host, path, &[]).await.ok()?;
            (a.backend() == Some(who.as_str())).then_some(())
        })
        .await;
    };
    let t = Instant::now();
    serves(admin_host.clone(), "/", svc("admin")).await;
    serves(foo.clone(), "/login", svc("tenant")).await;
    serves(format!("bar.{apps}"), "/steal", svc("tenant")).await;
    serves(gold_host.clone(), "/", svc("gold")).await;
    serves(team_host.clone(), "/", svc("team")).await;
    serves(format!("x.{apps}"), "/direct", svc("tenant")).await;
    let served_after = t.elapsed();

    // The restricted hostnames: never the tenant's backend (nor, without a grant, the
    // platform's through the tenant's route).
    let restricted = [
        (
            admin_host.as_str(),
            "/login",
            "a hostname of the listener that refused it",
        ),
        (
            admin_host.as_str(),
            "/steal",
            "no hostname: every listener's",
        ),
        (
            admin_host.as_str(),
            "/direct",
            "the child Gateway named directly",
        ),
        (
            gold_host.as_str(),
            "/",
            "a Selector listener its namespace is not selected by",
        ),
        (
            gold_host.as_str(),
            "/direct",
            "the child's Selector listener, directly",
        ),
        (
            team_host.as_str(),
            "/",
            "a ListenerSet listener from: Same of another namespace",
        ),
        (
            team_host.as_str(),
            "/direct",
            "the child's ListenerSet listener, directly",
        ),
    ];
    let mut lines = Vec::new();
    for (host, path, what) in restricted {
        let mut by = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..PROBES {
            let a = http(p, host, path, &[]).await.unwrap();
            *by.entry(
                a.backend()
                    .map_or_else(|| a.code.to_string(), str::to_owned),
            )
            .or_default() += 1;
        }
        assert!(
            !by.contains_key(&svc("tenant")),
            "{host}{path} ({what}) answered by the tenant's backend: {by:?}"
        );
        lines.push(format!("{host}{path}: {by:?}"));
    }
    let nogrant = format!("nogrant.{apps}");
    for _ in 0..PROBES {
        let a = http(p, &nogrant, "/", &[]).await.unwrap();
        assert_ne!(
            a.backend(),
            Some(svc("admin").as_str()),
            "a backend of another namespace reached without a ReferenceGrant"
        );
    }
    let nogrant_code = http(p, &nogrant, "/", &[]).await.unwrap().code;
    // And what gatewright said of the refused ones.
    let route_status = |ns: String, name: &'static str| {
        let client = client.clone();
        async move {
            let r = dynamic(&client, &ns, "gateway.networking.k8s.io", "v1", "HTTPRoute")
                .get(name)
                .await
                .unwrap();
            serde_json::to_value(r).unwrap()["status"]["parents"].clone()
        }
    };
    for name in ["gold", "team"] {
        let parents = wait_for(&format!("{tenant}/{name} refused"), T, || async {
            let p = route_status(tenant.clone(), name).await;
            let accepted = accepted_of(&p[0])?;
            (accepted["status"] == "False").then_some(p)
        })
        .await;
        assert_eq!(
            accepted_of(&parents[0]).unwrap()["reason"],
            "NotAllowedByListeners",
            "{parents}"
        );
    }

    // The admission policy, bound in the platform's namespace; gatewright here acts as the
    // cluster's admin identity (the chart names its ServiceAccount).
    let policy = format!("{run}-child-routes");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/admission/policy.yaml"
    ))
    .unwrap()
    .replace(
        "system:serviceaccount:gatewright-system:gatewright",
        "admin",
    )
    .replace(
        "name: gatewright-child-gateway-routes",
        &format!("name: {policy}"),
    );
    apply_yaml(&client, &text).await;
    apply_yaml(
        &client,
        &format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: {policy}}}\nspec:\n  policyName: {policy}\n  validationActions: [Deny]\n  paramRef:\n    namespace: {infra}\n    selector: {{matchLabels: {{app.kubernetes.io/managed-by: gatewright}}}}\n    parameterNotFoundAction: Allow\n"
        ),
    )
    .await;
    let user = format!("{run}-dev");
    apply_yaml(
        &client,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: routes, namespace: {tenant}}}\nrules:\n- apiGroups: [gateway.networking.k8s.io]\n  resources: [httproutes]\n  verbs: [get, list, create, update, patch, delete]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: routes, namespace: {tenant}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: routes}}\nsubjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        ),
    )
    .await;
    let dev = common::impersonating(&user, &[]).await;
    let dev_routes = dynamic(
        &dev,
        &tenant,
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
    );
    let object = |text: &str| -> DynamicObject {
        let docs = gatewright::render::output::parse_documents(text).unwrap();
        serde_json::from_value(docs[0].clone()).unwrap()
    };
    let direct = object(&route_yaml(
        &tenant,
        "direct-again",
        &format!("{{name: {child}, namespace: {infra}}}"),
        &[],
        "/direct",
        &svc("tenant"),
    ));
    let t = Instant::now();
    // The policy is in force once the API server has read it and its binding: until then
    // the route may be created (and is removed again).
    let refused = wait_for(
        "the API server refusing the tenant's route to the child Gateway",
        T,
        || async {
            match dev_routes.create(&PostParams::default(), &direct).await {
                Err(kube::Error::Api(s)) if s.message.contains("which gatewright renders") => {
                    Some(s.message)
                }
                Err(e) => panic!("refused for another reason: {e}"),
                Ok(_) => {
                    let _ = dev_routes
                        .delete("direct-again", &DeleteParams::default())
                        .await;
                    None
                }
            }
        },
    )
    .await;
    let refused_after = t.elapsed();
    // The tenant's route to the parent is admitted; gatewright's copy of it too.
    let legit = format!("legit.{apps}");
    dev_routes
        .create(
            &PostParams::default(),
            &object(&route_yaml(
                &tenant,
                "legit",
                &to_gw,
                &[&legit],
                "/",
                &svc("tenant"),
            )),
        )
        .await
        .expect("the tenant's route to the parent Gateway admitted");
    serves(legit.clone(), "/", svc("tenant")).await;

    // Teardown.
    for (group, version, kind, name) in [
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
            &policy,
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            &policy,
        ),
    ] {
        let _ = kube::Api::<DynamicObject>::all_with(
            client.clone(),
            &super::resource(group, version, kind),
        )
        .delete(name, &DeleteParams::default())
        .await;
    }
    let _ = dynamic(
        &client,
        infra,
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
    )
    .delete("admin", &DeleteParams::default())
    .await;
    super::remove_gateway_and_class(&client, infra, &gw, &class).await;
    ctl.shutdown(std::time::Duration::from_secs(10)).await;
    for ns in [&tenant, &gold_ns, &team] {
        let _ = kube::Api::<DynamicObject>::all_with(
            client.clone(),
            &super::resource("", "v1", "Namespace"),
        )
        .delete(ns, &DeleteParams::default())
        .await;
    }
    let _ = dynamic(&client, infra, "", "v1", "Service")
        .delete(&svc("admin"), &DeleteParams::default())
        .await;
    let _ = dynamic(&client, infra, "discovery.k8s.io", "v1", "EndpointSlice")
        .delete(&format!("{}-1", svc("admin")), &DeleteParams::default())
        .await;
    drop(backends);
    eprintln!(
        "tenancy: every legitimate route served {served_after:.1?} after the routes were applied; \
         {PROBES} requests to each restricted hostname and path, none answered by the tenant: {}; \
         nogrant.<apps>/ answered {nogrant_code} (never the platform's backend); the admission \
         policy refused the tenant's route to the child Gateway {refused_after:.1?} after it \
         was bound ({refused:?}) and admitted its route to the parent, served through \
         gatewright's copy; in all {:.1?}",
        lines.join("; "),
        began.elapsed()
    );
}
