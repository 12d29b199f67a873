//! Who reopens an `InPlaceUpdateReady` gate left closed: table-driven over the pod's gate,
//! condition, and the in-place states recorded on it.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::*;
use crate::workload::inplace::{REASON_START, STATE_ANNOTATION};
use crate::workload::test_pods::{PodBuilder, new_pod, run_on};

const UNDER_WAY: &str = r#"{"revision":"r2","updateTimestamp":"2026-01-01T00:00:00Z","lastContainerStatuses":{"web":{"imageID":"sha-old"}}}"#;

fn gated_pod() -> PodBuilder {
    let spec = PodSpec {
        containers: vec![Container {
            name: "web".to_owned(),
            image: Some("web:v1".to_owned()),
            ..Container::default()
        }],
        ..PodSpec::default()
    };
    PodBuilder(run_on(
        new_pod("p", Default::default(), Some(spec)),
        "node-a",
    ))
    .gate(INPLACE_UPDATE_READY)
}

fn closed_by_workload() -> PodBuilder {
    gated_pod().condition_because(
        INPLACE_UPDATE_READY,
        "False",
        REASON_START,
        "updating in place to r2",
    )
}

fn closed_by_sidecarset(set: &str) -> PodBuilder {
    gated_pod().condition_because(
        INPLACE_UPDATE_READY,
        "False",
        REASON_SIDECAR_START,
        &sidecar_gate_message(set),
    )
}

#[test]
fn the_workload_reopens_a_gate_only_it_left_closed() {
    let cases: Vec<(&str, Pod, bool)> = vec![
        (
            "closed by an update whose patch never landed",
            closed_by_workload().build(),
            true,
        ),
        (
            "closed with an older, finished update recorded",
            closed_by_workload()
                .annotation(SIDECAR_UPGRADE_STATE_ANNOTATION, "{}")
                .build(),
            true,
        ),
        (
            "open",
            gated_pod().condition(INPLACE_UPDATE_READY, "True").build(),
            false,
        ),
        (
            "no condition (refresh creates it)",
            gated_pod().build(),
            false,
        ),
        (
            "no readiness gate",
            PodBuilder(run_on(
                new_pod("p", Default::default(), Some(PodSpec::default())),
                "n",
            ))
            .condition(INPLACE_UPDATE_READY, "False")
            .build(),
            false,
        ),
        (
            "closed by a SidecarSet",
            closed_by_sidecarset("mesh").build(),
            false,
        ),
        (
            "a SidecarSet records an upgrade under way",
            closed_by_workload()
                .annotation(
                    SIDECAR_UPGRADE_STATE_ANNOTATION,
                    r#"{"mesh":{"revision":"h2"}}"#,
                )
                .build(),
            false,
        ),
        (
            "a SidecarSet state that does not parse is left to the SidecarSet",
            closed_by_workload()
                .annotation(SIDECAR_UPGRADE_STATE_ANNOTATION, "log")
                .build(),
            false,
        ),
    ];
    for (name, pod, reopen) in cases {
        assert_eq!(workload_gate_left_closed(&pod), reopen, "{name}");
    }
}

#[test]
fn a_sidecarset_reopens_only_the_gate_it_closed_itself() {
    let cases: Vec<(&str, Pod, bool)> = vec![
        (
            "closed by mesh, no upgrade recorded",
            closed_by_sidecarset("mesh").build(),
            true,
        ),
        (
            "closed by mesh, another set's upgrade recorded",
            closed_by_sidecarset("mesh")
                .annotation(
                    SIDECAR_UPGRADE_STATE_ANNOTATION,
                    r#"{"logs":{"revision":"h2"}}"#,
                )
                .build(),
            true,
        ),
        (
            "closed by mesh, its upgrade recorded (finishing reopens it)",
            closed_by_sidecarset("mesh")
                .annotation(
                    SIDECAR_UPGRADE_STATE_ANNOTATION,
                    r#"{"mesh":{"revision":"h2"}}"#,
                )
                .build(),
            false,
        ),
        (
            "closed by another SidecarSet",
            closed_by_sidecarset("logs").build(),
            false,
        ),
        (
            "closed by the workload",
            closed_by_workload().build(),
            false,
        ),
        (
            "the workload updates the pod in place",
            closed_by_sidecarset("mesh")
                .annotation(STATE_ANNOTATION, UNDER_WAY)
                .build(),
            false,
        ),
        (
            "open",
            gated_pod().condition(INPLACE_UPDATE_READY, "True").build(),
            false,
        ),
    ];
    for (name, pod, reopen) in cases {
        assert_eq!(sidecar_gate_left_closed(&pod, "mesh"), reopen, "{name}");
    }
}
