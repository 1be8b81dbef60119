{{/* The chart name, or nameOverride. */}}
{{- define "slurm-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* `<release>-<name>`, or just the release name when it holds the name already. */}}
{{- define "slurm-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "slurm-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "slurm-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "slurm-exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "slurm-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "slurm-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "slurm-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "slurm-exporter.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Checks that fail the render with a message naming the values to change. */}}
{{- define "slurm-exporter.checks" -}}
{{- if and .Values.token.create (ne .Values.token.source "secret") }}
{{- fail "token.create makes a Token that writes token.secret: it needs token.source secret" }}
{{- end }}
{{- if and .Values.web.basicAuth.user (not .Values.web.basicAuth.passwordSecret.name) }}
{{- fail "web.basicAuth.user needs web.basicAuth.passwordSecret.name" }}
{{- end }}
{{- end }}
