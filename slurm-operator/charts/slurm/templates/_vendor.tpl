{{- /*
Slinky's vendor presets (`vendor.*`).

- `vendor.nvidia.dcgm`: GPU-to-job mapping for NVIDIA's dcgm-exporter, rendered as Slinky's chart
  does it: a prolog and an epilog (each in a ConfigMap of its own that the Controller
  references) that write, for each GPU of a job (`SLURM_JOB_GPUS`), a file named after the GPU
  holding the job id, in `jobMappingDir`; that directory is the host's, mounted into the slurmd
  of every NodeSet whose slurmd or pod asks for `nvidia.com/gpu`.
- `vendor.google.*` (A3 Mega, A3 Ultra networking): not rendered; the chart refuses them by name.
*/ -}}

{{- define "slurm.dcgm.enabled" -}}
{{- if dig "nvidia" "dcgm" "enabled" false (.Values.vendor | default dict) }}true{{ end -}}
{{- end -}}

{{/*
The job-mapping directory; refused when a script could not hold it quoted.
*/}}
{{- define "slurm.dcgm.dir" -}}
{{- $dir := dig "nvidia" "dcgm" "jobMappingDir" "/var/lib/dcgm-exporter/job-mapping" (.Values.vendor | default dict) | toString -}}
{{- if not (regexMatch "^/[A-Za-z0-9._/-]*$" $dir) -}}
{{- fail (printf "vendor.nvidia.dcgm.jobMappingDir: %q is not an absolute path of letters, digits and ._-/" $dir) -}}
{{- end -}}
{{- $dir -}}
{{- end -}}

{{- define "slurm.dcgm.priority" -}}
{{- $p := dig "nvidia" "dcgm" "scriptPriority" "90" (.Values.vendor | default dict) | toString -}}
{{- if not (regexMatch "^[0-9]+$" $p) -}}
{{- fail (printf "vendor.nvidia.dcgm.scriptPriority: %q is not a number" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/*
The ConfigMap name of the DCGM script of KIND (prolog, epilog).
Call: include "slurm.dcgm.configMap" (list KIND ROOT)
*/}}
{{- define "slurm.dcgm.configMap" -}}
{{- include "slurm.fullname" (index . 1) }}-{{ index . 0 }}-dcgm
{{- end -}}

{{/*
The DCGM script of KIND: the prolog writes the job id into a file per GPU, the epilog removes
those files. Neither fails a job: a prolog that fails would drain the node.
Call: include "slurm.dcgm.script" (list KIND ROOT)
*/}}
{{- define "slurm.dcgm.script" -}}
{{- $kind := index . 0 -}}
#!/bin/bash
# slurm chart, vendor.nvidia.dcgm ({{ $kind }}): dcgm-exporter labels a GPU's metrics with the job
# whose id is in <dir>/<GPU index>.
dir='{{ include "slurm.dcgm.dir" (index . 1) }}'
[[ -n "${SLURM_JOB_GPUS:-}" ]] || exit 0
IFS=',' read -r -a gpus <<< "${SLURM_JOB_GPUS}"
{{- if eq $kind "prolog" }}
mkdir -p "$dir" || exit 0
for gpu in "${gpus[@]}"; do
  printf '%s' "${SLURM_JOB_ID:-0}" > "$dir/$gpu" || echo "dcgm prolog: cannot write $dir/$gpu" >&2
done
{{- else }}
for gpu in "${gpus[@]}"; do
  rm -f "$dir/$gpu" || echo "dcgm epilog: cannot remove $dir/$gpu" >&2
done
{{- end }}
exit 0
{{- end -}}

{{/*
Adds the job-mapping directory to a NodeSet's merged values (in place) when DCGM is on and the
NodeSet asks for nvidia.com/gpu.
Call: include "slurm.dcgm.nodeset" (list NODESET-VALUES ROOT)
*/}}
{{- define "slurm.dcgm.nodeset" -}}
{{- $ns := index . 0 -}}
{{- $root := index . 1 -}}
{{- if include "slurm.dcgm.enabled" $root -}}
{{- $gpu := "nvidia.com/gpu" -}}
{{- $slurmd := $ns.slurmd | default dict -}}
{{- $pod := $ns.podSpec | default dict -}}
{{- $asks := false -}}
{{- range $part := list $slurmd $pod -}}
{{- range $which := list "limits" "requests" -}}
{{- if dig "resources" $which $gpu "" $part -}}{{- $asks = true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if $asks -}}
{{- $dir := include "slurm.dcgm.dir" $root -}}
{{- $_ := set $slurmd "volumeMounts" (append ($slurmd.volumeMounts | default list) (dict "name" "dcgm-job-mapping" "mountPath" $dir)) -}}
{{- $_ := set $ns "slurmd" $slurmd -}}
{{- $_ := set $pod "volumes" (append ($pod.volumes | default list) (dict "name" "dcgm-job-mapping" "hostPath" (dict "type" "DirectoryOrCreate" "path" $dir))) -}}
{{- $_ := set $ns "podSpec" $pod -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Refuses the presets this chart does not render, naming each.
*/}}
{{- define "slurm.vendor.check" -}}
{{- range $k, $x := dig "google" dict (.Values.vendor | default dict) -}}
{{- if $x -}}
{{- fail (printf "vendor.google.%s: Slinky's Google %s preset (GPUDirect networking on GKE) is not rendered by this chart; give the NodeSet the interfaces, volumes and slurm.conf lines it needs in its own values, and remove vendor.google.%s" $k $k $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
