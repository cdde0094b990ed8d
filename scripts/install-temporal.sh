#!/usr/bin/env bash
# Install the Temporal CLI (which carries the dev server the integration
# tests run against) if it is not already there, and print its path.
#
#   scripts/install-temporal.sh        # prints e.g. <GOPATH>/bin/temporal
#
# Looks, in order, at $MESHROLL_TEMPORAL_CLI, `temporal` on PATH, $GOBIN and
# "$(go env GOPATH)/bin". A binary counts when it is CLI v1.5.1: either its
# `temporal --version` says 1.5.1 (release builds) or its Go build info says
# module github.com/temporalio/cli v1.5.1 (`go install` builds print
# "0.0.0-DEV" as their version). Otherwise it runs
# `go install github.com/temporalio/cli/cmd/temporal@v1.5.1`; the first build
# takes a few minutes (2 m 25 s measured on 2 cores), later ones come from the
# Go build cache. `worker --dev` finds the CLI the same way, by the same check
# (internal/temporalcli), and builds it into its own state directory when it
# finds none.
#
# Messages go to stderr; stdout is only the path.
set -euo pipefail

version="v1.5.1"
module="github.com/temporalio/cli"
pkg="${module}/cmd/temporal@${version}"

is_wanted() {
	local bin="$1"
	[[ -n "$bin" && -f "$bin" && -x "$bin" ]] || return 1
	local out
	out="$("$bin" --version 2>/dev/null || true)"
	if [[ "$out" =~ version\ ${version#v}([^0-9.]|$) ]]; then
		return 0
	fi
	go version -m "$bin" 2>/dev/null |
		awk -v m="$module" -v v="$version" '$1 == "mod" && $2 == m && $3 == v { found = 1 } END { exit !found }'
}

gobin="$(go env GOBIN)"
gopath_first="$(go env GOPATH | cut -d: -f1)"
install_dir="${gobin:-$gopath_first/bin}"

candidates=()
[[ -n "${MESHROLL_TEMPORAL_CLI:-}" ]] && candidates+=("$MESHROLL_TEMPORAL_CLI")
if on_path="$(command -v temporal 2>/dev/null)"; then
	candidates+=("$on_path")
fi
candidates+=("$install_dir/temporal")

if [[ -n "${MESHROLL_TEMPORAL_CLI:-}" ]] && ! is_wanted "$MESHROLL_TEMPORAL_CLI"; then
	echo "install-temporal: ignoring MESHROLL_TEMPORAL_CLI=$MESHROLL_TEMPORAL_CLI: not Temporal CLI $version" >&2
fi

for c in "${candidates[@]}"; do
	if is_wanted "$c"; then
		echo "$c"
		exit 0
	fi
done

echo "install-temporal: installing Temporal CLI $version: go install $pkg" >&2
echo "install-temporal: the first build takes a few minutes (cached afterwards)" >&2
start=$SECONDS
go install "$pkg"
echo "install-temporal: built in $((SECONDS - start))s: $install_dir/temporal" >&2

if ! is_wanted "$install_dir/temporal"; then
	echo "install-temporal: $install_dir/temporal is not Temporal CLI $version after go install" >&2
	exit 1
fi
echo "$install_dir/temporal"
