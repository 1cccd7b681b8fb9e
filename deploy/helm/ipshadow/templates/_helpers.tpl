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

{{/* Whether the admission policies are rendered: wanted, and Kubernetes >= 1.30. */}}
{{- define "ipshadow.admissionPolicies" -}}
{{- if and .Values.admissionPolicies.enabled (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) }}true{{ end -}}
{{- end -}}
