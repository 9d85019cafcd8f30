#!/bin/sh
# Makes the certificates the chart needs and no Secret of the user provides, and stores each
# set in a Secret, only if that Secret does not exist yet: an upgrade keeps the certificates
# (and the pods that read them) as they are. Run by the pre-install/pre-upgrade hook Job
# (templates/certs-job.yaml) in the larder image (sh, openssl, curl, base64), talking to the
# Kubernetes API with the Job's ServiceAccount, which may only get these Secrets and create.
#
#   LARDER_TLS_SECRET   Larder's gRPC certificate (empty: none to make): type
#                       kubernetes.io/tls, ca.crt + tls.crt + tls.key, serverAuth and
#                       clientAuth (masters and workers serve it and present it to each other)
#   LARDER_TLS_SANS     its subjectAltName, e.g. DNS:a,DNS:*.b,IP:127.0.0.1
#   LARDER_ETCD_SECRET  the chart's etcd (empty: none to make): ca.crt, server.crt/key (the
#                       members' serving and peer certificate), client.crt/key (the masters')
#   LARDER_ETCD_SANS    the members' subjectAltName
#   LARDER_CERT_DAYS    validity of every certificate
#   LARDER_SECRET_LABELS  the Secrets' labels, a JSON object
#
# Each set has its own CA, whose key is thrown away once the set is signed: no certificate of
# Larder's CA is trusted by etcd, and no one can sign another. To renew or re-key a set,
# delete its Secret, run `helm upgrade`, and restart the pods that read it.
#
# LARDER_KUBE_API and LARDER_SA_DIR (the API server, the ServiceAccount's token, namespace and
# CA) are for tests only.
set -eu
umask 077
API=${LARDER_KUBE_API:-https://kubernetes.default.svc}
SA=${LARDER_SA_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
DAYS=${LARDER_CERT_DAYS:-3650}
LABELS=${LARDER_SECRET_LABELS:-"{}"}
NS=$(cat "$SA/namespace")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# The token goes to curl in a file, not on its command line.
printf 'Authorization: Bearer %s\n' "$(cat "$SA/token")" > "$W/auth"

say() { echo "larder certs: $*"; }
die() { echo "larder certs: $*" >&2; exit 1; }

# api METHOD PATH [BODY_FILE]: the HTTP status on stdout, the response in $W/out.
api() {
  if [ $# -eq 3 ]; then
    curl -sS --cacert "$SA/ca.crt" -H @"$W/auth" -H 'Content-Type: application/json' \
      -o "$W/out" -w '%{http_code}' -X "$1" --data-binary @"$3" "$API$2"
  else
    curl -sS --cacert "$SA/ca.crt" -H @"$W/auth" -o "$W/out" -w '%{http_code}' -X "$1" "$API$2"
  fi
}

# exists NAME: 0 if the Secret is there, 1 if not; any other answer stops the Job.
exists() {
  code=$(api GET "/api/v1/namespaces/$NS/secrets/$1") ||
    die "reading Secret $1: the API server is not reachable"
  case $code in
    200) rm -f "$W/out"; return 0 ;;   # A found Secret's data goes no further.
    404) rm -f "$W/out"; return 1 ;;
    *) die "reading Secret $1: HTTP $code: $(cat "$W/out")" ;;
  esac
}

# create NAME TYPE KEY=FILE...: the Secret, unless another run made it meanwhile.
create() {
  name=$1 type=$2
  shift 2
  {
    printf '{"apiVersion":"v1","kind":"Secret","type":"%s",' "$type"
    printf '"metadata":{"name":"%s","labels":%s},"data":{' "$name" "$LABELS"
    sep=
    for kv in "$@"; do
      printf '%s"%s":"%s"' "$sep" "${kv%%=*}" "$(base64 -w0 < "${kv#*=}")"
      sep=,
    done
    printf '}}'
  } > "$W/body"
  code=$(api POST "/api/v1/namespaces/$NS/secrets" "$W/body") ||
    die "creating Secret $name: the API server is not reachable"
  rm -f "$W/body"
  case $code in
    201) say "created Secret $name" ;;
    409) say "Secret $name was created meanwhile: kept" ;;
    *) die "creating Secret $name: HTTP $code: $(cat "$W/out")" ;;
  esac
}

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# ca DIR CN: DIR/ca.crt and DIR/ca.key.
ca() {
  key "$1/ca.key"
  openssl req -x509 -new -key "$1/ca.key" -out "$1/ca.crt" -days "$DAYS" -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}

# leaf DIR NAME CN EXTENDED_KEY_USAGE [SANS]: DIR/NAME.crt and DIR/NAME.key, signed by DIR/ca.
leaf() {
  key "$1/$2.key"
  openssl req -new -key "$1/$2.key" -out "$W/$2.csr" -subj "/CN=$3"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$4"
    if [ -n "${5:-}" ]; then echo "subjectAltName=$5"; fi
  } > "$W/$2.ext"
  openssl x509 -req -in "$W/$2.csr" -CA "$1/ca.crt" -CAkey "$1/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$DAYS" -extfile "$W/$2.ext" -out "$1/$2.crt"
}

if [ -n "${LARDER_TLS_SECRET:-}" ]; then
  if exists "$LARDER_TLS_SECRET"; then
    say "Secret $LARDER_TLS_SECRET exists: kept"
  else
    d="$W/larder"; mkdir "$d"
    ca "$d" larder-ca
    leaf "$d" tls larder-node serverAuth,clientAuth "${LARDER_TLS_SANS:?}"
    rm -f "$d/ca.key"
    create "$LARDER_TLS_SECRET" kubernetes.io/tls \
      "ca.crt=$d/ca.crt" "tls.crt=$d/tls.crt" "tls.key=$d/tls.key"
  fi
fi

if [ -n "${LARDER_ETCD_SECRET:-}" ]; then
  if exists "$LARDER_ETCD_SECRET"; then
    say "Secret $LARDER_ETCD_SECRET exists: kept"
  else
    d="$W/etcd"; mkdir "$d"
    ca "$d" larder-etcd-ca
    # Also the members' client certificate to each other (peer TLS), hence clientAuth.
    leaf "$d" server larder-etcd serverAuth,clientAuth "${LARDER_ETCD_SANS:?}"
    # No subjectAltName: etcd checks a client certificate's names against the caller's
    # address, which a master's certificate cannot know.
    leaf "$d" client larder-master clientAuth
    rm -f "$d/ca.key"
    create "$LARDER_ETCD_SECRET" Opaque "ca.crt=$d/ca.crt" \
      "server.crt=$d/server.crt" "server.key=$d/server.key" \
      "client.crt=$d/client.crt" "client.key=$d/client.key"
  fi
fi
