//! The CA kept in a Secret of the control plane's namespace: read if it exists, else
//! created. Every replica does this at start; creation is create-if-absent, so when two
//! replicas race, the loser (409) reads the winner's and both trust and sign with one CA.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::authority::{Authority, AuthorityError};
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::runtime::owner::add_owner;

/// The Secret key holding the CA certificate (PEM).
pub const CA_CERT_KEY: &str = "ca.crt";
/// The Secret key holding the CA private key (PEM).
pub const CA_KEY_KEY: &str = "ca.key";

/// Why there is no CA.
#[derive(Debug, thiserror::Error)]
pub enum CaSecretError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("the Secret {name} lacks {key}; delete it to have a new CA created")]
    Missing { name: String, key: &'static str },
    #[error("the CA in the Secret {name} cannot be used: {source}")]
    Unusable {
        name: String,
        #[source]
        source: AuthorityError,
    },
    #[error(transparent)]
    Generate(AuthorityError),
}

/// The CA from Secret `name` of `secrets`' namespace, created there first if absent.
/// The Secret is made owned by `owner` (the control plane's Deployment), and one made
/// before without it is given it, so it is deleted with the Deployment.
pub async fn load_or_create(
    secrets: &Api<Secret>,
    name: &str,
    owner: Option<&OwnerReference>,
) -> Result<Authority, CaSecretError> {
    let reading = || format!("Reading the CA Secret {name}");
    if let Some(secret) = secrets.get_opt(name).await.map_err(api_error(reading()))? {
        let authority = from_secret(&secret, name)?;
        if let Some(owner) = owner {
            adopt(secrets, secret, owner).await;
        }
        return Ok(authority);
    }
    let authority =
        Authority::generate_named(name, SystemTime::now()).map_err(CaSecretError::Generate)?;
    let mut secret = to_secret(name, &authority);
    if let Some(owner) = owner {
        add_owner(&mut secret.metadata, owner);
    }
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = name, "created the CA and kept it in its Secret");
            Ok(authority)
        }
        Err(err) if status_code(&err) == Some(409) => {
            let secret = secrets.get(name).await.map_err(api_error(reading()))?;
            from_secret(&secret, name)
        }
        Err(err) => Err(api_error(format!("Creating the CA Secret {name}"))(err).into()),
    }
}

/// Gives an ownerless CA Secret (made by an older control plane) its owner. The write
/// carries the read `resourceVersion`, so it changes nothing another replica changed in
/// between; a failure only means the Secret outlives the Deployment, so it is logged.
async fn adopt(secrets: &Api<Secret>, mut secret: Secret, owner: &OwnerReference) {
    if !add_owner(&mut secret.metadata, owner) {
        return;
    }
    let name = secret.metadata.name.clone().unwrap_or_default();
    match secrets
        .replace(&name, &PostParams::default(), &secret)
        .await
    {
        Ok(_) => tracing::info!(
            secret = name,
            owner = owner.name,
            "the CA Secret is now owned by the Deployment"
        ),
        Err(err) => tracing::warn!(
            secret = name,
            error = %api_error(format!("Giving the CA Secret {name} its owner"))(err),
            "the CA Secret keeps no owner and will outlive the Deployment"
        ),
    }
}

fn from_secret(secret: &Secret, name: &str) -> Result<Authority, CaSecretError> {
    let field = |key: &'static str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .and_then(|value| String::from_utf8(value.0.clone()).ok())
            .ok_or_else(|| CaSecretError::Missing {
                name: name.to_owned(),
                key,
            })
    };
    Authority::from_pem(&field(CA_CERT_KEY)?, &field(CA_KEY_KEY)?).map_err(|source| {
        CaSecretError::Unusable {
            name: name.to_owned(),
            source,
        }
    })
}

fn to_secret(name: &str, authority: &Authority) -> Secret {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "stevedore-controlplane".to_owned(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (CA_CERT_KEY.to_owned(), bytes(authority.cert_pem())),
            (CA_KEY_KEY.to_owned(), bytes(authority.key_pem())),
        ])),
        type_: Some("Opaque".to_owned()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_written_reads_back_as_the_same_ca() {
        let authority = Authority::generate(SystemTime::now()).expect("CA");
        let read = from_secret(&to_secret("ca", &authority), "ca").expect("read back");
        assert_eq!(read.cert_pem(), authority.cert_pem());
    }

    #[test]
    fn a_secret_without_the_key_names_what_is_missing() {
        let authority = Authority::generate(SystemTime::now()).expect("CA");
        let mut secret = to_secret("ca", &authority);
        secret.data.as_mut().expect("data").remove(CA_KEY_KEY);
        let err = from_secret(&secret, "ca").expect_err("no key");
        assert!(err.to_string().contains("lacks ca.key"), "{err}");
    }
}
