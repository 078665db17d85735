#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# /init caBundle: the PEM is appended to the trust bundle and written as
# e2b-ca.crt; when a different CA arrives later (egress CA rotation) every
# copy of the previous one leaves the bundle. Uses a bundle in a temporary
# directory (-ca-bundle, -ca-cert-dir), never the system's.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
W=$(mktemp -d /tmp/envd-ca.XXXXXX)
on_exit '_t_cleanup; rm -rf "$W"'
mkdir -p "$W/certs"
printf -- '-----BEGIN CERTIFICATE-----\nSYSTEMROOT\n-----END CERTIFICATE-----\n' >"$W/certs/bundle.crt"
chmod 600 "$W/certs/bundle.crt"
envd_start -ca-bundle "$W/certs/bundle.crt" -ca-cert-dir "$W/local" || { fail "envd starts"; finish; exit 1; }
U=$ENVD_URL
pem() { printf -- '-----BEGIN CERTIFICATE-----\\n%s\\n-----END CERTIFICATE-----' "$1"; }
init() { curl -s -o /dev/null -w '%{http_code}' -X POST -d "{\"caBundle\":\"$1\"}" "$U/init"; }

expect_eq "first CA installed" 204 "$(init "$(pem CA-ONE)")"
expect_eq "bundle: system root, then the CA" "SYSTEMROOT CA-ONE" "$(grep -v -- ----- "$W/certs/bundle.crt" | tr '\n' ' ' | sed 's/ $//')"
expect_eq "e2b-ca.crt written" "CA-ONE" "$(grep -v -- ----- "$W/local/e2b-ca.crt")"
expect_eq "same CA again" 204 "$(init "$(pem CA-ONE)\\n\\n")"
expect_eq "same CA again is a no-op" 1 "$(grep -c CA-ONE "$W/certs/bundle.crt")"
expect_eq "rotation to a second CA" 204 "$(init "$(pem CA-TWO)")"
expect_eq "the previous CA left the bundle" "SYSTEMROOT CA-TWO" "$(grep -v -- ----- "$W/certs/bundle.crt" | tr '\n' ' ' | sed 's/ $//')"
expect_eq "bundle mode 0644 after the rewrite" 644 "$(stat -c %a "$W/certs/bundle.crt")"
expect_eq "e2b-ca.crt is the new CA" "CA-TWO" "$(grep -v -- ----- "$W/local/e2b-ca.crt")"
expect_eq "no temporary file left" "bundle.crt" "$(ls "$W/certs")"
rm -f "$W/certs/bundle.crt"
r=$(curl -s -w ' %{http_code}' -X POST -d "{\"caBundle\":\"$(pem CA-THREE)\"}" "$U/init")
expect_match "missing bundle is a 400 naming it" "^failed to install CA bundle: open CA bundle: open $W/certs/bundle.crt: .* 400$" "$r"
check "envd alive" envd_alive
finish
