#!/usr/bin/env python3
"""Failed TLS handshakes against a sluice TLS listener (tls_hostile.sh): --count bad or aborted
handshakes, --workers at a time, of these kinds in turn:

  garbage       512 random bytes, then wait for the server to close
  plaintext     an HTTP/1.1 GET in clear, then wait for the 400 and the close
  half_fin      the first half of a real ClientHello, then FIN
  half_rst      the first half of a real ClientHello, then RST
  hello_fin     a whole ClientHello, then FIN before the server's answer is read
  after_shello  a whole ClientHello, read the server's first flight, then RST (no Finished)
  tls10         a ClientHello offering TLS 1.0 only: expect an alert and a close
  no_fs_cbc     a TLS 1.2 ClientHello offering AES128-SHA only (RSA key exchange, CBC): alert
  connect_rst   connect, then RST at once

and --silent connections that send half a ClientHello and then nothing: the server must close
them itself (tls.handshake_timeout_ms) within --silent-deadline seconds.

Prints one JSON object: counts per kind, how each ended (server closed, server alert, reset, we
closed, timeout), the fd count of --pid at the start, at the end and when it came back to the
baseline (bounded wait), and whether a good TLS GET / is served after. stdlib only."""
import argparse
import json
import os
import random
import socket
import ssl
import struct
import sys
import threading
import time

KINDS = ["garbage", "plaintext", "half_fin", "half_rst", "hello_fin", "after_shello", "tls10", "no_fs_cbc",
         "connect_rst"]


def client_hello(ciphers=None, version=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if ciphers:
        ctx.set_ciphers(ciphers)
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    out = ssl.MemoryBIO()
    s = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname="localhost")
    try:
        s.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rst_close(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def read_until_close(s, deadline_s):
    """'closed' (FIN), 'alert' (a TLS alert record, then FIN), 'http_400' (a plaintext 400, then
    FIN: the answer to plaintext HTTP), 'reset', or 'timeout'."""
    s.settimeout(deadline_s)
    first = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                if first.startswith(b"HTTP/1.1 400 "):
                    return "http_400"
                return "alert" if first[:1] == b"\x15" else "closed"
            first = first or chunk
    except ConnectionResetError:
        return "reset"
    except socket.timeout:
        return "timeout"
    finally:
        s.close()


class Run:
    def __init__(self, port, hellos, deadline_s):
        self.port, self.hellos, self.deadline_s = port, hellos, deadline_s
        self.lock = threading.Lock()
        self.outcomes = {k: {} for k in KINDS}
        self.connect_errors = 0

    def note(self, kind, outcome):
        with self.lock:
            self.outcomes[kind][outcome] = self.outcomes[kind].get(outcome, 0) + 1

    def one(self, kind):
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=self.deadline_s)
        except OSError:
            with self.lock:
                self.connect_errors += 1
            return
        hello = self.hellos["default"]
        try:
            if kind == "garbage":
                s.sendall(random.randbytes(512))
                self.note(kind, read_until_close(s, self.deadline_s))
            elif kind == "plaintext":
                s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                self.note(kind, read_until_close(s, self.deadline_s))
            elif kind == "half_fin":
                s.sendall(hello[: len(hello) // 2])
                s.shutdown(socket.SHUT_WR)
                self.note(kind, read_until_close(s, self.deadline_s))
            elif kind == "half_rst":
                s.sendall(hello[: len(hello) // 2])
                rst_close(s)
                self.note(kind, "we_reset")
            elif kind == "hello_fin":
                s.sendall(hello)
                s.shutdown(socket.SHUT_WR)
                self.note(kind, read_until_close(s, self.deadline_s))
            elif kind == "after_shello":
                s.sendall(hello)
                s.settimeout(self.deadline_s)
                got = s.recv(4096)
                rst_close(s)
                self.note(kind, "we_reset_after_server_hello" if got[:1] == b"\x16" else "unexpected")
            elif kind == "tls10":
                s.sendall(self.hellos["tls10"])
                self.note(kind, read_until_close(s, self.deadline_s))
            elif kind == "no_fs_cbc":
                s.sendall(self.hellos["no_fs_cbc"])
                self.note(kind, read_until_close(s, self.deadline_s))
            elif kind == "connect_rst":
                rst_close(s)
                self.note(kind, "we_reset")
        except OSError as e:
            s.close()
            self.note(kind, type(e).__name__)


def silent(port, n, deadline_s, hello):
    """n connections that send half a ClientHello and stall: seconds until the server closed all."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(hello[: len(hello) // 2])
        socks.append(s)
    t0 = time.monotonic()
    closed = 0
    for s in socks:
        left = max(0.1, deadline_s - (time.monotonic() - t0))
        if read_until_close(s, left) in ("closed", "alert", "reset"):
            closed += 1
    return closed, round(time.monotonic() - t0, 2)


def good_get(port, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                return data.startswith(b"HTTP/1.1 200")
    except (OSError, ssl.SSLError):
        return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--cafile", required=True)
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--silent", type=int, default=200)
    p.add_argument("--silent-deadline", type=float, default=15.0)
    p.add_argument("--deadline", type=float, default=10.0, help="per connection, for the server's answer")
    p.add_argument("--fd-deadline", type=float, default=20.0)
    a = p.parse_args()
    hellos = {"default": client_hello(),
              "tls10": client_hello("DEFAULT:@SECLEVEL=0", ssl.TLSVersion.TLSv1),
              "no_fs_cbc": client_hello("AES128-SHA:@SECLEVEL=0", ssl.TLSVersion.TLSv1_2)}
    healthy_before = good_get(a.port, a.cafile)
    time.sleep(0.5)
    fds_baseline = fd_count(a.pid)
    run = Run(a.port, hellos, a.deadline)
    todo = [KINDS[i % len(KINDS)] for i in range(a.count)]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                kind = todo.pop()
            run.one(kind)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(a.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad_s = round(time.monotonic() - t0, 2)
    fds_peak_after = fd_count(a.pid)
    silent_closed, silent_s = silent(a.port, a.silent, a.silent_deadline, hellos["default"]) if a.silent else (0, 0)
    # The server may still be closing the last ones: the fd count must come back within the deadline.
    t1 = time.monotonic()
    fds_end = fd_count(a.pid)
    while fds_end > fds_baseline and time.monotonic() - t1 < a.fd_deadline:
        time.sleep(0.1)
        fds_end = fd_count(a.pid)
    result = {"count": a.count, "workers": a.workers, "bad_s": bad_s, "outcomes": run.outcomes,
              "connect_errors": run.connect_errors,
              "timeouts": sum(o.get("timeout", 0) for o in run.outcomes.values()),
              "silent": a.silent, "silent_closed_by_server": silent_closed, "silent_closed_s": silent_s,
              "fds_baseline": fds_baseline, "fds_right_after": fds_peak_after, "fds_end": fds_end,
              "fds_back_s": round(time.monotonic() - t1, 2), "fds_back": fds_end <= fds_baseline,
              "healthy_before": healthy_before, "healthy_after": good_get(a.port, a.cafile)}
    print(json.dumps(result))
    ok = (result["fds_back"] and result["healthy_after"] and result["timeouts"] == 0 and silent_closed == a.silent
          and run.connect_errors == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
