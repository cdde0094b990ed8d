#!/usr/bin/env bash
# Start a private Docker Engine for meshroll's docker-runtime tests and print
# the socket they read from MESHROLL_TEST_DOCKER_SOCKET.
#
#   MESHROLL_TEST_DOCKER_SOCKET="$(bash scripts/docker-test.sh)" scripts/test.sh
#   bash scripts/docker-test.sh stop      # stop it (CI does, when the tests end)
#
# Meant for Debian 12 as root (CI's machine, and a developer's): installs
# Debian's docker.io if dockerd is missing, then runs a dockerd of its own,
# apart from any engine the machine runs, with its data, state and socket
# under one directory (MESHROLL_TEST_DOCKER_DIR, default
# /var/tmp/meshroll-docker-test). It has no bridge and touches no firewall
# (--bridge=none --iptables=false --ip-masq=false): the machines meshroll is
# developed on allow loopback traffic only, so containers run on the host
# network. Safe to run again: an engine already answering on the socket is
# kept. Its log is dockerd.log in that directory.
#
# Messages go to stderr; stdout is only the socket's path.
set -euo pipefail

dir="${MESHROLL_TEST_DOCKER_DIR:-/var/tmp/meshroll-docker-test}"
sock="$dir/docker.sock"
pidfile="$dir/dockerd.pid"

say() { echo "docker-test: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

running_pid() {
	[[ -f "$pidfile" ]] || return 1
	local pid
	pid="$(cat "$pidfile")"
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

answers() {
	[[ -S "$sock" ]] && curl -fsS --max-time 2 --unix-socket "$sock" http://docker/_ping >/dev/null 2>&1
}

if [[ "${1:-start}" == stop ]]; then
	if pid="$(running_pid)"; then
		say "stopping dockerd (pid $pid)"
		kill "$pid"
		for _ in $(seq 1 60); do
			kill -0 "$pid" 2>/dev/null || exit 0
			sleep 0.5
		done
		die "dockerd (pid $pid) did not stop within 30s"
	fi
	say "no dockerd of ours runs"
	exit 0
fi
[[ "${1:-start}" == start ]] || die "usage: docker-test.sh [start|stop]"

if [[ "$(id -u)" != 0 ]]; then
	die "run as root (dockerd needs it, and it installs docker.io when missing)"
fi

if ! command -v dockerd >/dev/null 2>&1; then
	say "installing docker.io (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends docker.io >&2
	command -v dockerd >/dev/null 2>&1 || die "apt-get install docker.io left no dockerd"
fi

if answers; then
	say "an engine already answers on $sock"
	echo "$sock"
	exit 0
fi
if pid="$(running_pid)"; then
	say "dockerd (pid $pid) runs but does not answer; stopping it"
	kill "$pid" || true
	sleep 2
fi

mkdir -p "$dir/data" "$dir/exec"
rm -f "$sock"
say "starting dockerd in $dir"
# setsid: the engine outlives this script (the tests run after it ends);
# `docker-test.sh stop` ends it.
setsid dockerd \
	--bridge=none --iptables=false --ip-masq=false \
	--data-root "$dir/data" --exec-root "$dir/exec" \
	--pidfile "$pidfile" -H "unix://$sock" \
	>"$dir/dockerd.log" 2>&1 </dev/null &

for _ in $(seq 1 120); do
	if answers; then
		say "ready: $(dockerd --version)"
		echo "$sock"
		exit 0
	fi
	sleep 0.5
done
tail -n 20 "$dir/dockerd.log" >&2 || true
die "dockerd did not answer on $sock within 60s (log: $dir/dockerd.log)"
