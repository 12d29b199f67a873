//! PodProbeMarker (`apps.kruise.io/v1alpha1`): custom probes the node agents run against
//! the pods a selector picks, whose results become a pod condition and labels or
//! annotations. OpenKruise's field names and defaults (a probe's timeout 1 s, period
//! 10 s, success threshold 1, failure threshold 3); its validating webhook's checks that
//! need no other object as CEL, each naming the field it refuses.
//!
//! The probe handlers are declared here rather than taken from core/v1's `Probe`: only
//! exec, tcpSocket and httpGet are run (as OpenKruise's daemon runs them), and a declared,
//! bounded schema keeps the rules' CEL cost within the apiserver's budget.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::schema;

/// The most probes one PodProbeMarker holds.
pub const MAX_PROBES: u32 = 16;
/// The most arguments of an exec probe's command.
pub const MAX_COMMAND_ARGS: u32 = 64;
/// The default of `timeoutSeconds` (core/v1 Probe's).
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 1;
/// The default of `periodSeconds`.
pub const DEFAULT_PERIOD_SECONDS: i32 = 10;
/// The default of `successThreshold`.
pub const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
/// The default of `failureThreshold`.
pub const DEFAULT_FAILURE_THRESHOLD: i32 = 3;

/// Pod conditions others own: the kubelet's, and the two the workload controllers set
/// through the agent. A probe may neither be named like one nor write one, as in
/// OpenKruise's webhook.
pub const RESERVED_CONDITIONS: [&str; 6] = [
    "PodScheduled",
    "Initialized",
    "Ready",
    "ContainersReady",
    "KruisePodReady",
    "InPlaceUpdateReady",
];

/// A condition type is a qualified name, as a label key is (OpenKruise's webhook checks
/// it with `ValidateLabelName`).
pub const CONDITION_TYPE_REGEX: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

/// CEL over a probe list: names unique.
const UNIQUE_NAMES_RULE: &str = "self.all(p, self.filter(q, q.name == p.name).size() == 1)";
/// CEL over a probe list: condition types unique.
const UNIQUE_CONDITIONS_RULE: &str = "self.all(p, !has(p.podConditionType) || \
    self.filter(q, has(q.podConditionType) && q.podConditionType == p.podConditionType).size() == 1)";
/// CEL over a probe: exactly one handler.
pub const ONE_HANDLER_RULE: &str =
    "[has(self.exec), has(self.tcpSocket), has(self.httpGet)].filter(x, x).size() == 1";
/// The message of [`ONE_HANDLER_RULE`].
pub const ONE_HANDLER_MESSAGE: &str =
    "probe must set exactly one handler: exec, tcpSocket or httpGet";
/// CEL over a port: the shared 32-bit bound of every int-or-string (so it decodes).
const PORT_BOUND_RULE: &str =
    "type(self) == int ? int(self) >= 0 && int(self) <= 2147483647 : true";
/// CEL over a port: a number from 1 to 65535, or a name of 1 to 15 characters (a container
/// port name's length). Sizes only: the apiserver costs a regex or a `string()` over an
/// int-or-string, whose length no schema bounds, beyond its budget. A name no container
/// port has is never probed (the control plane leaves the probe out), and the apiserver
/// checks the syntax of container ports' names.
pub const PORT_RULE: &str = "type(self) == int ? int(self) >= 1 && int(self) <= 65535 \
    : size(self) >= 1 && size(self) <= 15";
/// The message of [`PORT_RULE`] and [`PORT_BOUND_RULE`].
pub const PORT_MESSAGE: &str =
    "port must be a number from 1 to 65535 or the name of a container port (at most 15 characters)";

/// CEL list of [`RESERVED_CONDITIONS`].
macro_rules! reserved_list {
    () => {
        "['PodScheduled', 'Initialized', 'Ready', 'ContainersReady', 'KruisePodReady', 'InPlaceUpdateReady']"
    };
}

/// Custom probes for the pods a selector picks.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "PodProbeMarker",
    namespaced,
    status = "PodProbeMarkerStatus",
    doc = "PodProbeMarker runs custom probes, through the node agents, against the pods its selector picks, and records each result as a pod condition and labels or annotations (OpenKruise compatible).",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the PodProbeMarker was created."
    )
)]
#[x_kube(
    validation = Rule::new("self.selector == oldSelf.selector").message("spec.selector is immutable: create a new PodProbeMarker instead").field_path(".selector"),
    validation = Rule::new("(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)").message("spec.selector must not be empty: an empty selector would probe every pod in the namespace").field_path(".selector")
)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeMarkerSpec {
    /// A label query over the pods to probe; it must not be empty, and cannot change.
    #[schemars(schema_with = "pod_selector")]
    pub selector: LabelSelector,

    /// The probes, each named once; their results are recorded on the pods as each
    /// probe's podConditionType and markerPolicy say.
    #[schemars(length(min = 1, max = MAX_PROBES))]
    #[x_kube(
        validation = Rule::new(UNIQUE_NAMES_RULE).message("spec.probes: each probe name may be used only once"),
        validation = Rule::new(UNIQUE_CONDITIONS_RULE).message("spec.probes: each podConditionType may be used by one probe only")
    )]
    pub probes: Vec<PodContainerProbe>,
}

/// One probe of one container of each selected pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("has(self.podConditionType) || (has(self.markerPolicy) && size(self.markerPolicy) > 0)").message("spec.probes: set podConditionType or markerPolicy, or the result is recorded nowhere").field_path(".podConditionType"),
    validation = Rule::new(concat!("!(self.name in ", reserved_list!(), ")")).message(concat!("spec.probes.name may not be a condition others own: ", reserved_list!())).field_path(".name"),
    validation = Rule::new(concat!("!has(self.podConditionType) || !(self.podConditionType in ", reserved_list!(), ")")).message(concat!("spec.probes.podConditionType may not be a condition others own: ", reserved_list!())).field_path(".podConditionType")
)]
#[serde(rename_all = "camelCase")]
pub struct PodContainerProbe {
    /// The probe's name, unique within the PodProbeMarker; no `#`.
    #[schemars(length(min = 1, max = 63), regex(pattern = "^[^#]+$"))]
    pub name: String,
    /// The container the probe runs in (exec) or against (tcpSocket and httpGet ports).
    #[schemars(length(min = 1, max = 63))]
    pub container_name: String,
    /// What to run, and how often. Its timing fields default as core/v1 Probe's. Required:
    /// the apiserver refuses a schema default that its own one-handler rule refuses.
    pub probe: ContainerProbeSpec,
    /// Labels and annotations to put on the pod while the probe is in a state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    #[x_kube(validation = Rule::new("self.all(p, self.filter(q, q.state == p.state).size() == 1)").message("spec.probes.markerPolicy: each state may have one policy only"))]
    pub marker_policy: Vec<ProbeMarkerPolicy>,
    /// The pod condition the result is written to: `True` while the probe succeeds,
    /// `False` while it fails. A qualified name, such as `game.kruise.io/healthy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 316), regex(pattern = CONDITION_TYPE_REGEX))]
    pub pod_condition_type: Option<String>,
}

/// A probe: one handler and its timing, as in core/v1 Probe. `Port` is how a handler
/// gives its port: a number or a container port's name ([`ProbePort`]) in a
/// PodProbeMarker, a number ([`PortNumber`]) in a NodePodProbe, where the control plane
/// has resolved the names. The one-handler rule is in the schema of both.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{ "rule": ONE_HANDLER_RULE, "message": ONE_HANDLER_MESSAGE }]))]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbeSpec<Port = ProbePort> {
    /// Run a command in the container; exit status 0 is success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// Open a TCP connection to the pod's IP; a connection is success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction<Port>>,
    /// GET a URL on the pod's IP; a status from 200 to 399 is success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction<Port>>,
    /// Seconds after the container started before the first probe. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub initial_delay_seconds: Option<i32>,
    /// Seconds after which the probe times out. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_TIMEOUT_SECONDS))]
    pub timeout_seconds: Option<i32>,
    /// How often, in seconds, to probe. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_PERIOD_SECONDS))]
    pub period_seconds: Option<i32>,
    /// Consecutive successes for the probe to count as succeeded after a failure.
    /// Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_SUCCESS_THRESHOLD))]
    pub success_threshold: Option<i32>,
    /// Consecutive failures for the probe to count as failed after a success.
    /// Defaults to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_FAILURE_THRESHOLD))]
    pub failure_threshold: Option<i32>,
}

/// A command run in the container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ExecAction {
    /// The command and its arguments, run without a shell (exec'd directly).
    #[schemars(length(min = 1, max = MAX_COMMAND_ARGS))]
    pub command: Vec<String>,
}

/// A TCP connection to the pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TcpSocketAction<Port = ProbePort> {
    /// The port to connect to.
    pub port: Port,
}

/// An HTTP GET against the pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpGetAction<Port = ProbePort> {
    /// The path to GET. Defaults to `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = "^/"))]
    pub path: Option<String>,
    /// The port to connect to.
    pub port: Port,
    /// HTTP (the default) or HTTPS; HTTPS does not verify the server's certificate, as
    /// the kubelet does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<UriScheme>,
    /// Headers to send.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub http_headers: Vec<HttpHeader>,
}

/// A port as a PodProbeMarker's probe gives it: a number, or the name of a port the
/// probed container declares, which the control plane resolves for the agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(transparent)]
pub struct ProbePort(pub IntOrString);

impl Default for ProbePort {
    fn default() -> Self {
        Self(IntOrString::Int(0))
    }
}

impl JsonSchema for ProbePort {
    fn schema_name() -> Cow<'static, str> {
        "ProbePort".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The port: a number, or the name of a port of the probed container.",
            "x-kubernetes-int-or-string": true,
            "x-kubernetes-validations": [
                { "rule": PORT_BOUND_RULE, "message": PORT_MESSAGE },
                { "rule": PORT_RULE, "message": PORT_MESSAGE }
            ]
        })
    }
}

/// A port number, as a NodePodProbe's probe gives it. A plain integer bounded by its
/// schema: an int-or-string's rules, costed for every probe of every pod a NodePodProbe
/// may list, exceed the apiserver's CEL budget for one CRD.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(transparent)]
pub struct PortNumber(pub u16);

impl JsonSchema for PortNumber {
    fn schema_name() -> Cow<'static, str> {
        "PortNumber".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The port number.",
            "type": "integer",
            "format": "int32",
            "minimum": 1,
            "maximum": 65535
        })
    }
}

/// The scheme of an httpGet probe.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum UriScheme {
    #[default]
    Http,
    Https,
}

/// One header of an httpGet probe.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct HttpHeader {
    /// The header's name.
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = "^[-A-Za-z0-9!#$%&'*+.^_`|~]+$")
    )]
    pub name: String,
    /// The header's value.
    #[schemars(length(max = 4096))]
    pub value: String,
}

/// A probe's state, as the agent reports it and markerPolicy names it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ProbeState {
    /// The probe reached its success threshold.
    Succeeded,
    /// The probe reached its failure threshold.
    Failed,
    /// Not probed yet (within its initial delay), or the probe could not run.
    #[default]
    Unknown,
}

/// The labels and annotations a pod carries while its probe is in one state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[x_kube(
    validation = Rule::new("self.state == 'Succeeded' || self.state == 'Failed'").message("spec.probes.markerPolicy.state must be Succeeded or Failed").field_path(".state"),
    validation = Rule::new("(has(self.labels) && size(self.labels) > 0) || (has(self.annotations) && size(self.annotations) > 0)").message("spec.probes.markerPolicy: set labels or annotations")
)]
pub struct ProbeMarkerPolicy {
    /// Succeeded or Failed.
    pub state: ProbeState,
    /// Labels put on the pod in this state (removed in the other).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub labels: BTreeMap<String, String>,
    /// Annotations put on the pod in this state (removed in the other).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub annotations: BTreeMap<String, String>,
}

/// What the controller saw of a PodProbeMarker.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeMarkerStatus {
    /// The generation of the spec this status was computed for.
    #[serde(default)]
    pub observed_generation: i64,
    /// The number of active pods (not finished, not being deleted) the selector picks.
    #[serde(default)]
    pub matched_pods: i64,
}

impl<Port> ContainerProbeSpec<Port> {
    /// The probe with each handler's port mapped by `map`; `None` when `map` gives none
    /// for one of them.
    pub fn try_map_ports<To>(
        &self,
        map: impl Fn(&Port) -> Option<To>,
    ) -> Option<ContainerProbeSpec<To>> {
        let tcp_socket = match &self.tcp_socket {
            Some(tcp) => Some(TcpSocketAction {
                port: map(&tcp.port)?,
            }),
            None => None,
        };
        let http_get = match &self.http_get {
            Some(http) => Some(HttpGetAction {
                path: http.path.clone(),
                port: map(&http.port)?,
                scheme: http.scheme,
                http_headers: http.http_headers.clone(),
            }),
            None => None,
        };
        Some(ContainerProbeSpec {
            exec: self.exec.clone(),
            tcp_socket,
            http_get,
            initial_delay_seconds: self.initial_delay_seconds,
            timeout_seconds: self.timeout_seconds,
            period_seconds: self.period_seconds,
            success_threshold: self.success_threshold,
            failure_threshold: self.failure_threshold,
        })
    }

    /// `initialDelaySeconds`, at least 0.
    pub fn initial_delay_seconds(&self) -> u32 {
        self.initial_delay_seconds
            .unwrap_or(0)
            .max(0)
            .unsigned_abs()
    }

    /// `timeoutSeconds`, default 1, at least 1.
    pub fn timeout_seconds(&self) -> u32 {
        positive(self.timeout_seconds, DEFAULT_TIMEOUT_SECONDS)
    }

    /// `periodSeconds`, default 10, at least 1.
    pub fn period_seconds(&self) -> u32 {
        positive(self.period_seconds, DEFAULT_PERIOD_SECONDS)
    }

    /// `successThreshold`, default 1, at least 1.
    pub fn success_threshold(&self) -> u32 {
        positive(self.success_threshold, DEFAULT_SUCCESS_THRESHOLD)
    }

    /// `failureThreshold`, default 3, at least 1.
    pub fn failure_threshold(&self) -> u32 {
        positive(self.failure_threshold, DEFAULT_FAILURE_THRESHOLD)
    }
}

fn positive(value: Option<i32>, default: i32) -> u32 {
    value.unwrap_or(default).max(1).unsigned_abs()
}

fn pod_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut selector = schema::label_selector(generator);
    selector.insert(
        "description".into(),
        "A label query over the pods to probe; it must not be empty.".into(),
    );
    selector
}
