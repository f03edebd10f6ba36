//! Scale-out: the members of a fleet spread over gatewright replicas through Leases in the
//! hub, the API server being the only coordinator.
//!
//! - Each replica holds a *replica Lease* (`<prefix>-replica-<hash>`) and renews it: the
//!   replicas whose Lease moves are the live ones.
//! - Each member has a *member Lease* (`<prefix>-member-<namespace>.<name>`, the profile's
//!   key in its annotation): only its holder serves the member (watches it, writes to it).
//! - A replica aims at its fair share, `ceil(members / live replicas)`: it takes free
//!   Leases while under it, and lets the Leases it holds above it run out (it stops
//!   serving those members first) so another replica takes them.
//! - A Lease is free when it has no holder, or when this replica has seen its record
//!   unchanged for its whole duration (as client-go's leader election judges expiry: by
//!   our own clock since we saw it change, never by comparing clocks). A Lease held by
//!   a replica that died moves within its duration plus one tick.
//! - Which members a replica prefers is rendezvous hashing of (member, replica): the
//!   replicas mostly reach for different Leases, and a new replica's share comes from
//!   every other replica alike.
//!
//! The writes are the shell's (`controller::share`), each a replace under the Lease's
//! `resourceVersion`, so two replicas can never both take one Lease; a replica writes to
//! a member only while its Lease is fresh (the member's write fence). Nothing here does
//! I/O or reads a clock: times are arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Label on every Lease of the share: the prefix (the leader-election Lease name), so
/// that two fleets in one namespace keep apart.
pub const LABEL_SHARE: &str = "gatewright.dev/fleet-share";
/// Label telling member Leases (`member`) from replica Leases (`replica`).
pub const LABEL_LEASE_KIND: &str = "gatewright.dev/fleet-lease";
/// Annotation on a member Lease: the ClusterProfile it is for (`namespace/name`).
pub const ANNOTATION_MEMBER: &str = "gatewright.dev/member";
/// How long a Lease of the share lasts without a renewal.
pub const LEASE_SECONDS: u64 = 15;
/// How often a replica renews and looks at the share.
pub const TICK: Duration = Duration::from_secs(4);

/// A Lease of the share, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    /// Its name.
    pub name: String,
    /// Member or replica.
    pub kind: LeaseKind,
    /// For a member Lease: the profile key.
    pub member: Option<String>,
    /// Who holds it (empty or absent: nobody).
    pub holder: Option<String>,
    /// `metadata.resourceVersion`: what a replace must name.
    pub resource_version: String,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
}

/// Member or replica Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseKind {
    /// A member's: its holder serves the member.
    Member,
    /// A replica's heartbeat.
    Replica,
}

impl LeaseView {
    /// Reads a Lease as the API server returns it; `None` for one that is not of the
    /// share (no kind label).
    #[must_use]
    pub fn of(lease: &Value) -> Option<Self> {
        let meta = &lease["metadata"];
        let kind = match meta["labels"][LABEL_LEASE_KIND].as_str()? {
            "member" => LeaseKind::Member,
            "replica" => LeaseKind::Replica,
            _ => return None,
        };
        let spec = &lease["spec"];
        Some(Self {
            name: meta["name"].as_str()?.to_owned(),
            kind,
            member: meta["annotations"][ANNOTATION_MEMBER]
                .as_str()
                .map(str::to_owned),
            holder: spec["holderIdentity"]
                .as_str()
                .filter(|h| !h.is_empty())
                .map(str::to_owned),
            resource_version: meta["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            duration: Duration::from_secs(
                spec["leaseDurationSeconds"]
                    .as_u64()
                    .unwrap_or(LEASE_SECONDS),
            ),
        })
    }
}

/// The name of a member's Lease: readable when it fits a Lease name, else hashed.
#[must_use]
pub fn member_lease_name(prefix: &str, member: &str) -> String {
    let readable = format!("{prefix}-member-{}", member.replace('/', "."));
    if readable.len() <= 253 {
        readable
    } else {
        format!("{prefix}-member-{}", short_hash(member))
    }
}

/// The name of a replica's Lease (an identity may hold characters a name may not).
#[must_use]
pub fn replica_lease_name(prefix: &str, identity: &str) -> String {
    format!("{prefix}-replica-{}", short_hash(identity))
}

fn short_hash(s: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(s.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How much `replica` wants `member` (rendezvous hashing): higher first.
fn score(member: &str, replica: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(format!("{member}\u{0}{replica}").as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

/// What this replica has seen of each Lease over time: the record (resourceVersion) and
/// when it first saw it.
#[derive(Debug, Default)]
pub struct Observed {
    seen: BTreeMap<String, (String, Instant)>,
}

impl Observed {
    /// Takes a listing in: a Lease whose record changed is seen anew at `now`; Leases
    /// gone are forgotten.
    pub fn take(&mut self, leases: &[LeaseView], now: Instant) {
        let names: BTreeSet<&str> = leases.iter().map(|l| l.name.as_str()).collect();
        self.seen.retain(|n, _| names.contains(n.as_str()));
        for l in leases {
            let fresh = self
                .seen
                .get(&l.name)
                .is_none_or(|(rv, _)| *rv != l.resource_version);
            if fresh {
                self.seen
                    .insert(l.name.clone(), (l.resource_version.clone(), now));
            }
        }
    }

    /// Whether `l` has gone unchanged, as this replica saw it, for at least its duration.
    #[must_use]
    pub fn expired(&self, l: &LeaseView, now: Instant) -> bool {
        self.seen
            .get(&l.name)
            .filter(|(rv, _)| *rv == l.resource_version)
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) >= l.duration)
    }

    /// Whether `l` can be taken: nobody holds it, or it ran out.
    #[must_use]
    pub fn free(&self, l: &LeaseView, now: Instant) -> bool {
        l.holder.is_none() || self.expired(l, now)
    }
}

/// What a replica decides on one tick.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Members whose Lease it holds and keeps: renew them.
    pub renew: Vec<String>,
    /// Members to take: the Lease as listed (`None`: it does not exist yet, create it).
    pub take: Vec<(String, Option<LeaseView>)>,
    /// Members it holds and stops serving (no longer in the inventory, or above its
    /// share): let go of them and stop renewing, so the Lease runs out for another.
    pub give_up: Vec<String>,
    /// Replicas seen alive, this one included.
    pub replicas: usize,
    /// Its fair share of the members.
    pub share: usize,
}

/// One tick's decision for replica `me`: `members` are those the inventory would serve
/// (healthy, reachable through their credentials), `held` those whose Lease `me` holds
/// (as its last successful writes said), `leases` the share's Leases as just listed and
/// taken into `observed`.
#[must_use]
pub fn decide(
    me: &str,
    members: &BTreeSet<String>,
    held: &BTreeSet<String>,
    leases: &[LeaseView],
    observed: &Observed,
    now: Instant,
) -> Decision {
    let replicas = leases
        .iter()
        .filter(|l| l.kind == LeaseKind::Replica)
        .filter(|l| l.holder.as_deref() != Some(me) && !observed.free(l, now))
        .count()
        + 1;
    let share = members.len().div_ceil(replicas);
    let by_member: BTreeMap<&str, &LeaseView> = leases
        .iter()
        .filter(|l| l.kind == LeaseKind::Member)
        .filter_map(|l| Some((l.member.as_deref()?, l)))
        .collect();
    let mut d = Decision {
        replicas,
        share,
        ..Decision::default()
    };
    // Keep what is still wanted and ours, best score first, up to the share.
    let mut mine: Vec<&String> = held
        .iter()
        .filter(|m| members.contains(*m))
        .filter(|m| {
            // A Lease another replica holds now (ours ran out and it took it) is lost.
            by_member
                .get(m.as_str())
                .is_none_or(|l| l.holder.as_deref() == Some(me))
        })
        .collect();
    mine.sort_by_key(|m| std::cmp::Reverse(score(m, me)));
    for (i, m) in mine.iter().enumerate() {
        if i < share {
            d.renew.push((*m).clone());
        } else {
            d.give_up.push((*m).clone());
        }
    }
    let lost: Vec<String> = held
        .iter()
        .filter(|m| !d.renew.contains(m) && !d.give_up.contains(m))
        .cloned()
        .collect();
    d.give_up.extend(lost);
    // Take free Leases, best score first, until the share is reached.
    let mut free: Vec<(&String, Option<&LeaseView>)> = members
        .iter()
        .filter(|m| !held.contains(*m))
        .filter_map(|m| match by_member.get(m.as_str()) {
            None => Some((m, None)),
            Some(l) if observed.free(l, now) => Some((m, Some(*l))),
            Some(_) => None,
        })
        .collect();
    free.sort_by_key(|(m, _)| std::cmp::Reverse(score(m, me)));
    let room = share.saturating_sub(d.renew.len());
    d.take = free
        .into_iter()
        .take(room)
        .map(|(m, l)| (m.clone(), l.cloned()))
        .collect();
    d
}

/// Replica Leases that have run out by `observed` for twice their duration: left behind
/// by replicas that died (each start has an identity of its own); any replica may delete
/// them.
#[must_use]
pub fn dead_replicas<'a>(
    me: &str,
    leases: &'a [LeaseView],
    observed: &Observed,
    now: Instant,
) -> Vec<&'a LeaseView> {
    leases
        .iter()
        .filter(|l| l.kind == LeaseKind::Replica && l.holder.as_deref() != Some(me))
        .filter(|l| {
            observed.seen.get(&l.name).is_some_and(|(rv, at)| {
                *rv == l.resource_version && now.saturating_duration_since(*at) >= 2 * l.duration
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(m: &str, holder: Option<&str>, rv: &str) -> LeaseView {
        LeaseView {
            name: member_lease_name("gw", m),
            kind: LeaseKind::Member,
            member: Some(m.to_owned()),
            holder: holder.map(str::to_owned),
            resource_version: rv.to_owned(),
            duration: Duration::from_secs(LEASE_SECONDS),
        }
    }

    fn replica(id: &str, rv: &str) -> LeaseView {
        LeaseView {
            name: replica_lease_name("gw", id),
            kind: LeaseKind::Replica,
            member: None,
            holder: Some(id.to_owned()),
            resource_version: rv.to_owned(),
            duration: Duration::from_secs(LEASE_SECONDS),
        }
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn members(n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("fleet/m{i}")).collect()
    }

    #[test]
    fn a_lone_replica_takes_every_member_and_creates_missing_leases() {
        let now = Instant::now();
        let obs = Observed::default();
        let d = decide("a", &members(3), &BTreeSet::new(), &[], &obs, now);
        assert_eq!(d.replicas, 1);
        assert_eq!(d.share, 3);
        assert_eq!(d.take.len(), 3);
        assert!(d.take.iter().all(|(_, l)| l.is_none()));
        assert!(d.renew.is_empty() && d.give_up.is_empty());
    }

    #[test]
    fn a_second_replica_halves_the_share_and_the_first_gives_up_the_rest() {
        let now = Instant::now();
        let ms = members(4);
        let leases: Vec<LeaseView> = ms
            .iter()
            .map(|m| member(m, Some("a"), "1"))
            .chain([replica("a", "1"), replica("b", "1")])
            .collect();
        let mut obs = Observed::default();
        obs.take(&leases, now);
        let a = decide("a", &ms, &ms, &leases, &obs, now);
        assert_eq!((a.replicas, a.share), (2, 2));
        assert_eq!(a.renew.len(), 2);
        assert_eq!(a.give_up.len(), 2);
        assert!(a.take.is_empty());
        // b cannot take them until a's Leases ran out as b saw them.
        let b = decide("b", &ms, &BTreeSet::new(), &leases, &obs, now);
        assert!(b.take.is_empty(), "{b:?}");
        // a keeps renewing its own Lease and the two it kept; the two it gave up run out.
        let later = now + Duration::from_secs(LEASE_SECONDS);
        let leases: Vec<LeaseView> = leases
            .into_iter()
            .map(|mut l| {
                if l.kind == LeaseKind::Replica
                    || l.member.as_ref().is_some_and(|m| a.renew.contains(m))
                {
                    l.resource_version = "2".into();
                }
                l
            })
            .collect();
        obs.take(&leases, later - Duration::from_secs(1));
        let b = decide("b", &ms, &BTreeSet::new(), &leases, &obs, later);
        assert_eq!((b.replicas, b.share), (2, 2));
        let taken: BTreeSet<String> = b.take.iter().map(|(m, _)| m.clone()).collect();
        let given: BTreeSet<String> = a.give_up.iter().cloned().collect();
        assert_eq!(taken, given, "b takes exactly what a gave up");
    }

    #[test]
    fn a_lease_that_moves_is_never_free_and_one_that_stops_is_free_after_its_duration() {
        let t0 = Instant::now();
        let mut obs = Observed::default();
        let mut l = member("fleet/m0", Some("a"), "1");
        obs.take(std::slice::from_ref(&l), t0);
        let t1 = t0 + Duration::from_secs(10);
        l.resource_version = "2".into();
        obs.take(std::slice::from_ref(&l), t1);
        assert!(!obs.free(&l, t0 + Duration::from_secs(20)));
        assert!(obs.free(&l, t1 + Duration::from_secs(LEASE_SECONDS)));
        // Nobody holding it: free at once.
        let empty = member("fleet/m1", None, "3");
        assert!(obs.free(&empty, t0));
        // Never seen before: its duration counts from now.
        assert!(!Observed::default().free(&l, t1));
    }

    #[test]
    fn a_lease_taken_by_another_replica_is_given_up() {
        let now = Instant::now();
        let ms = members(1);
        let leases = vec![member("fleet/m0", Some("b"), "9")];
        let mut obs = Observed::default();
        obs.take(&leases, now);
        let d = decide("a", &ms, &ms, &leases, &obs, now);
        assert_eq!(d.give_up, vec!["fleet/m0".to_owned()]);
        assert!(d.renew.is_empty() && d.take.is_empty());
    }

    #[test]
    fn members_leaving_the_inventory_are_given_up() {
        let now = Instant::now();
        let held = set(&["fleet/m0", "fleet/gone"]);
        let d = decide(
            "a",
            &set(&["fleet/m0"]),
            &held,
            &[],
            &Observed::default(),
            now,
        );
        assert_eq!(d.renew, vec!["fleet/m0".to_owned()]);
        assert_eq!(d.give_up, vec!["fleet/gone".to_owned()]);
    }

    #[test]
    fn replicas_prefer_different_members() {
        // With many members and two replicas, rendezvous hashing sends each replica
        // mostly after members the other does not want first.
        let ms = members(40);
        let now = Instant::now();
        let leases = vec![replica("a", "1"), replica("b", "1")];
        let mut obs = Observed::default();
        obs.take(&leases, now);
        let a = decide("a", &ms, &BTreeSet::new(), &leases, &obs, now);
        let b = decide("b", &ms, &BTreeSet::new(), &leases, &obs, now);
        assert_eq!((a.share, b.share), (20, 20));
        let a: BTreeSet<&String> = a.take.iter().map(|(m, _)| m).collect();
        let overlap = b.take.iter().filter(|(m, _)| a.contains(m)).count();
        assert!(overlap < 20, "{overlap} of 20 wanted by both");
    }

    #[test]
    fn dead_replicas_are_those_unchanged_for_twice_their_duration() {
        let t0 = Instant::now();
        let leases = vec![replica("a", "1"), replica("dead", "4")];
        let mut obs = Observed::default();
        obs.take(&leases, t0);
        assert!(dead_replicas("a", &leases, &obs, t0 + Duration::from_secs(20)).is_empty());
        let dead = dead_replicas("a", &leases, &obs, t0 + Duration::from_secs(30));
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].holder.as_deref(), Some("dead"));
        // A dead replica does not count towards the share once its Lease ran out.
        let ms = members(2);
        let d = decide(
            "a",
            &ms,
            &BTreeSet::new(),
            &leases,
            &obs,
            t0 + Duration::from_secs(15),
        );
        assert_eq!((d.replicas, d.share), (1, 2));
    }

    #[test]
    fn lease_names_are_valid_names() {
        assert_eq!(
            member_lease_name("gatewright", "fleet/east"),
            "gatewright-member-fleet.east"
        );
        let long = format!("fleet/{}", "a".repeat(250));
        let n = member_lease_name("gatewright", &long);
        assert!(n.len() <= 253 && n.starts_with("gatewright-member-"));
        let r = replica_lease_name("gatewright", "pod-1_17a");
        assert!(
            r.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }

    #[test]
    fn lease_view_reads_what_the_api_server_returns() {
        let l = LeaseView::of(&serde_json::json!({
            "metadata": {"name": "gw-member-fleet.east", "resourceVersion": "12",
                "labels": {LABEL_LEASE_KIND: "member", LABEL_SHARE: "gw"},
                "annotations": {ANNOTATION_MEMBER: "fleet/east"}},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 15}
        }))
        .unwrap();
        assert_eq!(l.member.as_deref(), Some("fleet/east"));
        assert_eq!(l.holder, None);
        assert_eq!(l.kind, LeaseKind::Member);
        assert!(LeaseView::of(&serde_json::json!({"metadata": {"name": "x"}})).is_none());
    }
}
