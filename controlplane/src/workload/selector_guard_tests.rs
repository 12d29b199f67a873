use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::jiff::Timestamp;

use super::{
    RefusableStatus, SELECTING_ALL, SELECTOR_MISMATCH, SelectorRefusal, check_template_selected,
    refused_status,
};
use crate::api::cloneset::CloneSetCondition;
use crate::controller::conditions::{StatusCondition, find};

/// A status with nothing but what the guard writes, and a count it must keep.
#[derive(Clone, Debug, Default, PartialEq)]
struct ToyStatus {
    observed_generation: i64,
    replicas: i32,
    conditions: Vec<CloneSetCondition>,
}

impl RefusableStatus for ToyStatus {
    type Condition = CloneSetCondition;

    fn observed_generation_mut(&mut self) -> &mut i64 {
        &mut self.observed_generation
    }

    fn conditions_mut(&mut self) -> &mut Vec<CloneSetCondition> {
        &mut self.conditions
    }
}

fn template(labels: &[(&str, &str)]) -> PodTemplateSpec {
    let labels: BTreeMap<String, String> = (labels.iter())
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            ..ObjectMeta::default()
        }),
        spec: None,
    }
}

fn match_labels(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            (labels.iter())
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        match_expressions: None,
    }
}

fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }]),
    }
}

/// A case, the selector, the template, the refusal's reason (None: no refusal), and the
/// words its message names.
type Case<'a> = (
    &'a str,
    LabelSelector,
    PodTemplateSpec,
    Option<&'a str>,
    &'a [&'a str],
);

#[test]
fn the_reason_says_how_the_selector_misses_the_template() {
    let web = template(&[("app", "web")]);
    let cases: Vec<Case<'_>> = vec![
        (
            "selects the template",
            match_labels(&[("app", "web")]),
            web.clone(),
            None,
            &[],
        ),
        (
            "empty: selects every pod",
            LabelSelector::default(),
            web.clone(),
            Some(SELECTING_ALL),
            &["spec.selector is empty"],
        ),
        (
            "empty matchLabels counts as empty",
            match_labels(&[]),
            web.clone(),
            Some(SELECTING_ALL),
            &["spec.selector is empty"],
        ),
        (
            "a label the template lacks",
            match_labels(&[("tier", "front")]),
            web.clone(),
            Some(SELECTOR_MISMATCH),
            &["tier=front", "has no tier"],
        ),
        (
            "a label of another value",
            match_labels(&[("app", "db")]),
            web.clone(),
            Some(SELECTOR_MISMATCH),
            &["app=db", "app=web"],
        ),
        (
            "an expression the template does not meet",
            expression("app", "In", &["db"]),
            web.clone(),
            Some(SELECTOR_MISMATCH),
            &["matchExpressions[0]", "app=web"],
        ),
        (
            "a template without labels",
            match_labels(&[("app", "web")]),
            PodTemplateSpec::default(),
            Some(SELECTOR_MISMATCH),
            &["has no app"],
        ),
    ];
    for (case, selector, template, reason, words) in cases {
        let checked = check_template_selected(&selector, &template);
        assert_eq!(checked.as_ref().err().map(|r| r.reason), reason, "{case}");
        let message = checked.err().map(|r| r.message).unwrap_or_default();
        for word in words {
            assert!(message.contains(word), "{case}: {message:?} names {word:?}");
        }
        if reason.is_some() {
            assert!(
                message.ends_with("until the selector selects the template's labels"),
                "{case}: {message:?} says what is held and until when"
            );
        }
    }
}

fn refusal(reason: &'static str, message: &str) -> SelectorRefusal {
    SelectorRefusal {
        reason,
        message: message.to_owned(),
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).expect("a valid time")
}

#[test]
fn the_refused_status_keeps_the_counts_and_sets_the_kinds_condition() {
    let earlier = ToyStatus {
        observed_generation: 3,
        replicas: 2,
        conditions: vec![CloneSetCondition::new(
            "FailedUpdate",
            "True",
            "",
            "an agent is unreachable".to_owned(),
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)),
        )],
    };
    let mismatch = refusal(SELECTOR_MISMATCH, "tier is missing");
    let status = refused_status(Some(&earlier), 4, "FailedCreatePod", &mismatch, at(10));
    assert_eq!(status.observed_generation, 4, "the generation is observed");
    assert_eq!(status.replicas, 2, "the counts stay as they were");
    assert!(
        find(&status.conditions, "FailedUpdate").is_some(),
        "other conditions stay"
    );
    let condition = find(&status.conditions, "FailedCreatePod").expect("the kind's condition");
    assert_eq!(
        (
            condition.status(),
            condition.reason.as_str(),
            condition.message.as_str()
        ),
        ("True", SELECTOR_MISMATCH, "tier is missing")
    );
}

#[test]
fn a_refusal_seen_again_writes_nothing_new_and_a_new_one_replaces_it() {
    let first = refusal(SELECTOR_MISMATCH, "tier is missing");
    let once = refused_status::<ToyStatus>(None, 1, "FailedScale", &first, at(0));
    let again = refused_status(Some(&once), 1, "FailedScale", &first, at(30));
    assert_eq!(
        again, once,
        "the same refusal later is the same status: no write"
    );

    let emptied = refusal(SELECTING_ALL, "spec.selector is empty");
    let changed = refused_status(Some(&once), 2, "FailedScale", &emptied, at(60));
    let condition = find(&changed.conditions, "FailedScale").expect("the condition");
    assert_eq!(
        (condition.reason.as_str(), condition.message.as_str()),
        (SELECTING_ALL, "spec.selector is empty"),
        "reason and message follow the newest refusal"
    );
    assert_eq!(
        condition.last_transition_time,
        find(&once.conditions, "FailedScale").and_then(|c| c.last_transition_time.clone()),
        "still True: the transition time stays"
    );
}
