//! The pure rule for setting one pod condition: what the conditions list becomes, and
//! whether anything changed at all (so an unchanged value is never patched).

use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The value a caller wants one condition to have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredCondition {
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// The conditions after setting `desired`, or `None` when `current` already has it
/// (same status, reason and message). `lastTransitionTime` moves to `now` only when
/// the status changes; a changed reason or message alone keeps the old time.
pub fn set_condition(
    current: &[PodCondition],
    desired: &DesiredCondition,
    now: Time,
) -> Option<Vec<PodCondition>> {
    let existing = current.iter().find(|c| c.type_ == desired.type_);
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let wanted = PodCondition {
        type_: desired.type_.clone(),
        status: desired.status.clone(),
        reason: non_empty(&desired.reason),
        message: non_empty(&desired.message),
        last_transition_time: match existing {
            Some(old) if old.status == desired.status => old.last_transition_time.clone(),
            _ => Some(now),
        },
        last_probe_time: existing.and_then(|old| old.last_probe_time.clone()),
        observed_generation: existing.and_then(|old| old.observed_generation),
    };
    if existing.is_some_and(|old| {
        old.status == wanted.status && old.reason == wanted.reason && old.message == wanted.message
    }) {
        return None;
    }
    let mut next: Vec<PodCondition> = current.to_vec();
    match next.iter_mut().find(|c| c.type_ == desired.type_) {
        Some(slot) => *slot = wanted,
        None => next.push(wanted),
    }
    Some(next)
}

/// The status of condition `type_` on a pod's conditions, if it is set.
pub fn condition_status<'a>(conditions: &'a [PodCondition], type_: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn time(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).expect("valid timestamp"))
    }

    fn cond(type_: &str, status: &str, reason: &str, at: i64) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            status: status.into(),
            reason: (!reason.is_empty()).then(|| reason.into()),
            last_transition_time: Some(time(at)),
            ..Default::default()
        }
    }

    fn desired(type_: &str, status: &str, reason: &str) -> DesiredCondition {
        DesiredCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn table() {
        const NOW: i64 = 1_000;
        struct Case {
            name: &'static str,
            current: Vec<PodCondition>,
            desired: DesiredCondition,
            expected: Option<Vec<PodCondition>>,
        }
        let ready = || cond("Ready", "True", "", 5);
        let cases = [
            Case {
                name: "absent condition is appended with now as transition time",
                current: vec![ready()],
                desired: desired("InPlaceUpdateReady", "True", "Done"),
                expected: Some(vec![
                    ready(),
                    cond("InPlaceUpdateReady", "True", "Done", NOW),
                ]),
            },
            Case {
                name: "same status, reason and message is no change",
                current: vec![cond("InPlaceUpdateReady", "True", "Done", 7), ready()],
                desired: desired("InPlaceUpdateReady", "True", "Done"),
                expected: None,
            },
            Case {
                name: "status flip replaces in place and moves the transition time",
                current: vec![cond("InPlaceUpdateReady", "True", "", 7), ready()],
                desired: desired("InPlaceUpdateReady", "False", "Updating"),
                expected: Some(vec![
                    cond("InPlaceUpdateReady", "False", "Updating", NOW),
                    ready(),
                ]),
            },
            Case {
                name: "reason change alone keeps the transition time",
                current: vec![cond("KruisePodReady", "False", "Old", 7)],
                desired: desired("KruisePodReady", "False", "New"),
                expected: Some(vec![cond("KruisePodReady", "False", "New", 7)]),
            },
            Case {
                name: "empty list gets the condition",
                current: vec![],
                desired: desired("KruisePodReady", "Unknown", ""),
                expected: Some(vec![cond("KruisePodReady", "Unknown", "", NOW)]),
            },
        ];
        for case in cases {
            let got = set_condition(&case.current, &case.desired, time(NOW));
            assert_eq!(got, case.expected, "{}", case.name);
        }
    }

    #[test]
    fn status_lookup() {
        let conditions = [cond("Ready", "False", "", 1)];
        assert_eq!(condition_status(&conditions, "Ready"), Some("False"));
        assert_eq!(condition_status(&conditions, "KruisePodReady"), None);
    }
}
