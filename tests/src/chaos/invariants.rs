//! The promises checked on every pod event of the watch stream, from what the apiserver
//! says alone. Pure: the caller passes the time of each observation.
//!
//! - **maxUnavailable**: a controller never deletes (or takes down for an in-place
//!   update: `InPlaceUpdateReady` False, from the moment that gate closes) a ready pod of
//!   a CloneSet or Advanced StatefulSet while `maxUnavailable` pods of it are already
//!   unavailable (not ready, held by an in-place update, or missing below `replicas`).
//!   What the harness deleted itself is not the controller's deletion, but the hole it
//!   leaves counts, as OpenKruise counts it. A pod counts as
//!   unavailable only after `grace` (the controller acts on a watch that may be a moment
//!   behind ours), so a race of a few hundred milliseconds is not reported.
//! - **identity**: no two live pods of one CloneSet share an instance id, nor of one
//!   StatefulSet an ordinal.
//! - **PodUnavailableBudget**: the same count over the pods a budget selects, against the
//!   budget's own `maxUnavailable` (tighter than the set's, so the budget is what holds).
//! - **one per node**: no two running pods of one BroadcastJob on one node.
//! - **Forbid**: no two runs (Jobs) of a `concurrencyPolicy: Forbid` cron with running pods
//!   at once.
//! - **ownership**: no live pod that carries a set's labels lacks a controller owner.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// How many of a set's last pod transitions a violation of its availability carries.
const HISTORY_KEPT: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetKind {
    CloneSet,
    StatefulSet,
    DaemonSet,
    /// Its pods are checked for one running pod per node.
    BroadcastJob,
    /// An AdvancedCronJob with `concurrencyPolicy: Forbid`: its pods (of its runs) are
    /// checked for one running run at a time.
    ForbidCron,
}

/// A PodUnavailableBudget the harness created over the pods of set `app`.
#[derive(Clone, Debug)]
pub struct BudgetRule {
    pub name: String,
    pub app: String,
    pub max_unavailable: i32,
}

/// A workload the harness created: its pods carry `app: <name>`.
#[derive(Clone, Debug)]
pub struct SetRule {
    pub kind: SetKind,
    pub name: String,
    pub replicas: i32,
    pub max_unavailable: i32,
}

/// What the checkers read of a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    pub uid: String,
    pub name: String,
    /// The `app` label: whose selector it matches.
    pub app: Option<String>,
    /// The kind of its controller owner reference, if it has one.
    pub owner_kind: Option<String>,
    /// The name of its controller owner (for a cron's pods: the run).
    pub owner_name: Option<String>,
    /// `apps.kruise.io/cloneset-instance-id`.
    pub instance_id: Option<String>,
    /// `apps.kubernetes.io/pod-index`.
    pub ordinal: Option<String>,
    pub terminating: bool,
    pub ready: bool,
    /// `InPlaceUpdateReady` is False: a controller is updating it in place.
    pub in_place_pending: bool,
    pub node: Option<String>,
    /// Phase Succeeded or Failed.
    pub finished: bool,
}

impl PodView {
    /// Ready and not held by an in-place update (`InPlaceUpdateReady` False): available as
    /// the controllers count it (OpenKruise's `IsPodUpdateReady`).
    pub fn serving(&self) -> bool {
        self.ready && !self.in_place_pending
    }

    /// What the history line says of the pod.
    fn state(&self) -> String {
        let mut state = String::from(if self.ready { "ready" } else { "not ready" });
        if self.in_place_pending {
            state.push_str(", InPlaceUpdateReady False");
        }
        if self.terminating {
            state.push_str(", terminating");
        }
        state
    }
}

/// A broken promise, at the time (since the run began) it was seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Violation {
    pub at: Duration,
    pub rule: &'static str,
    pub detail: String,
    /// For an availability promise: the set's last pod transitions as the run's watch saw
    /// them, oldest first, so a report from CI can be read without a replay.
    pub history: Vec<String>,
}

/// What of a set is down besides the pod going.
struct Down {
    unready: Vec<String>,
    missing: i32,
}

impl Down {
    fn count(&self) -> i32 {
        i32::try_from(self.unready.len()).unwrap_or(i32::MAX) + self.missing
    }
}

struct Tracked {
    view: PodView,
    /// Since when the live pod has not been ready.
    unready_since: Option<Duration>,
}

pub struct Checker {
    rules: Vec<SetRule>,
    budgets: Vec<BudgetRule>,
    pods: BTreeMap<String, Tracked>,
    harness_deleted: BTreeSet<String>,
    /// Per set, when a pod of it last stopped being live.
    live_dropped_at: BTreeMap<String, Duration>,
    grace: Duration,
    reported: BTreeSet<(&'static str, String)>,
    pods_seen: usize,
    /// Per set, its pods' last transitions (`HISTORY_KEPT` of them).
    history: BTreeMap<String, VecDeque<String>>,
}

impl Checker {
    pub fn new(rules: Vec<SetRule>, grace: Duration) -> Self {
        Self {
            rules,
            budgets: Vec::new(),
            pods: BTreeMap::new(),
            harness_deleted: BTreeSet::new(),
            live_dropped_at: BTreeMap::new(),
            grace,
            reported: BTreeSet::new(),
            pods_seen: 0,
            history: BTreeMap::new(),
        }
    }

    /// How many distinct pods the checkers have seen: a run that saw few checked little.
    pub fn pods_seen(&self) -> usize {
        self.pods_seen
    }

    /// The harness deleted the pod with `uid`: its going is not a controller's deletion.
    pub fn harness_deleted(&mut self, uid: &str) {
        self.harness_deleted.insert(uid.to_owned());
    }

    /// A workload created during the run (a job) joins the checked ones.
    pub fn add_rule(&mut self, rule: SetRule) {
        self.rules.push(rule);
    }

    /// A budget the harness created joins the checked ones.
    pub fn add_budget(&mut self, budget: BudgetRule) {
        self.budgets.push(budget);
    }

    /// A pod was added or changed. Returns the promises this event breaks, each once.
    pub fn observe(&mut self, at: Duration, view: PodView) -> Vec<Violation> {
        let before = self
            .pods
            .get(&view.uid)
            .map(|p| (p.view.clone(), p.unready_since));
        if before.is_none() {
            self.pods_seen += 1;
        }
        self.note_transition(at, before.as_ref().map(|(v, _)| v), &view);
        let was_live = before.as_ref().is_some_and(|(v, _)| !v.terminating);
        let was_serving = before.as_ref().is_some_and(|(v, _)| v.serving());
        let mut found = Vec::new();
        if view.terminating && was_live {
            found.extend(self.check_disruption(at, &view.uid));
            self.note_live_drop(at, &view);
        }
        // An in-place update takes a live pod down as a deletion would, the moment its
        // controller closes the `InPlaceUpdateReady` gate: that write is the controller's
        // decision, and the Ready=False that the kubelet derives from it may come seconds
        // later on a busy node.
        let taken_in_place = was_live && was_serving && view.in_place_pending;
        if taken_in_place && !view.terminating {
            found.extend(self.check_disruption(at, &view.uid));
        }
        let unready_since = if view.terminating || view.serving() {
            None
        } else {
            before.and_then(|(_, since)| since).or(Some(at))
        };
        let name = view.app.clone();
        self.pods.insert(
            view.uid.clone(),
            Tracked {
                view,
                unready_since,
            },
        );
        if let Some(app) = name {
            found.extend(self.check_identity(at, &app));
        }
        self.first_reports(found)
    }

    /// Records `view`'s state in its set's history when it differs from `before`.
    fn note_transition(&mut self, at: Duration, before: Option<&PodView>, view: &PodView) {
        let Some(app) = &view.app else { return };
        if self.rule_of(app).is_none() {
            return;
        }
        let state = view.state();
        if before.is_some_and(|b| b.state() == state) {
            return;
        }
        self.remember(app.clone(), format!("{at:.1?} {} {state}", view.name));
    }

    fn remember(&mut self, app: String, line: String) {
        let lines = self.history.entry(app).or_default();
        if lines.len() == HISTORY_KEPT {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// A pod is gone from the apiserver.
    pub fn forget(&mut self, at: Duration, uid: &str) -> Vec<Violation> {
        let Some(tracked) = self.pods.get(uid) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let view = tracked.view.clone();
        if !view.terminating {
            found.extend(self.check_disruption(at, uid));
            self.note_live_drop(at, &view);
        }
        if let Some(app) = view.app.filter(|app| self.rule_of(app).is_some()) {
            self.remember(app, format!("{at:.1?} {} gone", view.name));
        }
        self.pods.remove(uid);
        self.first_reports(found)
    }

    /// A watch was listed again: every tracked pod the new list lacks went away unseen.
    pub fn forget_all_but(&mut self, at: Duration, listed: &BTreeSet<String>) -> Vec<Violation> {
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|uid| !listed.contains(*uid))
            .cloned()
            .collect();
        gone.iter().flat_map(|uid| self.forget(at, uid)).collect()
    }

    /// A watch was listed again with `views`, a snapshot of one moment: what happened
    /// between the last event seen and the list is lost, and the order of a list is not
    /// the order of events. So the snapshot is applied in the order that judges every
    /// take-down against the snapshot's own state, never against a state the cluster left
    /// while the watch was down:
    /// 1. tracked pods that serve in the list (ready, no in-place update holding them) are
    ///    back (an in-place update that finished during the gap; seed 23 reported a
    ///    take-down 3 s after an apiserver restart against two pods that were ready again
    ///    later in the same list);
    /// 2. every tracked pod the list lacks goes (it went unseen while the watch was down);
    ///    before the new pods, since a StatefulSet pod replaced during the gap comes back
    ///    with its old name and a new UID, and observed beside its unforgotten predecessor
    ///    it looked like a second live pod of one ordinal (seed 24);
    /// 3. the rest: new pods (ready ones first), then the pods the list shows going down.
    pub fn relisted(&mut self, at: Duration, views: Vec<PodView>) -> Vec<Violation> {
        let listed: BTreeSet<String> = views.iter().map(|v| v.uid.clone()).collect();
        let (back_up, rest): (Vec<PodView>, Vec<PodView>) = views
            .into_iter()
            .partition(|v| v.serving() && !v.terminating && self.pods.contains_key(&v.uid));
        let mut found = Vec::new();
        for view in back_up {
            found.extend(self.observe(at, view));
        }
        found.extend(self.forget_all_but(at, &listed));
        let (up, down): (Vec<PodView>, Vec<PodView>) = rest
            .into_iter()
            .partition(|v| v.serving() && !v.terminating);
        for view in up.into_iter().chain(down) {
            found.extend(self.observe(at, view));
        }
        found
    }

    fn note_live_drop(&mut self, at: Duration, view: &PodView) {
        if let Some(app) = &view.app {
            self.live_dropped_at.insert(app.clone(), at);
        }
    }

    fn rule_of(&self, app: &str) -> Option<&SetRule> {
        self.rules.iter().find(|r| r.name == app)
    }

    fn live_of<'a>(&'a self, app: &'a str) -> impl Iterator<Item = &'a Tracked> + 'a {
        self.pods
            .values()
            .filter(move |t| !t.view.terminating && t.view.app.as_deref() == Some(app))
    }

    /// The pod `uid` (still tracked as live) is going: was that within the set's
    /// maxUnavailable, and within the budgets over it?
    fn check_disruption(&self, at: Duration, uid: &str) -> Vec<Violation> {
        let Some(going) = self.pods.get(uid).map(|t| &t.view) else {
            return Vec::new();
        };
        let Some(app) = going.app.as_deref() else {
            return Vec::new();
        };
        let Some(rule) = self.rule_of(app) else {
            return Vec::new();
        };
        let counted = matches!(rule.kind, SetKind::CloneSet | SetKind::StatefulSet);
        let voluntary = going.serving() && going.owner_kind.is_some();
        if !counted || !voluntary || self.harness_deleted.contains(uid) {
            return Vec::new();
        }
        let Some(down) = self.unavailable_besides(at, rule, uid) else {
            return Vec::new(); // a surplus pod (scale-down, surge) is not a disruption
        };
        let own = (
            "maxUnavailable",
            format!("maxUnavailable {}", rule.max_unavailable),
        );
        let limits = std::iter::once((own, rule.max_unavailable)).chain(
            self.budgets.iter().filter(|b| b.app == app).map(|b| {
                let words = format!(
                    "PodUnavailableBudget {} maxUnavailable {}",
                    b.name, b.max_unavailable
                );
                (("PodUnavailableBudget", words), b.max_unavailable)
            }),
        );
        limits
            .filter(|(_, max)| down.count() + 1 > *max)
            .map(|((rule_name, limit), _)| Violation {
                at,
                rule: rule_name,
                detail: format!(
                    "{:?} {app}: ready pod {} was taken down while {} of {} pods were \
                     already unavailable (not ready: {:?}, missing: {}; {limit})",
                    rule.kind,
                    going.name,
                    down.count(),
                    rule.replicas,
                    down.unready,
                    down.missing,
                ),
                history: self
                    .history
                    .get(app)
                    .into_iter()
                    .flatten()
                    .cloned()
                    .collect(),
            })
            .collect()
    }

    /// The pods of `rule`'s set unavailable besides `uid`, once settled for the grace; None
    /// when the set has more live pods than replicas.
    fn unavailable_besides(&self, at: Duration, rule: &SetRule, uid: &str) -> Option<Down> {
        let app = rule.name.as_str();
        let live: Vec<&Tracked> = self.live_of(app).collect();
        let live_count = i32::try_from(live.len()).unwrap_or(i32::MAX);
        if live_count > rule.replicas {
            return None;
        }
        let settled = |since: Duration| at.saturating_sub(since) >= self.grace;
        let unready: Vec<String> = live
            .iter()
            .filter(|t| t.view.uid != uid && t.unready_since.is_some_and(settled))
            .map(|t| t.view.name.clone())
            .collect();
        let hole_settled = self.live_dropped_at.get(app).is_none_or(|at| settled(*at));
        let missing = if hole_settled {
            (rule.replicas - live_count).max(0)
        } else {
            0
        };
        Some(Down { unready, missing })
    }

    fn check_identity(&self, at: Duration, app: &str) -> Vec<Violation> {
        let mut found = Vec::new();
        let mut instance_ids: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut ordinals: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut running_on: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let kind = self.rule_of(app).map(|r| r.kind);
        let is_job = kind == Some(SetKind::BroadcastJob);
        let mut runs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for tracked in self.live_of(app) {
            let view = &tracked.view;
            if view.owner_kind.is_none() && self.rule_of(app).is_some() {
                found.push(Violation {
                    at,
                    rule: "ownership",
                    detail: format!("pod {} carries app={app} but has no controller", view.name),
                    ..Violation::default()
                });
            }
            if let Some(id) = &view.instance_id {
                instance_ids.entry(id).or_default().push(&view.name);
            }
            if let Some(ordinal) = &view.ordinal {
                ordinals.entry(ordinal).or_default().push(&view.name);
            }
            if let (true, false, Some(node)) = (is_job, view.finished, &view.node) {
                running_on.entry(node).or_default().push(&view.name);
            }
            let is_cron = kind == Some(SetKind::ForbidCron);
            if let (true, false, Some(run)) = (is_cron, view.finished, &view.owner_name) {
                runs.entry(run).or_default().push(&view.name);
            }
        }
        if runs.len() > 1 {
            found.push(Violation {
                at,
                rule: "Forbid",
                detail: format!(
                    "cron {app} (concurrencyPolicy Forbid) has {} runs active at once: {runs:?}",
                    runs.len()
                ),
                ..Violation::default()
            });
        }
        let shared = |what: &str, map: BTreeMap<&str, Vec<&str>>| {
            map.into_iter()
                .filter(|(_, pods)| pods.len() > 1)
                .map(|(id, pods)| Violation {
                    at,
                    rule: "identity",
                    detail: format!("{app}: live pods {pods:?} share {what} {id}"),
                    ..Violation::default()
                })
                .collect::<Vec<_>>()
        };
        found.extend(shared("instance id", instance_ids));
        found.extend(shared("ordinal", ordinals));
        found.extend(shared("running on node", running_on));
        found
    }

    fn first_reports(&mut self, found: Vec<Violation>) -> Vec<Violation> {
        found
            .into_iter()
            .filter(|v| self.reported.insert((v.rule, v.detail.clone())))
            .collect()
    }
}
