//! ImageList and ImagePullJob: the seed 004 ImageList and OpenKruise's ImagePullJob
//! example deserialize, the defaults and helpers, the reference grammar of the CEL rules,
//! and the CRDs' shape (scope, columns, merge strategies).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::CustomResourceExt as _;
use serde_json::Value;

use super::common::CompletionPolicyType;
use super::image_reference::{HEX_NAME_REGEX, NAME_PREFIX_REGEX, REFERENCE_REGEX};
use super::imagelist::{
    ImageCounts, ImageList, ImageListEntry, ImageListSpec, ImageListStatus, ImagePullPhase,
    ImageStatus,
};
use super::imagepulljob::{ImagePullJob, ImagePullJobSpec, ImagePullPolicy};

const SEED_IMAGELIST: &str = include_str!("../../../tests/fixtures/seed-004/imagelist.yaml");
const OPENKRUISE_JOB: &str = include_str!("../../../tests/fixtures/openkruise/imagepulljob.yaml");
const SEED_IMAGE: &str = "swr.cn-north-4.myhuaweicloud.com/ddn-k8s/docker.io/mysql:8.0";

#[test]
fn seed_imagelist_deserializes() {
    let list: ImageList = serde_saphyr::from_str(SEED_IMAGELIST).expect("seed deserializes");
    assert_eq!(list.metadata.name.as_deref(), Some("dev-worker3"));
    let entry = list.spec.images.get(SEED_IMAGE).expect("the seed's image");
    assert_eq!(entry, &ImageListEntry::default());
}

#[test]
fn openkruise_job_round_trips() {
    let raw: Value = serde_saphyr::from_str(OPENKRUISE_JOB).expect("YAML");
    let job: ImagePullJob = serde_saphyr::from_str(OPENKRUISE_JOB).expect("deserializes");
    assert_eq!(serde_json::to_value(&job).expect("serializes"), raw);
    let spec = &job.spec;
    assert_eq!(spec.image, "nginx:1.9.1");
    assert_eq!(spec.parallelism_or_default(), IntOrString::Int(10));
    assert_eq!(spec.pull_secrets, ["secret-name1", "secret-name2"]);
    assert_eq!(spec.timeout(), Duration::from_secs(300));
    assert_eq!(spec.backoff_limit(), 3);
    assert_eq!(
        spec.completion_policy.policy_type(),
        CompletionPolicyType::Always
    );
    assert_eq!(spec.completion_policy.ttl_seconds_after_finished, Some(300));
    let selector = spec.selector.as_ref().expect("selector");
    let labels = selector.label_selector().match_labels.unwrap_or_default();
    assert_eq!(labels.get("node-type").map(String::as_str), Some("xxx"));
}

#[test]
fn job_defaults_are_openkruise_defaults() {
    let spec = ImagePullJobSpec::default();
    assert_eq!(spec.parallelism_or_default(), IntOrString::Int(1));
    assert_eq!(spec.pull_policy_or_default(), ImagePullPolicy::IfNotPresent);
    assert_eq!(spec.timeout(), Duration::from_secs(600));
    assert_eq!(spec.backoff_limit(), 3);
    assert_eq!(
        spec.completion_policy.policy_type(),
        CompletionPolicyType::Always
    );
}

#[test]
fn entry_defaults() {
    let entry = ImageListEntry::default();
    assert!(!entry.always_pull);
    assert_eq!(entry.pull_interval(), Ok(Duration::from_secs(86_400)));
    assert_eq!(entry.timeout(), Duration::from_secs(600));
    assert_eq!(entry.backoff_limit(), 3);

    let set = ImageListEntry {
        pull_interval: Some("1h30m".into()),
        timeout_seconds: Some(30),
        backoff_limit: Some(0),
        ..ImageListEntry::default()
    };
    assert_eq!(set.pull_interval(), Ok(Duration::from_secs(5_400)));
    assert_eq!(set.timeout(), Duration::from_secs(30));
    assert_eq!(set.backoff_limit(), 0);

    let bad = ImageListEntry {
        pull_interval: Some("daily".into()),
        ..ImageListEntry::default()
    };
    assert!(bad.pull_interval().is_err());
}

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

#[test]
fn next_pull_of_always_pull_images() {
    let last = ts("2025-01-01T00:00:00Z");
    let entry = |always_pull, interval: Option<&str>, next: Option<&str>| ImageListEntry {
        always_pull,
        pull_interval: interval.map(Into::into),
        next_pull: next.map(|n| Time(ts(n))),
        ..ImageListEntry::default()
    };
    let cases = [
        ("not alwaysPull", entry(false, None, None), None),
        (
            "default interval",
            entry(true, None, None),
            Some("2025-01-02T00:00:00Z"),
        ),
        (
            "set interval",
            entry(true, Some("30m"), None),
            Some("2025-01-01T00:30:00Z"),
        ),
        (
            "nextPull after the last pull wins",
            entry(true, Some("30m"), Some("2025-01-01T00:05:00Z")),
            Some("2025-01-01T00:05:00Z"),
        ),
        (
            "nextPull already served",
            entry(true, Some("30m"), Some("2024-12-31T23:00:00Z")),
            Some("2025-01-01T00:30:00Z"),
        ),
    ];
    for (name, entry, want) in cases {
        assert_eq!(entry.next_pull_after(last), Ok(want.map(ts)), "{name}");
    }
}

fn spec_of(images: &[&str]) -> ImageListSpec {
    ImageListSpec {
        images: images
            .iter()
            .map(|i| ((*i).to_owned(), ImageListEntry::default()))
            .collect(),
    }
}

fn statuses_of(phases: &[(&str, ImagePullPhase)]) -> BTreeMap<String, ImageStatus> {
    phases
        .iter()
        .map(|(image, phase)| {
            let status = ImageStatus {
                phase: *phase,
                ..ImageStatus::default()
            };
            ((*image).to_owned(), status)
        })
        .collect()
}

#[test]
fn counts_from_per_image_statuses() {
    use ImagePullPhase::{Failed, Pulling, Succeeded, Waiting};
    let counts = |desired, succeeded, failed, pulling, waiting| ImageCounts {
        desired,
        succeeded,
        failed,
        pulling,
        waiting,
    };
    let cases = [
        (
            "empty",
            spec_of(&[]),
            statuses_of(&[]),
            counts(0, 0, 0, 0, 0),
        ),
        (
            "no statuses yet: all waiting",
            spec_of(&["a", "b"]),
            statuses_of(&[]),
            counts(2, 0, 0, 0, 2),
        ),
        (
            "one of each",
            spec_of(&["a", "b", "c", "d"]),
            statuses_of(&[
                ("a", Succeeded),
                ("b", Failed),
                ("c", Pulling),
                ("d", Waiting),
            ]),
            counts(4, 1, 1, 1, 1),
        ),
        (
            "statuses of removed images are not counted",
            spec_of(&["a"]),
            statuses_of(&[("a", Succeeded), ("gone", Failed)]),
            counts(1, 1, 0, 0, 0),
        ),
    ];
    for (name, spec, statuses, want) in cases {
        assert_eq!(ImageCounts::of(&spec, &statuses), want, "{name}");
        let mut status = ImageListStatus {
            images: statuses,
            ..ImageListStatus::default()
        };
        status.update_counts(&spec);
        let got = counts(
            status.desired,
            status.succeeded,
            status.failed,
            status.pulling,
            status.waiting,
        );
        assert_eq!(got, want, "{name}: update_counts");
    }
}

/// What the agent's parser (agent/src/reference.rs) accepts, as the CEL rules must.
/// The component test `crd_imagelist` checks the same against the real apiserver and
/// the agent's parser itself.
const REFERENCES: [(&str, bool); 24] = [
    ("nginx", true),
    ("nginx:1.25", true),
    ("library/nginx:latest", true),
    ("docker.io/library/nginx:1.25", true),
    (SEED_IMAGE, true),
    ("localhost:5000/foo/bar:v1", true),
    ("localhost/foo", true),
    ("registry:5000/foo", true),
    ("Registry.Example.com/foo", true),
    ("Foo/bar", true),
    ("a.b", true),
    ("foo_bar/baz", true),
    ("foo__bar---baz", true),
    (
        "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        true,
    ),
    ("my_reg.io/x", false),
    ("UPPER", false),
    ("a b", false),
    ("nginx;rm -rf /", false),
    ("foo//bar", false),
    ("foo:bar:baz", false),
    ("-foo.io/x", false),
    ("nginx:-tag", false),
    ("nginx@sha256:0123", false),
    (
        "nginx@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
        false,
    ),
];

#[test]
fn the_reference_regex_follows_the_agent_grammar() {
    let reference = regex::Regex::new(REFERENCE_REGEX).expect("valid regex");
    let hex_name = regex::Regex::new(HEX_NAME_REGEX).expect("valid regex");
    let name = regex::Regex::new(NAME_PREFIX_REGEX).expect("valid regex");
    for (input, valid) in REFERENCES {
        let accepted = reference.is_match(input) && !hex_name.is_match(input);
        assert_eq!(accepted, valid, "{input:?}");
    }
    let hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert!(reference.is_match(hex) && hex_name.is_match(hex));
    assert!(hex_name.is_match(&format!("{hex}:tag")));
    assert!(!hex_name.is_match(&format!("x{hex}")));
    let found = |s: &str| name.find(s).map(|m| m.as_str().to_owned());
    assert_eq!(
        found("localhost:5000/a/b:v1@sha256:x").as_deref(),
        Some("localhost:5000/a/b")
    );
    assert_eq!(found("nginx:1.25").as_deref(), Some("nginx"));
}

#[test]
fn imagelist_crd_shape() {
    let crd = ImageList::crd();
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.group, "stevedore.dev");
    let version = &crd.spec.versions[0];
    assert!(
        version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some())
    );
    let columns: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        columns,
        ["DESIRED", "SUCCEEDED", "FAILED", "PULLING", "AGE"]
    );

    let schema = serde_json::to_value(&version.schema).expect("schema");
    let images = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["images"];
    assert_eq!(images["x-kubernetes-map-type"], "granular");
    assert_eq!(images["maxProperties"], 1024);
    assert_eq!(
        images["x-kubernetes-validations"].as_array().map(Vec::len),
        Some(4)
    );
    let secrets = &images["additionalProperties"]["properties"]["pullSecrets"];
    assert_eq!(secrets["x-kubernetes-list-type"], "map");
    assert_eq!(
        secrets["x-kubernetes-list-map-keys"],
        serde_json::json!(["namespace", "name"])
    );
    let secret_required = &secrets["items"]["required"];
    assert_eq!(secret_required, &serde_json::json!(["name", "namespace"]));
}

#[test]
fn imagepulljob_crd_shape() {
    let crd = ImagePullJob::crd();
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.group, "apps.kruise.io");
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(
        version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some())
    );
    let columns: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        columns,
        ["TOTAL", "ACTIVE", "SUCCEED", "FAILED", "AGE", "MESSAGE"]
    );
    let schema = serde_json::to_value(&version.schema).expect("schema");
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["image"]));
    let names = &spec["properties"]["selector"]["properties"]["names"];
    assert_eq!(names["x-kubernetes-list-type"], "set");
}

/// Server-side apply leaves `null` where the last image was removed (Kubernetes < 1.36).
#[test]
fn null_spec_and_maps_read_as_empty() {
    for json in [
        r#"{"apiVersion":"stevedore.dev/v1alpha1","kind":"ImageList","metadata":{"name":"n"},"spec":null}"#,
        r#"{"apiVersion":"stevedore.dev/v1alpha1","kind":"ImageList","metadata":{"name":"n"},"spec":{"images":null},"status":{"images":null}}"#,
    ] {
        let list: ImageList = serde_json::from_str(json).expect(json);
        assert!(list.spec.images.is_empty(), "{json}");
        assert!(list.status.is_none_or(|s| s.images.is_empty()), "{json}");
    }
}

/// An entry whose last fields one writer released while another holds its key is `null`.
#[test]
fn null_entries_read_as_defaults() {
    let json = r#"{"apiVersion":"stevedore.dev/v1alpha1","kind":"ImageList","metadata":{"name":"n"},"spec":{"images":{"busybox:1":null,"nginx":{"alwaysPull":true}}}}"#;
    let list: ImageList = serde_json::from_str(json).expect(json);
    assert_eq!(list.spec.images["busybox:1"], ImageListEntry::default());
    assert!(list.spec.images["nginx"].always_pull);
    let crd = serde_json::to_value(ImageList::crd()).expect("crd");
    let entry = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["images"]["additionalProperties"];
    assert_eq!(entry["nullable"], true, "{entry}");
}

#[test]
fn imagelistpulljob_crd_shape() {
    use super::imagelistpulljob::ImageListPullJob;
    let crd = ImageListPullJob::crd();
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.group, "apps.kruise.io");
    let version = &crd.spec.versions[0];
    let columns: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        columns,
        ["TOTAL", "SUCCEEDED", "COMPLETED", "PROGRESS", "AGE"]
    );
    let schema = serde_json::to_value(&version.schema).expect("schema");
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["images"]));
    let images = &spec["properties"]["images"];
    assert_eq!(images["x-kubernetes-list-type"], "set");
    assert_eq!(images["minItems"], 1);
    assert_eq!(images["items"]["maxLength"], 512);
    let rules: Vec<&str> = images["x-kubernetes-validations"]
        .as_array()
        .expect("image rules")
        .iter()
        .filter_map(|r| r["rule"].as_str())
        .collect();
    assert_eq!(
        rules.len(),
        3,
        "grammar, hex name and name length: {rules:?}"
    );
    // The ImagePullJob defaults, on the same fields.
    assert_eq!(
        spec["properties"]["imagePullPolicy"]["default"],
        "IfNotPresent"
    );
    let pull = &spec["properties"]["pullPolicy"]["properties"];
    assert_eq!(pull["timeoutSeconds"]["default"], 600);
    assert_eq!(pull["backoffLimit"]["default"], 3);
}

#[test]
fn openkruise_image_list_pull_job_reads_and_makes_its_image_pull_jobs() {
    use super::imagelistpulljob::ImageListPullJob;
    let yaml = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ImageListPullJob
metadata:
  name: job-with-always
spec:
  images:
  - nginx:1.9.1
  - busybox:1.29
  parallelism: 10
  selector:
    matchLabels:
      node-type: xxx
  completionPolicy:
    type: Always
    activeDeadlineSeconds: 1200
    ttlSecondsAfterFinished: 300
  pullPolicy:
    backoffLimit: 3
    timeoutSeconds: 300
"#;
    let job: ImageListPullJob = serde_saphyr::from_str(yaml).expect("deserializes");
    assert_eq!(job.spec.images, ["nginx:1.9.1", "busybox:1.29"]);
    let child = job.spec.child_spec("busybox:1.29");
    assert_eq!(child.image, "busybox:1.29");
    assert_eq!(child.timeout(), Duration::from_secs(300));
    assert_eq!(child.parallelism_or_default(), IntOrString::Int(10));
    assert_eq!(child.completion_policy.active_deadline_seconds, Some(1200));
    assert_eq!(child.completion_policy.ttl_seconds_after_finished, None);
    assert_eq!(child.selector, job.spec.selector);
}
