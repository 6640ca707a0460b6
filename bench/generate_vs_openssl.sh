#!/usr/bin/env bash
# Whole-process timing: `certctl generate` + `certctl check` against the classic openssl CLI
# sequence a shell hook runs (RSA-2048 CA and leaf, SAN extension file, -checkend, verify).
# Every variant runs in the same session with hyperfine; the report gives medians and each
# variant's ratio to the openssl baseline. Usage: bench/generate_vs_openssl.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}

scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target certctl >/dev/null
certctl=$PWD/build/release/certctl

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/openssl_hook.sh" <<'SCRIPT'
#!/usr/bin/env bash
set -euo pipefail
dir=$1
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
  -subj /CN=webhook-ca -addext basicConstraints=critical,CA:TRUE,pathlen:0 \
  -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj /CN=webhook.infra.svc 2>/dev/null
printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
  'extendedKeyUsage=serverAuth' \
  'subjectAltName=DNS:webhook.infra.svc,DNS:webhook,DNS:webhook.infra,DNS:webhook.infra.svc.cluster.local' >ext.cnf
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 3650 \
  -extfile ext.cnf 2>/dev/null
openssl x509 -checkend 2592000 -noout -in tls.crt >/dev/null
openssl x509 -checkend 2592000 -noout -in ca.crt >/dev/null
openssl verify -CAfile ca.crt -purpose sslserver tls.crt >/dev/null
SCRIPT
chmod +x "$work/openssl_hook.sh"

# One pair to check repeatedly.
"$certctl" generate --service webhook -n infra --out-dir "$work/checked" 2>/dev/null

hyperfine --style basic --warmup 3 --runs "$runs" --export-json "$work/results.json" \
  -n "openssl CLI sequence (rsa-2048)" "$work/openssl_hook.sh $work/openssl" \
  -n "certctl generate+check (ecdsa-p256)" \
  "rm -rf $work/ec && $certctl generate --service webhook -n infra --out-dir $work/ec --log-level off && $certctl check --cert-dir $work/ec --service webhook -n infra >/dev/null" \
  -n "certctl generate+check (rsa-2048)" \
  "rm -rf $work/rsa && $certctl generate --service webhook -n infra --key-type rsa-2048 --out-dir $work/rsa --log-level off && $certctl check --cert-dir $work/rsa --service webhook -n infra >/dev/null" \
  -n "certctl check (one pair)" \
  "$certctl check --cert-dir $work/checked --service webhook -n infra" \
  -n "process baseline (/bin/true)" "/bin/true" >&2

/usr/bin/python3 - "$work/results.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
base = results[0]["median"]
print(f"{'variant':40} {'median ms':>10} {'ratio to openssl':>17}")
for r in results:
    print(f"{r['command']:40} {r['median']*1000:10.2f} {r['median']/base:17.3f}")
ec = next(r for r in results if "ecdsa-p256" in r["command"])
print(f"certctl generate+check (ecdsa-p256) is {base/ec['median']:.1f}x faster than the openssl sequence")
PY
