#!/usr/bin/env python3
"""Idle TLS keep-alive connections (tls_memory.sh): opens connections to 127.0.0.1:PORT in
stages (--counts 1000,5000: up to 1,000, then up to 5,000), each doing one GET / over TLS and
then staying idle, open; after each stage (and a settle time) reads the server's RSS and fd
count (the sum over --pids) and prints one JSON object per stage, then one for the end (a new
connection still served?). Every connection is closed with a RST at the end (no 5,000 TIME_WAIT
sockets between measurements). stdlib only."""
import argparse
import json
import socket
import ssl
import struct
import sys
import time


def status_sum(pids, field):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
    return total


def fd_count(pids):
    import os  # pylint: disable=import-outside-toplevel
    return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids)


def one_request(ctx, port, timeout):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the response head")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the end of the body")
        body += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError("status: " + head.split(b"\r\n", 1)[0].decode(errors="replace"))
    return s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pids", required=True, help="comma-separated server PIDs (nginx: master,worker)")
    p.add_argument("--counts", default="1000,5000")
    p.add_argument("--settle", type=float, default=2.0)
    p.add_argument("--cafile", required=True)
    p.add_argument("--timeout", type=float, default=10.0)
    a = p.parse_args()
    pids = [int(x) for x in a.pids.split(",") if x]
    ctx = ssl.create_default_context(cafile=a.cafile)
    time.sleep(a.settle)
    base_rss, base_fds = status_sum(pids, "VmRSS"), fd_count(pids)
    print(json.dumps({"stage": "baseline", "rss_kib": base_rss, "fds": base_fds}), flush=True)
    conns, errors = [], 0
    for target in (int(x) for x in a.counts.split(",")):
        t0 = time.monotonic()
        while len(conns) + errors < target:
            try:
                conns.append(one_request(ctx, a.port, a.timeout))
            except (OSError, ssl.SSLError, ConnectionError) as e:
                errors += 1
                if errors <= 3:
                    print(f"tls_idle_client: {e}", file=sys.stderr)
        opened_s = time.monotonic() - t0
        time.sleep(a.settle)
        rss, fds = status_sum(pids, "VmRSS"), fd_count(pids)
        print(json.dumps({"stage": "held", "target": target, "held": len(conns), "errors": errors,
                          "rss_before_kib": base_rss, "rss_after_kib": rss, "fds_before": base_fds, "fds": fds,
                          "open_s": round(opened_s, 2)}), flush=True)
    healthy = True
    try:
        one_request(ctx, a.port, a.timeout).close()
    except (OSError, ssl.SSLError, ConnectionError):
        healthy = False
    for s in conns:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    print(json.dumps({"stage": "end", "healthy_after": healthy}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
