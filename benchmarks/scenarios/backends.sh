#!/usr/bin/env bash
# The backend comparison of the io_uring issue, in one command: nginx, epoll and uring one
# after another in the same run, alternating, RUNS runs each (default 3):
#   1. plaintext GET /, 1 I/O thread (1 nginx worker), 256 connections
#   2. plaintext GET /, 2 I/O threads (2 nginx workers), 1,000 connections, wrk -t2
#   3. /delay?ms=1000 at 10,000 connections for 30 s on epoll and uring (req/s against the
#      10,000 req/s ideal, errors, p99; nginx has no built-in delay, so it has no row)
# Each step writes its own results files (benchmarks/results/) and prints its table.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
RUNS=${RUNS:-3}

echo "== 1/3 plaintext, 1 I/O thread, 256 connections"
RUNS=$RUNS BACKENDS="nginx epoll uring" IO_THREADS=1 CONNS=256 WRK_THREADS=1 bash "$here/plaintext.sh"
echo "== 2/3 plaintext, 2 I/O threads, 1,000 connections"
RUNS=$RUNS BACKENDS="nginx epoll uring" IO_THREADS=2 CONNS=1000 WRK_THREADS=2 bash "$here/plaintext.sh"
echo "== 3/3 /delay?ms=1000, 10,000 connections"
DURATION=30 CASES="epoll:10000 uring:10000" bash "$here/s1_mini.sh"
