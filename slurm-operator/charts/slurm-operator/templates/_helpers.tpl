{{/*
Names. Object names follow Slinky's chart: the Deployment, its Services and the webhook
configuration are named after the chart (`slurm-operator`, `slurm-operator-webhook`), the
ServiceAccount and the RBAC objects after the release (the full name).
*/}}
{{- define "slurm-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "slurm-operator.fullname" -}}
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

{{- define "slurm-operator.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "slurm-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The webhook's Service and ValidatingWebhookConfiguration. */}}
{{- define "slurm-operator.webhookName" -}}
{{- printf "%s-webhook" (include "slurm-operator.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "slurm-operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "slurm-operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "slurm-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "slurm-operator.labels" -}}
helm.sh/chart: {{ include "slurm-operator.chart" . }}
{{ include "slurm-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: slurm-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The image. Slinky's repository (from a Slinky values file) cannot run here (other flags, no
webhook in it): it is replaced by this chart's image and tag.
*/}}
{{- define "slurm-operator.slinkyImage" -}}
{{- eq (trimSuffix "/" (toString .Values.operator.image.repository)) "ghcr.io/slinkyproject/slurm-operator" }}
{{- end }}

{{- define "slurm-operator.image" -}}
{{- $image := .Values.operator.image }}
{{- if eq (include "slurm-operator.slinkyImage" .) "true" }}
{{- printf "ghcr.io/slurm-rs/slurm-operator:%s" .Chart.AppVersion }}
{{- else if $image.digest }}
{{- printf "%s@%s" (default "ghcr.io/slurm-rs/slurm-operator" $image.repository) $image.digest }}
{{- else }}
{{- printf "%s:%s" (default "ghcr.io/slurm-rs/slurm-operator" $image.repository) (toString (default .Chart.AppVersion $image.tag)) }}
{{- end }}
{{- end }}

{{/* A comma-separated string or a list of namespaces as a JSON list, blanks dropped. */}}
{{- define "slurm-operator.namespaceList" -}}
{{- $out := list }}
{{- $items := . }}
{{- if not (kindIs "slice" .) }}
{{- $items = splitList "," (toString (default "" .)) }}
{{- end }}
{{- range $items }}
{{- $n := trim (toString .) }}
{{- if $n }}
{{- $out = append $out $n }}
{{- end }}
{{- end }}
{{- $out | uniq | toJson }}
{{- end }}

{{/* The namespaces the operator watches (JSON list; empty: all). */}}
{{- define "slurm-operator.watched" -}}
{{- include "slurm-operator.namespaceList" .Values.operator.namespaces }}
{{- end }}

{{/* `RUST_LOG` from Slinky's `logLevel` (a level name or zap's verbosity number). */}}
{{- define "slurm-operator.rustLog" -}}
{{- $level := .Values.operator.logLevel }}
{{- if or (kindIs "float64" $level) (kindIs "int" $level) (kindIs "int64" $level) (regexMatch "^[0-9]+$" (toString $level)) }}
{{- if ge (int $level) 2 }}trace{{ else if ge (int $level) 1 }}debug{{ else }}info{{ end }}
{{- else }}
{{- $name := lower (toString (default "info" $level)) }}
{{- $known := dict "error" "error" "warn" "warn" "warning" "warn" "info" "info" "debug" "debug" "trace" "trace" "dpanic" "error" "panic" "error" "fatal" "error" }}
{{- required (printf "operator.logLevel %q: use error, warn, info, debug or trace" $name) (get $known $name) }}
{{- end }}
{{- end }}

{{/* The webhook's DNS names, as the serving certificate must carry them. */}}
{{- define "slurm-operator.webhookDnsNames" -}}
{{- $svc := include "slurm-operator.webhookName" . }}
{{- $ns := include "slurm-operator.namespace" . }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) | toJson }}
{{- end }}

{{/*
What the operator calls on namespaced resources, read from its code (see the README's RBAC
section for the call behind every verb). Rendered into the ClusterRole when it watches every
namespace, else into a Role per watched namespace.
*/}}
{{- define "slurm-operator.rules.namespaced" -}}
# The six kinds: watched; Controllers and Accountings also read by name (children, webhook).
- apiGroups: ["slinky.slurm.net"]
  resources: ["controllers", "accountings"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["slinky.slurm.net"]
  resources: ["nodesets", "loginsets", "restapis", "tokens"]
  verbs: ["list", "watch"]
# The NodeSet finalizer of ScheduledUpdate's reservation (a merge patch of metadata.finalizers).
- apiGroups: ["slinky.slurm.net"]
  resources: ["nodesets"]
  verbs: ["patch"]
# The Synced condition, NodeSet counters, LoginSet replicas, Token issuedAt.
- apiGroups: ["slinky.slurm.net"]
  resources: ["controllers/status", "nodesets/status", "loginsets/status", "restapis/status", "accountings/status", "tokens/status"]
  verbs: ["patch"]
# Every child's owner reference sets blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
# admission plugin (OpenShift) allows only with update on the owner's finalizers. No request is
# made there (CRDs serve no such subresource), so this grants no call.
- apiGroups: ["slinky.slurm.net"]
  resources: ["controllers/finalizers", "nodesets/finalizers", "loginsets/finalizers", "restapis/finalizers", "accountings/finalizers", "tokens/finalizers"]
  verbs: ["update"]
# Children written by server-side apply (patch; create when the apply creates the object),
# read back by name, and watched; Secrets are also created once (LoginSet host keys).
- apiGroups: [""]
  resources: ["configmaps", "secrets", "services"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["apps"]
  resources: ["statefulsets", "deployments"]
  verbs: ["get", "list", "watch", "create", "patch"]
# NodeSet history: a revision per pod template, renumbered when a template comes back, old ones
# deleted beyond revisionHistoryLimit; watched into the operator's cache.
- apiGroups: ["apps"]
  resources: ["controllerrevisions"]
  verbs: ["list", "watch", "create", "patch", "delete"]
# The cluster's worker PDB: applied, watched (metadata) into the cache.
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch"]
# NodeSet pods: created directly, listed by label, annotated, deleted after the drain.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
# NodeSet volumeClaimTemplates (create; list and patch: their owners, by
# persistentVolumeClaimRetentionPolicy); the webhook checks Controller persistence.existingClaim.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# A Controller's ServiceMonitor (metrics.serviceMonitor): read by name, applied, deleted when
# turned off. Not watched: the kind may not be installed.
- apiGroups: ["monitoring.coreos.com"]
  resources: ["servicemonitors"]
  verbs: ["get", "create", "patch", "delete"]
{{- end }}

{{/* What the operator calls on cluster-scoped resources: Kubernetes nodes (cordon, DaemonSet mode), watched into its cache. */}}
{{- define "slurm-operator.rules.cluster" -}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
{{- end }}
