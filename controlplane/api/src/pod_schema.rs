//! The schema of an embedded pod spec: the fields the CEL rules read (container names and
//! images), and the defaults OpenKruise stores in a template.
//!
//! OpenKruise's mutating webhook runs Kubernetes' core defaulters over a workload's pod
//! template (`apis/apps/defaults` `SetDefaultPodSpec`), so a template reads back with
//! `restartPolicy: Always`, `terminationMessagePath` and so on. Stevedore has no webhook:
//! the same values are structural `default:`s here, which the apiserver applies on every
//! write and read. Each object that holds a default is declared with
//! `x-kubernetes-preserve-unknown-fields`, so declaring it prunes nothing. A declared
//! field takes the values the Pod's own validation allows (an enum, a range), so a template
//! whose pods would be refused is refused at admission, naming the field, as OpenKruise's
//! validating webhook refuses it.
//!
//! Not expressible as a static default, and so left to the Pod defaulter when a pod is
//! created: an init container's `imagePullPolicy` (Always for `:latest` or no tag, else
//! IfNotPresent), a volume without any source becoming `emptyDir`, resource quantities in
//! canonical form, and host ports under host networking.
//!
//! Changing a default here changes what every stored template reads back as; the revision
//! hash ignores fields equal to these defaults (`workload::template_defaults`), so that
//! does not roll pods.

use serde_json::{Value, json};

use super::image_reference as reference;

/// Kubernetes' limit on a label value, and so on a container name.
const NAME_MAX: u32 = 63;
/// A bound on containers, far above real use, for the CEL cost estimate.
const MAX_CONTAINERS: u32 = 64;
/// `v1.SecretVolumeSourceDefaultMode` and its ConfigMap, DownwardAPI and Projected twins: 0644.
const VOLUME_DEFAULT_MODE: i64 = 0o644;
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
const HOST_PATH_TYPES: [&str; 8] = [
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
];
const IMAGE_GRAMMAR_MESSAGE: &str = "must be an image reference [registry[:port]/]path[:tag][@sha256:<64 hex>], with a lowercase path";
const IMAGE_HEX_NAME_MESSAGE: &str =
    "must not have a 64-character hexadecimal name, which reads as an image ID";
const IMAGE_NAME_LENGTH_MESSAGE: &str =
    "must have a name (registry and path) of at most 255 characters";

/// Whether a container list gets OpenKruise's `imagePullPolicy: Always`. OpenKruise sets
/// it on containers before the core defaulter runs (for in-place update); init containers
/// get the core defaulter's tag-dependent value, which a static default cannot express.
#[derive(Clone, Copy)]
enum PullPolicyDefault {
    Always,
    LeftToThePod,
}

/// An object that keeps the fields it does not declare.
fn open_object(description: &str, properties: Value) -> Value {
    json!({
        "type": "object",
        "description": description,
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": properties
    })
}

/// An open object that reads back as `{}` (then with its own defaults) when absent.
fn defaulted_object(description: &str, properties: Value) -> Value {
    let mut object = open_object(description, properties);
    object["default"] = json!({});
    object
}

fn list_of(description: &str, item: Value) -> Value {
    json!({ "type": "array", "description": description, "items": item })
}

fn string_default(description: &str, default: &str) -> Value {
    json!({ "type": "string", "description": description, "default": default })
}

/// A string that is one of `values` (the Pod's own validation, so a template the Pod would
/// refuse is refused at admission, naming the field), defaulting to `default`.
fn one_of(description: &str, values: &[&str], default: Option<&str>) -> Value {
    let mut schema = json!({ "type": "string", "description": description, "enum": values });
    if let Some(default) = default {
        schema["default"] = json!(default);
    }
    schema
}

fn integer_default(description: &str, format: &str, default: i64) -> Value {
    json!({ "type": "integer", "format": format, "description": description, "default": default })
}

/// `ObjectFieldSelector`: `apiVersion` defaults to v1.
fn field_ref() -> Value {
    open_object(
        "Selects a field of the pod (core/v1 ObjectFieldSelector).",
        json!({ "apiVersion": string_default("Version of the schema the fieldPath is written in. Defaults to v1.", "v1") }),
    )
}

/// `HTTPGetAction`: path `/`, scheme HTTP.
fn http_get() -> Value {
    open_object(
        "An HTTP GET request (core/v1 HTTPGetAction).",
        json!({
            "path": string_default("Path to access on the HTTP server. Defaults to /.", "/"),
            "scheme": one_of("Scheme to connect with, HTTP or HTTPS. Defaults to HTTP.", &["HTTP", "HTTPS"], Some("HTTP"))
        }),
    )
}

/// `Probe`: timeout 1 s, period 10 s, success threshold 1, failure threshold 3.
fn probe(description: &str) -> Value {
    open_object(
        description,
        json!({
            "timeoutSeconds": integer_default("Seconds after which the probe times out. Defaults to 1.", "int32", 1),
            "periodSeconds": integer_default("How often, in seconds, to probe. Defaults to 10.", "int32", 10),
            "successThreshold": integer_default("Consecutive successes for the probe to count as successful after a failure. Defaults to 1.", "int32", 1),
            "failureThreshold": integer_default("Consecutive failures for the probe to count as failed. Defaults to 3.", "int32", 3),
            "httpGet": http_get()
        }),
    )
}

fn lifecycle_handlers() -> Value {
    let handler = |description: &str| open_object(description, json!({ "httpGet": http_get() }));
    open_object(
        "Actions taken in response to container lifecycle events (core/v1 Lifecycle).",
        json!({
            "postStart": handler("Called right after the container is created."),
            "preStop": handler("Called before the container is terminated.")
        }),
    )
}

/// A container image reference in the agent's grammar.
pub(crate) fn image() -> Value {
    json!({
        "type": "string",
        "maxLength": reference::REFERENCE_MAX_LENGTH,
        "description": "Container image reference: [registry[:port]/]path[:tag][@digest].",
        "x-kubernetes-validations": [
            { "rule": reference::FIELD_GRAMMAR_RULE, "message": IMAGE_GRAMMAR_MESSAGE },
            { "rule": reference::FIELD_HEX_NAME_RULE, "message": IMAGE_HEX_NAME_MESSAGE },
            { "rule": reference::FIELD_NAME_LENGTH_RULE, "message": IMAGE_NAME_LENGTH_MESSAGE }
        ]
    })
}

fn container_properties(pull_policy: PullPolicyDefault) -> Value {
    let mut properties = json!({
        "name": { "type": "string", "minLength": 1, "maxLength": NAME_MAX, "description": "Name of the container, unique in the pod." },
        "image": image(),
        "terminationMessagePath": string_default("File the container's termination message is written to. Defaults to /dev/termination-log.", "/dev/termination-log"),
        "terminationMessagePolicy": one_of("How the termination message is filled: File, or FallbackToLogsOnError. Defaults to File.", &["File", "FallbackToLogsOnError"], Some("File")),
        "resources": defaulted_object("Compute resources of the container (core/v1 ResourceRequirements). Defaults to {}.", json!({})),
        "ports": list_of(
            "Ports the container exposes.",
            open_object("A port of the container (core/v1 ContainerPort).", json!({
                "protocol": one_of("Protocol of the port: TCP, UDP or SCTP. Defaults to TCP.", &["TCP", "UDP", "SCTP"], Some("TCP"))
            })),
        ),
        "env": list_of(
            "Environment variables of the container.",
            open_object("An environment variable (core/v1 EnvVar).", json!({
                "valueFrom": open_object("Source of the variable's value.", json!({ "fieldRef": field_ref() }))
            })),
        ),
        "livenessProbe": probe("Probe of the container's liveness (core/v1 Probe)."),
        "readinessProbe": probe("Probe of the container's readiness (core/v1 Probe)."),
        "startupProbe": probe("Probe of the container's start (core/v1 Probe)."),
        "lifecycle": lifecycle_handlers()
    });
    properties["imagePullPolicy"] = match pull_policy {
        PullPolicyDefault::Always => one_of(
            "When the image is pulled: Always, IfNotPresent or Never. Defaults to Always (OpenKruise's default for in-place update).",
            &PULL_POLICIES,
            Some("Always"),
        ),
        PullPolicyDefault::LeftToThePod => one_of(
            "When the image is pulled: Always, IfNotPresent or Never. Unset, the pod gets Always for a :latest or untagged image and IfNotPresent otherwise.",
            &PULL_POLICIES,
            None,
        ),
    };
    properties
}

/// A list of `v1.Container`s, each with a name and an image reference in the agent's
/// grammar (the apiserver requires the image in a Pod; refusing it here means a template
/// without one never starts a rollout).
fn containers(description: &str, min_items: u32, pull_policy: PullPolicyDefault) -> Value {
    let mut item = open_object(
        "A container of the pod (core/v1 Container).",
        container_properties(pull_policy),
    );
    item["required"] = json!(["name", "image"]);
    json!({
        "type": "array",
        "description": description,
        "minItems": min_items,
        "maxItems": MAX_CONTAINERS,
        "items": item
    })
}

fn mode_default(description: &str) -> Value {
    let mut mode = integer_default(
        &format!("{description} Between 0 and 0777 (511). Defaults to 420 (0644)."),
        "int32",
        VOLUME_DEFAULT_MODE,
    );
    mode["minimum"] = json!(0);
    mode["maximum"] = json!(0o777);
    mode
}

/// `expirationSeconds`: at least 10 minutes (the Pod's validation), 3600 by default.
fn token_lifetime() -> Value {
    let mut lifetime = integer_default(
        "Requested lifetime of the token in seconds, at least 600. Defaults to 3600.",
        "int64",
        3600,
    );
    lifetime["minimum"] = json!(600);
    lifetime
}

fn volume() -> Value {
    let field_ref_items = list_of(
        "Files holding pod fields.",
        open_object(
            "A file holding a pod field (core/v1 DownwardAPIVolumeFile).",
            json!({ "fieldRef": field_ref() }),
        ),
    );
    let projection = open_object(
        "One projected source (core/v1 VolumeProjection).",
        json!({
            "downwardAPI": open_object("Downward API projection.", json!({ "items": field_ref_items.clone() })),
            "serviceAccountToken": open_object("A service account token projection.", json!({
                "expirationSeconds": token_lifetime()
            }))
        }),
    );
    open_object(
        "A volume of the pod (core/v1 Volume).",
        json!({
            "secret": open_object("A Secret as a volume.", json!({ "defaultMode": mode_default("Mode bits of the files.") })),
            "configMap": open_object("A ConfigMap as a volume.", json!({ "defaultMode": mode_default("Mode bits of the files.") })),
            "downwardAPI": open_object("Pod fields as files.", json!({
                "defaultMode": mode_default("Mode bits of the files."),
                "items": field_ref_items
            })),
            "projected": open_object("Several sources projected into one directory.", json!({
                "defaultMode": mode_default("Mode bits of the files."),
                "sources": list_of("The projected sources.", projection)
            })),
            "hostPath": open_object("A directory of the node.", json!({
                "type": one_of("Type of the host path; empty means no check. Defaults to \"\".", &HOST_PATH_TYPES, Some(""))
            }))
        }),
    )
}

/// A `v1.PodSpec` with the defaults of `SetDefaultPodSpec`.
pub(crate) fn pod_spec() -> Value {
    let properties = json!({
        "containers": containers("Containers of the pod (core/v1 Container). At least one.", 1, PullPolicyDefault::Always),
        "initContainers": containers("Init containers of the pod (core/v1 Container), run in order before the containers.", 0, PullPolicyDefault::LeftToThePod),
        "restartPolicy": one_of("Restart policy of the containers: Always, OnFailure or Never. Defaults to Always.", &["Always", "OnFailure", "Never"], Some("Always")),
        "dnsPolicy": one_of("DNS policy of the pod: ClusterFirstWithHostNet, ClusterFirst, Default or None. Defaults to ClusterFirst.", &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"], Some("ClusterFirst")),
        "schedulerName": string_default("The scheduler that places the pod. Defaults to default-scheduler.", "default-scheduler"),
        "securityContext": defaulted_object("Pod-level security attributes (core/v1 PodSecurityContext). Defaults to {}.", json!({})),
        "terminationGracePeriodSeconds": integer_default("Seconds the pod is given to stop gracefully. Defaults to 30.", "int64", 30),
        "volumes": list_of("Volumes the containers can mount.", volume())
    });
    let mut spec = open_object(
        "Specification of the desired behavior of the pod (a core/v1 PodSpec).",
        properties,
    );
    spec["required"] = json!(["containers"]);
    spec
}

/// The `status` of a claim template: OpenKruise runs `SetDefaults_PersistentVolumeClaim`,
/// which sets `phase: Pending`.
pub(crate) fn claim_template_status() -> Value {
    defaulted_object(
        "Status of the claim template; the created claims get their own. Defaults to {phase: Pending}.",
        json!({ "phase": one_of("Phase of the claim: Pending, Bound or Lost. Defaults to Pending.", &["Pending", "Bound", "Lost"], Some("Pending")) }),
    )
}
