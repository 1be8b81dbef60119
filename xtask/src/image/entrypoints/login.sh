#!/bin/bash
# A login node: sackd (configless, $SACKD_OPTIONS, e.g. --conf-server HOST:PORT) in the background for
# Slurm's client commands, sshd in the foreground ($SSHD_OPTIONS and the arguments go to sshd).
# Host keys are generated unless mounted at /etc/ssh/ssh_host_*.
set -euo pipefail

mkdir -p /run/sshd /run/slurm /var/log/slurm
chmod 0755 /run/sshd
ssh-keygen -A >/dev/null

eval "sackd_args=(${SACKD_OPTIONS:-})"
sackd -D "${sackd_args[@]}" &

eval "set -- ${SSHD_OPTIONS:-} $*"
exec /usr/sbin/sshd -D -e "$@"
