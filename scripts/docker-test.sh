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
# --bridge starts a second engine, for the tests of bridge networking
# (MESHROLL_TEST_DOCKER_BRIDGE_SOCKET), with a bridge of its own that never
# routes off the machine:
#
#   MESHROLL_TEST_DOCKER_BRIDGE_SOCKET="$(bash scripts/docker-test.sh --bridge)"
#   bash scripts/docker-test.sh --bridge stop
#
# Its directory is MESHROLL_TEST_DOCKER_BRIDGE_DIR (default
# /var/tmp/meshroll-docker-bridge-test). The script creates the bridge
# (MESHROLL_TEST_DOCKER_BRIDGE_NAME, default meshroll-test0, with the
# address MESHROLL_TEST_DOCKER_BRIDGE_CIDR, default 10.213.0.1/24) with
# forwarding off on it, so that the kernel routes nothing from a container
# beyond the machine, and dockerd touches no firewall and no forwarding
# setting (--iptables=false --ip-masq=false --ip-forward=false). Ports
# published on 127.0.0.1 reach the containers through docker-proxy, the
# engine's userland proxy, and the containers' addresses on the bridge are
# reachable from the machine. `--bridge stop` removes the bridge it created.
#
# Messages go to stderr; stdout is only the socket's path.
set -euo pipefail

bridge=""
if [[ "${1:-}" == --bridge ]]; then
	bridge="${MESHROLL_TEST_DOCKER_BRIDGE_NAME:-meshroll-test0}"
	cidr="${MESHROLL_TEST_DOCKER_BRIDGE_CIDR:-10.213.0.1/24}"
	shift
	dir="${MESHROLL_TEST_DOCKER_BRIDGE_DIR:-/var/tmp/meshroll-docker-bridge-test}"
else
	dir="${MESHROLL_TEST_DOCKER_DIR:-/var/tmp/meshroll-docker-test}"
fi
sock="$dir/docker.sock"
pidfile="$dir/dockerd.pid"
# made is where the script notes the bridge it created, for stop to remove.
made="$dir/bridge-created"

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

# remove_bridge removes the bridge this script created in dir, once its
# engine is gone.
remove_bridge() {
	[[ -f "$made" ]] || return 0
	local name
	name="$(cat "$made")"
	if ip link show "$name" >/dev/null 2>&1; then
		say "removing bridge $name"
		ip link delete "$name" type bridge
	fi
	rm -f "$made"
}

if [[ "${1:-start}" == stop ]]; then
	if pid="$(running_pid)"; then
		say "stopping dockerd (pid $pid)"
		kill "$pid"
		for _ in $(seq 1 60); do
			if ! kill -0 "$pid" 2>/dev/null; then
				remove_bridge
				exit 0
			fi
			sleep 0.5
		done
		die "dockerd (pid $pid) did not stop within 30s"
	fi
	say "no dockerd of ours runs"
	remove_bridge
	exit 0
fi
[[ "${1:-start}" == start ]] || die "usage: docker-test.sh [--bridge] [start|stop]"

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
network=(--bridge=none --iptables=false --ip-masq=false)
if [[ -n "$bridge" ]]; then
	if ip link show "$bridge" >/dev/null 2>&1; then
		[[ -f "$made" && "$(cat "$made")" == "$bridge" ]] ||
			die "a bridge $bridge exists that this script did not create in $dir; name another with MESHROLL_TEST_DOCKER_BRIDGE_NAME"
	else
		say "creating bridge $bridge ($cidr)"
		ip link add "$bridge" type bridge
		echo "$bridge" >"$made"
		ip addr add "$cidr" dev "$bridge"
	fi
	# Nothing from the containers is forwarded anywhere: they reach the
	# machine's addresses on the bridge, and the machine reaches them.
	sysctl -q -w "net.ipv4.conf.$bridge.forwarding=0" "net.ipv6.conf.$bridge.disable_ipv6=1" >&2
	ip link set "$bridge" up
	network=("--bridge=$bridge" --iptables=false --ip-masq=false --ip-forward=false --userland-proxy=true)
fi
say "starting dockerd in $dir"
# setsid: the engine outlives this script (the tests run after it ends);
# `docker-test.sh stop` ends it.
setsid dockerd \
	"${network[@]}" \
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
