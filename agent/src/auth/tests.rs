use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use tonic::Code;

use super::*;

/// A reviewer that knows two tokens: `reader` (get only) and `admin` (everything),
/// and counts how often it is asked.
#[derive(Default)]
struct FakeReviewer {
    asked: AtomicUsize,
}

impl Reviewer for FakeReviewer {
    async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(["reader", "admin"].contains(&token).then(|| User {
            name: token.to_owned(),
            uid: None,
            groups: vec![],
            extra: BTreeMap::new(),
        }))
    }

    async fn authorize(&self, user: &User, access: Access) -> Result<bool, ReviewError> {
        Ok(user.name == "admin" || access.verb == "get")
    }
}

const SET_CONDITION: &str = "/stevedore.agent.v1.PodService/SetPodCondition";
const NODE_INFO: &str = "/stevedore.agent.v1.NodeService/GetNodeInfo";

#[tokio::test]
async fn decisions() {
    let gate = Gate::new(FakeReviewer::default());
    let cases = [
        ("/grpc.health.v1.Health/Check", None, None),
        (SET_CONDITION, None, Some(Code::Unauthenticated)),
        (
            SET_CONDITION,
            Some("Basic abc"),
            Some(Code::Unauthenticated),
        ),
        (
            SET_CONDITION,
            Some("Bearer nobody"),
            Some(Code::Unauthenticated),
        ),
        (
            SET_CONDITION,
            Some("Bearer reader"),
            Some(Code::PermissionDenied),
        ),
        (NODE_INFO, Some("Bearer reader"), None),
        (SET_CONDITION, Some("Bearer admin"), None),
        (SET_CONDITION, Some("bearer  admin "), None),
        (
            "/stevedore.agent.v1.PodService/Nope",
            Some("Bearer admin"),
            Some(Code::Unimplemented),
        ),
    ];
    for (path, header, expected) in cases {
        let got = gate.check(path, header).await.err().map(|s| s.code());
        assert_eq!(got, expected, "{path} with {header:?}");
    }
}

#[tokio::test]
async fn repeated_calls_are_answered_from_the_cache() {
    let gate = Gate::new(FakeReviewer::default());
    for _ in 0..3 {
        let _ = gate.check(SET_CONDITION, Some("Bearer reader")).await;
    }
    assert_eq!(gate.reviewer.asked.load(Ordering::SeqCst), 1);
    let _ = gate.check(NODE_INFO, Some("Bearer reader")).await;
    assert_eq!(
        gate.reviewer.asked.load(Ordering::SeqCst),
        2,
        "another permission is reviewed anew"
    );
}

#[test]
fn bearer_tokens() {
    assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
    assert_eq!(bearer_token(Some("BEARER abc")), Some("abc"));
    assert_eq!(bearer_token(Some("Bearer ")), None);
    assert_eq!(bearer_token(Some("Bearer")), None);
    assert_eq!(bearer_token(Some("Token abc")), None);
    assert_eq!(bearer_token(None), None);
}
