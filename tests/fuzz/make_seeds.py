#!/usr/bin/env python3
"""Writes the hand-written seed inputs of the fuzz targets into tests/fuzz/<target>/corpus/.

Seeds are named seed-*; libFuzzer's own finds (merged with -merge=1) keep their hash names.
http_server inputs are 16 control bytes (see http_server_fuzz.cc) followed by the client's bytes.
"""
import os
import pathlib

root = pathlib.Path(__file__).resolve().parent
H = "Host: a\r\n"


def control(limits=0, send=0, pieces=(0,) * 6, kinds=range(8)):
    return bytes([limits, send, *pieces, *kinds])


def get(path="/", extra="", method="GET", version="1.1"):
    return f"{method} {path} HTTP/{version}\r\n{H if version == '1.1' else ''}{extra}\r\n"


http = {
    "get": get(),
    "keepalive-pipeline": get("/a") + get("/b?q=1") + get("/c", "Connection: close\r\n"),
    "head": get("/h", method="HEAD") + get("/g"),
    "http10": get("/", version="1.0") + get("/x", version="1.0"),
    "http10-keepalive": get("/", "Connection: keep-alive\r\n", version="1.0") + get("/y", version="1.0"),
    "post-length": "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" + get("/after"),
    "post-chunked": "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    "3;ext=1\r\nabc\r\n4\r\ndefg\r\n0\r\nTrailer: x\r\n\r\n" + get("/after"),
    "expect-continue": "PUT /u HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "options-star": "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n" + get(),
    "absolute-form": "GET http://a/b%20c?x HTTP/1.1\r\nHost: a\r\n\r\n",
    "bad-escape": get("/%zz") + get(),
    "no-host": "GET / HTTP/1.1\r\n\r\n",
    "two-hosts": "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "cl-and-te": "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-gzip": "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "bad-method": "G@T / HTTP/1.1\r\nHost: a\r\n\r\n",
    "unknown-method": "BREW / HTTP/1.1\r\nHost: a\r\n\r\n",
    "connect": "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
    "http2-preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "version-09": "GET /\r\n\r\n",
    "version-3": "GET / HTTP/3.0\r\nHost: a\r\n\r\n",
    "space-before-colon": "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
    "bare-lf": "GET / HTTP/1.1\nHost: a\n\n",
    "long-header": "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + "v" * 400 + "\r\n\r\n",
    "long-target": "GET /" + "t" * 400 + " HTTP/1.1\r\nHost: a\r\n\r\n",
    "big-body": "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 200\r\n\r\n" + "b" * 200,
    "big-chunk": "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nff\r\n" + "c" * 255 + "\r\n0\r\n\r\n",
    "upgrade": get("/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n") + get(),
    "partial-last": get() + "GET /partial HTTP/1.1\r\nHo",
    "delete-patch": get("/d", method="DELETE") + "PATCH /p HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx",
}

# A few shapes: whole, byte by byte, odd pieces with partial writes, small limits, keep-alive cap.
shapes = {
    "whole": control(),
    "bytes": control(pieces=(1,) * 6, send=1),
    "odd": control(pieces=(7, 3, 1, 13, 2, 5), send=5, kinds=(0x21, 0x12, 0x33, 0x44, 0x55, 0x76, 0x98, 0xAA)),
    "limits": control(limits=0b011011, kinds=(0x0B, 0x1A, 0x09, 0x28, 0x57, 0x36, 0x62, 0x71)),
}

out = root / "http_server" / "corpus"
out.mkdir(parents=True, exist_ok=True)
for i, (name, wire) in enumerate(http.items()):
    shape = list(shapes)[i % len(shapes)]
    (out / f"seed-{name}-{shape}").write_bytes(shapes[shape] + wire.encode())
    if shape != "whole":
        (out / f"seed-{name}-whole").write_bytes(shapes["whole"] + wire.encode())

every_key = """backend = "epoll"
listen = "[::1]:8081"
io_threads = 4
dispatch = "pool"
worker_threads = 16
async_timeout_ms = 5000
watchdog_ms = 0
shutdown_timeout_ms = 0
log_level = "debug"

[blocking]
threads = 32
accept_queue = 0

[limits]
max_header_bytes = 16384
max_body_bytes = 0
header_timeout_ms = 1000
body_timeout_ms = 2000
idle_timeout_ms = 3000
write_timeout_ms = 4000
max_connections = 100
max_keepalive_requests = 10

[tls]
cert = "/etc/ssl/cert.pem"
key = "/etc/ssl/key.pem"
"""

config = {
    "every-key": every_key,
    "inline-tables": 'limits = { max_body_bytes = 1, max_header_bytes = 256 }\nblocking.threads = 1\n',
    "bad-type": 'io_threads = "four"\n',
    "out-of-range": "[limits]\nmax_header_bytes = 10\n",
    "unknown-key": "[limits]\nmax_bodybytes = 1\n",
    "syntax": "listen = \n[[",
    "negative": "worker_threads = -1\n",
    "huge": "async_timeout_ms = 99999999999999999999\n",
    "float": "watchdog_ms = 1.5\n",
    "tls-half": '[tls]\ncert = "c.pem"\n',
    "strings": 'listen = ":0"\nbackend = "auto"\n[tls]\ncert = "a\\"b\\\\c\\u00e9"\nkey = "k"\n',
    "env": "--- env\nSLUICE_LISTEN=:9000\nSLUICE_LIMITS_MAX_BODY_BYTES=10\nSLUICE_DISPATCH=inline\nPATH=/bin\n",
    "env-bad": "--- env\nSLUICE_IO_THREADS=0\nSLUICE_NOPE=1\n",
    "env-config": "io_threads = 2\n--- env\nSLUICE_CONFIG=x\nSLUICE_WORKER_THREADS=3\n",
    "argv": "--- argv\n--backend\nblocking\n--listen=127.0.0.1:0\n--io-threads\n2\n--dispatch=pool\n"
    "--worker-threads=3\n--threads\n10\n--set\nlimits.idle_timeout_ms=5\n--upstream=http://x\n",
    "argv-config": "log_level = \"warn\"\n--- env\nSLUICE_LOG_LEVEL=error\n--- argv\n--config\nf.toml\n--set=log_level=info\n",
    "argv-help": "--- argv\n--listen\n--help\n",
    "argv-bad": "--- argv\n-x\n--set\nnokey\n--io-thread=1\n",
    "argv-missing": "--- argv\n--listen\n--io-threads\n",
}

out = root / "config" / "corpus"
out.mkdir(parents=True, exist_ok=True)
for name, text in config.items():
    (out / f"seed-{name}").write_text(text)
