use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::config::{ExecConfig, ExecInteractiveMode, Kubeconfig};

use super::*;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fleet/examples");

/// The text of an example file of `tests/fleet/examples`.
pub(crate) fn example(file: &str) -> String {
    std::fs::read_to_string(format!("{EXAMPLES}/{file}")).unwrap()
}

/// A ClusterProfile of `tests/fleet/examples`.
pub(crate) fn profile(file: &str) -> ClusterProfile {
    let v: serde_json::Value = serde_saphyr::from_str(&example(file)).unwrap();
    ClusterProfile::from_value(&v).unwrap()
}

fn with_status(status: serde_json::Value) -> ClusterProfile {
    ClusterProfile::from_value(&serde_json::json!({
        "metadata": {"name": "m1", "namespace": "fleet"},
        "spec": {"clusterManager": {"name": "demo"}},
        "status": status,
    }))
    .unwrap()
}

fn exec_of(kc: &Kubeconfig) -> &ExecConfig {
    kc.auth_infos[0]
        .auth_info
        .as_ref()
        .unwrap()
        .exec
        .as_ref()
        .unwrap()
}

fn env_of(e: &ExecConfig) -> Vec<(String, String)> {
    e.env
        .iter()
        .flatten()
        .map(|m| (m["name"].clone(), m["value"].clone()))
        .collect()
}

#[test]
fn upstream_provider_files_parse() {
    for f in [
        "provider-secretreader.json",
        "provider-kubeconfig-secretreader.json",
    ] {
        let file = ProviderFile::parse(&example(f)).unwrap();
        assert_eq!(file.providers.len(), 1, "{f}");
        let exec = file.providers[0].exec_config.as_ref().unwrap();
        assert!(exec.provide_cluster_info && exec.args.is_empty() && exec.env.is_empty());
        assert_eq!(exec.api_version.as_deref(), Some(EXEC_API_VERSIONS[0]));
    }
}

#[test]
fn provider_matched_builds_an_exec_kubeconfig() {
    let p = profile("profile-secretreader.yaml");
    let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
    let access = exec_kubeconfig(&p, &file).unwrap();
    assert_eq!(access.provider, "secretreader");
    let kc = &access.kubeconfig;
    assert_eq!(kc.current_context.as_deref(), Some("fleet/spoke-1"));
    let c = kc.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(c.server.as_deref(), Some("https://spoke-1.example:6443"));
    assert!(c.certificate_authority_data.is_some());
    let ext = c.extensions.as_ref().unwrap();
    assert_eq!(
        (ext[0].name.as_str(), &ext[0].extension["clusterName"]),
        (EXEC_EXTENSION, &serde_json::json!("spoke-1"))
    );
    let e = exec_of(kc);
    assert_eq!(e.command.as_deref(), Some("./bin/secretreader-plugin"));
    assert!(e.provide_cluster_info);
    assert_eq!(e.interactive_mode, Some(ExecInteractiveMode::Never));
    assert!(matches!(
        route(&p, &file, DEFAULT_CONSUMER).unwrap(),
        Route::Provider(_)
    ));
}

#[test]
fn first_provider_of_the_file_wins() {
    let p = with_status(serde_json::json!({"accessProviders": [
        {"name": "a", "cluster": {"server": "https://a.example"}},
        {"name": "b", "cluster": {"server": "https://b.example"}}
    ]}));
    let file = ProviderFile::parse(
        r#"{"providers": [
            {"name": "z", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "z"}},
            {"name": "b", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "b"}},
            {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "a"}}
        ]}"#,
    )
    .unwrap();
    let access = exec_kubeconfig(&p, &file).unwrap();
    assert_eq!(access.provider, "b");
    assert_eq!(
        access.kubeconfig.clusters[0]
            .cluster
            .as_ref()
            .unwrap()
            .server
            .as_deref(),
        Some("https://b.example")
    );
}

#[test]
fn no_provider_matches_falls_back_to_the_secret() {
    let p = profile("profile-kubeconfig-secretreader.yaml");
    let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
    let e = exec_kubeconfig(&p, &file).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ClusterProfile fleet/spoke-2 offers access providers [kubeconfig-secretreader], none of which the provider file configures ([secretreader])"
    );
    let Route::Secret(lookup) = route(&p, &file, DEFAULT_CONSUMER).unwrap() else {
        panic!("expected the Secret route");
    };
    assert_eq!(lookup.namespace, "fleet");
    assert_eq!(
        lookup.selector(),
        "x-k8s.io/cluster-inventory-consumer=gatewright,x-k8s.io/cluster-profile=spoke-2"
    );
}

#[test]
fn no_access_providers_falls_back_to_the_secret() {
    let p = profile("profile-status.yaml");
    let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
    let e = exec_kubeconfig(&p, &file).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ClusterProfile cluster-b lists no access providers in its status"
    );
    assert!(
        matches!(route(&p, &file, "other").unwrap(), Route::Secret(l) if l.labels[LABEL_INVENTORY_CONSUMER] == "other")
    );
}

#[test]
fn bad_ca_data_is_named() {
    let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
    for (data, reason) in [
        ("not base64!", "not base64"),
        ("aGVsbG8gd29ybGQ=", "no PEM certificate in it"),
    ] {
        let p = with_status(serde_json::json!({"accessProviders": [
            {"name": "secretreader", "cluster": {"server": "https://m1.example", "certificate-authority-data": data}}
        ]}));
        let e = exec_kubeconfig(&p, &file).unwrap_err();
        assert!(matches!(e, AccessError::BadCaData { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.starts_with("ClusterProfile fleet/m1: access provider secretreader has bad cluster.certificate-authority-data: "), "{msg}");
        assert!(msg.contains(reason), "{msg}");
        // A bad provider's cluster is an error, not a reason to try the Secret.
        assert!(route(&p, &file, DEFAULT_CONSUMER).is_err());
    }
}

#[test]
fn server_missing_or_not_a_url_is_named() {
    let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
    let p = with_status(serde_json::json!({"accessProviders": [{"name": "secretreader"}]}));
    assert_eq!(
        exec_kubeconfig(&p, &file).unwrap_err().to_string(),
        "ClusterProfile fleet/m1: access provider secretreader has no cluster.server"
    );
    for server in ["spoke:6443", "ftp://spoke", "https://"] {
        let p = with_status(
            serde_json::json!({"accessProviders": [{"name": "secretreader", "cluster": {"server": server}}]}),
        );
        assert!(
            matches!(
                exec_kubeconfig(&p, &file).unwrap_err(),
                AccessError::BadServer { .. }
            ),
            "{server}"
        );
    }
}

#[test]
fn certificate_authority_path_is_dropped() {
    let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
    let p = with_status(
        serde_json::json!({"accessProviders": [{"name": "secretreader",
        "cluster": {"server": "https://m1.example", "certificate-authority": "/etc/shadow", "tls-server-name": "m1", "insecure-skip-tls-verify": false}}]}),
    );
    let kc = exec_kubeconfig(&p, &file).unwrap().kubeconfig;
    let c = kc.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(c.certificate_authority, None);
    assert_eq!(c.tls_server_name.as_deref(), Some("m1"));
    assert_eq!(c.insecure_skip_tls_verify, Some(false));
}

fn extension_profile() -> ClusterProfile {
    with_status(
        serde_json::json!({"accessProviders": [{"name": "p", "cluster": {
        "server": "https://m1.example",
        "extensions": [
            {"name": EXTENSION_ADDITIONAL_ARGS, "extension": ["--audience", "member"]},
            {"name": EXTENSION_ADDITIONAL_ENVS, "extension": {"CLIENT_ID": "from-profile", "TENANT_ID": "t"}}
        ]}}]}),
    )
}

fn policy_file(args: &str, envs: &str) -> ProviderFile {
    ProviderFile::parse(&format!(
        r#"{{"providers": [{{"name": "p", "profileSourcedCLIArgsPolicy": "{args}", "profileSourcedEnvVarsPolicy": "{envs}",
            "execConfig": {{"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin", "args": ["--base"],
            "env": [{{"name": "CLIENT_ID", "value": "from-file"}}]}}}}]}}"#
    ))
    .unwrap()
}

#[test]
fn profile_sourced_args_and_envs_follow_the_policies() {
    let p = extension_profile();
    let own = |k: &str, v: &str| (k.to_owned(), v.to_owned());

    let kc = exec_kubeconfig(&p, &policy_file("", ""))
        .unwrap()
        .kubeconfig;
    let e = exec_of(&kc);
    assert_eq!(e.args.as_deref(), Some(&["--base".to_owned()][..]));
    assert_eq!(env_of(e), [own("CLIENT_ID", "from-file")]);

    let kc = exec_kubeconfig(&p, &policy_file("Append", "AppendIfNotExists"))
        .unwrap()
        .kubeconfig;
    let e = exec_of(&kc);
    assert_eq!(e.args.clone().unwrap(), ["--base", "--audience", "member"]);
    assert_eq!(
        env_of(e),
        [own("CLIENT_ID", "from-file"), own("TENANT_ID", "t")]
    );

    let kc = exec_kubeconfig(&p, &policy_file("Ignore", "Replace"))
        .unwrap()
        .kubeconfig;
    let e = exec_of(&kc);
    assert_eq!(e.args.clone().unwrap(), ["--base"]);
    assert_eq!(
        env_of(e),
        [own("CLIENT_ID", "from-profile"), own("TENANT_ID", "t")]
    );
}

#[test]
fn malformed_extension_is_an_error_only_when_read() {
    let p = with_status(
        serde_json::json!({"accessProviders": [{"name": "p", "cluster": {
        "server": "https://m1.example",
        "extensions": [{"name": EXTENSION_ADDITIONAL_ENVS, "extension": {"N": 1}}]}}]}),
    );
    assert!(exec_kubeconfig(&p, &policy_file("", "Ignore")).is_ok());
    let e = exec_kubeconfig(&p, &policy_file("", "Replace")).unwrap_err();
    assert!(e.to_string().starts_with(&format!("ClusterProfile fleet/m1: access provider p has a bad extension {EXTENSION_ADDITIONAL_ENVS}: not a map of strings")), "{e}");
}

#[test]
fn provider_file_refusals() {
    for (text, want) in [
        (
            r#"{"providers": [{"name": "a"}]}"#,
            "provider \"a\": no execConfig",
        ),
        (
            r#"{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1"}}]}"#,
            "provider \"a\": execConfig has no command",
        ),
        (
            r#"{"providers": [{"name": "a", "execConfig": {"command": "x"}}]}"#,
            "execConfig.apiVersion is None",
        ),
        (
            r#"{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}},
                          {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "y"}}]}"#,
            "provider \"a\": named twice",
        ),
        (
            r#"{"providers": [{"name": "a", "profileSourcedCLIArgsPolicy": "Prepend", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}]}"#,
            "Prepend",
        ),
    ] {
        let e = ProviderFile::parse(text).unwrap_err().to_string();
        assert!(
            e.starts_with("access provider file: ") && e.contains(want),
            "{e}"
        );
    }
    assert!(
        ProviderFile::parse("providers: null")
            .unwrap()
            .providers
            .is_empty()
    );
}

fn secret(name: &str, ns: &str, labels: &[(&str, &str)], kubeconfig: &str) -> Secret {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": ns,
            "labels": labels.iter().map(|(k, v)| ((*k).to_owned(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>()},
        "data": {SECRET_KEY_KUBECONFIG: base64::engine::general_purpose::STANDARD.encode(kubeconfig)},
    }))
    .unwrap()
}

fn example_secret() -> Secret {
    // The example as the API server returns it: stringData moved into data.
    let mut s: Secret = serde_saphyr::from_str(&example("secret-kubeconfig.yaml")).unwrap();
    let text = s
        .string_data
        .take()
        .unwrap()
        .remove(SECRET_KEY_KUBECONFIG)
        .unwrap();
    s.data = Some(
        [(
            SECRET_KEY_KUBECONFIG.to_owned(),
            k8s_openapi::ByteString(text.into_bytes()),
        )]
        .into(),
    );
    s
}

#[test]
fn secret_fallback_reads_the_labelled_secret() {
    let p = profile("profile-secretreader.yaml");
    let labels = [
        (LABEL_INVENTORY_CONSUMER, "gatewright"),
        (LABEL_CLUSTER_PROFILE, "spoke-1"),
    ];
    let others = [
        secret(
            "other-consumer",
            "fleet",
            &[
                (LABEL_INVENTORY_CONSUMER, "argo"),
                (LABEL_CLUSTER_PROFILE, "spoke-1"),
            ],
            "x",
        ),
        secret("other-namespace", "elsewhere", &labels, "x"),
    ];
    let mut all = others.to_vec();
    all.push(example_secret());
    let kc = secret_kubeconfig(&p, DEFAULT_CONSUMER, &all).unwrap();
    assert_eq!(kc.current_context.as_deref(), Some("spoke-1"));
    assert_eq!(
        kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
        Some("https://spoke-1.example:6443")
    );

    let e = secret_kubeconfig(&p, DEFAULT_CONSUMER, &others).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ClusterProfile fleet/spoke-1: no Secret in namespace fleet has the labels x-k8s.io/cluster-inventory-consumer=gatewright,x-k8s.io/cluster-profile=spoke-1"
    );

    all.push(secret("second", "fleet", &labels, "x"));
    let e = secret_kubeconfig(&p, DEFAULT_CONSUMER, &all).unwrap_err();
    assert!(
        matches!(&e, AccessError::SecretAmbiguous { names, .. } if names == &["second", "spoke-1-kubeconfig"]),
        "{e}"
    );
}

#[test]
fn secret_kubeconfig_may_not_run_or_read() {
    let p = profile("profile-secretreader.yaml");
    let labels = [
        (LABEL_INVENTORY_CONSUMER, "gatewright"),
        (LABEL_CLUSTER_PROFILE, "spoke-1"),
    ];
    let base =
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://m\n";
    for (user, what) in [
        (
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sh\n",
            "users[u].user.exec",
        ),
        (
            "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
            "users[u].user.tokenFile",
        ),
        ("    client-key: /etc/key.pem\n", "users[u].user.client-key"),
    ] {
        let text = format!("{base}users:\n- name: u\n  user:\n{user}");
        let e = secret_kubeconfig(
            &p,
            DEFAULT_CONSUMER,
            &[secret("s", "fleet", &labels, &text)],
        )
        .unwrap_err();
        assert!(
            matches!(&e, AccessError::UnsafeSecret { what: w, .. } if w == what),
            "{e}"
        );
    }
    let text = base.replace(
        "server: https://m",
        "server: https://m\n    certificate-authority: /etc/ca.pem",
    );
    let e = secret_kubeconfig(
        &p,
        DEFAULT_CONSUMER,
        &[secret("s", "fleet", &labels, &text)],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("clusters[c].cluster.certificate-authority"),
        "{e}"
    );

    let e = secret_kubeconfig(
        &p,
        DEFAULT_CONSUMER,
        &[secret("s", "fleet", &labels, "clusters: 3")],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("ClusterProfile fleet/spoke-1: Secret fleet/s: data.Config: "),
        "{e}"
    );
}
