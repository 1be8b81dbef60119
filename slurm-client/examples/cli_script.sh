#!/bin/sh
# Scripting the `slurm` CLI: submit a job, take its id from the JSON output, wait until it
# has ended and act on how it ended. POSIX sh and the CLI only (sed reads the JSON).
#
#   cargo install slurm-client --features cli       # or: cargo build -p slurm-client --features cli
#   set -a; . /run/slurm-dev/26.05/cluster.env; set +a   # SLURM_REST_URL, SLURM_JWT, ...
#   sh slurm-client/examples/cli_script.sh ['COMMAND ...']   # default: hostname
#
# Exits 0 when the job completed, with the job's exit code when it failed (1 if it has none),
# and with the CLI's own exit code when `slurm` fails (`slurm --help`: 2 usage or configuration,
# 3 authentication, 4 not found, 5 slurmrestd unreachable, ...).
set -eu

command=${*:-hostname}

# The value of a top-level field of `--output json` (pretty-printed, one field per line,
# two spaces in), e.g. `field state "$json"`. Strings lose their quotes; null stays null.
field() {
    printf '%s\n' "$2" | sed -n \
        -e "s/^  \"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" \
        -e "s/^  \"$1\": \([^\"{[][^,]*\),\{0,1\}\$/\1/p"
}

# Fails here (set -e) with exit code 3 if the token is refused, 5 if nothing answers.
slurm ping >/dev/null

# `jobs submit --output json` prints the SubmittedJob: {"job_id": 42, "step_id": ..., ...}.
submitted=$(slurm jobs submit --output json --name cli_script --time 10 --chdir /tmp --wrap "$command")
job_id=$(field job_id "$submitted")
case $job_id in
'' | *[!0-9]*)
    echo "no job id in the answer: $submitted" >&2
    exit 1
    ;;
esac
echo "submitted job $job_id: $command"

# Poll, waiting longer each time (up to 10 s) while the job is queued or running.
delay=1
last=
while :; do
    rc=0
    job=$(slurm jobs show "$job_id" --output json) || rc=$?
    case $rc in
    0) ;;
    5) # slurmrestd or slurmctld unreachable for a moment (a restart): try again.
        echo "slurmrestd did not answer; trying again in ${delay}s" >&2
        job= ;;
    4) # slurmctld forgets finished jobs after MinJobAge (300 s by default).
        echo "job $job_id is gone from slurmctld; see \`slurm jobs history\`" >&2
        exit 4 ;;
    *) exit "$rc" ;;
    esac
    state=$(field state "$job")
    if [ -n "$state" ] && [ "$state" != "$last" ]; then
        echo "job $job_id: $state"
        last=$state
    fi
    case $state in
    '' | PENDING | RUNNING | SUSPENDED) ;;
    *) break ;;
    esac
    sleep "$delay"
    [ "$delay" -ge 10 ] || delay=$((delay * 2))
done

# The only "return_code" of a Job is its exit_code's (four spaces in).
return_code=$(printf '%s\n' "$job" | sed -n 's/^    "return_code": \([0-9][0-9]*\),\{0,1\}$/\1/p')
case $state in
COMPLETED)
    echo "job $job_id completed, exit code ${return_code:-0}"
    ;;
*)
    echo "job $job_id ended $state, exit code ${return_code:-none}:" >&2
    slurm jobs show "$job_id" >&2 || true # the whole record, as people read it
    if [ -n "$return_code" ] && [ "$return_code" -ne 0 ]; then
        exit "$return_code"
    fi
    exit 1
    ;;
esac
