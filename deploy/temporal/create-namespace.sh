#!/usr/bin/env sh
# Register meshroll's namespace and its search attributes on a Temporal
# cluster, the one-time set-up of a new cluster: waits for the frontend,
# creates the namespace if it is missing, then each search attribute that is
# missing. Safe to run again. (The worker also registers missing search
# attributes at start, but two workers starting at once would race; doing it
# here first avoids that.) On Temporal Cloud, create the namespace and the
# attributes in its UI or tcld instead.
#
# It is the compose file's temporal-namespace job and what
# testsuite/production_test.go runs against the real server.
#
# Settings (environment):
#   TEMPORAL_ADDRESS    frontend host:port (default temporal:7233)
#   TEMPORAL_NAMESPACE  default meshroll
#   TEMPORAL_RETENTION  closed workflows' retention (default 72h)
#   TEMPORAL_CLI        the Temporal CLI (default temporal, on PATH)
set -eu

cli="${TEMPORAL_CLI:-temporal}"
addr="${TEMPORAL_ADDRESS:-temporal:7233}"
ns="${TEMPORAL_NAMESPACE:-meshroll}"

# The search attributes meshroll sets (internal/meshapi/search.go); the
# production test checks this list against the code.
attributes="MeshrollModule=Keyword MeshrollCommit=Keyword MeshrollMachines=KeywordList MeshrollState=Keyword MeshrollMachine=Keyword MeshrollMachineChanged=Datetime MeshrollEnrollment=Keyword"

# retry N WHY CMD...: runs CMD (its stderr dropped, its stdout passed on)
# once a second until it succeeds; after N failures it says WHY and fails.
retry() {
	n="$1" why="$2"
	shift 2
	tries=0
	until "$@" 2>/dev/null; do
		tries=$((tries + 1))
		if [ "$tries" -ge "$n" ]; then
			echo "create-namespace: $why" >&2
			return 1
		fi
		sleep 1
	done
}

retry 90 "the Temporal frontend at $addr is not healthy after 90 tries" \
	"$cli" operator cluster health --address "$addr" >/dev/null

if "$cli" operator namespace describe --address "$addr" --namespace "$ns" >/dev/null 2>&1; then
	echo "create-namespace: namespace $ns exists" >&2
else
	"$cli" operator namespace create --address "$addr" --namespace "$ns" --retention "${TEMPORAL_RETENTION:-72h}" >&2
fi

# A namespace just created takes a moment to be usable for its attributes.
have="$(retry 60 "cannot list the search attributes of $ns" \
	"$cli" operator search-attribute list --address "$addr" --namespace "$ns")"
for a in $attributes; do
	name="${a%%=*}"
	if printf '%s\n' "$have" | grep -qw "$name"; then
		continue
	fi
	"$cli" operator search-attribute create --address "$addr" --namespace "$ns" --name "$name" --type "${a#*=}" >&2
done
echo "create-namespace: namespace $ns ready with $attributes" >&2
