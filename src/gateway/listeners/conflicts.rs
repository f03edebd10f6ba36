//! Conflicts: listeners sharing a port must be distinct (by protocol family and
//! hostname); a listener of a later source loses to an earlier one, within one source all
//! indistinct listeners are conflicted.

use std::collections::BTreeMap;

use super::ListenerEval;
use crate::gateway::conditions::{Cond, reasons, types};

fn family(protocol: &str) -> &str {
    match protocol {
        "HTTPS" | "TLS" => "tls",
        other => other,
    }
}

/// Why two listeners of one port are not distinct (GatewaySpec.Listeners godoc), if they
/// are not. UDP runs beside every TCP-based protocol on a port and conflicts only with
/// UDP; TCP takes the whole port, so every other TCP-based listener on it conflicts; HTTP,
/// HTTPS and TLS need one family (HTTPS and TLS are one: SNI tells them apart, and a TLS
/// listener in `Terminate` mode beside one in `Passthrough` is mixed mode, which we
/// support) and distinct hostnames.
fn conflict_between(a: &ListenerEval, b: &ListenerEval) -> Option<(&'static str, String)> {
    let udp = (a.protocol == "UDP", b.protocol == "UDP");
    if udp.0 != udp.1 {
        return None;
    }
    if udp.0 || a.protocol == "TCP" || b.protocol == "TCP" {
        return Some((
            reasons::PROTOCOL_CONFLICT,
            format!(
                "port {} is also used by listener {:?} with protocol {}{}",
                a.port,
                b.name,
                b.protocol,
                if a.protocol == b.protocol {
                    format!(": {} listeners are told apart by port alone", a.protocol)
                } else {
                    String::new()
                }
            ),
        ));
    }
    if family(&a.protocol) != family(&b.protocol) {
        return Some((
            reasons::PROTOCOL_CONFLICT,
            format!(
                "port {} is also used by listener {:?} with protocol {}",
                a.port, b.name, b.protocol
            ),
        ));
    }
    (a.hostname == b.hostname).then(|| {
        (
            reasons::HOSTNAME_CONFLICT,
            format!("listener {:?} uses the same port and hostname", b.name),
        )
    })
}

/// Listeners sharing a port must be distinct ([`conflict_between`]); every listener of an
/// indistinct pair is conflicted and not accepted, a protocol conflict naming itself before
/// a hostname conflict.
///
/// Only listeners accepted on their own take part (`GatewaySpec.Listeners` godoc): a
/// listener whose protocol we do not support (`UnsupportedProtocol`), or whose hostname or
/// port is invalid, produces no configuration, so it cannot conflict with another listener
/// and keeps its own reason.
pub(super) fn mark_conflicts(listeners: &mut [ListenerEval], ranks: &[usize]) {
    let rank = |i: usize| ranks.get(i).copied().unwrap_or(0);
    let mut by_port: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        if l.accepted.status.is_true() {
            by_port.entry(l.port).or_default().push(i);
        }
    }
    let mut all_ranks: Vec<usize> = ranks.to_vec();
    all_ranks.push(0);
    all_ranks.sort_unstable();
    all_ranks.dedup();
    for idx in by_port.values() {
        // Source by source, in precedence order (the Gateway, then ListenerSets): a
        // listener that conflicts with a listener of an earlier source that stands is the
        // one conflicted; then, among the rest of one source, every indistinct one is.
        for &r in &all_ranks {
            let mine: Vec<usize> = idx.iter().copied().filter(|&i| rank(i) == r).collect();
            // Against the listeners of earlier sources that stand, then among the rest.
            let earlier: Vec<usize> = idx
                .iter()
                .copied()
                .filter(|&j| rank(j) < r && listeners[j].conflicted.is_none())
                .collect();
            let lost = first_conflicts(listeners, &mine, &earlier);
            let rest: Vec<usize> = mine
                .iter()
                .copied()
                .filter(|i| !lost.iter().any(|(l, ..)| l == i))
                .collect();
            let among = first_conflicts(listeners, &rest, &rest);
            for (i, reason, msg) in lost.into_iter().chain(among) {
                let l = &mut listeners[i];
                l.conflicted = Some(Cond::t(types::CONFLICTED, reason, &msg));
                l.accepted = Cond::f(types::ACCEPTED, reason, &msg);
            }
        }
    }
}

/// For each of `which`, its conflict with one of `others` (itself aside), a protocol
/// conflict before a hostname one.
fn first_conflicts(
    listeners: &[ListenerEval],
    which: &[usize],
    others: &[usize],
) -> Vec<(usize, &'static str, String)> {
    let mut out = Vec::new();
    for &i in which {
        let mut conflict: Option<(&'static str, String)> = None;
        for &j in others.iter().filter(|&&j| j != i) {
            match conflict_between(&listeners[i], &listeners[j]) {
                Some(c) if c.0 == reasons::PROTOCOL_CONFLICT => {
                    conflict = Some(c);
                    break;
                }
                Some(c) => {
                    conflict.get_or_insert(c);
                }
                None => {}
            }
        }
        if let Some((reason, msg)) = conflict {
            out.push((i, reason, msg));
        }
    }
    out
}
