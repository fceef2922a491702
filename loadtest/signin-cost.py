#!/usr/bin/env python3
"""Latency of authenticated requests for one user: N sequential GET /api/v1/tokens over one
keep-alive connection, p50 and p90. Run it against a server with the default
security.auth_cache_ttl_secs (cached decisions) and with 0 (every request a sign-in: argon2 for a
local user, bind + search + bind for an LDAP one) to see what a cache miss costs.

    python3 loadtest/signin-cost.py PORT USER PASSWORD [N]
"""
import base64
import http.client
import sys
import time

port, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 200
headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
conn = http.client.HTTPConnection("127.0.0.1", port)
times = []
for _ in range(n):
    start = time.perf_counter()
    conn.request("GET", "/api/v1/tokens", headers=headers)
    res = conn.getresponse()
    res.read()
    times.append(time.perf_counter() - start)
    if res.status != 200:
        sys.exit(f"{user}: HTTP {res.status}")
times.sort()
print(f"{user}: n={n} p50={times[n // 2] * 1000:.2f} ms p90={times[int(n * 0.9)] * 1000:.2f} ms")
