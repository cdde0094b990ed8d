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
# Both are built in a scratch module that requires the Temporal CLI at the
# version scripts/install-temporal.sh installs (CLI v1.5.1 embeds this same
# server, v1.29.1): the server then builds with the CLI's dependency versions,
# so after the CLI's build nearly every package comes from the Go build cache
# instead of being compiled a second time at the server's own (older) ones.
# That is the combination Temporal ships in the CLI's dev server. The
# binaries take the names Temporal's own release archives use.
#
# A binary counts as installed when its Go build info names module
# go.temporal.io/server v1.29.1 and the package above; otherwise both are
# built. After the CLI's build this takes about a minute on 2 cores; from a
# cold cache about as long as the CLI's. Later runs find the binaries and
# print the path at once. MESHROLL_TEMPORAL_SERVER, when set, is checked
# first.
#
# Messages go to stderr; stdout is only the server's path (the SQL tool is
# beside it).
set -euo pipefail

module="go.temporal.io/server"
version="v1.29.1"
cli_module="github.com/temporalio/cli"
cli_version="v1.5.1"

say() { echo "install-temporal-server: $*" >&2; }

# is_wanted BIN PACKAGE: BIN was built from PACKAGE with the server module at
# $version (as the main module, or as a dependency of the scratch module).
is_wanted() {
	local bin="$1" pkg="$2"
	[[ -n "$bin" && -f "$bin" && -x "$bin" ]] || return 1
	go version -m "$bin" 2>/dev/null |
		awk -v p="$pkg" -v m="$module" -v v="$version" '
			$1 == "path" && $2 == p { path = 1 }
			($1 == "mod" || $1 == "dep") && $2 == m && $3 == v { mod = 1 }
			END { exit !(path && mod) }'
}

# installed DIR: both binaries in DIR are the wanted ones.
installed() {
	is_wanted "$1/temporal-server" "$module/cmd/server" && is_wanted "$1/temporal-sql-tool" "$module/cmd/tools/sql"
}

gobin="$(go env GOBIN)"
gopath_first="$(go env GOPATH | cut -d: -f1)"
install_dir="${gobin:-$gopath_first/bin}"

if [[ -n "${MESHROLL_TEMPORAL_SERVER:-}" ]]; then
	if [[ "$(basename "$MESHROLL_TEMPORAL_SERVER")" == temporal-server ]] && installed "$(dirname "$MESHROLL_TEMPORAL_SERVER")"; then
		echo "$MESHROLL_TEMPORAL_SERVER"
		exit 0
	fi
	say "ignoring MESHROLL_TEMPORAL_SERVER=$MESHROLL_TEMPORAL_SERVER: not $module $version with temporal-sql-tool beside it"
fi
if installed "$install_dir"; then
	echo "$install_dir/temporal-server"
	exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "building $module $version (cmd/server, cmd/tools/sql) with the dependencies of $cli_module $cli_version"
say "this takes a few minutes on 2 cores the first time (cached afterwards)"
start=$SECONDS
(
	cd "$tmp"
	export GOFLAGS=-mod=mod GOWORK=off
	go mod init meshroll.invalid/temporal-tools
	go get "$cli_module@$cli_version" "$module/cmd/server@$version" "$module/cmd/tools/sql@$version"
	go build -o "$tmp/bin/temporal-server" "$module/cmd/server"
	go build -o "$tmp/bin/temporal-sql-tool" "$module/cmd/tools/sql"
) >&2
mkdir -p "$install_dir"
mv -f "$tmp/bin/temporal-server" "$tmp/bin/temporal-sql-tool" "$install_dir/"
say "built in $((SECONDS - start))s: $install_dir/temporal-server, $install_dir/temporal-sql-tool"

if ! installed "$install_dir"; then
	say "$install_dir/temporal-server or temporal-sql-tool is not $module $version after the build"
	exit 1
fi
echo "$install_dir/temporal-server"
