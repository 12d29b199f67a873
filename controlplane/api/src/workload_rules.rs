//! Admission rules every workload CRD with a `selector` and a pod `template` in its spec
//! shares (CloneSet now; Advanced StatefulSet and the other kinds as they come): the
//! selector is not empty and selects the template's own labels. A workload that admitted
//! a selector missing its template created a pod, could not claim it, and created another,
//! without end; the controller refuses such a workload as well (`workload::selector`), the
//! rules here make the apiserver say why at `kubectl apply`.
//!
//! The rules sit on the spec (`self` is the spec). The matchExpressions item rules (values
//! present for In/NotIn, absent for Exists/DoesNotExist) are in the selector schema
//! (`schema::label_selector`), where the apiserver names the item's index itself. The
//! bounds that keep the estimated cost in the apiserver's budget are in that schema too.

use kube::core::{Message, Rule};

/// The template has the requirement's key (`r`) among its labels.
macro_rules! has_key {
    () => {
        "(has(self.template.metadata) && has(self.template.metadata.labels) \
         && r.key in self.template.metadata.labels)"
    };
}

/// The template's value for the requirement's key is one of its values.
macro_rules! value_in {
    () => {
        concat!(
            "(",
            has_key!(),
            " && has(r.values) && self.template.metadata.labels[r.key] in r.values)"
        )
    };
}

/// Requirement `r` selects the template's labels, as `labels.Selector.Matches` would.
macro_rules! selects {
    () => {
        concat!(
            "((r.operator == 'In' && ",
            value_in!(),
            ") || (r.operator == 'NotIn' && !",
            value_in!(),
            ") || (r.operator == 'Exists' && ",
            has_key!(),
            ") || (r.operator == 'DoesNotExist' && !",
            has_key!(),
            "))"
        )
    };
}

/// CEL: the selector has at least one matchLabels entry or matchExpressions requirement.
pub const SELECTOR_NOT_EMPTY: &str = "(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) \
    || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)";
/// The message of [`SELECTOR_NOT_EMPTY`].
pub const SELECTOR_NOT_EMPTY_MESSAGE: &str = "spec.selector must not be empty: an empty selector selects every pod in the namespace; \
    set matchLabels or matchExpressions that select spec.template.metadata.labels";

/// CEL: every matchLabels entry is among the template's labels with the same value.
pub const SELECTOR_LABELS_MATCH: &str = "!has(self.selector.matchLabels) || \
    self.selector.matchLabels.all(k, has(self.template.metadata) && has(self.template.metadata.labels) \
    && k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k])";
/// The message of [`SELECTOR_LABELS_MATCH`], naming the first label that differs.
pub const SELECTOR_LABELS_MATCH_MESSAGE: &str = "'spec.selector.matchLabels.' + \
    self.selector.matchLabels.filter(k, !(has(self.template.metadata) && has(self.template.metadata.labels) \
    && k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k]))[0] \
    + ' must match spec.template.metadata.labels: the selector must select the pods the template creates'";

/// CEL: every matchExpressions requirement selects the template's labels.
pub const SELECTOR_EXPRESSIONS_MATCH: &str = concat!(
    "!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(r, ",
    selects!(),
    ")"
);
/// The message of [`SELECTOR_EXPRESSIONS_MATCH`]. A message expression naming the first
/// requirement (by `filter` and `indexOf`) exceeds the apiserver's cost budget more than
/// 100 times over; the controller's condition names it (`workload::selector`).
pub const SELECTOR_EXPRESSIONS_MATCH_MESSAGE: &str = "spec.selector.matchExpressions: every requirement must select spec.template.metadata.labels \
    (In: the template's value is listed; NotIn: it is not; Exists: the template has the key; DoesNotExist: it has not)";

/// CEL on one matchExpressions item: In and NotIn have values.
pub const REQUIREMENT_VALUES_PRESENT: &str =
    "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)";
/// The message of [`REQUIREMENT_VALUES_PRESENT`]; the apiserver prefixes the item's path.
pub const REQUIREMENT_VALUES_PRESENT_MESSAGE: &str =
    "values must not be empty when the operator is In or NotIn";
/// CEL on one matchExpressions item: Exists and DoesNotExist have no values.
pub const REQUIREMENT_VALUES_ABSENT: &str =
    "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0";
/// The message of [`REQUIREMENT_VALUES_ABSENT`].
pub const REQUIREMENT_VALUES_ABSENT_MESSAGE: &str =
    "values must be empty when the operator is Exists or DoesNotExist";

/// The spec-level rules of a workload with `selector` and `template`, for `x_kube`.
pub fn selector_not_empty() -> Rule {
    Rule::new(SELECTOR_NOT_EMPTY)
        .message(SELECTOR_NOT_EMPTY_MESSAGE)
        .field_path(".selector")
}

/// See [`SELECTOR_LABELS_MATCH`].
pub fn selector_labels_match() -> Rule {
    Rule::new(SELECTOR_LABELS_MATCH)
        .message(Message::Expression(SELECTOR_LABELS_MATCH_MESSAGE.into()))
        .field_path(".selector.matchLabels")
}

/// See [`SELECTOR_EXPRESSIONS_MATCH`].
pub fn selector_expressions_match() -> Rule {
    Rule::new(SELECTOR_EXPRESSIONS_MATCH)
        .message(SELECTOR_EXPRESSIONS_MATCH_MESSAGE)
        .field_path(".selector.matchExpressions")
}

/// The labels a pod-set controller (CloneSet, Advanced StatefulSet, Advanced DaemonSet)
/// writes on the pods it creates, over whatever the template says, or changes over a
/// pod's life: the instance id (`cloneset::pods`), the revision labels
/// (`workload::revision_adapter`), the ordinal labels (`statefulset::ordinals`) and the
/// lifecycle state (`workload::lifecycle`). A selector that names one of them either
/// selects a value the controller then overwrites, or stops selecting the pod when the
/// label changes: the controller creates a pod it never claims, and another, without end.
/// So every pod-set kind refuses them in its selector, with any operator (`DoesNotExist`
/// too: the controller adds the label). One list for the three kinds: each label is a
/// per-pod or per-revision value no workload selector can sensibly name, so YAML that names
/// one was already a runaway. OpenKruise's webhooks do not refuse them; the native
/// StatefulSet's selector must match its template, whose labels cannot carry a pod's name.
/// The controllers' constants are checked against this list by `tests_bounds`.
pub const CONTROLLER_OWNED_POD_LABELS: [&str; 6] = [
    "apps.kruise.io/cloneset-instance-id",
    "controller-revision-hash",
    "pod-template-hash",
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "lifecycle.apps.kruise.io/state",
];

/// What a selector naming a controller-owned label is told, after the label. Inside a CEL
/// string literal, so without single quotes.
pub const CONTROLLER_OWNED_MESSAGE: &str = " is a label the controller writes on its pods, over the value in the \
template: a selector naming it would stop selecting the pods the controller creates";

/// CEL: `names(label)` for some controller-owned label, ORed over the list.
fn any_owned(names: fn(&str) -> String) -> String {
    let terms: Vec<String> = CONTROLLER_OWNED_POD_LABELS
        .iter()
        .map(|l| names(l))
        .collect();
    terms.join(" || ")
}

/// CEL: the first controller-owned label `names(label)` holds for. Only evaluated when one
/// does, so the last label is the fallback. A chain of ternaries, not `filter(...)[0]`: the
/// apiserver estimates a `filter` over a selector at more than 100 times its budget.
fn first_owned(names: fn(&str) -> String) -> String {
    let mut labels = CONTROLLER_OWNED_POD_LABELS.iter().rev();
    let last = labels.next().copied().unwrap_or_default();
    labels.fold(format!("'{last}'"), |chain, label| {
        format!("({} ? '{label}' : {chain})", names(label))
    })
}

/// CEL: `label` is a matchLabels key (a map lookup).
fn in_match_labels(label: &str) -> String {
    format!("('{label}' in self.selector.matchLabels)")
}

/// CEL: a matchExpressions requirement names `label`.
fn in_match_expressions(label: &str) -> String {
    format!("self.selector.matchExpressions.exists(r, r.key == '{label}')")
}

/// CEL: no matchLabels key is a controller-owned label; the message names the first.
pub fn selector_labels_not_controller_owned() -> Rule {
    Rule::new(format!(
        "!has(self.selector.matchLabels) || !({})",
        any_owned(in_match_labels)
    ))
    .message(Message::Expression(format!(
        "'spec.selector.matchLabels: ' + {} + '{CONTROLLER_OWNED_MESSAGE}'",
        first_owned(in_match_labels)
    )))
    .field_path(".selector.matchLabels")
}

/// CEL: no matchExpressions requirement names a controller-owned label; the message names
/// the first.
pub fn selector_expressions_not_controller_owned() -> Rule {
    Rule::new(format!(
        "!has(self.selector.matchExpressions) || !({})",
        any_owned(in_match_expressions)
    ))
    .message(Message::Expression(format!(
        "'spec.selector.matchExpressions: ' + {} + '{CONTROLLER_OWNED_MESSAGE}'",
        first_owned(in_match_expressions)
    )))
    .field_path(".selector.matchExpressions")
}

/// CEL: an int-or-percent value (`x` is a field path) that is zero: `0` or `"0%"`.
macro_rules! is_zero {
    ($x:literal) => {
        concat!(
            "(type(",
            $x,
            ") == int ? int(",
            $x,
            ") == 0 : string(",
            $x,
            ") == '0%')"
        )
    };
}

/// CEL on an update strategy with `maxSurge` (default 0) and `maxUnavailable` (a default
/// above 0): they are not both 0, or no pod could ever be updated.
pub const SURGE_OR_UNAVAILABLE: &str = concat!(
    "!(has(self.maxUnavailable) && ",
    is_zero!("self.maxUnavailable"),
    " && (!has(self.maxSurge) || ",
    is_zero!("self.maxSurge"),
    "))"
);
/// The message of [`SURGE_OR_UNAVAILABLE`].
pub const SURGE_OR_UNAVAILABLE_MESSAGE: &str = "spec.updateStrategy: maxSurge and maxUnavailable must not both be 0 \
    (maxSurge defaults to 0): no pod could ever be updated";
