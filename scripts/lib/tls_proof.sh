# Sourced by scripts and e2e tests. tls_proof CERT KEY CA_BUNDLE HOSTNAME
# Serves CERT/KEY with `openssl s_server` on a free loopback port and connects with
# `openssl s_client` trusting only CA_BUNDLE and verifying HOSTNAME, exactly as the API
# server does when it calls a webhook. Returns 0 only for a verified handshake.
tls_proof() {
  local cert=$1 key=$2 ca=$3 host=$4
  local workdir server_pid port="" client_out rc
  workdir=$(mktemp -d)
  openssl s_server -accept 127.0.0.1:0 -cert "$cert" -key "$key" -naccept 1 -www \
    >"$workdir/server.out" 2>&1 </dev/null &
  server_pid=$!
  for _ in $(seq 1 100); do
    port=$(sed -n 's/^ACCEPT .*:\([0-9][0-9]*\)$/\1/p' "$workdir/server.out" | head -n1)
    [[ -n $port ]] && break
    sleep 0.05
  done
  if [[ -z $port ]]; then
    echo "tls_proof: s_server did not start:" >&2
    cat "$workdir/server.out" >&2
    kill "$server_pid" 2>/dev/null || true
    rm -rf "$workdir"
    return 1
  fi
  rc=0
  client_out=$(openssl s_client -connect "127.0.0.1:$port" -servername "$host" \
    -verify_return_error -verify_hostname "$host" -CAfile "$ca" -brief </dev/null 2>&1) || rc=$?
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  rm -rf "$workdir"
  if [[ $rc -ne 0 ]] || ! grep -q "Verification: OK" <<<"$client_out"; then
    echo "tls_proof: handshake with $host NOT verified:" >&2
    echo "$client_out" >&2
    return 1
  fi
  echo "$client_out" | grep -E "^(Protocol version|Ciphersuite|Verification|Verified peername|Peer certificate)" || true
  return 0
}
