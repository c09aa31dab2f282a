#!/bin/sh
# Creates the role and database of the webhook delivery service.
#
# Mounted into /docker-entrypoint-initdb.d of the official postgres image, so it runs
# once, when the data volume is initialised; changing WEBHOOKS_DB_PASSWORD later has
# no effect on an existing volume (use ALTER ROLE webhooks PASSWORD ... instead).
# The temporal and temporal_visibility databases are created by the
# temporal-admin-tools job, not here.
set -eu

: "${WEBHOOKS_DB_PASSWORD:?WEBHOOKS_DB_PASSWORD must be set for the postgres service}"

# The password goes through a psql variable (:'...' quotes it as a literal),
# never through string concatenation.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  --set=webhooks_password="$WEBHOOKS_DB_PASSWORD" <<'SQL'
CREATE ROLE webhooks LOGIN PASSWORD :'webhooks_password';
CREATE DATABASE webhooks OWNER webhooks;
REVOKE ALL ON DATABASE webhooks FROM PUBLIC;
SQL
