#!/bin/bash
# slurmd in the foreground, typically `-Z --conf-server HOST:PORT --conf '<Key=Value …>'` from the operator.
# Arguments and $SLURMD_OPTIONS are parsed again by the shell (the operator's --conf value relies on it,
# e.g. Topology='"$SLINKY_TOPOLOGY"'). POD_CPUS / POD_MEMORY (MiB) reserve the rest of the machine for
# the system through CoreSpecCount / MemSpecLimit; POD_TOPOLOGY sets the node's topology.
set -euo pipefail

mkdir -p /run/slurm /run/slurmd /var/spool/slurmd /var/log/slurm

# sshd runs beside slurmd when the operator mounts an sshd_config (a NodeSet with ssh enabled).
if grep -q ' /etc/ssh/sshd_config ' /proc/self/mountinfo 2>/dev/null; then
	mkdir -p /run/sshd
	chmod 0755 /run/sshd
	ssh-keygen -A >/dev/null
	eval "sshd_args=(${SSHD_OPTIONS:-})"
	/usr/sbin/sshd -D -e "${sshd_args[@]}" &
fi

eval "set -- ${SLURMD_OPTIONS:-} $*"

hw() { slurmd -C | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n1; }

extra=()
if [ "${POD_CPUS:-0}" -gt 0 ]; then
	cores=$(($(hw Boards) * $(hw SocketsPerBoard) * $(hw CoresPerSocket)))
	spec=$((cores - POD_CPUS / $(hw ThreadsPerCore)))
	if [ "$spec" -gt 0 ]; then extra+=("CoreSpecCount=$spec"); fi
fi
if [ "${POD_MEMORY:-0}" -gt 0 ]; then
	spec=$(($(hw RealMemory) - POD_MEMORY))
	if [ "$spec" -gt 0 ]; then extra+=("MemSpecLimit=$spec"); fi
fi
if [ -n "${POD_TOPOLOGY:-}" ]; then extra+=("Topology=$POD_TOPOLOGY"); fi

if [ "${#extra[@]}" -gt 0 ]; then
	args=()
	merged=0
	while [ "$#" -gt 0 ]; do
		case "$1" in
		--conf)
			args+=(--conf "${2:-} ${extra[*]}")
			merged=1
			shift 2 || shift
			;;
		--conf=*)
			args+=("--conf=${1#--conf=} ${extra[*]}")
			merged=1
			shift
			;;
		*)
			args+=("$1")
			shift
			;;
		esac
	done
	if [ "$merged" = 0 ]; then args+=(--conf "${extra[*]}"); fi
	set -- "${args[@]}"
fi

exec slurmd -D "$@"
