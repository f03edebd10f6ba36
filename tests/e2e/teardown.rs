//! Teardown when the class goes too: `kubectl delete -f` (or a GitOps application's
//! deletion) removes the Gateway, its GatewayClass and the blueprint at once, and a class
//! whose finalizer someone strips goes before the Gateway's teardown is done. Neither may
//! leave the Gateway hanging on our finalizer or its children behind.

use std::time::Duration;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use kube::api::{Api, DeleteParams, DynamicObject};

use crate::common::{
    TestNamespace, admin, apply_yaml, controller, hold, wait_class_gone, wait_deleting, wait_for,
};
use crate::controller::{blueprints, dynamic, gateway_json, gateway_yaml, lb_listeners, shipped};
use crate::mbb::{cm_blueprint, cm_gateway, delete_class, our_cms, wait_gateway_gone};

const T: Duration = Duration::from_secs(90);

#[tokio::test]
async fn deleting_the_gateway_its_class_and_blueprint_at_once_removes_every_child() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "delall").await;
    let class = format!("delall-{}", ns.name);
    apply_yaml(&client, &shipped("aws-alb-crossplane", &class)).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    let lbs: Api<DynamicObject> = dynamic(
        &client,
        &ns.name,
        "elbv2.aws.m.upbound.io",
        "v1beta1",
        "LB",
        "lbs",
    );
    let lb_name = gatewright::render::safe_name(&format!("{}-gw-alb", ns.name), 63);
    wait_for("the LB", T, || async {
        lbs.get_opt(&lb_name).await.unwrap()
    })
    .await;
    let classes: Api<GatewayClass> = Api::all(client.clone());
    wait_for("the class finalizer", T, || async {
        let c = classes.get(&class).await.unwrap();
        c.metadata
            .finalizers
            .is_some_and(|f| !f.is_empty())
            .then_some(())
    })
    .await;

    let listeners: Api<DynamicObject> = lb_listeners(&client, &ns.name);
    let uid = gateway_json(&client, &ns.name).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let ours =
        kube::api::ListParams::default().labels(&format!("gatewright.dev/gateway-uid={uid}"));
    // The listener reads the LB's ARN. Someone else's finalizer holds it, so the teardown
    // can be looked at midway.
    let listener = wait_for("the listener reading the LB", T, || async {
        listeners
            .list(&ours)
            .await
            .unwrap()
            .items
            .into_iter()
            .next()
    })
    .await
    .metadata
    .name
    .unwrap();
    hold(&listeners, &listener, true).await;

    // The worst order: the class and its blueprint first, then the Gateway.
    classes
        .delete(&class, &DeleteParams::default())
        .await
        .unwrap();
    blueprints(&client)
        .delete(&class, &DeleteParams::default())
        .await
        .unwrap();
    Api::<gateway_api::apis::standard::gateways::Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    // The blueprint is gone, yet the order holds: the LB waits for the listener reading it.
    wait_deleting(&listeners, &listener, T).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lb = lbs.get_opt(&lb_name).await.unwrap();
    assert!(
        lb.is_some_and(|lb| lb.metadata.deletion_timestamp.is_none()),
        "the LB was deleted while a listener still read it"
    );
    // The class stays while its Gateway tears down.
    let c = classes.get(&class).await.unwrap();
    assert!(
        c.metadata.deletion_timestamp.is_some(),
        "the class is being deleted"
    );
    hold(&listeners, &listener, false).await;
    wait_gateway_gone(&client, &ns.name, T).await;
    assert!(
        lbs.get_opt(&lb_name).await.unwrap().is_none(),
        "the Gateway went before its LB"
    );
    // The class waits for the Gateway's teardown, then goes.
    wait_class_gone(&client, &class, T).await;
    ns.delete().await;
}

#[tokio::test]
async fn a_gateway_whose_class_vanished_mid_teardown_is_still_torn_down() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "noclass").await;
    let class = format!("noclass-{}", ns.name);
    apply_yaml(&client, &cm_blueprint(&class, 600)).await;
    apply_yaml(&client, &cm_gateway(&ns.name, &class, 1)).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for("both children", T, || async {
        (our_cms(&client, &ns.name).await.len() == 2).then_some(())
    })
    .await;
    // Someone else's finalizer holds the reader (deleted first), so the teardown waits.
    hold(&cms, "gw-reader", true).await;
    Api::<gateway_api::apis::standard::gateways::Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleting(&cms, "gw-reader", T).await;

    // The class goes for good, its finalizer stripped by hand.
    let classes: Api<GatewayClass> = Api::all(client.clone());
    classes
        .delete(&class, &DeleteParams::default())
        .await
        .unwrap();
    hold(&classes, &class, false).await;
    wait_class_gone(&client, &class, T).await;
    // Without the class or blueprint, the order comes from the children themselves: the
    // cert (read by the held reader) stays.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left = our_cms(&client, &ns.name).await;
    assert!(
        left.iter().any(|c| c.starts_with("gw-cert-")),
        "the cert went before its reader: {left:?}"
    );

    // Released: the teardown finishes without the class.
    hold(&cms, "gw-reader", false).await;
    wait_gateway_gone(&client, &ns.name, T).await;
    let left: Vec<String> = cms
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("gatewright.dev/parent-uid"))
        })
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(left.is_empty(), "children left behind: {left:?}");
    delete_class(&client, &class).await;
    ns.delete().await;
}
