#!/usr/bin/env sh
# Create (or upgrade) the Temporal server's two PostgreSQL databases with
# temporal-sql-tool: the persistence database and the visibility database,
# each created if missing, initialised, then updated to the newest schema
# version shipped with the server. Safe to run again, and the way to upgrade
# the schema before starting a newer server.
#
# It is the compose file's temporal-schema job and what
# testsuite/production_test.go runs before it starts the real server.
#
# Settings (environment):
#   SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD  read by temporal-sql-tool itself
#   TEMPORAL_SCHEMA_DIR     the server's schema/postgresql/v12 directory (required)
#   TEMPORAL_DB             default temporal
#   TEMPORAL_VISIBILITY_DB  default temporal_visibility
#   TEMPORAL_SQL_TOOL       default temporal-sql-tool (on PATH)
#
# POSIX sh, so that it runs in a slim image as well as on CI's machine.
set -eu

tool="${TEMPORAL_SQL_TOOL:-temporal-sql-tool}"
schema="${TEMPORAL_SCHEMA_DIR:?set TEMPORAL_SCHEMA_DIR to the schema/postgresql/v12 directory of the Temporal server release}"
export SQL_PLUGIN="${SQL_PLUGIN:-postgres12}"

for pair in "${TEMPORAL_DB:-temporal}:temporal" "${TEMPORAL_VISIBILITY_DB:-temporal_visibility}:visibility"; do
	db="${pair%%:*}"
	kind="${pair##*:}"
	if [ ! -d "$schema/$kind/versioned" ]; then
		echo "setup-schema: no $schema/$kind/versioned: TEMPORAL_SCHEMA_DIR must be the server's schema/postgresql/v12" >&2
		exit 1
	fi
	echo "setup-schema: database $db ($kind)" >&2
	"$tool" --db "$db" create-database >&2
	"$tool" --db "$db" setup-schema -v 0.0 >&2
	"$tool" --db "$db" update-schema -d "$schema/$kind/versioned" >&2
done
echo "setup-schema: done" >&2
