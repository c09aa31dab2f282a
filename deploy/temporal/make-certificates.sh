#!/bin/sh
# Makes the certificates of a Temporal frontend that requires mutual TLS, with openssl, into a
# folder; run again, it keeps them (it makes them anew when one is missing or expires within a
# day, or when the server's names differ from the last run's).
#
#   make-certificates.sh <folder> [<name>...]
#
#   ca.pem                   a certificate authority of its own, which signs the two below: the
#                            frontend trusts the clients it signed, the clients trust the frontend;
#                            its key is discarded once they are signed, so no folder holds it
#   server.pem, server.key   the frontend's certificate, for the names given as IP addresses or
#                            DNS names (default: 127.0.0.1 localhost)
#   client.pem, client.key   the client certificate of the service's replicas, the Web UI, the
#                            Temporal CLI and the server's own system worker
#
# Run by `npm run cluster -- up` when CLUSTER_TLS is set (folder DATA_DIR/cluster/tls), and by hand
# for docker-compose.yml (docs/deployment.md, "Temporal over TLS").
set -eu

dir=${1:?usage: make-certificates.sh <folder> [<name>...]}
shift
[ $# -gt 0 ] || set -- 127.0.0.1 localhost
days=825

valid() {
  [ "$(cat "$dir/names" 2>/dev/null)" = "$*" ] || return 1
  for name in ca server client; do
    [ -s "$dir/$name.pem" ] || return 1
    [ "$name" = ca ] || [ -s "$dir/$name.key" ] || return 1
    openssl x509 -in "$dir/$name.pem" -noout -checkend 86400 >/dev/null || return 1
  done
}

if valid "$@"; then
  exit 0
fi

mkdir -p "$dir"
umask 077
work=$(mktemp -d "$dir/.make.XXXXXX")
trap 'rm -rf "$work"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

key "$work/ca.key"
openssl req -x509 -new -key "$work/ca.key" -subj "/CN=Webhook delivery service Temporal CA" -days "$days" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$work/ca.pem"

alt_names=""
for name in "$@"; do
  case $name in
  *[!0-9.:]*) entry="DNS:$name" ;;
  *) entry="IP:$name" ;;
  esac
  alt_names="${alt_names:+$alt_names,}$entry"
done

# <name> <common name> <extended key usage> [<subject alternative names>]
leaf() {
  key "$work/$1.key"
  openssl req -new -key "$work/$1.key" -subj "/CN=$2" -addext "extendedKeyUsage=$3" \
    ${4:+-addext "subjectAltName=$4"} -out "$work/$1.csr"
  openssl x509 -req -in "$work/$1.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days "$days" \
    -copy_extensions copyall -out "$work/$1.pem" 2>/dev/null
}
leaf server "$1" serverAuth "$alt_names"
leaf client "webhook-delivery-service" clientAuth

rm -f "$dir/ca.key" # left by an older version of this script
mv "$work/ca.pem" "$dir/"
for name in server client; do
  mv "$work/$name.key" "$work/$name.pem" "$dir/"
done
printf '%s\n' "$*" >"$dir/names"
# The certificates are public; the keys stay readable by their owner only.
chmod 644 "$dir/ca.pem" "$dir/server.pem" "$dir/client.pem"
echo "make-certificates: CA, server certificate ($alt_names) and client certificate in $dir"
