#!/usr/bin/env bash
# The official postgres image's entrypoint contract, as docker-compose.yml relies on it:
# POSTGRES_USER (default postgres), POSTGRES_PASSWORD (required), POSTGRES_DB (default: the user),
# POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD (default scram-sha-256) and PGDATA. On an empty
# PGDATA it runs initdb, then /docker-entrypoint-initdb.d (*.sh run, or sourced when not
# executable; *.sql through psql) against a server on the unix socket only, then starts the real one.
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ]; then set -- postgres "$@"; fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA"
  chown -R postgres:postgres "$PGDATA"
  chmod 700 "$PGDATA"
  exec runuser -u postgres -- "$BASH_SOURCE" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set on first initialisation}"
  export POSTGRES_USER="${POSTGRES_USER:-postgres}"
  export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
  # shellcheck disable=SC2086
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" ${POSTGRES_INITDB_ARGS:-}
  rm -f "$pwfile"
  printf '\nhost all all all %s\n' "${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start
  export PGHOST=/var/run/postgresql PGUSER="$POSTGRES_USER"
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  for file in /docker-entrypoint-initdb.d/*; do
    case "$file" in
      *.sh) if [ -x "$file" ]; then "$file"; else . "$file"; fi ;;
      *.sql) psql -v ON_ERROR_STOP=1 --dbname "$POSTGRES_DB" -f "$file" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop
  unset PGHOST PGUSER
fi

exec "$@"
