#![allow(clippy::unwrap_used)]

use super::*;

const SHA: &str = "sha256:a3ed95caeb02ffe68cdd9fd84406680ae93d633cb16422d00e8a7c22955b46d4";

#[test]
fn valid_references_normalise() {
    let long_tag = "t".repeat(128);
    let cases: Vec<(String, String)> = vec![
        ("nginx", "docker.io/library/nginx:latest"),
        ("nginx:1.25", "docker.io/library/nginx:1.25"),
        ("user/app", "docker.io/user/app:latest"),
        ("user/app:v1", "docker.io/user/app:v1"),
        ("docker.io/nginx", "docker.io/library/nginx:latest"),
        ("index.docker.io/nginx", "docker.io/library/nginx:latest"),
        ("docker.io/library/nginx:1", "docker.io/library/nginx:1"),
        (
            "127.0.0.1:5000/stevedore/web:v1",
            "127.0.0.1:5000/stevedore/web:v1",
        ),
        ("localhost/app", "localhost/app:latest"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
        ("quay.io/a/b/c/d:x", "quay.io/a/b/c/d:x"),
        (
            "my-registry.example.com/team/app",
            "my-registry.example.com/team/app:latest",
        ),
        ("Registry.Example/app", "Registry.Example/app:latest"),
        ("a.b/x_y", "a.b/x_y:latest"),
        ("a.b/x__y", "a.b/x__y:latest"),
        ("a.b/x.y", "a.b/x.y:latest"),
        ("a.b/x---y", "a.b/x---y:latest"),
        ("app:_tag", "docker.io/library/app:_tag"),
        ("app:V1.2-rc_3", "docker.io/library/app:V1.2-rc_3"),
        ("registry:5000/app:5000", "registry:5000/app:5000"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .chain([
        (format!("app@{SHA}"), format!("docker.io/library/app@{SHA}")),
        (
            format!("app:v1@{SHA}"),
            format!("docker.io/library/app:v1@{SHA}"),
        ),
        (
            format!("127.0.0.1:5000/x@{SHA}"),
            format!("127.0.0.1:5000/x@{SHA}"),
        ),
        (
            format!("app:{long_tag}"),
            format!("docker.io/library/app:{long_tag}"),
        ),
    ])
    .collect();
    for (input, expected) in cases {
        let parsed = Reference::parse_normalized(&input)
            .unwrap_or_else(|err| panic!("{input:?} rejected: {err}"));
        assert_eq!(parsed.to_string(), expected, "normalising {input:?}");
    }
}

#[test]
fn invalid_references_are_rejected_naming_the_problem() {
    use ReferenceError as E;
    let hex64 = "a".repeat(64);
    let long_path = format!("example.com/{}", "a".repeat(250));
    let long_tag = "t".repeat(129);
    type IsExpected = fn(&E) -> bool;
    let cases: Vec<(String, IsExpected)> = vec![
        (String::new(), |e| matches!(e, E::Empty)),
        (":tag".into(), |e| matches!(e, E::Empty)),
        ("Nginx".into(), |e| matches!(e, E::Uppercase { .. })),
        ("user/App".into(), |e| matches!(e, E::Uppercase { .. })),
        ("example.com/App".into(), |e| {
            matches!(e, E::Uppercase { .. })
        }),
        ("app:".into(), |e| matches!(e, E::InvalidTag { .. })),
        ("app:-x".into(), |e| matches!(e, E::InvalidTag { .. })),
        ("app:.x".into(), |e| matches!(e, E::InvalidTag { .. })),
        ("app:a+b".into(), |e| matches!(e, E::InvalidTag { .. })),
        (format!("app:{long_tag}"), |e| {
            matches!(e, E::InvalidTag { .. })
        }),
        ("app@".into(), |e| matches!(e, E::InvalidDigest { .. })),
        ("app@sha256".into(), |e| {
            matches!(e, E::InvalidDigest { .. })
        }),
        ("app@sha256:abc".into(), |e| {
            matches!(e, E::InvalidDigest { .. })
        }),
        (format!("app@sha256:{}", "A".repeat(64)), |e| {
            matches!(e, E::InvalidDigest { .. })
        }),
        (format!("app@sha256:{}", "g".repeat(64)), |e| {
            matches!(e, E::InvalidDigest { .. })
        }),
        (format!("app@md5:{}", "a".repeat(32)), |e| {
            matches!(e, E::InvalidDigest { .. })
        }),
        (format!("app@1sha:{}", "a".repeat(64)), |e| {
            matches!(e, E::InvalidDigest { .. })
        }),
        ("app@sha256:xyz@sha256:abc".into(), |e| {
            matches!(e, E::InvalidDigest { .. })
        }),
        (hex64.clone(), |e| matches!(e, E::HexName { .. })),
        (long_path, |e| matches!(e, E::NameTooLong { .. })),
        ("-bad.com/app".into(), |e| {
            matches!(e, E::InvalidDomain { .. })
        }),
        ("bad-.com/app".into(), |e| {
            matches!(e, E::InvalidDomain { .. })
        }),
        ("a..b/app".into(), |e| matches!(e, E::InvalidDomain { .. })),
        ("a_b.com/app".into(), |e| {
            matches!(e, E::InvalidDomain { .. })
        }),
        ("[::1]:5000/app".into(), |e| {
            matches!(e, E::InvalidDomain { .. })
        }),
        ("host:port/app".into(), |e| {
            matches!(e, E::InvalidPort { .. })
        }),
        ("host:/app".into(), |e| matches!(e, E::InvalidPort { .. })),
        ("app/".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("/app".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("a//b".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("a.b/_x".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("a.b/x_".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("a.b/x___y".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("a.b/x..y".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("a.b/x._y".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("app name".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("app;rm -rf".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
        ("a.b/$(x)".into(), |e| {
            matches!(e, E::InvalidPathComponent { .. })
        }),
    ];
    for (input, expected) in cases {
        match Reference::parse_normalized(&input) {
            Ok(parsed) => panic!("{input:?} accepted as {parsed}"),
            Err(err) => {
                assert!(expected(&err), "{input:?} gave the wrong error: {err:?}");
                assert!(!err.to_string().is_empty());
            }
        }
    }
}

#[test]
fn parts_and_derived_names() {
    let r = Reference::parse_normalized("127.0.0.1:5000/stevedore/web:v1").unwrap();
    assert_eq!(r.domain(), "127.0.0.1:5000");
    assert_eq!(r.path(), "stevedore/web");
    assert_eq!(r.tag(), Some("v1"));
    assert_eq!(r.digest(), None);
    assert_eq!(r.manifest_reference(), "v1");
    assert_eq!(
        r.repo_tag().as_deref(),
        Some("127.0.0.1:5000/stevedore/web:v1")
    );
    assert_eq!(
        r.repo_digest(SHA),
        format!("127.0.0.1:5000/stevedore/web@{SHA}")
    );

    let pinned = Reference::parse_normalized(&format!("web:v1@{SHA}")).unwrap();
    assert_eq!(pinned.manifest_reference(), SHA);
    let digest_only = Reference::parse_normalized(&format!("web@{SHA}")).unwrap();
    assert_eq!(digest_only.tag(), None);
    assert_eq!(digest_only.repo_tag(), None);
}

#[test]
fn image_ids_are_recognised() {
    assert!(is_image_id(SHA));
    assert!(!is_image_id("sha256:abc"));
    assert!(!is_image_id(&SHA.to_uppercase()));
    assert!(!is_image_id("nginx"));
}

#[test]
fn name_of_exactly_the_limit_is_accepted() {
    let path = "a".repeat(NAME_TOTAL_LENGTH_MAX - "example.com/".len());
    let input = format!("example.com/{path}");
    assert!(Reference::parse_normalized(&input).is_ok());
}
