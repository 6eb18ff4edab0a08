{{/* Name of the chart, or nameOverride. */}}
{{- define "flotilla-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name of the release's objects (63 characters at most). */}}
{{- define "flotilla-agent.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Name of cluster-scoped objects (ClusterRoles and their bindings): the full
name and the release namespace, so that releases in two namespaces (agents of
two hubs) do not collide.
*/}}
{{- define "flotilla-agent.clusterName" -}}
{{- printf "%s-%s" (include "flotilla-agent.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "flotilla-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "flotilla-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flotilla-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: flotilla
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "flotilla-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flotilla-agent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret where the agent keeps its key and certificate. */}}
{{- define "flotilla-agent.certSecret" -}}
{{- default (printf "%s-cert" (include "flotilla-agent.fullname" .)) .Values.certSecret -}}
{{- end -}}

{{/* The leader-election Lease. */}}
{{- define "flotilla-agent.leaseName" -}}
{{- default (include "flotilla-agent.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The Secret holding the bootstrap token; empty when there is none. */}}
{{- define "flotilla-agent.tokenSecret" -}}
{{- if .Values.bootstrapTokenExistingSecret -}}
{{- .Values.bootstrapTokenExistingSecret -}}
{{- else if .Values.bootstrapToken -}}
{{- printf "%s-bootstrap-token" (include "flotilla-agent.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The key of the token in that Secret. */}}
{{- define "flotilla-agent.tokenKey" -}}
{{- if .Values.bootstrapTokenExistingSecret -}}
{{- .Values.bootstrapTokenSecretKey -}}
{{- else -}}
token
{{- end -}}
{{- end -}}

{{- define "flotilla-agent.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* --cluster-labels: k=v pairs sorted by key. */}}
{{- define "flotilla-agent.clusterLabels" -}}
{{- $pairs := list -}}
{{- range $k := keys .Values.cluster.labels | sortAlpha -}}
{{- $pairs = append $pairs (printf "%s=%v" $k (index $.Values.cluster.labels $k)) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* The workload rules with the workload verbs, then the extra rules. */}}
{{- define "flotilla-agent.workloadRules" -}}
{{- range .Values.rbac.workloads.rules }}
- apiGroups: {{ toJson .apiGroups }}
  resources: {{ toJson .resources }}
  verbs: {{ toJson $.Values.rbac.workloads.verbs }}
{{- end }}
{{- with .Values.rbac.workloads.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end -}}
