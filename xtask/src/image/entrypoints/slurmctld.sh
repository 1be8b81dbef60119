#!/bin/bash
# slurmctld in the foreground. Arguments and $SLURMCTLD_OPTIONS are parsed again by the shell, as in
# Slinky's image, so quoted values in container args keep their spaces.
set -euo pipefail

for dir in /run/slurmctld /var/spool/slurmctld /var/log/slurm; do
	mkdir -p "$dir" 2>/dev/null || true
	if [ "$(id -u)" = 0 ]; then chown slurm:slurm "$dir"; fi
done

eval "set -- ${SLURMCTLD_OPTIONS:-} $*"
exec slurmctld -D "$@"
