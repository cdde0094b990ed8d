# syntax=docker/dockerfile:1
#
# meshroll's images, one target each (docker-compose.yml builds them all):
#
#   docker build --target worker -t meshroll/worker .           # the Temporal worker; builds modules, so it has go and git
#   docker build --target starter -t meshroll/starter .         # the CLI: merge, plan, machine
#   docker build --target host -t meshroll/host .               # the host agent (exec or docker runtime)
#   docker build --target temporal-schema -t meshroll/temporal-schema .  # temporal-sql-tool + schema, runs deploy/temporal/setup-schema.sh
#
# GO_VERSION is the Go meshroll is built and tested with; the Temporal server
# version matches the temporalio/server image docker-compose.yml runs and
# what scripts/install-temporal-server.sh installs for the native test.

ARG GO_VERSION=1.26.8
ARG DEBIAN=bookworm
ARG TEMPORAL_VERSION=v1.29.1

# ---- build: every meshroll binary, static ----
FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /out/ ./worker ./starter ./host

# ---- temporal-tools: temporal-sql-tool and the schema of the same server version ----
FROM golang:${GO_VERSION}-${DEBIAN} AS temporal-tools
ARG TEMPORAL_VERSION
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOBIN=/out go install go.temporal.io/server/cmd/tools/sql@${TEMPORAL_VERSION} && \
    mv /out/sql /out/temporal-sql-tool && \
    mkdir -p /out/schema && \
    cp -r "$(go env GOMODCACHE)/go.temporal.io/server@${TEMPORAL_VERSION}/schema/postgresql" /out/schema/

# ---- worker: runs plans; its go builder needs the Go toolchain and git ----
FROM golang:${GO_VERSION}-${DEBIAN} AS worker
# Compose runs the worker as the checkout's owner (any uid), so its state
# directory, a named volume seeded from here, is writable by every user.
RUN useradd --system --create-home --home-dir /var/lib/meshroll --uid 10001 meshroll && \
    chmod 1777 /var/lib/meshroll
COPY --from=build /out/worker /out/starter /usr/local/bin/
USER meshroll
WORKDIR /var/lib/meshroll
# The checkout modules are built from is mounted from elsewhere; git would
# refuse a repository owned by another user.
ENV MESHROLL_CONFIG=/etc/meshroll/mesh.yaml \
    GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0=* \
    GOCACHE=/var/lib/meshroll/go-build GOMODCACHE=/var/lib/meshroll/go-mod
ENTRYPOINT ["/usr/local/bin/worker"]

# ---- starter: the operator's CLI ----
FROM debian:${DEBIAN}-slim AS starter
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/starter /usr/local/bin/
ENV MESHROLL_CONFIG=/etc/meshroll/mesh.yaml
ENTRYPOINT ["/usr/local/bin/starter"]

# ---- host: the agent; curl is for the health check ----
FROM debian:${DEBIAN}-slim AS host
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && rm -rf /var/lib/apt/lists/* && \
    useradd --system --create-home --home-dir /var/lib/meshroll --uid 10001 meshroll
COPY --from=build /out/host /usr/local/bin/
USER meshroll
WORKDIR /var/lib/meshroll
EXPOSE 7400
ENTRYPOINT ["/usr/local/bin/host"]

# ---- temporal-schema: creates or upgrades Temporal's PostgreSQL databases ----
FROM debian:${DEBIAN}-slim AS temporal-schema
COPY --from=temporal-tools /out/temporal-sql-tool /usr/local/bin/
COPY --from=temporal-tools /out/schema /etc/temporal/schema
COPY deploy/temporal/setup-schema.sh /usr/local/bin/setup-schema.sh
ENV TEMPORAL_SCHEMA_DIR=/etc/temporal/schema/postgresql/v12
ENTRYPOINT ["/bin/sh", "/usr/local/bin/setup-schema.sh"]
