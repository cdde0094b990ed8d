#!/usr/bin/env bash
# Make a local PostgreSQL ready for meshroll's tests and print the DSN they
# read from MESHROLL_TEST_POSTGRES_DSN (the SQL catalogue's tests in
# internal/catalogue/sqlcat run against it, each in a database of its own).
#
#   MESHROLL_TEST_POSTGRES_DSN="$(bash scripts/postgres-test.sh)" scripts/test.sh
#
# Meant for Debian 12 as root (CI's machine, and a developer's): installs the
# postgresql package if it is missing, creates a cluster if there is none,
# starts it, and creates (or resets) the role meshroll, with a password and
# CREATEDB (and pg_signal_backend, for the tests' DROP DATABASE ... WITH
# (FORCE)), that logs in over TCP on 127.0.0.1 (Debian's pg_hba.conf allows
# password logins there by default). Safe to run again: each step checks
# first. The server is left running.
#
# MESHROLL_TEST_POSTGRES_PASSWORD overrides the role's password (letters,
# digits, '-', '_' and '.' only, so that it needs no escaping in the URL).
#
# Messages go to stderr; stdout is only the DSN,
# postgres://meshroll:<password>@127.0.0.1:<port>/postgres?sslmode=disable
set -euo pipefail

role="meshroll"
password="${MESHROLL_TEST_POSTGRES_PASSWORD:-meshroll-test}"

say() { echo "postgres-test: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

[[ "$password" =~ ^[A-Za-z0-9._-]+$ ]] || die "MESHROLL_TEST_POSTGRES_PASSWORD may hold only letters, digits, '-', '_' and '.'"

if [[ "$(id -u)" != 0 ]]; then
	die "run as root (it installs packages and manages the cluster as the postgres user)"
fi

# as_postgres runs a command as the database superuser over the local socket.
as_postgres() {
	runuser -u postgres -- "$@"
}

server_installed() {
	command -v pg_lsclusters >/dev/null 2>&1 &&
		compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

if server_installed; then
	say "postgresql is installed"
else
	say "installing postgresql (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y postgresql >&2
	server_installed || die "apt-get install postgresql left no server binary"
fi

# The first cluster pg_lsclusters knows; create one for the newest installed
# server version when there is none (the package's postinst normally makes
# <version>/main, but not in every image).
read_cluster() {
	pg_lsclusters --no-header 2>/dev/null | awk 'NF >= 4 { print $1, $2, $3, $4; exit }'
}
cluster="$(read_cluster)"
if [[ -z "$cluster" ]]; then
	version="$(basename "$(dirname "$(dirname "$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | sort -V | tail -n 1)")")")"
	say "no cluster; creating $version/main"
	pg_createcluster "$version" main >&2
	cluster="$(read_cluster)"
	[[ -n "$cluster" ]] || die "pg_createcluster made no cluster"
fi
read -r version name port status <<<"$cluster"
say "cluster $version/$name on port $port is $status"

if [[ "$status" != online* ]]; then
	say "starting cluster $version/$name"
	pg_ctlcluster "$version" "$name" start >&2 || {
		log="/var/log/postgresql/postgresql-$version-$name.log"
		[[ -r "$log" ]] && tail -n 20 "$log" >&2
		die "pg_ctlcluster $version $name start failed"
	}
fi

ready=""
for _ in $(seq 1 60); do
	if pg_isready -q -h 127.0.0.1 -p "$port"; then
		ready=1
		break
	fi
	sleep 0.5
done
[[ -n "$ready" ]] || die "PostgreSQL is not accepting connections on 127.0.0.1:$port after 30s"

say "creating role $role (or resetting its password)"
as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres -v role="$role" -v pw="$password" >&2 <<'SQL'
SELECT format('CREATE ROLE %I', :'role')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
ALTER ROLE :"role" WITH LOGIN CREATEDB PASSWORD :'pw';
-- Each test drops its database WITH (FORCE), which ends the sessions still
-- in it; one of another role (a background worker) needs this to be ended.
GRANT pg_signal_backend TO :"role";
SQL

dsn="postgres://$role:$password@127.0.0.1:$port/postgres?sslmode=disable"
if ! PGPASSWORD="$password" psql -X -q -w -h 127.0.0.1 -p "$port" -U "$role" -d postgres -c 'SELECT 1' >/dev/null; then
	die "role $role cannot log in over TCP on 127.0.0.1:$port; check pg_hba.conf allows host 127.0.0.1/32 with scram-sha-256 or md5"
fi
say "ready: postgres://$role:xxxxx@127.0.0.1:$port/postgres?sslmode=disable"
echo "$dsn"
