{{/*
stevedore.fromFile: a manifest of deploy/agent or deploy/controlplane (files/ links to them,
so the chart and the kustomize manifests share one source) moved into the release's
namespace. Usage: include "stevedore.fromFile" (list . "files/agent-rbac.yaml")
*/}}
{{- define "stevedore.fromFile" -}}
{{- $root := index . 0 -}}
{{- $ns := $root.Release.Namespace -}}
{{- $root.Files.Get (index . 1)
  | replace "namespace: kube-system" (printf "namespace: %s" $ns)
  | replace "system:serviceaccount:kube-system:" (printf "system:serviceaccount:%s:" $ns) }}
{{- end }}

{{/* stevedore.image: registry/repository:tag of one component (.Values.images.<component>);
its own tag, else images.tag, else the chart's appVersion. The registry is required: a
short name would leave the choice of registry to each node's container runtime, which may
resolve it on a public default registry, and the agent runs as root with the host's PIDs. */}}
{{- define "stevedore.image" -}}
{{- $root := index . 0 -}}
{{- $image := index $root.Values.images (index . 1) -}}
{{- $registry := required "images.registry is required: set it to the registry (host, and port if not 443) the stevedore/agent and stevedore/controlplane images are pushed to, e.g. --set images.registry=<your registry>. The chart never makes a short image name, which a node could resolve on a public default registry." $root.Values.images.registry -}}
{{- $tag := $image.tag | default $root.Values.images.tag | default $root.Chart.AppVersion -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) $image.repository $tag -}}
{{- end }}

{{- define "stevedore.labels" -}}
app.kubernetes.io/part-of: stevedore
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* stevedore.logEnv: log level and format, the same for both binaries. */}}
{{- define "stevedore.logEnv" -}}
- name: RUST_LOG
  value: {{ .Values.log.level | quote }}
- name: STEVEDORE_LOG_FORMAT
  value: {{ .Values.log.format | quote }}
{{- end }}

{{/* stevedore.scheduling: nodeSelector, tolerations and affinity of one component. */}}
{{- define "stevedore.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* stevedore.controlplaneScheduling: the control plane's scheduling, its node affinity
from `placement` (values.yaml) unless the values give one. Takes the root context. */}}
{{- define "stevedore.controlplaneScheduling" -}}
{{- $cp := .Values.controlplane -}}
{{- $affinity := deepCopy (default dict $cp.affinity) -}}
{{- if not (hasKey $affinity "nodeAffinity") -}}
{{- $_ := set $affinity "nodeAffinity" (include "stevedore.controlplaneNodeAffinity" . | fromYaml) -}}
{{- end -}}
{{- include "stevedore.scheduling" (dict "nodeSelector" $cp.nodeSelector "tolerations" $cp.tolerations "affinity" $affinity) -}}
{{- end }}

{{/* stevedore.controlplaneNodeAffinity: required on control-plane nodes, or preferred. */}}
{{- define "stevedore.controlplaneNodeAffinity" -}}
{{- $placement := .Values.controlplane.placement | default "auto" -}}
{{- if not (has $placement (list "auto" "controlPlaneNodes" "anywhere")) -}}
{{- fail (printf "controlplane.placement must be auto, controlPlaneNodes or anywhere, not %q" $placement) -}}
{{- end -}}
{{- $required := eq $placement "controlPlaneNodes" -}}
{{- if eq $placement "auto" -}}
{{- range (lookup "v1" "Node" "" "").items -}}
{{- if hasKey (.metadata.labels | default dict) "node-role.kubernetes.io/control-plane" -}}
{{- $required = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $term := dict "matchExpressions" (list (dict "key" "node-role.kubernetes.io/control-plane" "operator" "Exists")) -}}
{{- if $required -}}
requiredDuringSchedulingIgnoredDuringExecution:
  nodeSelectorTerms:
    - {{- toYaml $term | nindent 6 }}
{{- else -}}
preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    preference:
      {{- toYaml $term | nindent 6 }}
{{- end -}}
{{- end }}
