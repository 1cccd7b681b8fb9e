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

{{/* The labels of every object (kustomize's `labels:` in deploy/). */}}
{{- define "ipshadow.labels" -}}
app.kubernetes.io/name: ipshadow
app.kubernetes.io/part-of: ipshadow
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
