#!/usr/bin/env python3
"""How a connection ends, sluice against nginx (stdlib only): two clients that a reset hurts.

  close_probe.py [--runs 5] [--sluice build/release/bin/sluice-hello] [--nginx /usr/sbin/nginx]
                 [--backends epoll,uring,blocking]

Starts nginx (1 worker, client_max_body_size 1k, a 1 MiB file) and sluice-hello on each backend
(limits.max_body_bytes = 1024) on 127.0.0.1, runs both probes RUNS times against each, stops what
it started by PID, and prints a markdown table:

- 413, then more body: a POST declaring 10 MB sends 64 KiB, reads the 413, sends 8 x 64 KiB more,
  half-closes and reads to the end. A server that closes with the body unread resets: the sends
  fail and the end is a reset, not an EOF.
- half-close behind a pipeline: 24 GET of 1 MiB, each with a 4 KiB X-Pad header, the sixth with
  Connection: close, then shutdown(SHUT_WR), read through an 8 KiB receive buffer. Six responses
  are owed, then a clean EOF.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

NGINX_CONF = """worker_processes 1;
daemon off;
error_log {dir}/error.log;
pid {dir}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_max_body_size 1k;
    server {{
        listen 127.0.0.1:{port};
        location = /bytes {{ alias {dir}/mib.bin; default_type application/octet-stream; }}
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc):
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server on port {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port} after 10 s")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def after_413(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(5)
    s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 65536)
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(65536)
        if not b:
            break
        head += b
    status = head.split(b" ")[1].decode() if head else "none"
    sent = 0
    try:
        for _ in range(8):
            s.sendall(b"x" * 65536)
            sent += 1
            time.sleep(0.01)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    end = "EOF"
    try:
        while s.recv(65536):
            pass
    except OSError:
        end = "reset"
    s.close()
    return f"{status}, {sent}/8 sent, {end}"


def half_close_pipeline(port, path):
    pad = b"X-Pad: " + b"p" * 4000 + b"\r\n"
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    s.connect(("127.0.0.1", port))
    s.sendall(b"".join(b"GET %s HTTP/1.1\r\nHost: x\r\n%s%s\r\n" %
                       (path, b"Connection: close\r\n" if i == 5 else b"", pad) for i in range(24)))
    s.shutdown(socket.SHUT_WR)
    time.sleep(0.5)
    s.settimeout(5)
    data, end = b"", "EOF"
    while True:
        try:
            b = s.recv(65536)
        except OSError:
            end = "reset"
            break
        if not b:
            break
        data += b
    s.close()
    whole = data.count(b"HTTP/1.1 200")
    return f"{whole}/6 heads, {len(data) >> 10} of 6,144 KiB, {end}"


def tally(results):
    counts = {}
    for r in results:
        counts[r] = counts.get(r, 0) + 1
    return "; ".join(f"{r} ×{n}" for r, n in sorted(counts.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sluice", default="build/release/bin/sluice-hello")
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--backends", default="epoll,uring,blocking")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="close-probe-") as tmp:
        os.chmod(tmp, 0o755)  # nginx's workers run as another user and must read the file
        with open(os.path.join(tmp, "mib.bin"), "wb") as f:
            f.write(b"b" * (1 << 20))
        os.chmod(os.path.join(tmp, "mib.bin"), 0o644)
        port = free_port()
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=tmp, port=port))
        servers = [("nginx", [args.nginx, "-c", conf, "-p", tmp], port, b"/bytes")]
        for b in args.backends.split(","):
            p = free_port()
            servers.append((f"sluice {b}", [args.sluice, "--listen", f"127.0.0.1:{p}", "--backend", b,
                                            "--set", "limits.max_body_bytes=1024"], p, b"/bytes?n=1048576"))
        for name, cmd, p, path in servers:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_listening(p, proc)
                a = tally([after_413(p) for _ in range(args.runs)])
                h = tally([half_close_pipeline(p, path) for _ in range(args.runs)])
            finally:
                stop(proc)
            rows.append((name, a, h))
    print(f"| server | 413, then 8 x 64 KiB more ({args.runs} runs) | half-close behind 24 pipelined, close at #6 ({args.runs} runs) |")
    print("|---|---|---|")
    for name, a, h in rows:
        print(f"| {name} | {a} | {h} |")


if __name__ == "__main__":
    sys.exit(main())
