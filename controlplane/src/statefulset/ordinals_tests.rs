use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

/// (case, replicas, start, reserveOrdinals, wanted ordinals)
type WantedCase = (&'static str, i32, i32, Vec<IntOrString>, Vec<i32>);
/// (case, wanted, existing, missing, condemned)
type LayoutCase = (&'static str, Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>);

fn reserved(entries: &[IntOrString]) -> ReservedOrdinals {
    ReservedOrdinals::parse(entries).expect("valid reserveOrdinals")
}

fn int(i: i32) -> IntOrString {
    IntOrString::Int(i)
}

fn text(s: &str) -> IntOrString {
    IntOrString::String(s.to_owned())
}

#[test]
fn wanted_ordinals_follow_replicas_start_and_reserved() {
    let cases: Vec<WantedCase> = vec![
        ("plain", 3, 0, vec![], vec![0, 1, 2]),
        ("none", 0, 0, vec![], vec![]),
        ("seed 002: start 3", 5, 3, vec![], vec![3, 4, 5, 6, 7]),
        ("seed 002: reserve 1", 3, 0, vec![int(1)], vec![0, 2, 3]),
        (
            "seed 002: reserve 1 and 2 moves to 4",
            3,
            0,
            vec![int(1), int(2)],
            vec![0, 3, 4],
        ),
        ("range", 3, 0, vec![text("1-3")], vec![0, 4, 5]),
        ("single as string", 2, 0, vec![text("0")], vec![1, 2]),
        (
            "overlapping ranges",
            3,
            0,
            vec![text("2-4"), text("3-6"), int(7)],
            vec![0, 1, 8],
        ),
        ("reserved below start", 2, 5, vec![text("0-4")], vec![5, 6]),
        ("start inside a range", 2, 5, vec![text("4-6")], vec![7, 8]),
        (
            "a huge range is skipped, not walked",
            2,
            0,
            vec![text("1-999999999")],
            vec![0, 1_000_000_000],
        ),
    ];
    for (name, replicas, start, entries, want) in cases {
        let got = wanted_ordinals(replicas, start, &reserved(&entries));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn bad_reserve_entries_are_named() {
    for entry in [
        text("5-3"),
        text("a"),
        text("-1"),
        text("1-"),
        int(-2),
        text("1-2-3"),
    ] {
        let err = ReservedOrdinals::parse(&[int(1), entry.clone()]).expect_err("refused");
        assert!(err.to_string().contains(RESERVE_ORDINALS_FIELD), "{err}");
    }
}

#[test]
fn names_follow_the_native_controller() {
    assert_eq!(pod_name("web", 0), "web-0");
    assert_eq!(claim_name("www", "web", 2), "www-web-2");
    let cases = [
        ("web", "web-0", Some(0)),
        ("web", "web-12", Some(12)),
        ("web", "web-x", None),
        ("web", "web-", None),
        ("web", "webb-1", None),
        ("web", "web-1-2", None),
        ("web-1", "web-1-2", Some(2)),
        ("web", "other-1", None),
    ];
    for (set, pod, want) in cases {
        assert_eq!(ordinal_of(set, pod), want, "{pod} of {set}");
    }
}

#[test]
fn identity_is_applied_and_checked() {
    let mut pod = Pod {
        metadata: ObjectMeta {
            labels: Some([("app".to_owned(), "nginx".to_owned())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        ..Default::default()
    };
    assert!(!identity_matches(&pod, "web", Some("nginx")));
    apply_identity(&mut pod, "web", 4, Some("nginx"));
    assert_eq!(pod.metadata.name.as_deref(), Some("web-4"));
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("nginx"));
    assert_eq!(
        labels.get(POD_NAME_LABEL).map(String::as_str),
        Some("web-4")
    );
    assert_eq!(labels.get(POD_INDEX_LABEL).map(String::as_str), Some("4"));
    let spec = pod.spec.clone().unwrap_or_default();
    assert_eq!(spec.hostname.as_deref(), Some("web-4"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    assert!(identity_matches(&pod, "web", Some("nginx")));

    assert!(
        !identity_matches(&pod, "web", Some("other")),
        "service drifted"
    );
    let mut relabelled = pod.clone();
    if let Some(labels) = relabelled.metadata.labels.as_mut() {
        labels.insert(POD_INDEX_LABEL.to_owned(), "5".to_owned());
    }
    assert!(!identity_matches(&relabelled, "web", Some("nginx")));

    let mut headless = pod.clone();
    apply_identity(&mut headless, "web", 4, Some(""));
    let spec = headless.spec.clone().unwrap_or_default();
    assert_eq!(spec.subdomain, None, "no service, no subdomain");
    assert!(identity_matches(&headless, "web", None));
}

#[test]
fn layout_creates_lowest_first_and_deletes_highest_first() {
    let cases: Vec<LayoutCase> = vec![
        ("empty", vec![0, 1, 2], vec![], vec![0, 1, 2], vec![]),
        ("steady", vec![0, 1], vec![1, 0], vec![], vec![]),
        ("scale down", vec![0], vec![0, 1, 2], vec![], vec![2, 1]),
        (
            "seed 002: reserve 2 of 0,2,3 makes 4",
            vec![0, 3, 4],
            vec![0, 2, 3],
            vec![4],
            vec![2],
        ),
        ("a hole", vec![0, 1, 2], vec![0, 2], vec![1], vec![]),
    ];
    for (name, wanted, existing, missing, condemned) in cases {
        let got = layout(&wanted, &existing);
        assert_eq!(got.missing, missing, "{name}: missing");
        assert_eq!(got.condemned, condemned, "{name}: condemned");
    }
}
