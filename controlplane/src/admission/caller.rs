//! Who may have a disruption reviewed (pure): with `--webhook-client-ca` the control plane
//! knows the CA of the client certificate the apiserver presents to admission webhooks
//! (its `AdmissionConfiguration`, docs/security.md), and answers reviews only for a caller
//! that presented a certificate that CA signed (verified in the TLS handshake,
//! `runtime::tls_listener`) and, when `--webhook-client-names` lists names, whose
//! common name is one of them (for a CA that signs other clients too, such as a cluster
//! CA). Without the CA every caller is answered, as before: the pod check of the review
//! (`review::confirm`) and the NetworkPolicy are then what stand in the way.

use x509_parser::prelude::{FromDer as _, X509Certificate};

/// The callers admitted when the apiserver's client CA is configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallerPolicy {
    /// Common names admitted; empty admits any certificate the CA signed.
    pub names: Vec<String>,
}

/// Whether the caller that presented `certificate` (DER, already verified against the
/// client CA; `None` when it presented none) may have a review answered: `Err` holds the
/// sentence it is refused with.
pub fn admit_caller(
    policy: Option<&CallerPolicy>,
    certificate: Option<&[u8]>,
) -> Result<(), String> {
    let Some(policy) = policy else {
        return Ok(());
    };
    let Some(der) = certificate else {
        return Err(
            "This webhook answers the apiserver only: the caller presented no client \
                    certificate signed by the CA of --webhook-client-ca."
                .to_owned(),
        );
    };
    if policy.names.is_empty() {
        return Ok(());
    }
    let name = common_name(der).ok_or_else(|| {
        "The caller's client certificate names no common name, and --webhook-client-names \
         admits only named callers."
            .to_owned()
    })?;
    if policy.names.contains(&name) {
        Ok(())
    } else {
        Err(format!(
            "The caller's client certificate names {name:?}, which is not in \
             --webhook-client-names ({}).",
            policy.names.join(", ")
        ))
    }
}

/// The subject's first common name of a DER certificate.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, certificate) = X509Certificate::from_der(der).ok()?;
    let name = certificate.subject().iter_common_name().next()?;
    name.as_str().ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    use super::*;

    /// A self-signed certificate (DER) with the common name `cn`, or none at all.
    fn certificate(cn: Option<&str>) -> Vec<u8> {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.not_before = SystemTime::now().into();
        params
            .self_signed(&key)
            .expect("certificate")
            .der()
            .to_vec()
    }

    #[test]
    fn a_caller_is_admitted_by_its_certificate_where_a_client_ca_is_configured() {
        let apiserver = certificate(Some("stevedore-webhook-client"));
        let kubelet = certificate(Some("system:node:a"));
        let nameless = certificate(None);
        let any = CallerPolicy::default();
        let named = CallerPolicy {
            names: vec!["stevedore-webhook-client".to_owned()],
        };
        type Case<'a> = (
            &'a str,
            Option<&'a CallerPolicy>,
            Option<&'a [u8]>,
            Result<(), &'a str>,
        );
        let cases: [Case<'_>; 7] = [
            ("no client CA, no certificate", None, None, Ok(())),
            ("no client CA, a certificate", None, Some(&kubelet), Ok(())),
            (
                "client CA, no certificate",
                Some(&any),
                None,
                Err(
                    "This webhook answers the apiserver only: the caller presented no client certificate signed by the CA of --webhook-client-ca.",
                ),
            ),
            ("client CA, any name", Some(&any), Some(&kubelet), Ok(())),
            (
                "client CA, the named caller",
                Some(&named),
                Some(&apiserver),
                Ok(()),
            ),
            (
                "client CA, another name",
                Some(&named),
                Some(&kubelet),
                Err(
                    "The caller's client certificate names \"system:node:a\", which is not in --webhook-client-names (stevedore-webhook-client).",
                ),
            ),
            (
                "client CA, no common name",
                Some(&named),
                Some(&nameless),
                Err(
                    "The caller's client certificate names no common name, and --webhook-client-names admits only named callers.",
                ),
            ),
        ];
        for (case, policy, presented, want) in cases {
            let got = admit_caller(policy, presented);
            assert_eq!(got, want.map_err(str::to_owned), "{case}");
        }
    }
}
