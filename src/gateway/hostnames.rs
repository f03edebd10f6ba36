//! Hostnames: validation, listener/route intersection (GATEWAY-API.md 4.3), and the set
//! operations behind `hostnames.union` / `hostnames.intersection`.

/// Checks a DNS name with an optional leading `*.` label: at most 253 characters,
/// labels of 1-63 lowercase letters, digits and `-`, not starting or ending with `-`,
/// and not an IP address.
///
/// # Errors
/// What is wrong, in a sentence.
pub fn validate_hostname(h: &str) -> Result<(), String> {
    if h.is_empty() {
        return Err("hostname is empty".into());
    }
    if h.len() > 253 {
        return Err(format!("hostname is {} characters, more than 253", h.len()));
    }
    if h.parse::<std::net::IpAddr>().is_ok() {
        return Err("hostname must be a DNS name, not an IP address".into());
    }
    let rest = h.strip_prefix("*.").unwrap_or(h);
    for label in rest.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!(
                "hostname {:?} has an empty or over-long label",
                truncate(h)
            ));
        }
        if !label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(format!(
                "hostname {:?} may only contain lowercase letters, digits, '-' and '.' (and a leading '*.')",
                truncate(h)
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!(
                "hostname {:?} has a label starting or ending with '-'",
                truncate(h)
            ));
        }
    }
    Ok(())
}

fn truncate(h: &str) -> String {
    let s: String = h.chars().take(64).collect();
    if s.len() < h.len() {
        format!("{s}...")
    } else {
        s
    }
}

/// Whether `wildcard` (`*.example.com`) covers `name` (`a.example.com`, `a.b.example.com`,
/// or a more specific wildcard `*.a.example.com`). A wildcard does not cover its own apex.
#[must_use]
pub fn covered_by_wildcard(name: &str, wildcard: &str) -> bool {
    let Some(suffix) = wildcard.strip_prefix('*') else {
        return false;
    };
    name != wildcard && name.len() > suffix.len() && name.ends_with(suffix)
}

/// The hostname traffic is accepted for when a listener with `listener` hostname and a
/// route with `route` hostname meet; `None` when they do not intersect.
#[must_use]
pub fn intersect<'a>(listener: Option<&'a str>, route: &'a str) -> Option<&'a str> {
    let Some(l) = listener else {
        return Some(route);
    };
    if l == route {
        return Some(route);
    }
    match (l.starts_with("*."), route.starts_with("*.")) {
        (false, false) => None,
        (true, false) => covered_by_wildcard(route, l).then_some(route),
        (false, true) => covered_by_wildcard(l, route).then_some(l),
        (true, true) => {
            if covered_by_wildcard(route, l) {
                Some(route)
            } else if covered_by_wildcard(l, route) {
                Some(l)
            } else {
                None
            }
        }
    }
}

/// Sorted, without duplicates.
#[must_use]
pub fn dedupe_sorted(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = names.into_iter().collect();
    v.sort();
    v.dedup();
    v
}

/// Sorted, without duplicates, and without names another wildcard of the set covers.
#[must_use]
pub fn drop_covered(names: &[String]) -> Vec<String> {
    let all = dedupe_sorted(names.iter().cloned());
    // The wildcards first (a few, beside thousands of precise names on a shared Gateway).
    let wildcards: Vec<&String> = all.iter().filter(|w| w.starts_with("*.")).collect();
    if wildcards.is_empty() {
        return all;
    }
    all.iter()
        .filter(|n| !wildcards.iter().any(|w| covered_by_wildcard(n, w)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersection_table() {
        let cases = [
            (None, "a.example.com", Some("a.example.com")),
            (
                Some("a.example.com"),
                "a.example.com",
                Some("a.example.com"),
            ),
            (Some("a.example.com"), "b.example.com", None),
            (
                Some("*.example.com"),
                "test.example.com",
                Some("test.example.com"),
            ),
            (
                Some("*.example.com"),
                "foo.test.example.com",
                Some("foo.test.example.com"),
            ),
            (Some("*.example.com"), "example.com", None),
            (
                Some("very.specific.com"),
                "*.specific.com",
                Some("very.specific.com"),
            ),
            (Some("*.com"), "*.example.com", Some("*.example.com")),
            (Some("*.example.com"), "*.com", Some("*.example.com")),
            (Some("*.example.com"), "*.example.net", None),
            (
                Some("*.wildcard.io"),
                "*.wildcard.io",
                Some("*.wildcard.io"),
            ),
        ];
        for (l, r, want) in cases {
            assert_eq!(intersect(l, r), want, "{l:?} ∩ {r}");
        }
    }

    #[test]
    fn union_and_covered() {
        let names = vec![
            "b.example.com".to_owned(),
            "*.example.com".into(),
            "a.x.io".into(),
            "b.example.com".into(),
            "*.a.example.com".into(),
        ];
        assert_eq!(
            dedupe_sorted(names.clone()),
            [
                "*.a.example.com",
                "*.example.com",
                "a.x.io",
                "b.example.com"
            ]
        );
        assert_eq!(drop_covered(&names), ["*.example.com", "a.x.io"]);
    }

    #[test]
    fn malicious_hostnames_are_rejected() {
        for h in [
            "a\"b.com",
            "a.com\nkind: Secret",
            "a: b",
            "{{ x }}.com",
            "bücher.de",
            "UPPER.com",
            "-a.com",
            "a..com",
            "*.*.com",
            "10.0.0.1",
            "",
            &"a".repeat(300),
            &format!("{}.com", "a".repeat(64)),
        ] {
            assert!(validate_hostname(h).is_err(), "{h:?} should be rejected");
        }
        for h in ["a.com", "*.example.com", "x-1.y.z", "localhost"] {
            assert!(validate_hostname(h).is_ok(), "{h}");
        }
    }
}
