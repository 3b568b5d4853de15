#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Dev runner: paddock-sessiond, paddock-fcgi and a throwaway nginx in the foreground,
# everything kept in one state dir. Ctrl-C or SIGTERM stops all three.
#
#   PADDOCK_LISTEN     host:port nginx listens on (default 127.0.0.1:8080)
#   PADDOCK_STATE_DIR  state dir (default ./.paddock); sockets in <state>/run, logs in <state>/log
#   PADDOCK_BUILD_DIR  where the binaries are (default ./build)
# Any other PADDOCK_* setting (see README.md) is passed to both programs.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
listen=${PADDOCK_LISTEN:-127.0.0.1:8080}
state=${PADDOCK_STATE_DIR:-$src/.paddock}
build=${PADDOCK_BUILD_DIR:-$src/build}
mkdir -p "$state"
state=$(cd "$state" && pwd)
build=$(cd "$build" && pwd)

die() {
	echo "run.sh: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "run as root: sessiond creates namespaces and cgroups (try: sudo make run)"
getent passwd paddock >/dev/null || die "no user 'paddock': run scripts/deps.sh first"
for b in paddock-sessiond paddock-fcgi; do
	[ -x "$build/$b" ] || die "$build/$b is missing: run 'make build' first"
done
command -v nginx >/dev/null || die "nginx is missing: run scripts/deps.sh first"
case "$listen" in
*:*) ;;
*) die "PADDOCK_LISTEN must be host:port, got '$listen'" ;;
esac

# The workers run as paddock and must reach <state>/run through every parent.
if ! runuser -u paddock -- test -x "$state"; then
	die "user paddock cannot enter $state; choose PADDOCK_STATE_DIR under a world-searchable path"
fi

run="$state/run"
logs="$state/log"
mkdir -p "$run" "$logs" "$state/nginx"
chown root:paddock "$run"
chmod 0770 "$run"
chmod 0755 "$state" "$state/nginx"
rm -f "$run/fcgi.sock" "$run/sessiond.sock"

export PADDOCK_STATE_DIR="$state"
export PADDOCK_RUNTIME_DIR="$run"
export PADDOCK_LIB_DIR="${PADDOCK_LIB_DIR:-$build/lib}"

# nginx config: the template with this instance's fields.
conf="$state/nginx/nginx.conf"
sed -e "s|@USER@|paddock|g" -e "s|@GROUP@|paddock|g" \
	-e "s|@LISTEN@|$listen|g" -e "s|@STATE_DIR@|$state|g" \
	-e "s|@FCGI_SOCKET@|$run/fcgi.sock|g" \
	-e "s|@LOCATIONS@|$src/nginx/paddock-locations.conf|g" \
	"$src/nginx/paddock-dev.conf.in" >"$conf"
nginx -q -t -p "$state/nginx/" -c "$conf" -e "$logs/nginx-error.log" ||
	die "nginx rejected $conf (see above)"

pids=()
stopping=0
stop() {
	[ "$stopping" -eq 0 ] || return 0
	stopping=1
	trap '' INT TERM
	echo "run.sh: stopping" >&2
	# Front to back: nginx, the workers, then sessiond, which destroys its sessions.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		stop_one "${pids[i]}"
	done
}

# SIGTERM, then up to 30 s for the process to exit, then SIGKILL.
stop_one() {
	local pid=$1 deadline=$((SECONDS + 30))
	kill -TERM "$pid" 2>/dev/null || return 0
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "run.sh: pid $pid ignored SIGTERM for 30 s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	wait "$pid" 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap 'stop' EXIT

# Wait until the unix socket $1 accepts a connection, while pid $2 is alive.
wait_socket() {
	local sock=$1 pid=$2 what=$3 deadline=$((SECONDS + 60))
	until /usr/bin/python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])' "$sock" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || die "$what exited during start-up (log: $logs/$what.log)"
		[ "$SECONDS" -lt "$deadline" ] || die "$what did not open $sock within 60 s"
		sleep 0.05
	done
}

# Each program gets its own session (setsid), so a Ctrl-C reaches only this script,
# which then stops them in order; the log tees ignore it too.
log_to() {
	trap '' INT TERM
	exec tee -a "$logs/$1.log" >&2
}

setsid "$build/paddock-sessiond" 2> >(log_to paddock-sessiond) &
pids+=($!)
wait_socket "$run/sessiond.sock" "${pids[0]}" paddock-sessiond

setsid "$build/paddock-fcgi" --socket "$run/fcgi.sock" 2> >(log_to paddock-fcgi) &
pids+=($!)
wait_socket "$run/fcgi.sock" "${pids[1]}" paddock-fcgi

setsid nginx -p "$state/nginx/" -c "$conf" -e "$logs/nginx-error.log" &
pids+=($!)

host=${listen%:*}
port=${listen##*:}
case "$host" in
0.0.0.0 | '*' | '') host=127.0.0.1 ;;
esac
cat <<MSG

paddock is running at http://$host:$port  (state: $state, logs: $logs)
Try:
  curl -s -X POST http://$host:$port/sessions
  curl -s -X POST http://$host:$port/sessions/<session_id>/exec \\
       -H 'Content-Type: application/json' \\
       -d '{"tool": "code_execution", "input": {"code": "print(6 * 7)"}}'
Ctrl-C stops everything.

MSG

# Stop everything as soon as one of the three exits.
set +e
wait -n "${pids[@]}"
rc=$?
echo "run.sh: a process exited (status $rc); shutting down" >&2
stop
exit "$rc"
