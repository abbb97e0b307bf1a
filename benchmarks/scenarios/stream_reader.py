#!/usr/bin/env python3
"""A slow HTTP reader for stream_gateway.sh: GET PATH?n=BYTES at RATE MB/s, check the body
(byte i is 'a' + i % 26; Content-Length, chunked or close-delimited), and sample VmRSS of PID
every 50 ms. Prints one JSON row. Bounded: the caller runs it under timeout."""
import argparse
import json
import socket
import threading
import time


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fetch(port, path, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
    n = 0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
    s.close()
    return n


BLOCK = 64 * 1024  # sluice-slow-backend writes /bytes in 64 KiB chunks of its pattern
PATTERN = bytes(97 + i % 26 for i in range(BLOCK))  # byte i of each chunk: 'a' + i % 26


class body_checker:
    """Checks every byte against the backend's pattern, wherever the pieces were cut."""

    def __init__(self):
        self.n = 0
        self.ok = True

    def feed(self, b):
        view = memoryview(b)
        while len(view) > 0:
            at = self.n % BLOCK
            k = min(len(view), BLOCK - at)
            if self.ok and view[:k] != PATTERN[at : at + k]:
                self.ok = False
            self.n += k
            view = view[k:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--bytes", type=int, required=True)
    ap.add_argument("--rate-mbps", type=float, default=20.0)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--warmup-bytes", type=int, default=16 * 1024 * 1024)
    a = ap.parse_args()

    # Warm-up at full speed: the upstream connection, and the drivers' fixed receive-buffer
    # pools (per loop, not per request; io_uring touches its buffer ring's pages on first use).
    fetch(a.port, f"{a.path}?n={a.warmup_bytes}")
    time.sleep(0.3)
    before = vm_rss_kib(a.pid)
    peak = [before]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], vm_rss_kib(a.pid))
            except OSError:
                return
            time.sleep(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    s = socket.create_connection(("127.0.0.1", a.port), 10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
    s.sendall(f"GET {a.path}?n={a.bytes} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
    t0 = time.monotonic()
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            break
        buf += b
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    chunked = any(l.lower().startswith("transfer-encoding:") and "chunked" in l.lower() for l in lines[1:])
    checker = body_checker()
    raw = bytearray(rest)
    per_read = 64 * 1024
    budget_per_s = a.rate_mbps * 1e6
    received_raw = len(rest)
    done = False
    while not done:
        # De-chunk what we have.
        if chunked:
            while True:
                nl = raw.find(b"\r\n")
                if nl < 0:
                    break
                size = int(bytes(raw[:nl]).split(b";")[0], 16)
                if size == 0:
                    done = True
                    break
                if len(raw) < nl + 2 + size + 2:
                    break
                checker.feed(bytes(raw[nl + 2 : nl + 2 + size]))
                del raw[: nl + 2 + size + 2]
        else:
            checker.feed(bytes(raw))
            raw.clear()
        if done:
            break
        # Pace: never ahead of RATE.
        ahead = received_raw / budget_per_s - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
        b = s.recv(per_read)
        if not b:
            break
        received_raw += len(b)
        raw += b
    seconds = time.monotonic() - t0
    s.close()
    time.sleep(0.2)
    stop.set()
    t.join()
    print(json.dumps({
        "label": a.label, "status": status, "chunked": chunked, "received": checker.n,
        "intact": checker.ok and checker.n == a.bytes, "seconds": seconds,
        "rss_before_kib": before, "rss_peak_kib": peak[0], "rss_growth_kib": peak[0] - before,
    }))


if __name__ == "__main__":
    main()
