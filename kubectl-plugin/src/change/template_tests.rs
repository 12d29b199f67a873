use serde_json::json;

use super::*;

fn pod_spec() -> Value {
    json!({
        "initContainers": [{ "name": "init", "image": "busybox:1" }],
        "containers": [
            { "name": "web", "image": "nginx:1", "env": [{ "name": "A", "value": "1" }] },
            { "name": "sidecar", "image": "envoy:1" }
        ]
    })
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn container_patterns() {
    let cases = [
        ("*", "web", true),
        ("web", "web", true),
        ("web", "web2", false),
        ("w*", "web", true),
        ("*car", "sidecar", true),
        ("s*d*r", "sidecar", true),
        ("s*x*r", "sidecar", false),
        ("we*eb", "web", false),
    ];
    for (pattern, name, expected) in cases {
        assert_eq!(name_matches(pattern, name), expected, "{pattern} {name}");
    }
}

#[test]
fn set_image_changes_named_containers_only() {
    let mut spec = pod_spec();
    let pairs = parse_pairs(
        &words(&["web=nginx:2", "init=busybox:1"]),
        "container=image",
    )
    .unwrap();
    assert_eq!(set_images(&mut spec, &pairs), Ok(words(&["web"])));
    assert_eq!(spec["containers"][0]["image"], "nginx:2");
    assert_eq!(spec["containers"][1]["image"], "envoy:1");

    let mut all = pod_spec();
    let every = parse_pairs(&words(&["*=x:1"]), "container=image").unwrap();
    assert_eq!(
        set_images(&mut all, &every),
        Ok(words(&["init", "web", "sidecar"]))
    );

    let missing = set_images(&mut pod_spec(), &[("db".into(), "pg:1".into())]).unwrap_err();
    assert!(missing.contains("no container named \"db\""), "{missing}");
    assert!(parse_pairs(&words(&["web"]), "container=image").is_err());
}

#[test]
fn set_env_sets_replaces_and_removes() {
    let mut spec = pod_spec();
    let edits = parse_env(&words(&["A=2", "B=x"])).unwrap();
    assert_eq!(set_env(&mut spec, "web", &edits), Ok(words(&["web"])));
    assert_eq!(
        spec["containers"][0]["env"],
        json!([{ "name": "A", "value": "2" }, { "name": "B", "value": "x" }])
    );
    let remove = parse_env(&words(&["A-"])).unwrap();
    assert_eq!(set_env(&mut spec, "*", &remove), Ok(words(&["web"])));
    assert_eq!(
        spec["containers"][0]["env"],
        json!([{ "name": "B", "value": "x" }])
    );
    assert!(
        spec["containers"][1].get("env").is_none(),
        "untouched: {spec}"
    );
    assert!(parse_env(&words(&["=1"])).is_err());
    assert!(parse_env(&[]).is_err());
    assert!(
        set_env(&mut spec, "db*", &remove)
            .unwrap_err()
            .contains("db*")
    );
}

#[test]
fn set_resources_merges_quantities() {
    let mut spec = pod_spec();
    let limits = parse_pairs(&words(&["cpu=200m,memory=512Mi"]), "resource=quantity").unwrap();
    let requests = parse_pairs(&words(&["cpu=100m"]), "resource=quantity").unwrap();
    assert_eq!(
        set_resources(&mut spec, "web", &limits, &requests),
        Ok(words(&["web"]))
    );
    assert_eq!(
        spec["containers"][0]["resources"],
        json!({ "limits": { "cpu": "200m", "memory": "512Mi" }, "requests": { "cpu": "100m" } })
    );
    assert_eq!(set_resources(&mut spec, "web", &limits, &[]), Ok(vec![]));
    assert!(set_resources(&mut spec, "web", &[], &[]).is_err());
}

#[test]
fn patches() {
    let restart = restart_patch("2026-01-02T03:04:05Z");
    assert_eq!(
        restart["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT],
        "2026-01-02T03:04:05Z"
    );
    let patch = containers_patch(&pod_spec(), "42");
    assert_eq!(patch["metadata"]["resourceVersion"], "42");
    assert_eq!(
        patch["spec"]["template"]["spec"]["containers"][1]["name"],
        "sidecar"
    );
    assert_eq!(
        patch["spec"]["template"]["spec"]["initContainers"][0]["name"],
        "init"
    );
}
