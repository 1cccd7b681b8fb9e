{{/*
The objects' names are fixed ("ipshadow"): one release per cluster, as one
DaemonSet covers every node and the ClusterRoles are cluster-wide.
*/}}

{{/* The namespace the agent runs in. */}}
{{- define "ipshadow.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{/* The agent's service account as the API server names its user. */}}
{{- define "ipshadow.user" -}}
system:serviceaccount:{{ include "ipshadow.namespace" . }}:ipshadow
{{- end -}}

{{/*
The labels of every object: kustomize's (`labels:` in deploy/) and Helm's
recommended ones (the release, the chart, who manages it). The selectors keep
app.kubernetes.io/name alone: a DaemonSet's selector cannot change on upgrade.
*/}}
{{- define "ipshadow.labels" -}}
app.kubernetes.io/name: ipshadow
app.kubernetes.io/part-of: ipshadow
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* repository:tag, or repository@digest. */}}
{{- define "ipshadow.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The DNS name of the metrics Service, which the serving certificate names. */}}
{{- define "ipshadow.metricsHost" -}}
ipshadow-metrics.{{ include "ipshadow.namespace" . }}.svc
{{- end -}}

{{/*
Whether the admission policies are rendered: "true" when wanted. Where the
cluster cannot take them, rendering fails (naming the opt-out) rather than
leave each agent's token unnarrowed without a word. Helm's API list names
kinds only when it comes from a cluster (install, upgrade, template
--validate, or --api-versions as Argo CD passes them; every cluster this chart
runs on serves apps/v1/DaemonSet): there the list decides, so a 1.30 cluster
with the API turned off fails too. Offline (template, lint) the list names
groups only, and the Kubernetes version decides (--kube-version): 1.30
brought admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy.
*/}}
{{- define "ipshadow.admissionPolicies" -}}
{{- if .Values.admissionPolicies.enabled -}}
{{- $api := .Capabilities.APIVersions -}}
{{- $version := .Capabilities.KubeVersion.Version -}}
{{- $fromCluster := $api.Has "apps/v1/DaemonSet" -}}
{{- $served := or ($api.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (and (not $fromCluster) (semverCompare ">=1.30.0-0" $version)) -}}
{{- if not $served -}}
{{- fail (printf "ipshadow: this cluster (Kubernetes %s) does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (served from Kubernetes 1.30 on), so the chart cannot install the two policies that narrow each agent's credentials to its own Node's PodIPsShadowed condition and its own Events. Without them one node's stolen agent token can rewrite any Node's status and write Events in any component's name (docs/threat-model.md). Install on a cluster that serves it, or accept that and set admissionPolicies.enabled=false." $version) -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/*
Whether a prometheus-operator kind is rendered: "true" when wanted and
served. `include "ipshadow.monitoring" (list $ "ServiceMonitor" "serviceMonitor")`.
Served as for the admission policies: from a cluster (the list names kinds,
apps/v1/DaemonSet among them) the kind must be listed; offline the group
version decides (`helm template --api-versions monitoring.coreos.com/v1`).
"auto" renders it only where served; true fails where it is not, naming the
value, rather than have `helm install` stop at "no matches for kind".
*/}}
{{- define "ipshadow.monitoring" -}}
{{- $ := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $key := index . 2 -}}
{{- $want := index $.Values.monitoring $key "enabled" -}}
{{- if and $.Values.monitoring.enabled (ne (toString $want) "false") -}}
{{- $api := $.Capabilities.APIVersions -}}
{{- $fromCluster := $api.Has "apps/v1/DaemonSet" -}}
{{- $served := or ($api.Has (printf "monitoring.coreos.com/v1/%s" $kind)) (and (not $fromCluster) ($api.Has "monitoring.coreos.com/v1")) -}}
{{- if $served -}}
true
{{- else if eq (toString $want) "true" -}}
{{- fail (printf "ipshadow: monitoring.%s.enabled=true, but this cluster does not serve monitoring.coreos.com/v1 %s (prometheus-operator's CRDs), so the install would fail on it. Install prometheus-operator (or just its CRDs) first; or set monitoring.%s.enabled=auto to render it only where the API is served, or false. Rendering offline (helm template) for a cluster that has it: add --api-versions monitoring.coreos.com/v1." $key $kind $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A monitoring object's namespace: its own value, else the agent's. */}}
{{- define "ipshadow.monitoringNamespace" -}}
{{- $ := index . 0 -}}
{{- default (include "ipshadow.namespace" $) (index $.Values.monitoring (index . 1) "namespace") -}}
{{- end -}}
