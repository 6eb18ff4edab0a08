{{/* Name of the chart, or nameOverride. */}}
{{- define "flotilla-hub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name of the release's objects (63 characters at most). */}}
{{- define "flotilla-hub.fullname" -}}
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

{{- define "flotilla-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "flotilla-hub.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flotilla-hub.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: hub
app.kubernetes.io/part-of: flotilla
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "flotilla-hub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flotilla-hub.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "flotilla-hub.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* HOST of hub.agentAddress (without brackets for IPv6). */}}
{{- define "flotilla-hub.agentHost" -}}
{{- with .Values.hub.agentAddress -}}
{{- $host := regexReplaceAll ":[0-9]+$" . "" -}}
{{- trimPrefix "[" $host | trimSuffix "]" -}}
{{- end -}}
{{- end -}}

{{/* The serving certificate names: the api Service, agentAddress, tlsSANs. */}}
{{- define "flotilla-hub.tlsSANs" -}}
{{- $api := include "flotilla-hub.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $sans := list $api (printf "%s.%s" $api $ns) (printf "%s.%s.svc" $api $ns) (printf "%s.%s.svc.cluster.local" $api $ns) -}}
{{- $agents := printf "%s-agents" $api -}}
{{- $sans = concat $sans (list $agents (printf "%s.%s.svc" $agents $ns) (printf "%s.%s.svc.cluster.local" $agents $ns)) -}}
{{- with include "flotilla-hub.agentHost" . -}}
{{- $sans = append $sans . -}}
{{- end -}}
{{- if .Values.hub.httpTLS -}}
{{- $metrics := printf "%s-metrics" $api -}}
{{- $sans = concat $sans (list $metrics (printf "%s.%s.svc" $metrics $ns) (printf "%s.%s.svc.cluster.local" $metrics $ns)) -}}
{{- end -}}
{{- $sans = concat $sans .Values.hub.tlsSANs -}}
{{- join "," (uniq $sans) -}}
{{- end -}}

{{/*
A probe of the HTTP endpoint: with hub.httpTLS, an httpGet without a
scheme gets HTTPS (the kubelet does not verify the certificate).
Called with (list probe httpTLS).
*/}}
{{- define "flotilla-hub.probe" -}}
{{- $probe := deepCopy (index . 0) -}}
{{- if and (index . 1) $probe.httpGet (not $probe.httpGet.scheme) -}}
{{- $_ := set $probe.httpGet "scheme" "HTTPS" -}}
{{- end -}}
{{- toYaml $probe -}}
{{- end -}}
