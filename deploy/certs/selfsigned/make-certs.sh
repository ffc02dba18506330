#!/usr/bin/env bash
# Webhook certificate with nothing but openssl and kubectl (no cert-manager, no certgen image):
# makes a CA and a serving certificate for tessera-webhook.tessera-system.svc, stores them in the
# Secret tessera-webhook-tls and writes the CA into the caBundle of both tessera-webhook
# configurations. Run it after `kubectl apply -k deploy/overlays/...` (the certgen Jobs then find
# the Secret present and only re-patch the same CA). Re-running it rotates the certificate.
#   usage: deploy/certs/selfsigned/make-certs.sh [DAYS]   (default 3650)
set -euo pipefail
days=${1:-3650}
ns=tessera-system
svc=tessera-webhook
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=tessera-webhook-ca" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$svc.$ns.svc" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc\nextendedKeyUsage=serverAuth\n' \
  "$svc" "$svc" "$ns" "$svc" "$ns" >"$dir/ext.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days "$days" -extfile "$dir/ext.cnf" -out "$dir/tls.crt" 2>/dev/null

kubectl -n "$ns" create secret generic tessera-webhook-tls \
  --from-file=tls.crt="$dir/tls.crt" --from-file=tls.key="$dir/tls.key" --from-file=ca="$dir/ca.crt" \
  --dry-run=client -o yaml | kubectl apply -f -
ca=$(base64 -w0 <"$dir/ca.crt")
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
  kubectl patch "$kind" tessera-webhook --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca\"}]" 2>/dev/null ||
  kubectl patch "$kind" tessera-webhook --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca\"}]"
done
# The webhook reloads its certificate files when they change (new connections use the new pair);
# the kubelet takes up to a minute to refresh the mounted Secret. Restarting is not needed.
echo "make-certs: tessera-webhook certificate valid for $days days"
