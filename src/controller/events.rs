//! Events (events.k8s.io/v1) about our objects. An Event repeated within
//! [`SERIES_WINDOW`] (same object, type, reason, action **and note**) is counted on the
//! first one's `series` rather than written again, as the Events API intends.
//!
//! kube-runtime's `Recorder` leaves the note out of what makes two Events the same: a
//! `RolloutStarted` for a second version, a `TemplateFailed` with another error or a
//! `DeletionStuck` for another child within six minutes only raised the count of the first
//! one, whose note then told the wrong story. Here a different note is a new Event.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::Mutex;

/// How long a published Event takes repeats into its series.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// What makes two Events the same.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Same {
    regarding: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    warning: bool,
    reason: String,
    action: String,
    note: String,
}

/// One Event published: its name, how often it happened, when last.
#[derive(Debug)]
struct Published {
    name: String,
    namespace: String,
    count: i32,
    last: Instant,
}

/// Publishes Events as `controller` (instance `instance`).
pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    published: Mutex<HashMap<Same, Published>>,
}

impl Events {
    /// An Event publisher for `controller`; `instance` defaults to the controller's name.
    #[must_use]
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: instance.unwrap_or_else(|| controller.to_owned()),
            published: Mutex::new(HashMap::new()),
        }
    }

    /// Publishes an Event about `regarding`, or counts it on the same one published within
    /// [`SERIES_WINDOW`].
    ///
    /// # Errors
    /// The API server refused the Event.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<(), kube::Error> {
        let same = Same {
            regarding: (
                regarding.kind.clone(),
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
            ),
            warning,
            reason: reason.to_owned(),
            action: action.to_owned(),
            note: note.to_owned(),
        };
        let now = Instant::now();
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        // The lock is not held across a request: an API server that is slow to answer
        // must not hold up every other worker's Events.
        let repeat = {
            let mut published = self.published.lock().await;
            published.retain(|_, p| now.duration_since(p.last) < SERIES_WINDOW);
            published.get_mut(&same).map(|p| {
                p.count += 1;
                p.last = now;
                (p.name.clone(), p.namespace.clone(), p.count)
            })
        };
        if let Some((name, ns, count)) = repeat {
            let patch = serde_json::json!({
                "series": EventSeries { count, last_observed_time: MicroTime(Timestamp::now()) },
            });
            Api::<Event>::namespaced(self.client.clone(), &ns)
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(());
        }
        let at = Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(&self.controller),
                    at.as_nanosecond()
                )),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            action: Some(action.to_owned()),
            reason: Some(reason.to_owned()),
            note: Some(note.to_owned()),
            type_: Some(if warning { "Warning" } else { "Normal" }.to_owned()),
            event_time: Some(MicroTime(at)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        };
        let created = Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        self.published.lock().await.insert(
            same,
            Published {
                name: created.metadata.name.unwrap_or_default(),
                namespace,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }
}
