#!/usr/bin/env bash
# The classic shell hook that certctl job replaces, as many charts ship it: openssl checks the
# stored certificate (-checkend, SAN), generates an RSA CA and leaf when needed, kubectl
# applies the Secret and patches every caBundle. Baseline for bench/job_vs_shell.sh.
# Usage: shell_hook.sh NAMESPACE SERVICE SECRET VWC MWC CRD APISERVICE
set -euo pipefail
ns=$1 service=$2 secret=$3 vwc=$4 mwc=$5 crd=$6 apiservice=$7
host=$service.$ns.svc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

valid=false
if kubectl get secret "$secret" -n "$ns" -o jsonpath='{.data.tls\.crt}' 2>/dev/null |
  base64 -d >tls.crt 2>/dev/null && [[ -s tls.crt ]]; then
  if openssl x509 -checkend 2592000 -noout -in tls.crt >/dev/null &&
    openssl x509 -noout -ext subjectAltName -in tls.crt | grep -q "DNS:$host"; then
    valid=true
    kubectl get secret "$secret" -n "$ns" -o jsonpath='{.data.ca\.crt}' | base64 -d >ca.crt
  fi
fi

if ! $valid; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
    -subj "/CN=$service-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj "/CN=$host" 2>/dev/null
  printf 'subjectAltName=DNS:%s,DNS:%s,DNS:%s.%s,DNS:%s.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$host" "$service" "$service" "$ns" "$host" >ext.cnf
  openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt \
    -days 3650 -extfile ext.cnf 2>/dev/null
  kubectl create secret tls "$secret" -n "$ns" --cert tls.crt --key tls.key \
    --dry-run=client -o yaml | kubectl apply -f - >/dev/null
fi

bundle=$(base64 -w0 <ca.crt)
count=$(kubectl get validatingwebhookconfiguration "$vwc" -o jsonpath='{range .webhooks[*]}x{end}')
for ((i = 0; i < ${#count}; i++)); do
  kubectl patch validatingwebhookconfiguration "$vwc" --type json \
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$bundle\"}]" >/dev/null
done
kubectl patch mutatingwebhookconfiguration "$mwc" --type json \
  -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$bundle\"}]" >/dev/null
kubectl patch crd "$crd" --type json \
  -p "[{\"op\":\"add\",\"path\":\"/spec/conversion/webhook/clientConfig/caBundle\",\"value\":\"$bundle\"}]" >/dev/null
kubectl patch apiservice "$apiservice" --type merge -p "{\"spec\":{\"caBundle\":\"$bundle\"}}" >/dev/null
