{{/*
Names. F = the release's full name: names the Controller, RestApi and Accounting, and prefixes
everything else.
*/}}
{{- define "slurm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "slurm.fullname" -}}
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

{{- define "slurm.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "slurm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels of every object the chart renders (the same set as Slinky's chart: the operator's own
selector labels `app.kubernetes.io/name` and `instance` stay the operator's).
*/}}
{{- define "slurm.labels" -}}
helm.sh/chart: {{ include "slurm.chart" . }}
app.kubernetes.io/part-of: slurm
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
A name the chart makes from F must fit where Kubernetes puts it: the operator names Services and
labels after it, and both allow 63 characters.
Call: include "slurm.checkName" (list NAME ROOM WHAT)
*/}}
{{- define "slurm.checkName" -}}
{{- $name := index . 0 -}}
{{- $room := index . 1 -}}
{{- if gt (len $name) (int $room) -}}
{{- fail (printf "%s name %q is %d characters long; at most %d fit (shorten the release name or set fullnameOverride)" (index . 2) $name (len $name) (int $room)) -}}
{{- end -}}
{{- end -}}

{{/*
An image: a string as it is, or {repository, tag, digest} (the digest wins).
*/}}
{{- define "slurm.image" -}}
{{- if kindIs "string" . -}}
{{- . -}}
{{- else if kindIs "map" . -}}
{{- $repo := required "an image needs a repository" .repository -}}
{{- if .digest -}}
{{- printf "%s@%s" $repo .digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (required (printf "image %s needs a tag or a digest" $repo) (toString .tag)) -}}
{{- end -}}
{{- else -}}
{{- fail "an image is a string or {repository, tag, digest}" -}}
{{- end -}}
{{- end -}}

{{/*
A container wrapper of a custom resource: every Container field of the values, the image as a
string, the release's pull policy unless the container names one; null fields left out.
Call: include "slurm.container" (list CONTAINER-VALUES ROOT)
*/}}
{{- define "slurm.container" -}}
{{- $in := index . 0 | default dict -}}
{{- $root := index . 1 -}}
{{- $out := dict -}}
{{- range $k, $v := $in -}}
{{- if and (ne $k "image") (not (kindIs "invalid" $v)) -}}
{{- $_ := set $out $k (deepCopy $v) -}}
{{- end -}}
{{- end -}}
{{- with $in.image -}}
{{- $_ := set $out "image" (include "slurm.image" .) -}}
{{- end -}}
{{- if and $root.Values.imagePullPolicy (not $out.imagePullPolicy) -}}
{{- $_ := set $out "imagePullPolicy" $root.Values.imagePullPolicy -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
The priority class name of every pod, "" for none.
*/}}
{{- define "slurm.priorityClassName" -}}
{{- if .Values.priorityClass.enabled -}}
{{- .Values.priorityClass.name | default "slurm-system-critical" -}}
{{- else if .Values.priorityClassName -}}
{{- .Values.priorityClassName -}}
{{- end -}}
{{- end -}}

{{/*
Metadata of a resource and of its pods: the component's `metadata` values plus the chart labels.
Call: include "slurm.metadata" (list COMPONENT-VALUES ROOT)
*/}}
{{- define "slurm.metadata" -}}
{{- $values := index . 0 | default dict -}}
{{- $root := index . 1 -}}
{{- $meta := deepCopy ($values.metadata | default dict) -}}
{{- $labels := merge (deepCopy ($meta.labels | default dict)) (include "slurm.labels" $root | fromYaml) -}}
{{- $out := dict "labels" $labels -}}
{{- with $meta.annotations -}}
{{- $_ := set $out "annotations" . -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
`template:` of a resource: its metadata, and `podSpec` with the release's pull secrets and
priority class added (and `hostname` when given).
Call: include "slurm.podTemplate" (dict "values" COMPONENT-VALUES "root" ROOT ["hostname" H])
*/}}
{{- define "slurm.podTemplate" -}}
{{- $root := .root -}}
{{- $spec := deepCopy (.values.podSpec | default dict) -}}
{{- $secrets := concat ($spec.imagePullSecrets | default list) ($root.Values.imagePullSecrets | default list) | uniq -}}
{{- if $secrets -}}
{{- $_ := set $spec "imagePullSecrets" $secrets -}}
{{- end -}}
{{- $priority := include "slurm.priorityClassName" $root -}}
{{- if and $priority (not $spec.priorityClassName) -}}
{{- $_ := set $spec "priorityClassName" $priority -}}
{{- end -}}
{{- with .hostname -}}
{{- $_ := set $spec "hostname" . -}}
{{- end -}}
metadata:
  {{- include "slurm.metadata" (list .values $root) | nindent 2 }}
{{- if $spec }}
spec:
  {{- toYaml $spec | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
`{metadata, spec, port, nodePort}` of a component's Service, null fields left out.
Call: include "slurm.service" SERVICE-VALUES
*/}}
{{- define "slurm.service" -}}
{{- $out := dict -}}
{{- range $k, $v := (. | default dict) -}}
{{- if not (kindIs "invalid" $v) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- if $out -}}
{{- toYaml $out -}}
{{- end -}}
{{- end -}}

{{/*
Slurm `Key=Value` items from a map: list values joined by commas; nil, "" and empty lists left
out; sorted by key. Joined with SEP.
Call: include "slurm.keyValues" (list MAP SEP)
*/}}
{{- define "slurm.keyValues" -}}
{{- $items := list -}}
{{- range $k, $v := (index . 0 | default dict) -}}
{{- if kindIs "slice" $v -}}
{{- if $v -}}
{{- $items = append $items (printf "%s=%s" $k (join "," $v)) -}}
{{- end -}}
{{- else if not (or (kindIs "invalid" $v) (eq (toString $v) "")) -}}
{{- $items = append $items (printf "%s=%v" $k $v) -}}
{{- end -}}
{{- end -}}
{{- join (index . 1) $items -}}
{{- end -}}

{{/*
A `{name, key}` reference: the values' `name`/`key` where set, else the defaults.
Call: include "slurm.ref" (list REF-VALUES DEFAULT-NAME DEFAULT-KEY)
*/}}
{{- define "slurm.ref" -}}
{{- $ref := index . 0 | default dict -}}
name: {{ $ref.name | default (index . 1) }}
key: {{ $ref.key | default (index . 2) }}
{{- end -}}

{{/*
The auth/slurm key: `slurmKey.secretRef`, else the v1.0 key `slurmKeyRef`, else F-auth-slurm.
*/}}
{{- define "slurm.slurmKeyRef" -}}
{{- $ref := .Values.slurmKey.secretRef | default dict -}}
{{- if and (not $ref.name) .Values.slurmKeyRef -}}
{{- $ref = .Values.slurmKeyRef -}}
{{- end -}}
{{- include "slurm.ref" (list $ref (printf "%s-auth-slurm" (include "slurm.fullname" .)) "slurm.key") -}}
{{- end -}}

{{/*
The auth/jwt key: `jwtKey.secretRef`, else `jwtKeyRef` or v1.0's `jwtHs256KeyRef`, else
F-auth-jwt.
*/}}
{{- define "slurm.jwtKeyRef" -}}
{{- $ref := .Values.jwtKey.secretRef | default dict -}}
{{- if not $ref.name -}}
{{- $ref = .Values.jwtKeyRef | default .Values.jwtHs256KeyRef | default dict -}}
{{- end -}}
{{- include "slurm.ref" (list $ref (printf "%s-auth-jwt" (include "slurm.fullname" .)) "jwt.key") -}}
{{- end -}}

{{/*
Whether the chart makes a key Secret: `create`, no key of your own under the v1.0 names, and
neither slurmctld nor slurmdbd outside the cluster (then the keys are theirs).
Call: include "slurm.createKey" (list ROOT "slurm"|"jwt")
*/}}
{{- define "slurm.createKey" -}}
{{- $root := index . 0 -}}
{{- $v := $root.Values -}}
{{- $which := index . 1 -}}
{{- $create := ternary $v.slurmKey.create $v.jwtKey.create (eq $which "slurm") -}}
{{- $legacy := ternary (($v.slurmKeyRef | default dict).name) (or (($v.jwtKeyRef | default dict).name) (($v.jwtHs256KeyRef | default dict).name)) (eq $which "slurm") -}}
{{- if and $create (not $legacy) (not $v.controller.external) (not (and $v.accounting.enabled $v.accounting.external)) -}}
true
{{- end -}}
{{- end -}}

{{- define "slurm.jwksKeyRef" -}}
{{- include "slurm.ref" (list .Values.jwksKeys.configMapRef (printf "%s-auth-jwks" (include "slurm.fullname" .)) "jwks.json") -}}
{{- end -}}

{{- define "slurm.sssdConfRef" -}}
{{- include "slurm.ref" (list .Values.sssd.secretRef (printf "%s-sssd-conf" (include "slurm.fullname" .)) "sssd.conf") -}}
{{- end -}}

{{/*
ConfigMap names.
*/}}
{{- define "slurm.configFilesName" -}}{{ include "slurm.fullname" . }}-config-extra{{- end -}}
{{- define "slurm.prologName" -}}{{ include "slurm.fullname" . }}-prolog-scripts{{- end -}}
{{- define "slurm.epilogName" -}}{{ include "slurm.fullname" . }}-epilog-scripts{{- end -}}
{{- define "slurm.prologSlurmctldName" -}}{{ include "slurm.fullname" . }}-prolog-slurmctld-scripts{{- end -}}
{{- define "slurm.epilogSlurmctldName" -}}{{ include "slurm.fullname" . }}-epilog-slurmctld-scripts{{- end -}}

{{/*
The files of ConfigMap F-config-extra as JSON (`configFiles`, plus cgroup.conf without cgroups);
JSON keeps each file's final newline, which a YAML round trip through toYaml drops.
*/}}
{{- define "slurm.configFiles" -}}
{{- $files := deepCopy (.Values.configFiles | default dict) -}}
{{- if and (not .Values.cgroups.enabled) (not (hasKey $files "cgroup.conf")) -}}
{{- $_ := set $files "cgroup.conf" "CgroupPlugin=disabled\n" -}}
{{- end -}}
{{- if $files -}}
{{- toJson $files -}}
{{- end -}}
{{- end -}}

{{/*
A NodeSet's or LoginSet's values merged over the defaults.
Call: include "slurm.merged" (list DEFAULTS ENTRY) | fromYaml
*/}}
{{- define "slurm.merged" -}}
{{- toYaml (mergeOverwrite (dict) (deepCopy (index . 0 | default dict)) (deepCopy (index . 1 | default dict))) -}}
{{- end -}}

{{/*
The entries of `nodesets` to render, as YAML (`include ... | fromYaml`): the values' own, or,
when none of them is enabled and `defaultNodeset.enabled`, `<defaultNodeset.name>: {}`.
*/}}
{{- define "slurm.nodesetEntries" -}}
{{- $entries := .Values.nodesets | default dict -}}
{{- $any := false -}}
{{- range $key, $entry := $entries -}}
{{- $ns := mergeOverwrite (dict) (deepCopy ($.Values.nodesetDefaults | default dict)) (deepCopy ($entry | default dict)) -}}
{{- if $ns.enabled -}}{{- $any = true -}}{{- end -}}
{{- end -}}
{{- if and (not $any) .Values.defaultNodeset.enabled -}}
{{- $entries = dict (required "defaultNodeset.name is required" .Values.defaultNodeset.name) dict -}}
{{- end -}}
{{- toYaml $entries -}}
{{- end -}}

{{/*
The keys of the enabled NodeSets, space-separated.
*/}}
{{- define "slurm.enabledNodesets" -}}
{{- $keys := list -}}
{{- range $key, $entry := include "slurm.nodesetEntries" . | fromYaml -}}
{{- $ns := mergeOverwrite (dict) (deepCopy ($.Values.nodesetDefaults | default dict)) (deepCopy ($entry | default dict)) -}}
{{- if $ns.enabled -}}
{{- $keys = append $keys $key -}}
{{- end -}}
{{- end -}}
{{- join " " $keys -}}
{{- end -}}

{{/*
Whether an enabled LoginSet or an enabled NodeSet with `ssh.enabled` needs sssd.conf.
*/}}
{{- define "slurm.needsSssd" -}}
{{- $need := false -}}
{{- range $key, $entry := .Values.loginsets -}}
{{- $ls := mergeOverwrite (dict) (deepCopy ($.Values.loginsetDefaults | default dict)) (deepCopy ($entry | default dict)) -}}
{{- if $ls.enabled -}}{{- $need = true -}}{{- end -}}
{{- end -}}
{{- range $key, $entry := include "slurm.nodesetEntries" . | fromYaml -}}
{{- $ns := mergeOverwrite (dict) (deepCopy ($.Values.nodesetDefaults | default dict)) (deepCopy ($entry | default dict)) -}}
{{- if and $ns.enabled (dig "ssh" "enabled" false $ns) -}}{{- $need = true -}}{{- end -}}
{{- end -}}
{{- if $need -}}true{{- end -}}
{{- end -}}

{{/*
Options of a partition line from `config` (one line) or `configMap`.
Call: include "slurm.partitionOptions" (list PARTITION-VALUES WHAT)
*/}}
{{- define "slurm.partitionOptions" -}}
{{- $p := index . 0 -}}
{{- if $p.config -}}
{{- $config := toString $p.config | trim -}}
{{- if contains "\n" $config -}}
{{- fail (printf "%s.config must be one line" (index . 1)) -}}
{{- end -}}
{{- $config -}}
{{- else -}}
{{- include "slurm.keyValues" (list $p.configMap " ") -}}
{{- end -}}
{{- end -}}

{{/*
The Controller's extraConf: the slurm.conf lines cgroups.enabled=false needs (unless set by
you), your extraConf (or extraConfMap), then one line per enabled partition.
*/}}
{{- define "slurm.controllerExtraConf" -}}
{{- $v := .Values -}}
{{- $user := "" -}}
{{- if $v.controller.extraConf -}}
{{- $user = toString $v.controller.extraConf | trimSuffix "\n" -}}
{{- else if $v.controller.extraConfMap -}}
{{- $user = include "slurm.keyValues" (list $v.controller.extraConfMap "\n") -}}
{{- end -}}
{{- $lines := list -}}
{{- if not $v.cgroups.enabled -}}
{{- range $kv := list (list "ProctrackType" "proctrack/linuxproc") (list "TaskPlugin" "task/none") (list "JobAcctGatherType" "jobacct_gather/none") -}}
{{- if not (regexMatch (printf "(?mi)^[ \\t]*%s[ \\t]*=" (index $kv 0)) $user) -}}
{{- $lines = append $lines (printf "%s=%s" (index $kv 0) (index $kv 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $user -}}
{{- $lines = append $lines $user -}}
{{- end -}}
{{- $enabled := include "slurm.enabledNodesets" . | splitList " " | compact -}}
{{- range $name, $part := $v.partitions -}}
{{- $part = $part | default dict -}}
{{- if $part.enabled -}}
{{- $nodesets := $part.nodesets | default list | uniq | sortAlpha -}}
{{- if not $nodesets -}}
{{- fail (printf "partitions.%s.nodesets: list at least one NodeSet key (or ALL)" $name) -}}
{{- end -}}
{{- range $nodesets -}}
{{- if not (or (eq . "ALL") (has . $enabled)) -}}
{{- fail (printf "partitions.%s.nodesets: %q is not an enabled NodeSet (enabled: %s; or use ALL)" $name . (join ", " $enabled | default "none")) -}}
{{- end -}}
{{- end -}}
{{- $line := printf "PartitionName=%s Nodes=%s" $name (join "," $nodesets) -}}
{{- with include "slurm.partitionOptions" (list $part (printf "partitions.%s" $name)) -}}
{{- $line = printf "%s %s" $line . -}}
{{- end -}}
{{- $lines = append $lines $line -}}
{{- end -}}
{{- end -}}
{{- join "\n" $lines -}}
{{- end -}}

{{/*
An external component's {host, port}, the port defaulted.
Call: include "slurm.externalConfig" (list EXTERNAL-CONFIG-VALUES DEFAULT-PORT)
*/}}
{{- define "slurm.externalConfig" -}}
{{- $c := index . 0 | default dict -}}
host: {{ required "externalConfig.host is required when external is true" $c.host }}
port: {{ $c.port | default (index . 1) }}
{{- end -}}
