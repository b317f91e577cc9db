#!/usr/bin/env bash
# Run a command with the offline flowchart service up, and always stop it afterwards
# (also when the command fails or is interrupted):
#     scripts/with_flowchart_service.sh .venv/bin/python -m trglab build
# A running service is reused (this script only holds a lease on it, so a second build
# sharing the service does not lose it). If the service cannot start, the command is
# not run: exit status 1 with the service's one-line reason. With internet you may
# skip the service: TRGLAB_FLOWCHART_SERVICE=off and MERMAID_INK_SERVER=https://mermaid.ink.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if [[ "${TRGLAB_FLOWCHART_SERVICE:-on}" == "off" ]]; then
    [[ -n "${MERMAID_INK_SERVER:-}" ]] || { echo "flowchart service off but MERMAID_INK_SERVER is not set" >&2; exit 1; }
    exec "$@"
fi
owner="$$"
stop() { "$PY" -m trglab.flowchart_service stop --owner "$owner" >/dev/null 2>&1 || true; }
child=
forward() {  # pass the signal on to the command, let it clean up, then stop the service (EXIT)
    [[ -n "$child" ]] && kill "-$1" "$child" 2>/dev/null && wait "$child" 2>/dev/null
    exit "$2"
}
trap stop EXIT
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM
if ! url=$("$PY" -m trglab.flowchart_service start --owner "$owner"); then
    echo "the flowchart service could not start (reason above): flowcharts cannot be drawn, stopping" >&2
    exit 1
fi
export MERMAID_INK_SERVER="$url"
"$@" &
child=$!
wait "$child"
rc=$?
exit "$rc"
