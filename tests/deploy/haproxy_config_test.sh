#!/usr/bin/env bash
# deploy/haproxy/haproxy.cfg is a configuration haproxy accepts (`haproxy -c`), with the pieces
# benchmarks/scenarios/s4.sh rewrites (the two binds, the stats socket, the server markers).
# Usage: haproxy_config_test.sh <source dir>. Exit 77 (skipped) without haproxy.
set -euo pipefail
cfg="$1/deploy/haproxy/haproxy.cfg"
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
if [[ ! -x $haproxy ]]; then
    echo "haproxy_config_test: haproxy not installed (scripts/bootstrap installs it): skipped"
    exit 77
fi
timeout 20 "$haproxy" -c -f "$cfg"
for piece in '^frontend api$' '^listen stats$' '^    stats socket ' '^    # BEGIN servers' '^    # END servers' \
    '^    option httpchk GET /readyz$' '^    option redispatch' '^    balance roundrobin$'; do
    grep -q "$piece" "$cfg" || {
        echo "haproxy_config_test: $cfg lacks /$piece/" >&2
        exit 1
    }
done
echo "haproxy_config_test: ok"
