#!/usr/bin/env bash
# Install the real Temporal server and its SQL schema tool, built from the Go
# module go.temporal.io/server at one version, if they are not already there,
# and print the server's path. The production-topology test
# (testsuite/production_test.go) runs them on PostgreSQL.
#
#   scripts/install-temporal-server.sh   # prints e.g. <GOPATH>/bin/temporal-server
#
# Installs two binaries side by side in $GOBIN (else "$(go env GOPATH)/bin"):
#
#   temporal-server     go.temporal.io/server/cmd/server      (`temporal-server start`)
#   temporal-sql-tool   go.temporal.io/server/cmd/tools/sql   (schema set-up and upgrades)
#
# `go install pkg@version` names a binary after its package's directory
# ("server", "sql"), too generic for a bin directory, so both are built into
# a temporary GOBIN and moved into place under the names Temporal's own
# release archives use. The module's go.mod has no replace directives, so
# `go install …@v1.29.1` works from the module proxy as is.
#
# A binary counts as installed when its Go build info says module
# go.temporal.io/server v1.29.1; otherwise both are built. After
# scripts/install-temporal.sh has built the CLI (which embeds the same server,
# so most packages come from the Go build cache) the build took under 3
# minutes on 2 cores here; from a cold cache expect about as long as the
# CLI's. Later runs find the binaries and print the path at once.
# MESHROLL_TEMPORAL_SERVER, when set, is checked first.
#
# Messages go to stderr; stdout is only the server's path (the SQL tool is
# beside it).
set -euo pipefail

module="go.temporal.io/server"
version="v1.29.1"

say() { echo "install-temporal-server: $*" >&2; }

is_wanted() {
	local bin="$1"
	[[ -n "$bin" && -f "$bin" && -x "$bin" ]] || return 1
	go version -m "$bin" 2>/dev/null |
		awk -v m="$module" -v v="$version" '$1 == "mod" && $2 == m && $3 == v { found = 1 } END { exit !found }'
}

gobin="$(go env GOBIN)"
gopath_first="$(go env GOPATH | cut -d: -f1)"
install_dir="${gobin:-$gopath_first/bin}"

if [[ -n "${MESHROLL_TEMPORAL_SERVER:-}" ]]; then
	if is_wanted "$MESHROLL_TEMPORAL_SERVER" && is_wanted "$(dirname "$MESHROLL_TEMPORAL_SERVER")/temporal-sql-tool"; then
		echo "$MESHROLL_TEMPORAL_SERVER"
		exit 0
	fi
	say "ignoring MESHROLL_TEMPORAL_SERVER=$MESHROLL_TEMPORAL_SERVER: not $module $version with temporal-sql-tool beside it"
fi
if is_wanted "$install_dir/temporal-server" && is_wanted "$install_dir/temporal-sql-tool"; then
	echo "$install_dir/temporal-server"
	exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "installing $module $version: go install $module/cmd/server@$version $module/cmd/tools/sql@$version"
say "this takes a few minutes on 2 cores the first time (cached afterwards)"
start=$SECONDS
GOBIN="$tmp" go install "$module/cmd/server@$version" "$module/cmd/tools/sql@$version"
mkdir -p "$install_dir"
mv -f "$tmp/server" "$install_dir/temporal-server"
mv -f "$tmp/sql" "$install_dir/temporal-sql-tool"
say "built in $((SECONDS - start))s: $install_dir/temporal-server, $install_dir/temporal-sql-tool"

for b in temporal-server temporal-sql-tool; do
	if ! is_wanted "$install_dir/$b"; then
		say "$install_dir/$b is not $module $version after go install"
		exit 1
	fi
done
echo "$install_dir/temporal-server"
