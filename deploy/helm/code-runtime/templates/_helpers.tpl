{{/* The release's name for every object, at most 63 characters. */}}
{{- define "code-runtime.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the pods: the Service, the PodDisruptionBudget and the Deployment agree on them. */}}
{{- define "code-runtime.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "code-runtime.labels" -}}
{{ include "code-runtime.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Seconds a pod is given to stop: the wait before SIGTERM, its longest run (limits.timeoutMs, rounded up) and a margin. */}}
{{- define "code-runtime.drainSeconds" -}}
{{- $ms := int64 (default 60000 .Values.config.limits.timeoutMs) -}}
{{- add (div (add $ms 999) 1000) .Values.drainMarginSeconds .Values.preStopSeconds -}}
{{- end -}}
