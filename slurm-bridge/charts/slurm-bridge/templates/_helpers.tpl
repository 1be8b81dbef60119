{{/* The chart name, or nameOverride. */}}
{{- define "slurm-bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* `<release>-<name>`, or just the release name when it holds the name already. */}}
{{- define "slurm-bridge.fullname" -}}
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

{{- define "slurm-bridge.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "slurm-bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "slurm-bridge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "slurm-bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "slurm-bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "slurm-bridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is needed when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "slurm-bridge.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "slurm-bridge.webhookService" -}}
{{- printf "%s-webhook" (include "slurm-bridge.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "slurm-bridge.metricsService" -}}
{{- printf "%s-metrics" (include "slurm-bridge.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "slurm-bridge.certificate" -}}
{{- printf "%s-webhook" (include "slurm-bridge.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "slurm-bridge.certSecret" -}}
{{- printf "%s-webhook-tls" (include "slurm-bridge.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
What the templates use: this chart's values with Slinky's keys mapped onto them (a Slinky key
that is set wins). Rendered as YAML; read it with `include "slurm-bridge.settings" . | fromYaml`.
*/}}
{{- define "slurm-bridge.settings" -}}
{{- $v := .Values -}}
{{- $s := $v.scheduler | default dict -}}
{{- $c := $v.controllers | default dict -}}
{{- $a := $v.admission | default dict -}}
{{- $sc := $v.schedulerConfig | default dict -}}
{{- $sh := $v.sharedConfig | default dict -}}
{{- $out := dict -}}

{{- /* One Deployment for Slinky's three: the largest replica count set. */ -}}
{{- $replicas := int $v.replicas -}}
{{- $counts := list -}}
{{- range (list $s.replicaCount $c.replicas $a.replicas) }}
{{- if not (kindIs "invalid" .) }}{{ $counts = append $counts (int .) }}{{ end }}
{{- end }}
{{- if $counts }}
{{- $replicas = 0 }}
{{- range $counts }}{{ if gt . $replicas }}{{ $replicas = . }}{{ end }}{{ end }}
{{- end }}
{{- $_ := set $out "replicas" $replicas -}}
{{- $_ := set $out "leaderElect" (or (gt $replicas 1) $v.leaderElect $s.leaderElect $c.leaderElect | default false) -}}

{{- /* Pod settings: Slinky's scheduler, else controllers, else admission, else ours. */ -}}
{{- range $key := list "priorityClassName" "resources" "nodeSelector" "affinity" "tolerations" "pdb" }}
{{- $val := index $v $key }}
{{- range $group := list $a $c $s }}
{{- $x := index $group $key }}
{{- if $x }}{{ $val = $x }}{{ end }}
{{- end }}
{{- $_ := set $out $key $val }}
{{- end }}

{{- /* The config file. */ -}}
{{- $config := deepCopy $v.config -}}
{{- range $key := list "schedulerName" "mcsLabel" "partition" }}
{{- if index $sc $key }}{{ $_ := set $config $key (index $sc $key) }}{{ end }}
{{- end }}
{{- if $sh.slurmRestApi }}{{ $_ := set $config "slurmRestApi" $sh.slurmRestApi }}{{ end }}
{{- if not (kindIs "invalid" $a.managedNamespaces) }}{{ $_ := set $config "managedNamespaces" $a.managedNamespaces }}{{ end }}
{{- if $a.managedNamespaceSelector }}{{ $_ := set $config "managedNamespaceSelector" $a.managedNamespaceSelector }}{{ end }}
{{- if not $config.managedNamespaceSelector }}{{ $_ := unset $config "managedNamespaceSelector" }}{{ end }}
{{- $_ := set $out "config" $config -}}

{{- /* The webhook and its certificate. */ -}}
{{- $hook := deepCopy $v.webhook -}}
{{- if not (kindIs "invalid" $a.enabled) }}{{ $_ := set $hook "enabled" $a.enabled }}{{ end }}
{{- $cm := $a.certManager | default dict -}}
{{- range $key := list "enabled" "duration" "renewBefore" }}
{{- if not (kindIs "invalid" (index $cm $key)) }}{{ $_ := set $hook.certManager $key (index $cm $key) }}{{ end }}
{{- end }}
{{- $tls := $a.tls | default dict -}}
{{- range $key := list "existingSecret" "caBundle" }}
{{- if index $tls $key }}{{ $_ := set $hook.tls $key (index $tls $key) }}{{ end }}
{{- end }}
{{- $mode := "selfSigned" -}}
{{- if $hook.certManager.enabled }}{{ $mode = "certManager" }}
{{- else if $hook.tls.existingSecret }}{{ $mode = "secret" }}
{{- end }}
{{- $_ := set $hook "mode" $mode -}}
{{- $_ := set $out "webhook" $hook -}}

{{- /* The token Secret: Slinky's slurmJwtSecret is a name, or {name, key}. */ -}}
{{- $secret := deepCopy $v.token.secret -}}
{{- $jwt := $sh.slurmJwtSecret -}}
{{- if kindIs "string" $jwt }}
{{- if $jwt }}{{ $_ := set $secret "name" $jwt }}{{ end }}
{{- else if $jwt }}
{{- if $jwt.name }}{{ $_ := set $secret "name" $jwt.name }}{{ end }}
{{- if $jwt.key }}{{ $_ := set $secret "key" $jwt.key }}{{ end }}
{{- end }}
{{- $_ := set $out "tokenSecret" $secret -}}
{{- toYaml $out }}
{{- end }}

{{/* Checks that fail the render with a message naming the values to change. */}}
{{- define "slurm-bridge.checks" -}}
{{- $set := include "slurm-bridge.settings" . | fromYaml -}}
{{- $ns := include "slurm-bridge.namespace" . -}}
{{- if and $set.webhook.enabled (not $set.config.managedNamespaceSelector) (has $ns $set.config.managedNamespaces) }}
{{- fail (printf "config.managedNamespaces holds the bridge's own namespace %q: the webhook would hand the bridge's pods to the bridge. Install it in another namespace or manage other namespaces." $ns) }}
{{- end }}
{{- if and $set.webhook.enabled (eq $set.webhook.mode "selfSigned") (gt (int $set.replicas) 1) }}
{{- fail "the binary's self-signed webhook certificate (webhook.certManager.enabled false, no webhook.tls.existingSecret) makes one CA per pod, so it needs replicas: 1; use cert-manager or webhook.tls.existingSecret for more" }}
{{- end }}
{{- if and $set.webhook.enabled (eq $set.webhook.mode "secret") (not $set.webhook.tls.caBundle) }}
{{- fail "webhook.tls.existingSecret needs webhook.tls.caBundle (base64 of the PEM CA that signed it)" }}
{{- end }}
{{- if not $set.config.managedNamespaceSelector }}
{{- if not $set.config.managedNamespaces }}
{{- fail "config.managedNamespaces is empty and no managedNamespaceSelector is set" }}
{{- end }}
{{- end }}
{{- end }}
