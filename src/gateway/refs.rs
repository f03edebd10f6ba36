//! References across namespaces (ReferenceGrant, GEP-709) and what we know of TLS
//! Secrets: their type and whether `tls.crt` / `tls.key` hold PEM that parses.

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;

/// The Secret type for TLS certificates.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// What TLS validation needs of a Secret (its data is not kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretInfo {
    /// `type`, `Opaque` when unset.
    pub type_: String,
    /// `tls.crt` holds at least one PEM certificate and `tls.key` a PEM private key.
    pub tls_valid: bool,
}

impl SecretInfo {
    /// Reads a Secret (`data`, or `stringData` as a client would send it).
    #[must_use]
    pub fn from_secret(secret: &Secret) -> Self {
        let get = |k: &str| -> Option<Vec<u8>> {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .map(|b| b.0.clone())
                .or_else(|| {
                    secret
                        .string_data
                        .as_ref()
                        .and_then(|d| d.get(k))
                        .map(|s| s.as_bytes().to_vec())
                })
        };
        let crt = get("tls.crt").is_some_and(|b| has_pem_block(&b, |label| label == "CERTIFICATE"));
        let key = get("tls.key")
            .is_some_and(|b| has_pem_block(&b, |label| label.ends_with("PRIVATE KEY")));
        Self {
            type_: secret.type_.clone().unwrap_or_else(|| "Opaque".into()),
            tls_valid: crt && key,
        }
    }
}

/// Whether `bytes` hold a PEM block with an accepted label and a base64 body that decodes
/// to something that starts like DER (a SEQUENCE).
fn has_pem_block(bytes: &[u8], accept: impl Fn(&str) -> bool) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        rest = &rest[start + 11..];
        let Some(end_label) = rest.find("-----") else {
            return false;
        };
        let label = rest[..end_label].to_owned();
        rest = &rest[end_label + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = rest.find(&end_marker) else {
            return false;
        };
        let body: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
        rest = &rest[end + end_marker.len()..];
        if accept(&label)
            && let Ok(der) = base64::engine::general_purpose::STANDARD.decode(body)
            && der.len() > 16
            && der[0] == 0x30
        {
            return true;
        }
    }
    false
}

/// The Secrets a Gateway's listeners name as `(namespace, name)` (core group, kind
/// `Secret`; a certificateRef of another kind is not a Secret).
pub fn secret_refs(
    g: &gateway_api::apis::standard::gateways::Gateway,
) -> impl Iterator<Item = (String, String)> + '_ {
    let ns = g.metadata.namespace.as_deref().unwrap_or_default();
    g.spec
        .listeners
        .iter()
        .filter_map(|l| l.tls.as_ref())
        .flat_map(|t| t.certificate_refs.iter().flatten())
        .filter(|r| {
            r.group.as_deref().unwrap_or_default().is_empty()
                && r.kind.as_deref().unwrap_or("Secret") == "Secret"
        })
        .map(move |r| {
            (
                r.namespace.as_deref().unwrap_or(ns).to_owned(),
                r.name.clone(),
            )
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    /// A self-signed certificate and key for tests.
    pub const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBhDCCASmgAwIBAgIUQ8mtS+J2DwgW6asVvBBAjrnjA3UwCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLZXhhbXBsZS5jb20wIBcNMjYxMTIyMTUxNjI0WhgPMjEyNjEw
MjkxNTE2MjRaMBYxFDASBgNVBAMMC2V4YW1wbGUuY29tMFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAE42bWD9zoijzmqUIGJj4a8uCU1ivNgO9LYYtJT13KYmUUNNUm
MhyMam5UOU5dAk6Nhh/j+cHtD592+fKruPM+OKNTMFEwHQYDVR0OBBYEFLHnT5q2
2emw893loxvK2Oerig5lMB8GA1UdIwQYMBaAFLHnT5q22emw893loxvK2Oerig5l
MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAJ+LCRNl272IqM2D
xZnS7V6TqWy61xNIP5Je9qdXLG/pAiEA7SSinVkF/PtuXXqQcUYe/mbCS7Ksova7
TAIrziWBpyM=
-----END CERTIFICATE-----
";
    /// The key.
    pub const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgy5W9azEI9a9GFdHj
nOJ6NwCFor9zpBTSNTkh7/xXjr2hRANCAATjZtYP3OiKPOapQgYmPhry4JTWK82A
70thi0lPXcpiZRQ01SYyHIxqblQ5Tl0CTo2GH+P5we0Pn3b58qu48z44
-----END PRIVATE KEY-----
";

    pub fn secret(type_: &str, crt: &[u8], key: &[u8]) -> Secret {
        Secret {
            type_: Some(type_.into()),
            data: Some(BTreeMap::from([
                ("tls.crt".into(), ByteString(crt.to_vec())),
                ("tls.key".into(), ByteString(key.to_vec())),
            ])),
            ..Secret::default()
        }
    }

    #[test]
    fn pem_validity() {
        assert!(
            SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, CERT.as_bytes(), KEY.as_bytes()))
                .tls_valid
        );
        assert!(
            !SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, b"Hello world\n", KEY.as_bytes()))
                .tls_valid
        );
        assert!(!SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, CERT.as_bytes(), b"")).tls_valid);
        let garbage = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(
            !SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, garbage.as_bytes(), KEY.as_bytes()))
                .tls_valid
        );
        assert_eq!(SecretInfo::from_secret(&Secret::default()).type_, "Opaque");
    }
}
