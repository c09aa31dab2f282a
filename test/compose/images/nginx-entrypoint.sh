#!/bin/sh
# What docker-compose.yml uses of the official nginx image's entrypoint: the executable *.envsh
# files of /docker-entrypoint.d are sourced, in order; then every /etc/nginx/templates/*.template
# is rendered with envsubst (the defined variables only) into /etc/nginx/conf.d, without its
# .template suffix.
set -eu
for script in /docker-entrypoint.d/*.envsh; do
  if [ -x "$script" ]; then . "$script"; fi
done
if [ -d /etc/nginx/templates ]; then
  defined=$(printf '${%s} ' $(env | cut -d= -f1))
  for template in /etc/nginx/templates/*.template; do
    [ -f "$template" ] || continue
    envsubst "$defined" <"$template" >"/etc/nginx/conf.d/$(basename "$template" .template)"
  done
fi
exec "$@"
