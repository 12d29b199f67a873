//! Status conditions as every workload keeps them, for any condition type: one condition
//! per type, upserted by type, keeping `lastTransitionTime` while the status holds; and
//! problem conditions (FailedScale, FailedUpdate) that are present while a problem lasts
//! and removed after it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::broadcastjob::JobCondition;
use crate::api::cloneset::CloneSetCondition;
use crate::api::daemonset::DaemonSetCondition;
use crate::api::statefulset::StatefulSetCondition;

/// A workload's status condition type (`type`, `status`, `reason`, `message`,
/// `lastTransitionTime`).
pub trait StatusCondition {
    fn condition_type(&self) -> &str;
    fn status(&self) -> &str;
    /// A new condition that turned to `status` at `transition`.
    fn new(type_: &str, status: &str, reason: &str, message: String, transition: Time) -> Self;
    /// Sets status, reason and message, and the transition time when it is given.
    fn update(&mut self, status: &str, reason: &str, message: String, transition: Option<Time>);
}

/// `True` or `False`.
pub fn bool_status(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

/// The condition of `type_`, if there is one.
pub fn find<'a, C: StatusCondition>(conditions: &'a [C], type_: &str) -> Option<&'a C> {
    conditions.iter().find(|c| c.condition_type() == type_)
}

/// The longest condition message written: `metav1.Condition`'s limit (its `message` has
/// `maxLength: 32768`). A message is built from what the apiserver or an agent said, which
/// can be any length; one of 100 KiB would make every status write of the object large.
pub const MESSAGE_MAX_BYTES: usize = 32768;

/// Sets the condition of `type_`, keeping its transition time when the status does not
/// change. The message is cut to [`MESSAGE_MAX_BYTES`].
pub fn set_condition<C: StatusCondition>(
    conditions: &mut Vec<C>,
    type_: &str,
    value: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let message = super::events::truncate(message, MESSAGE_MAX_BYTES);
    let status = bool_status(value);
    match conditions.iter_mut().find(|c| c.condition_type() == type_) {
        Some(existing) => {
            let transition = (existing.status() != status).then_some(Time(now));
            existing.update(status, reason, message, transition);
        }
        None => conditions.push(C::new(type_, status, reason, message, Time(now))),
    }
}

/// A problem condition: present (True) while the problem lasts, removed after, its
/// message the error and its reason empty, as OpenKruise writes FailedScale and
/// FailedUpdate. While it lasts the condition keeps its first message, like the ReplicaSet's
/// ReplicaFailure: messages name the pod that failed, which differs on every retry, and a
/// status write on every retry would requeue the workload at once, past its backoff.
pub fn set_problem<C: StatusCondition>(
    conditions: &mut Vec<C>,
    type_: &str,
    problem: Option<&str>,
    now: Timestamp,
) {
    match problem {
        Some(_) if find(conditions, type_).is_some_and(|c| c.status() == "True") => {}
        Some(message) => set_condition(conditions, type_, true, "", message.to_owned(), now),
        None => conditions.retain(|c| c.condition_type() != type_),
    }
}

/// `StatusCondition` for condition types with the usual fields (type, status,
/// lastTransitionTime, reason, message); any other field keeps its default.
macro_rules! usual_status_condition {
    ($($condition:ty),+) => {$(
        impl StatusCondition for $condition {
            fn condition_type(&self) -> &str {
                &self.type_
            }

            fn status(&self) -> &str {
                &self.status
            }

            // Some of the types have no other field: the update is needless for them only.
            #[allow(clippy::needless_update)]
            fn new(type_: &str, status: &str, reason: &str, message: String, transition: Time) -> Self {
                Self {
                    type_: type_.to_owned(),
                    status: status.to_owned(),
                    last_transition_time: Some(transition),
                    reason: reason.to_owned(),
                    message,
                    ..Self::default()
                }
            }

            fn update(&mut self, status: &str, reason: &str, message: String, transition: Option<Time>) {
                if transition.is_some() {
                    self.last_transition_time = transition;
                }
                status.clone_into(&mut self.status);
                reason.clone_into(&mut self.reason);
                self.message = message;
            }
        }
    )+};
}

usual_status_condition!(CloneSetCondition, StatefulSetCondition, DaemonSetCondition);

impl StatusCondition for JobCondition {
    fn condition_type(&self) -> &str {
        &self.type_
    }

    fn status(&self) -> &str {
        &self.status
    }

    fn new(type_: &str, status: &str, reason: &str, message: String, transition: Time) -> Self {
        Self {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_probe_time: Some(transition.clone()),
            last_transition_time: Some(transition),
            reason: reason.to_owned(),
            message,
        }
    }

    fn update(&mut self, status: &str, reason: &str, message: String, transition: Option<Time>) {
        if transition.is_some() {
            self.last_transition_time.clone_from(&transition);
            self.last_probe_time = transition;
        }
        status.clone_into(&mut self.status);
        reason.clone_into(&mut self.reason);
        self.message = message;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("a time")
    }

    fn condition(type_: &str, status: &str, message: &str, since: i64) -> CloneSetCondition {
        CloneSetCondition::new(type_, status, type_, message.to_owned(), Time(at(since)))
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut conditions = vec![condition("Available", "True", "old", 0)];
        set_condition(
            &mut conditions,
            "Available",
            true,
            "R",
            "new".into(),
            at(10),
        );
        assert_eq!(conditions[0].last_transition_time, Some(Time(at(0))));
        assert_eq!(
            (
                conditions[0].reason.as_str(),
                conditions[0].message.as_str()
            ),
            ("R", "new")
        );
        set_condition(
            &mut conditions,
            "Available",
            false,
            "R",
            "down".into(),
            at(20),
        );
        assert_eq!(conditions[0].last_transition_time, Some(Time(at(20))));
        assert_eq!(conditions[0].status, "False");
        set_condition(
            &mut conditions,
            "Progressing",
            true,
            "P",
            String::new(),
            at(30),
        );
        assert_eq!(conditions.len(), 2, "one condition per type");
        assert_eq!(
            find(&conditions, "Progressing").map(|c| c.last_transition_time.clone()),
            Some(Some(Time(at(30))))
        );
    }

    #[test]
    fn a_long_message_is_cut_to_the_condition_limit() {
        let mut conditions: Vec<CloneSetCondition> = Vec::new();
        let long = "é".repeat(60 * 1024);
        set_problem(&mut conditions, "FailedScale", Some(&long), at(0));
        set_condition(
            &mut conditions,
            "Progressing",
            true,
            "R",
            long.clone(),
            at(0),
        );
        for condition in &conditions {
            assert_eq!(
                condition.message.len(),
                MESSAGE_MAX_BYTES,
                "{}",
                condition.type_
            );
            assert!(long.starts_with(&condition.message));
        }
    }

    #[test]
    fn a_problem_keeps_its_first_message_and_goes_when_it_is_over() {
        let mut conditions: Vec<CloneSetCondition> = Vec::new();
        set_problem(&mut conditions, "FailedScale", Some("pod a failed"), at(0));
        set_problem(&mut conditions, "FailedScale", Some("pod b failed"), at(5));
        let first = CloneSetCondition::new(
            "FailedScale",
            "True",
            "",
            "pod a failed".to_owned(),
            Time(at(0)),
        );
        assert_eq!(conditions, [first]);
        set_problem(&mut conditions, "FailedScale", None, at(9));
        assert!(conditions.is_empty());
    }
}
