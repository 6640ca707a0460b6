#!/usr/bin/env bash
# Writes the seed inputs of the pem fuzz target (fuzz/corpus/pem/) with the openssl CLI: a CA
# and a server certificate as certctl issues them, the same in DER, other key kinds and
# encodings, a CA that never expires (notAfter 99991231235959Z, RFC 5280's "no expiry") and
# damaged inputs. Parts of one input are joined by the "\n%%\n" separator (see pem.cc).
# The committed seeds came from this script; run it again only to change them.
# Usage: fuzz/make-pem-seeds.sh
set -euo pipefail
cd "$(dirname "$0")"
out=$PWD/corpus/pem
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# join FILE...: the files' contents, separated as the target expects.
join() {
  local first=true file
  for file in "$@"; do
    $first || printf '\n%%%%\n'
    first=false
    cat "$file"
  done
}

cd "$work"
cat >ca.ext <<'EOF'
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
cat >leaf.ext <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:svc.ns.svc, DNS:svc.ns, IP:10.0.0.7, IP:fd00::1
authorityKeyIdentifier = keyid
EOF
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
openssl req -new -key ca.key -subj "/O=acme/CN=svc-ca" -out ca.csr
openssl x509 -req -in ca.csr -signkey ca.key -days 36500 -set_serial 1 -extfile ca.ext \
  -sha256 -out ca.crt 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out tls.key 2>/dev/null
openssl req -new -key tls.key -subj "/CN=svc.ns.svc" -out tls.csr
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -days 3650 -set_serial 2 \
  -extfile leaf.ext -sha256 -out tls.crt 2>/dev/null
printf 'svc.ns.svc\n*.ns.svc\nip:10.0.0.7\nip:fd00::1' >names

openssl x509 -in ca.crt -outform DER -out ca.der
openssl x509 -in tls.crt -outform DER -out tls.der
openssl pkey -in tls.key -outform DER -out tls.key.der
openssl pkey -in tls.key -traditional -out tls.sec1.key
openssl genrsa -traditional -out rsa.key 2048 2>/dev/null
openssl genpkey -algorithm ED25519 -out ed25519.key
openssl pkey -in ed25519.key -aes-128-cbc -passout pass:fuzz -out encrypted.key
cat tls.crt ca.crt >chain.crt

# A CA whose notAfter is the GeneralizedTime 99991231235959Z, issued with `openssl ca`.
mkdir -p forever/new
touch forever/index.txt
echo 01 >forever/serial
cat >forever.cnf <<'EOF'
[ca]
default_ca = forever
[forever]
dir = forever
database = $dir/index.txt
new_certs_dir = $dir/new
serial = $dir/serial
default_md = sha256
policy = any
x509_extensions = ca_ext
[any]
commonName = supplied
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
EOF
openssl req -new -key ca.key -subj "/CN=forever-ca" -out forever.csr
openssl ca -batch -config forever.cnf -selfsign -keyfile ca.key -in forever.csr \
  -startdate 20250101000000Z -enddate 99991231235959Z -out forever.crt 2>/dev/null
openssl x509 -in forever.crt -out forever.pem

join ca.crt tls.crt tls.key ca.key names >"$out/pair"
join ca.der tls.der tls.key.der >"$out/pair-der"
join ca.crt chain.crt tls.sec1.key >"$out/chain-sec1-key"
join tls.crt tls.crt rsa.key >"$out/self-trust-rsa-key"
join ca.crt tls.crt ed25519.key encrypted.key >"$out/ed25519-encrypted-key"
join forever.pem forever.pem ca.key >"$out/forever-ca"
head -c 300 ca.crt >truncated
join truncated tls.crt >"$out/truncated"
printf 'garbage\n%%%%\n\n%%%%\n-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n' \
  >"$out/damaged"
echo "wrote $(find "$out" -type f | wc -l) seeds to $out"
