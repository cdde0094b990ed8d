#!/usr/bin/env bash
# Run meshroll's tests, the integration ones against a real Temporal dev
# server (see internal/devserver).
#
#   scripts/test.sh                              # every package
#   scripts/test.sh -run TestPlan ./workflows/   # extra go test args
#
# Extra arguments are passed to `go test`. When none of them names a package
# (./..., ./x, ../x or github.com/meshroll/meshroll/...), ./... is tested.
# MESHROLL_TEMPORAL_CLI is set via scripts/install-temporal.sh when unset
# (which installs the CLI if needed).
#
# Tests marked parallel run six at a time (MESHROLL_TEST_PARALLEL, or a
# -parallel argument, says otherwise): the integration tests spend most of
# their time waiting on timers, bakes and probes, not on the CPU. On a
# two-core box testsuite alone took 422 s at four, 377 s at five and 354 s
# at six, the CPU 58 % and 70 % busy at four and six.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${MESHROLL_TEMPORAL_CLI:-}" ]]; then
	MESHROLL_TEMPORAL_CLI="$(bash scripts/install-temporal.sh)"
fi
export MESHROLL_TEMPORAL_CLI

pkgs=(./...)
for a in "$@"; do
	case "$a" in
	./* | ../* | . | github.com/meshroll/meshroll | github.com/meshroll/meshroll/*) pkgs=() ;;
	esac
done

exec go test -race -count=1 -timeout 30m -parallel "${MESHROLL_TEST_PARALLEL:-6}" "${pkgs[@]}" "$@"
