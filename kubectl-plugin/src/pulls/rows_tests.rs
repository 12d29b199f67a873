use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use stevedore_api::imagelist::{ImageListEntry, ImageStatus};
use stevedore_api::{ImageListSpec, ImageListStatus};

use super::*;

fn list(node: &str, images: &[(&str, Option<ImageStatus>)]) -> ImageList {
    let spec = ImageListSpec {
        images: images
            .iter()
            .map(|(image, _)| ((*image).to_owned(), ImageListEntry::default()))
            .collect(),
    };
    let statuses: BTreeMap<String, ImageStatus> = images
        .iter()
        .filter_map(|(image, status)| status.clone().map(|s| ((*image).to_owned(), s)))
        .collect();
    ImageList {
        metadata: ObjectMeta {
            name: Some(node.into()),
            ..ObjectMeta::default()
        },
        spec,
        status: Some(ImageListStatus {
            images: statuses,
            ..ImageListStatus::default()
        }),
    }
}

fn pulling(done: i64, total: i64) -> ImageStatus {
    ImageStatus {
        phase: ImagePullPhase::Pulling,
        bytes_done: done,
        bytes_total: total,
        ..ImageStatus::default()
    }
}

#[test]
fn rows_per_node_and_image_with_unreported_images_waiting() {
    let lists = [
        list("node-b", &[("nginx:1", Some(pulling(10, 100)))]),
        list(
            "node-a",
            &[("redis:7", None), ("nginx:1", Some(pulling(0, 0)))],
        ),
    ];
    let rows = pull_rows(&lists, None);
    let summary: Vec<(&str, &str, &str, i64)> = rows
        .iter()
        .map(|r| {
            (
                r.node.as_str(),
                r.image.as_str(),
                r.phase.as_str(),
                r.bytes_done,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("node-a", "nginx:1", "Pulling", 0),
            ("node-a", "redis:7", "Waiting", 0),
            ("node-b", "nginx:1", "Pulling", 10),
        ]
    );
    let only_b = pull_rows(&lists, Some("node-b"));
    assert_eq!(only_b.len(), 1);
    assert!(pull_rows(&lists, Some("node-c")).is_empty());
}

#[test]
fn byte_progress_in_words() {
    let row = |done, total| PullRow {
        node: "n".into(),
        image: "i".into(),
        phase: "Pulling".into(),
        bytes_done: done,
        bytes_total: total,
        attempts: 0,
        message: String::new(),
    };
    let cases = [
        (0, 0, "-"),
        (2048, 0, "2.0 KiB"),
        (512, 1024, "512 B / 1.0 KiB (50%)"),
        (
            3 * 1024 * 1024 / 2,
            3 * 1024 * 1024,
            "1.5 MiB / 3.0 MiB (50%)",
        ),
        // A report past its total (a retried layer counted twice) shows at most 100%.
        (5000, 4096, "4.9 KiB / 4.0 KiB (100%)"),
    ];
    for (done, total, want) in cases {
        assert_eq!(byte_progress(&row(done, total)), want, "{done}/{total}");
    }
    let mut failed = row(0, 0);
    failed.phase = "Failed".into();
    failed.message = "The registry refused the credentials.".into();
    assert_eq!(
        change_line(&failed),
        "n i Failed -: The registry refused the credentials."
    );
}

#[test]
fn settled_when_no_pull_is_in_flight_and_every_job_is_done() {
    let row = |phase: &str| PullRow {
        node: "n".into(),
        image: "i".into(),
        phase: phase.into(),
        bytes_done: 0,
        bytes_total: 0,
        attempts: 0,
        message: String::new(),
    };
    let job = |done| JobRow {
        namespace: "ns".into(),
        name: "j".into(),
        image: "i".into(),
        percent: 100,
        succeeded: 1,
        failed: 0,
        desired: 1,
        done,
    };
    assert!(all_settled(
        &[row("Succeeded"), row("Failed")],
        &[job(true)]
    ));
    assert!(!all_settled(&[row("Succeeded"), row("Pulling")], &[]));
    assert!(!all_settled(&[row("Waiting")], &[]));
    assert!(!all_settled(&[], &[job(false)]));
    assert!(all_settled(&[], &[]));
}
