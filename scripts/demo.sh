#!/usr/bin/env bash
# The main job on an embedded default: build certctl, generate a CA and server pair for a
# sample webhook Service, check it, and prove it with a real TLS handshake that trusts only
# the generated CA and verifies the name the API server would use.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tls_proof.sh

service=${DEMO_SERVICE:-demo-webhook}
namespace=${DEMO_NAMESPACE:-demo}
host="$service.$namespace.svc"

scripts/setup.sh
echo "== building certctl"
scripts/build.sh ci >/dev/null
certctl=build/ci/certctl
"$certctl" version

workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT

echo "== certctl generate --service $service -n $namespace --out-dir $workdir"
"$certctl" generate --service "$service" -n "$namespace" --out-dir "$workdir"
ls -l "$workdir"

echo "== certctl check --cert-dir $workdir --service $service -n $namespace"
"$certctl" check --cert-dir "$workdir" --service "$service" -n "$namespace"

echo "== TLS handshake: s_server with tls.crt/tls.key, s_client trusting only ca.crt, verifying $host"
tls_proof "$workdir/tls.crt" "$workdir/tls.key" "$workdir/ca.crt" "$host"

echo "== demo passed: $host is served with a certificate the API server would trust"
