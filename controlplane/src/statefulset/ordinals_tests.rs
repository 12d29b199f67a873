use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

/// (case, replicas, start, reserveOrdinals, wanted ordinals)
type WantedCase = (&'static str, i32, i32, Vec<IntOrString>, Vec<i32>);
/// (case, replicas, reserveOrdinals, existing, most missing, missing, condemned)
type LayoutCase = (
    &'static str,
    i32,
    Vec<IntOrString>,
    Vec<i32>,
    usize,
    Vec<i32>,
    Vec<i32>,
);

fn reserved(entries: &[IntOrString]) -> ReservedOrdinals {
    ReservedOrdinals::parse(entries).expect("valid reserveOrdinals")
}

fn wanted(replicas: i32, start: i32, entries: &[IntOrString]) -> WantedOrdinals {
    WantedOrdinals::new(replicas, start, reserved(entries))
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
        let set = wanted(replicas, start, &entries);
        let got: Vec<i32> = set.iter().collect();
        assert_eq!(got, want, "{name}");
        // What `contains` and `count_below` work out arithmetically agrees with the walk.
        let top = want.last().copied().unwrap_or(start).saturating_add(3);
        for ordinal in 0..=top.min(20) {
            let listed = want.contains(&ordinal);
            assert_eq!(set.contains(ordinal), listed, "{name}: contains {ordinal}");
            let below = want.iter().filter(|&&o| o < ordinal).count();
            assert_eq!(
                set.count_below(ordinal),
                below as i64,
                "{name}: below {ordinal}"
            );
        }
        for &ordinal in &want {
            assert!(set.contains(ordinal), "{name}: contains {ordinal}");
        }
    }
}

/// (case, replicas, start, reserveOrdinals, first ordinals, ordinal asked, wanted, below it)
type HugeCase = (
    &'static str,
    i32,
    i32,
    Vec<IntOrString>,
    Vec<i32>,
    i32,
    bool,
    i64,
);

#[test]
fn huge_replicas_cost_what_is_asked_not_the_replicas() {
    let max = i32::MAX;
    let cases: Vec<HugeCase> = vec![
        (
            "int32 max",
            max,
            0,
            vec![],
            vec![0, 1, 2],
            max - 1,
            true,
            i64::from(max) - 1,
        ),
        (
            "the limit itself is never wanted",
            max,
            0,
            vec![],
            vec![0, 1, 2],
            max,
            false,
            i64::from(max),
        ),
        (
            "reserved ranges are skipped",
            max,
            0,
            vec![text("1-999999999"), int(1_000_000_001)],
            vec![0, 1_000_000_000, 1_000_000_002],
            1_500_000_000,
            true,
            500_000_000,
        ),
        (
            "start near the top",
            max,
            max - 2,
            vec![],
            vec![max - 2, max - 1],
            max - 1,
            true,
            1,
        ),
        (
            "a reserved top",
            max,
            max - 3,
            vec![text("2147483645-2147483646")],
            vec![max - 3],
            max - 1,
            false,
            1,
        ),
        ("zero", 0, 0, vec![], vec![], 0, false, 0),
        (
            "negative replicas want none",
            -5,
            0,
            vec![],
            vec![],
            0,
            false,
            0,
        ),
        (
            "negative start counts from 0",
            2,
            -7,
            vec![],
            vec![0, 1],
            1,
            true,
            1,
        ),
    ];
    for (name, replicas, start, entries, first, asked, is_wanted, below) in cases {
        let set = wanted(replicas, start, &entries);
        let got: Vec<i32> = set.iter().take(3).collect();
        assert_eq!(got, first, "{name}: first ordinals");
        assert_eq!(set.contains(asked), is_wanted, "{name}: contains {asked}");
        assert_eq!(set.count_below(asked), below, "{name}: below {asked}");
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
    let max = i32::MAX;
    let cases: Vec<LayoutCase> = vec![
        ("empty", 3, vec![], vec![], 10, vec![0, 1, 2], vec![]),
        ("steady", 2, vec![], vec![1, 0], 10, vec![], vec![]),
        (
            "scale down",
            1,
            vec![],
            vec![0, 1, 2],
            10,
            vec![],
            vec![2, 1],
        ),
        (
            "seed 002: reserve 2 of 0,2,3 makes 4",
            3,
            vec![text("1-2")],
            vec![0, 2, 3],
            10,
            vec![4],
            vec![2],
        ),
        ("a hole", 3, vec![], vec![0, 2], 10, vec![1], vec![]),
        (
            "only as many missing as asked",
            5,
            vec![],
            vec![1],
            2,
            vec![0, 2],
            vec![],
        ),
        ("none asked", 5, vec![], vec![1], 0, vec![], vec![]),
        (
            "int32 max: the next batch around the pods",
            max,
            vec![int(2)],
            vec![0, 1, 3, 1_000_000],
            4,
            vec![4, 5, 6, 7],
            vec![],
        ),
        (
            "int32 max: a reserved pod is condemned",
            max,
            vec![text("5-9")],
            vec![0, 7, 2_000_000_000],
            2,
            vec![1, 2],
            vec![7],
        ),
    ];
    for (name, replicas, entries, existing, most, missing, condemned) in cases {
        let got = layout(&wanted(replicas, 0, &entries), &existing, most);
        assert_eq!(got.missing, missing, "{name}: missing");
        assert_eq!(got.condemned, condemned, "{name}: condemned");
    }
}

/// (case, replicas, start, reserveOrdinals, partition, ordinals kept on the current revision)
type PartitionCase = (&'static str, i32, i32, Vec<IntOrString>, i32, Vec<i32>);

#[test]
fn the_partition_counts_pods_from_the_start_ordinal_around_reserved_ones() {
    let cases: Vec<PartitionCase> = vec![
        ("from 0", 3, 0, vec![], 1, vec![0]),
        ("start 3: index 0 is ordinal 3", 3, 3, vec![], 1, vec![3]),
        ("start 3, partition 2", 3, 3, vec![], 2, vec![3, 4]),
        ("partition 0 keeps none", 3, 3, vec![], 0, vec![]),
        (
            "partition above replicas keeps all",
            3,
            3,
            vec![],
            5,
            vec![3, 4, 5],
        ),
        (
            "a reserved ordinal is no pod: the next one is kept",
            4,
            0,
            vec![IntOrString::Int(1)],
            2,
            vec![0, 2],
        ),
        (
            "start and a reserved range",
            4,
            2,
            vec![IntOrString::String("2-3".into())],
            1,
            vec![4],
        ),
    ];
    for (case, replicas, start, reserve, partition, want) in cases {
        let wanted = WantedOrdinals::new(replicas, start, reserved(&reserve));
        let kept: Vec<i32> = wanted
            .iter()
            .filter(|&o| wanted.below_partition(o, partition))
            .collect();
        assert_eq!(kept, want, "{case}");
    }
}
