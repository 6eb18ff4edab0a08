{{/*
The member policy: what the hub may write in this cluster (values
memberPolicy; the agent's --member-policy-* flags).
*/}}

{{/* Kinds as the agent's flags read them: Kind (core group) or group/Kind. */}}
{{- define "flotilla-agent.kindList" -}}
{{- $out := list }}
{{- range . }}
{{- $out = append $out (ternary .kind (printf "%s/%s" .group .kind) (empty .group)) }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{/*
The namespaces Works may write in: memberPolicy.namespaces.allow, or, when
empty, rbac.workloads.namespaces. With rbac.workloads.namespaces set the
agent has rights nowhere else, so every allowed namespace must be listed
there.
*/}}
{{- define "flotilla-agent.allowNamespaces" -}}
{{- $allow := .Values.memberPolicy.namespaces.allow }}
{{- $rbac := .Values.rbac.workloads.namespaces }}
{{- if and $rbac (not .Values.rbac.clusterAdmin) }}
{{- range $allow }}
{{- if not (has . $rbac) }}
{{- fail (printf "memberPolicy.namespaces.allow: %q is not in rbac.workloads.namespaces %v: the agent would have no rights there (list exact names from rbac.workloads.namespaces, or leave allow empty to use them)" . $rbac) }}
{{- end }}
{{- end }}
{{- if not $allow }}{{ $allow = $rbac }}{{ end }}
{{- end }}
{{- join "," $allow }}
{{- end }}

{{/* The agent's member policy flags, one container arg a line. */}}
{{- define "flotilla-agent.memberPolicyArgs" -}}
{{- $p := .Values.memberPolicy -}}
- {{ printf "--member-policy-allow-namespaces=%s" (include "flotilla-agent.allowNamespaces" .) | quote }}
- {{ printf "--member-policy-deny-namespaces=%s" (join "," $p.namespaces.deny) | quote }}
- {{ printf "--member-policy-cluster-scoped=%s" (include "flotilla-agent.kindList" $p.clusterScoped.allow) | quote }}
- {{ printf "--member-policy-deny-kinds=%s" (include "flotilla-agent.kindList" $p.kinds.deny) | quote }}
- {{ printf "--pod-security-enforce=%s" $p.podSecurity.enforce | quote }}
{{- end }}
