//! The `PullImage` stream's pacing: progress at most every [`PROGRESS_EVERY`], the result
//! at once.

use stevedore_parsers::oci::Descriptor;
use tokio::sync::{mpsc, watch};
use tokio::time::{Duration, Instant};

use super::{PROGRESS_EVERY, stream_pull};
use crate::images::pipeline::pull::PulledImage;
use crate::images::progress::{BlobProgress, Phase, Progress};
use crate::images::service::manager::PullState;
use stevedore_proto::stevedore::agent::v1 as api;

fn downloading(done: u64) -> Progress {
    Progress {
        phase: Phase::Downloading,
        blobs: vec![BlobProgress {
            digest: "sha256:layer".into(),
            media_type: "application/vnd.oci.image.layer.v1.tar+gzip".into(),
            done,
            total: 100,
        }],
    }
}

fn pulled() -> PulledImage {
    PulledImage {
        image_id: "sha256:config".into(),
        repo_digest: "registry.test/app@sha256:manifest".into(),
        repo_tag: Some("registry.test/app:v1".into()),
        target: Descriptor::new(
            "application/vnd.oci.image.manifest.v1+json",
            "sha256:manifest",
            1,
        ),
    }
}

/// Each case: how long after the first progress message the pull ends; the DONE message
/// must follow at once, not at the end of the progress interval.
#[tokio::test(start_paused = true)]
async fn the_result_is_sent_as_soon_as_the_pull_ends() {
    for ends_after in [Duration::ZERO, Duration::from_millis(1), PROGRESS_EVERY / 2] {
        let (state, rx) = watch::channel(PullState {
            progress: downloading(10),
            ..PullState::default()
        });
        let (tx, mut out) = mpsc::channel(16);
        tokio::spawn(stream_pull(rx, tx));
        let first = out.recv().await.expect("a message").expect("progress");
        assert_eq!(first.phase, api::PullPhase::Downloading as i32);

        tokio::time::sleep(ends_after).await;
        let ended_at = Instant::now();
        state.send_modify(|s| {
            s.progress = downloading(100);
            s.outcome = Some(Ok(pulled()));
        });
        let done = out.recv().await.expect("a message").expect("the result");
        assert_eq!(done.phase, api::PullPhase::Done as i32, "{ends_after:?}");
        assert_eq!(done.image_id, "sha256:config");
        assert_eq!(
            ended_at.elapsed(),
            Duration::ZERO,
            "ended after {ends_after:?}"
        );
    }
}

/// Progress changing faster than the interval is sent at most once per interval, and the
/// latest state is the one sent.
#[tokio::test(start_paused = true)]
async fn progress_is_paced_and_the_latest_is_sent() {
    let (state, rx) = watch::channel(PullState {
        progress: downloading(1),
        ..PullState::default()
    });
    let (tx, mut out) = mpsc::channel(16);
    tokio::spawn(stream_pull(rx, tx));
    let started = Instant::now();
    let first = out.recv().await.expect("a message").expect("progress");
    assert_eq!(first.layers[0].bytes_done, 1);
    for done in 2..=5 {
        state.send_modify(|s| s.progress = downloading(done));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = out.recv().await.expect("a message").expect("progress");
    assert_eq!(second.layers[0].bytes_done, 5);
    assert_eq!(started.elapsed(), PROGRESS_EVERY);
}

/// A pull whose state goes away without a result ends the stream with an error.
#[tokio::test(start_paused = true)]
async fn a_pull_dropped_without_a_result_is_an_error() {
    let (state, rx) = watch::channel(PullState {
        progress: downloading(1),
        ..PullState::default()
    });
    let (tx, mut out) = mpsc::channel(16);
    tokio::spawn(stream_pull(rx, tx));
    out.recv().await.expect("a message").expect("progress");
    drop(state);
    let err = out.recv().await.expect("a message").expect_err("no result");
    assert_eq!(err.code(), tonic::Code::Internal);
}
