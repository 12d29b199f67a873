//! Interrupted downloads survive their pull: when a pull's lease is released (the pull
//! failed, timed out or was cancelled, or its agent died and a new one releases the
//! orphaned lease), the blobs it was still writing — containerd ingests — move to one
//! long-lived lease first, so garbage collection keeps them and the next pull of the
//! blob resumes where this one stopped. That lease expires by itself a day after it is
//! created, taking whatever partial downloads nobody resumed with it.

use std::{collections::HashMap, time::Duration};

use containerd_client::services::v1::{
    AddResourceRequest, CreateRequest, ListResourcesRequest, leases_client::LeasesClient,
};
use tonic::Code;

use super::{
    containerd_conn::{Connection, err},
    image_store::{LeaseId, StoreError},
};

/// The lease holding partial downloads between pulls.
pub(super) const PARTIAL_DOWNLOADS_LEASE: &str = "stevedore-partial-downloads";

/// containerd's lease resource type for ingests (`metadata/leases.go`).
const INGEST_RESOURCE: &str = "ingests";

/// How long partial downloads are kept at most.
const KEEP_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// Moves the ingests `lease` holds to [`PARTIAL_DOWNLOADS_LEASE`]; returns how many.
pub(super) async fn keep(conn: &Connection, lease: &LeaseId) -> Result<usize, StoreError> {
    if lease.0 == PARTIAL_DOWNLOADS_LEASE {
        return Ok(0);
    }
    let request = conn.request(
        ListResourcesRequest {
            id: lease.0.clone(),
        },
        None,
    )?;
    let resources = match LeasesClient::new(conn.channel())
        .list_resources(request)
        .await
    {
        Ok(response) => response.into_inner().resources,
        Err(status) if status.code() == Code::NotFound => return Ok(0),
        Err(status) => {
            return Err(StoreError::new(
                format!("list resources of lease {}", lease.0),
                &status,
            ));
        }
    };
    let ingests: Vec<_> = resources
        .into_iter()
        .filter(|r| r.r#type == INGEST_RESOURCE)
        .collect();
    if ingests.is_empty() {
        return Ok(0);
    }
    create_lease(conn).await?;
    for resource in &ingests {
        let request = conn.request(
            AddResourceRequest {
                id: PARTIAL_DOWNLOADS_LEASE.to_owned(),
                resource: Some(resource.clone()),
            },
            None,
        )?;
        LeasesClient::new(conn.channel())
            .add_resource(request)
            .await
            .map_err(err(format!("keep partial download {}", resource.id)))?;
    }
    Ok(ingests.len())
}

/// Creates the lease unless it exists. It has no owner label: no agent's death
/// releases it, only its expiry.
async fn create_lease(conn: &Connection) -> Result<(), StoreError> {
    let expire = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::try_from(KEEP_FOR).unwrap_or_default())
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let request = conn.request(
        CreateRequest {
            id: PARTIAL_DOWNLOADS_LEASE.to_owned(),
            labels: HashMap::from([("containerd.io/gc.expire".to_owned(), expire.to_string())]),
        },
        None,
    )?;
    match LeasesClient::new(conn.channel()).create(request).await {
        Ok(_) => Ok(()),
        Err(status) if status.code() == Code::AlreadyExists => Ok(()),
        Err(status) => Err(StoreError::new(
            "create the partial downloads lease",
            &status,
        )),
    }
}
