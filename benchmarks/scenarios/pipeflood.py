#!/usr/bin/env python3
"""Pipelining flood (stdlib only): requests pipelined so that a partial one always trails whole ones.

  pipeflood.py --port P --duration S [--connections 8] [--batch 32] [--depth 4]
               [--path '/delay?ms=0'] [--pad 200] [--server-pid PID]

Each connection sends rounds. The first is BATCH whole requests and the head of one more, cut
before its final CRLF; every later round is that CRLF (completing the partial request), BATCH - 1
whole requests and a new partial head. Up to DEPTH rounds are unanswered at any time: a new round
goes out as soon as the answers owed fall to (DEPTH - 1) * BATCH. So the server's input never
runs dry and never ends on a request boundary: while a request is in flight (an async route, or
dispatch = pool) the server keeps reading behind it, and a server that drops parsed bytes only
once its input buffer is wholly consumed keeps every byte for the connection's life (issue 6,
defect 2). `--pad` adds an X-Pad header of that many bytes to each request, to make growth visible.

Answers are counted by their status lines; an answer that is not 200 is counted apart. Prints one
JSON object on stdout: requests answered, bytes sent, the rate, errors, and with --server-pid the
server's VmRSS at the end, read before the connections close (closing frees what they hold).
"""
import argparse
import json
import selectors
import signal
import socket
import time

STOP = False


def on_signal(*_):
    global STOP
    STOP = True


class conn:
    def __init__(self, port, whole, head, tail, batch):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setblocking(False)
        self.first = whole * batch + head
        self.next = tail + whole * (batch - 1) + head
        self.batch = batch
        self.out = b""
        self.expect = 0
        self.carry = b""
        self.rounds = 0
        self.answered = 0
        self.non_200 = 0
        self.sent = 0
        self.closed = False

    def start_round(self):
        self.out += self.first if self.rounds == 0 else self.next
        self.expect += self.batch
        self.rounds += 1

    def on_readable(self):
        try:
            data = self.sock.recv(262144)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return
        text = self.carry + data
        n = text.count(b"HTTP/1.1 ")
        ok = text.count(b"HTTP/1.1 200 ")
        self.answered += n
        self.non_200 += n - ok
        self.expect -= n
        # A status line may be split across reads: keep the last 8 bytes (shorter than one, so
        # never counted twice) for the next count.
        self.carry = text[-8:]

    def on_writable(self):
        try:
            w = self.sock.send(self.out)
        except BlockingIOError:
            return
        except OSError:
            self.closed = True
            return
        self.sent += w
        self.out = self.out[w:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--path", default="/delay?ms=0")
    ap.add_argument("--pad", type=int, default=200)
    ap.add_argument("--server-pid", type=int, default=0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    pad = f"X-Pad: {'p' * args.pad}\r\n" if args.pad > 0 else ""
    head = f"GET {args.path} HTTP/1.1\r\nHost: flood\r\n{pad}".encode()
    whole, tail = head + b"\r\n", b"\r\n"
    sel = selectors.DefaultSelector()
    conns, errors = [], 0
    for _ in range(args.connections):
        try:
            c = conn(args.port, whole, head, tail, args.batch)
        except OSError:
            errors += 1
            continue
        for _ in range(max(1, args.depth)):
            c.start_round()
        conns.append(c)
        sel.register(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

    start = time.monotonic()
    end = start + args.duration
    while not STOP and time.monotonic() < end and any(not c.closed for c in conns):
        for key, events in sel.select(timeout=0.2):
            c = key.data
            if events & selectors.EVENT_READ:
                c.on_readable()
            if events & selectors.EVENT_WRITE and c.out:
                c.on_writable()
            if c.closed:
                sel.unregister(c.sock)
                continue
            if c.expect <= (args.depth - 1) * args.batch and not c.out:
                c.start_round()
            sel.modify(c.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0), c)
    elapsed = time.monotonic() - start
    rss_end = None
    if args.server_pid:
        try:
            with open(f"/proc/{args.server_pid}/status", encoding="ascii") as f:
                rss_end = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), None)
        except OSError:
            pass
    answered = sum(c.answered for c in conns)
    print(json.dumps({
        "tool": "pipeflood.py", "path": args.path, "connections": args.connections, "batch": args.batch,
        "depth": args.depth,
        "request_bytes": len(whole), "duration_s": round(elapsed, 2), "answered": answered,
        "rps": round(answered / elapsed, 1) if elapsed > 0 else None,
        "non_200": sum(c.non_200 for c in conns), "bytes_sent": sum(c.sent for c in conns),
        "closed_by_server": sum(1 for c in conns if c.closed), "connect_errors": errors,
        "server_rss_end_kib": rss_end,
    }))
    for c in conns:
        c.sock.close()


if __name__ == "__main__":
    main()
