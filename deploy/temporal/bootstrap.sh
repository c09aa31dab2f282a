#!/bin/sh
# Idempotent set-up of the production Temporal server; every step can run again at any time.
#
#   bootstrap.sh schema      before the server starts: creates the `temporal` and
#                            `temporal_visibility` databases if missing, then applies every schema
#                            version not applied yet (temporal-sql-tool update-schema: this is also
#                            the upgrade path after a server upgrade).
#   bootstrap.sh namespace   once the server answers: creates the namespace (or updates its
#                            retention), waits until it serves, registers the search attributes.
#
# Run by docker-compose.yml (temporalio/admin-tools jobs) and by `npm run cluster -- up`.
#
# schema:    POSTGRES_SEEDS, DB_PORT (5432), POSTGRES_USER, POSTGRES_PWD, DBNAME (temporal),
#            VISIBILITY_DBNAME (temporal_visibility),
#            TEMPORAL_SCHEMA_DIR (/etc/temporal/schema/postgresql/v12, as in admin-tools),
#            TEMPORAL_SQL_TOOL (temporal-sql-tool)
# namespace: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE (default), TEMPORAL_NAMESPACE_RETENTION (7d),
#            TEMPORAL_CLI (temporal); against a frontend that requires TLS, the Temporal CLI reads
#            TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH,
#            TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME (and TEMPORAL_API_KEY)
#            itself, as the service does
set -eu

# The custom search attributes of delivery workflows (workflows/search-attributes.ts; a test
# keeps the two lists equal).
SEARCH_ATTRIBUTES="WebhookId ProjectId EventType DeliveryStatus"

schema() {
  : "${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the PostgreSQL host}"
  : "${POSTGRES_USER:?POSTGRES_USER must name the PostgreSQL role of Temporal}"
  export SQL_PASSWORD="${POSTGRES_PWD:-}"
  sql_tool=${TEMPORAL_SQL_TOOL:-temporal-sql-tool}
  schema_dir=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}
  for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
    database=${pair%%:*}
    versions="$schema_dir/${pair#*:}/versioned"
    # temporal-sql-tool logs a missing folder as an error but exits with 0: the server would then
    # start on an empty schema and fail over and over.
    if [ ! -d "$versions" ]; then
      echo "bootstrap: no schema versions in $versions (TEMPORAL_SCHEMA_DIR)" >&2
      exit 1
    fi
    echo "bootstrap: schema of $database"
    run_sql_tool() {
      "$sql_tool" --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "${DB_PORT:-5432}" -u "$POSTGRES_USER" --db "$database" --quiet "$@"
    }
    # create-database ignores an existing database; setup-schema -v 0.0 only creates the
    # version tables (a database already past 0.0 keeps its version); update-schema applies
    # the versions not applied yet, in order.
    run_sql_tool create-database
    run_sql_tool setup-schema -v 0.0
    run_sql_tool update-schema -d "$versions"
  done
}

namespace() {
  : "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS must be host:port of the Temporal frontend}"
  cli=${TEMPORAL_CLI:-temporal}
  ns=${TEMPORAL_NAMESPACE:-default}
  retention=${TEMPORAL_NAMESPACE_RETENTION:-7d}
  tries=0
  until "$cli" operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
      echo "bootstrap: the Temporal server at $TEMPORAL_ADDRESS did not become healthy" >&2
      "$cli" operator cluster health --address "$TEMPORAL_ADDRESS" >&2 || true
      exit 1
    fi
    sleep 1
  done
  if ! "$cli" operator namespace describe --namespace "$ns" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; then
    echo "bootstrap: creating namespace $ns (retention $retention)"
    # Another bootstrap may create it at the same moment: then describe succeeds below.
    "$cli" operator namespace create --namespace "$ns" --retention "$retention" --address "$TEMPORAL_ADDRESS" ||
      "$cli" operator namespace describe --namespace "$ns" --address "$TEMPORAL_ADDRESS" >/dev/null
  fi
  # A new namespace reaches the services' caches within about 10 s; wait until it serves.
  tries=0
  until "$cli" workflow count --namespace "$ns" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
      echo "bootstrap: namespace $ns does not serve requests" >&2
      exit 1
    fi
    sleep 1
  done
  # The frontend and visibility answer before the history service has joined the cluster, and
  # until it has, starting a workflow fails ("Not enough hosts to serve the request"): the service
  # would start and fail its first publishes. Describing a workflow that does not exist is
  # answered by the history service, so "not found" means it serves.
  tries=0
  until "$cli" workflow describe --workflow-id bootstrap-history-probe --namespace "$ns" --address "$TEMPORAL_ADDRESS" 2>&1 | grep -q "not found"; do
    tries=$((tries + 1))
    if [ "$tries" -ge 120 ]; then
      echo "bootstrap: the history service of $TEMPORAL_ADDRESS does not serve requests" >&2
      "$cli" workflow describe --workflow-id bootstrap-history-probe --namespace "$ns" --address "$TEMPORAL_ADDRESS" >&2 || true
      exit 1
    fi
    sleep 1
  done
  # An existing namespace gets the retention of this run too.
  "$cli" operator namespace update --namespace "$ns" --retention "$retention" --address "$TEMPORAL_ADDRESS" >/dev/null
  set --
  for name in $SEARCH_ATTRIBUTES; do set -- "$@" --name "$name" --type Keyword; done
  "$cli" operator search-attribute create --namespace "$ns" --address "$TEMPORAL_ADDRESS" "$@" >/dev/null
  echo "bootstrap: namespace $ns ready (retention $retention; search attributes $SEARCH_ATTRIBUTES)"
}

case "${1:-}" in
schema) schema ;;
namespace) namespace ;;
*)
  echo "usage: bootstrap.sh schema | namespace" >&2
  exit 2
  ;;
esac
