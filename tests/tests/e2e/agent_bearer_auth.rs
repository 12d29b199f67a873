//! Component: the agent binary pulls from a real registry (distribution 2.8) that uses
//! Docker's token authentication. The registry answers `WWW-Authenticate: Bearer
//! realm=..,service=..,scope=..`; the agent takes the caller's username and password to
//! the realm (a token server of the test's own) and pulls with the token it gets: one
//! token per credential and repository, not one per blob or per pull. A wrong password is
//! refused with UNAUTHENTICATED naming the registry, and no password or token shows in
//! the agent's log. The registry, the token server and the agent are this test's own
//! processes on loopback; only containerd is the cluster's.

use crate::agent_process;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use base64::Engine as _;
use futures::StreamExt as _;
use stevedore_proto::stevedore::agent::v1::{
    self as api, image_service_client::ImageServiceClient,
};
use stevedore_tests::random_image;
use stevedore_tests::registry_process::{RegistryAuth, RegistryProcess};
use stevedore_tests::scratch::ScratchDir;
use stevedore_tests::token_server::{TokenRequest, TokenServer};
use tonic::{Code, transport::Channel};

use agent_process::AgentProcess;

const SERVICE: &str = "stevedore-bearer-test";
const ISSUER: &str = "stevedore-test-token-server";
const REPOSITORIES: [&str; 2] = ["stevedore/bearer", "stevedore/bearer-other"];
const LAYERS: usize = 2;

/// A token-authenticated registry holding an image of random layers under each of
/// `REPOSITORIES`, the token server it trusts, and an agent process pulling from it.
struct Setup {
    client: ImageServiceClient<Channel>,
    agent: AgentProcess,
    registry: RegistryProcess,
    tokens: TokenServer,
    /// Name → password, made at run time.
    users: HashMap<String, String>,
    _scratch: ScratchDir,
}

impl Setup {
    async fn start(name: &str) -> Result<Self> {
        let cluster = stevedore_tests::cluster().await?;
        let scratch = ScratchDir::new(name)?;
        let users: HashMap<String, String> = ["alice", "bob"]
            .into_iter()
            .map(|user| Ok((user.to_owned(), password()?)))
            .collect::<Result<_>>()?;
        let tokens = TokenServer::start(users.clone(), ISSUER).await?;
        let auth = RegistryAuth::Token {
            realm: tokens.realm(),
            service: SERVICE.to_owned(),
            issuer: ISSUER.to_owned(),
            ca_pem: tokens.ca_pem().to_owned(),
        };
        let registry = RegistryProcess::start(&scratch.path().join("registry"), &auth).await?;
        let layout =
            random_image::write_layout(&scratch.path().join("layout"), "v1", LAYERS, 256 << 10)?;
        let creds = format!("alice:{}", users["alice"]);
        for repository in REPOSITORIES {
            skopeo_copy(
                &layout,
                &format!("{}/{repository}:v1", registry.addr),
                &creds,
            )
            .await?;
        }
        let agent =
            AgentProcess::start(cluster, name, &["--insecure-registry", &registry.addr]).await?;
        Ok(Self {
            client: ImageServiceClient::new(agent.channel().await?),
            agent,
            registry,
            tokens,
            users,
            _scratch: scratch,
        })
    }

    fn image(&self, repository: &str) -> String {
        format!("{}/{repository}:v1", self.registry.addr)
    }

    fn credentials(&self, user: &str) -> Option<api::Credentials> {
        basic(user, &self.users[user])
    }

    /// Pulls `image` with `credentials`: every progress message, or the final status.
    async fn pull(
        &self,
        image: &str,
        credentials: Option<api::Credentials>,
    ) -> Result<Result<Vec<api::PullProgress>, tonic::Status>> {
        let request = api::PullImageRequest {
            image: image.to_owned(),
            pull_policy: api::PullPolicy::Always.into(),
            credentials,
            timeout_seconds: 0,
        };
        let mut client = self.client.clone();
        let pull = async move {
            let mut stream = match client.pull_image(request).await {
                Ok(response) => response.into_inner(),
                Err(status) => return Err(status),
            };
            let mut messages = Vec::new();
            while let Some(message) = stream.next().await {
                messages.push(message?);
            }
            Ok(messages)
        };
        tokio::time::timeout(Duration::from_secs(120), pull)
            .await
            .with_context(|| format!("the pull of {image} did not end in 120 s"))
    }

    /// Pulls `image` as `user`, failing unless the pull finishes; the number of blobs.
    async fn pull_as(&self, image: &str, user: &str) -> Result<usize> {
        let messages = self
            .pull(image, self.credentials(user))
            .await?
            .map_err(|status| anyhow::anyhow!("{user}'s pull of {image}: {status:?}"))?;
        let last = messages.last().context("no progress message")?;
        ensure!(
            last.phase == i32::from(api::PullPhase::Done),
            "last message is not DONE: {last:?}"
        );
        Ok(last.layers.len())
    }

    /// The token requests the agent made (not skopeo's pushes).
    fn agent_token_requests(&self) -> Vec<TokenRequest> {
        self.tokens
            .requests()
            .into_iter()
            .filter(|r| r.user_agent.starts_with("stevedore-agent/"))
            .collect()
    }

    async fn remove(&self, image: &str) -> Result<()> {
        stevedore_tests::grpc::remove_image(&self.client, image).await
    }

    async fn present(&self, image: &str) -> Result<bool> {
        Ok(stevedore_tests::grpc::image_status(&self.client, image)
            .await?
            .is_some())
    }
}

fn basic(username: &str, password: &str) -> Option<api::Credentials> {
    Some(api::Credentials {
        kind: Some(api::credentials::Kind::Basic(api::BasicAuth {
            username: username.to_owned(),
            password: password.to_owned(),
        })),
    })
}

fn password() -> Result<String> {
    stevedore_tests::token_signer::random_hex(&ring::rand::SystemRandom::new(), 16)
}

/// Pushes the layout's `v1` to `destination` through the registry's token flow (without
/// blocking: the token server answers on this test's runtime).
async fn skopeo_copy(layout: &Path, destination: &str, creds: &str) -> Result<()> {
    let output = tokio::process::Command::new("skopeo")
        .args([
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            "--dest-creds",
            creds,
        ])
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{destination}"))
        .output()
        .await
        .context("running skopeo")?;
    if !output.status.success() {
        bail!(
            "skopeo copy to {destination} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Each credential earns one token per repository, which then serves every blob and
/// every later pull while it holds: two pulls by alice cost one token, bob's pull of
/// the same image another, alice's pull of another repository a third; each token asked
/// for the one repository's pull scope, for the registry's service.
#[tokio::test]
async fn a_token_is_asked_for_once_per_credential_and_repository_not_per_blob() -> Result<()> {
    let setup = Setup::start("bearer-tokens").await?;
    let image = setup.image(REPOSITORIES[0]);
    let challenges = || setup.registry.agent_requests("", 401);

    let blobs = setup.pull_as(&image, "alice").await?;
    ensure!(
        blobs == LAYERS + 1,
        "{blobs} blobs, wanted the layers and the config"
    );
    let fetched = setup.registry.agent_requests("/blobs/", 200)?;
    ensure!(
        fetched == blobs,
        "{fetched} blob downloads for {blobs} blobs"
    );
    let asked = setup.agent_token_requests();
    ensure!(
        asked.len() == 1,
        "one pull of a manifest and {blobs} blobs asked for {} tokens: {asked:?}",
        asked.len()
    );
    let scope = format!("repository:{}:pull", REPOSITORIES[0]);
    ensure!(
        asked[0].user.as_deref() == Some("alice")
            && asked[0].scopes == [scope.as_str()]
            && asked[0].service.as_deref() == Some(SERVICE)
            && asked[0].token.is_some(),
        "{:?}",
        asked[0]
    );
    ensure!(challenges()? == 1, "challenged {} times", challenges()?);

    setup.pull_as(&image, "alice").await?;
    let asked = setup.agent_token_requests();
    ensure!(asked.len() == 1, "a second pull asked again: {asked:?}");
    ensure!(
        challenges()? == 1,
        "the token was not reused by the second pull"
    );

    setup.pull_as(&image, "bob").await?;
    let asked = setup.agent_token_requests();
    ensure!(
        asked.len() == 2 && asked[1].user.as_deref() == Some("bob"),
        "bob's pull borrowed alice's token or asked more than once: {asked:?}"
    );

    let other = setup.image(REPOSITORIES[1]);
    setup.pull_as(&other, "alice").await?;
    let asked = setup.agent_token_requests();
    let scope = format!("repository:{}:pull", REPOSITORIES[1]);
    ensure!(
        asked.len() == 3 && asked[2].scopes == [scope.as_str()],
        "another repository: {asked:?}"
    );
    setup.remove(&image).await?;
    setup.remove(&other).await
}

/// A wrong password is refused by the token server: the pull ends at once with
/// UNAUTHENTICATED, names the registry, leaves no image, and the agent pulls with the
/// right one afterwards. Neither password, nor `user:password` in base64, nor a token the
/// server issued is in the agent's log (which runs at debug level).
#[tokio::test]
async fn a_wrong_password_is_refused_by_name_and_no_secret_reaches_the_log() -> Result<()> {
    let setup = Setup::start("bearer-wrong").await?;
    let image = setup.image(REPOSITORIES[0]);
    let wrong = password()?;

    let refused = match setup.pull(&image, basic("alice", &wrong)).await? {
        Ok(messages) => bail!("pulled with a wrong password: {:?}", messages.last()),
        Err(status) => status,
    };
    ensure!(refused.code() == Code::Unauthenticated, "{refused:?}");
    ensure!(
        refused.message().contains(&setup.registry.addr),
        "the error does not name the registry {}: {refused:?}",
        setup.registry.addr
    );
    ensure!(
        !setup.present(&image).await?,
        "the refused pull left an image"
    );
    let asked = setup.agent_token_requests();
    ensure!(
        asked.len() == 1 && asked[0].user.as_deref() == Some("alice") && asked[0].token.is_none(),
        "{asked:?}"
    );

    setup.pull_as(&image, "alice").await?;

    let log = setup.agent.log_text()?;
    ensure!(
        log.contains(&image) && log.contains("pull failed"),
        "the log does not show the pulls: {log}"
    );
    ensure!(!log.contains("panicked"), "the agent panicked: {log}");
    let encode = |user: &str, password: &str| {
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    };
    let mut secrets = vec![
        ("the wrong password", wrong.clone()),
        ("base64 of alice:wrong", encode("alice", &wrong)),
    ];
    for (user, password) in &setup.users {
        secrets.push(("a password", password.clone()));
        secrets.push(("base64 of user:password", encode(user, password)));
    }
    for token in setup.tokens.requests().into_iter().filter_map(|r| r.token) {
        let signature = token.rsplit('.').next().unwrap_or_default().to_owned();
        secrets.push(("a token's signature", signature));
    }
    for (what, secret) in &secrets {
        ensure!(
            !log.contains(secret.as_str()),
            "{what} is in the agent's log"
        );
    }
    setup.remove(&image).await
}
