use std::sync::Mutex;

use tonic::{Request, service::Interceptor as _};

use super::*;
use crate::agents::{IssueFuture, IssuedToken};

const LIFETIME: Duration = Duration::from_secs(3600);

/// Records every audience asked for and answers with a token naming the audience and
/// the count; takes a second to answer, so concurrent callers overlap; fails while
/// `failing` is set.
#[derive(Default)]
struct RecordingIssuer {
    asked: Mutex<Vec<String>>,
    failing: std::sync::atomic::AtomicBool,
}

impl RecordingIssuer {
    fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("not poisoned").clone()
    }
}

impl TokenIssuer for RecordingIssuer {
    fn issue<'a>(&'a self, audience: &'a str) -> IssueFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(AgentError::TokenRequest {
                    audience: audience.to_owned(),
                    message: "apiserver down".into(),
                });
            }
            let mut asked = self.asked.lock().expect("not poisoned");
            asked.push(audience.to_owned());
            Ok(IssuedToken {
                token: format!("{audience}#{}", asked.len()),
                valid_for: LIFETIME,
            })
        })
    }
}

fn tokens() -> (Arc<RecordingIssuer>, NodeTokens) {
    let issuer = Arc::new(RecordingIssuer::default());
    let tokens = NodeTokens::new("stevedore-agent".into(), issuer.clone());
    (issuer, tokens)
}

fn header(mut auth: BearerAuth) -> String {
    let request = auth.call(Request::new(())).expect("interceptor accepts");
    let value = request.metadata().get("authorization").expect("header set");
    value.to_str().expect("ascii").to_owned()
}

async fn token(tokens: &NodeTokens, node: &str) -> String {
    header(tokens.for_node(node).await.expect("token issued"))
}

#[tokio::test(start_paused = true)]
async fn each_node_gets_a_token_for_its_own_audience() {
    let (issuer, tokens) = tokens();
    let a = token(&tokens, "node-a").await;
    let b = token(&tokens, "node-b").await;
    assert_eq!(
        issuer.asked(),
        ["stevedore-agent:node-a", "stevedore-agent:node-b"]
    );
    assert_eq!(a, "Bearer stevedore-agent:node-a#1");
    assert_eq!(b, "Bearer stevedore-agent:node-b#2");
}

#[tokio::test(start_paused = true)]
async fn a_token_is_reused_until_80_percent_of_its_lifetime() {
    let (issuer, tokens) = tokens();
    let first = token(&tokens, "node-a").await;
    // The issuer took a second; the lifetime counts from when the token arrived.
    tokio::time::advance(renew_after(LIFETIME) - Duration::from_secs(1)).await;
    assert_eq!(token(&tokens, "node-a").await, first);
    assert_eq!(issuer.asked().len(), 1);

    tokio::time::advance(Duration::from_secs(1)).await;
    let renewed = token(&tokens, "node-a").await;
    assert_ne!(renewed, first);
    assert_eq!(issuer.asked(), ["stevedore-agent:node-a"; 2]);
}

#[tokio::test(start_paused = true)]
async fn concurrent_callers_share_one_request_per_node() {
    let (issuer, tokens) = tokens();
    let tokens = Arc::new(tokens);
    let calls: Vec<_> = (0..10)
        .map(|i| {
            let tokens = Arc::clone(&tokens);
            let node = if i % 2 == 0 { "node-a" } else { "node-b" };
            tokio::spawn(async move { token(&tokens, node).await })
        })
        .collect();
    for call in calls {
        call.await.expect("task finished");
    }
    let mut asked = issuer.asked();
    asked.sort();
    assert_eq!(asked, ["stevedore-agent:node-a", "stevedore-agent:node-b"]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_renewal_keeps_the_token_until_it_expires() {
    let (issuer, tokens) = tokens();
    let first = token(&tokens, "node-a").await;
    issuer
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::advance(renew_after(LIFETIME)).await;
    assert_eq!(token(&tokens, "node-a").await, first);

    tokio::time::advance(LIFETIME - renew_after(LIFETIME)).await;
    let err = tokens.for_node("node-a").await.expect_err("expired");
    assert!(err.to_string().contains("apiserver down"), "{err}");
    assert!(err.to_string().contains("stevedore-agent:node-a"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_forgotten_node_gets_a_new_token() {
    let (issuer, tokens) = tokens();
    token(&tokens, "node-a").await;
    tokens.forget("node-a");
    token(&tokens, "node-a").await;
    assert_eq!(issuer.asked().len(), 2);
}
