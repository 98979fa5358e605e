#!/usr/bin/env python3
"""Slow and idle clients against `drift serve` (issue 37, item 5; docs/security.md, "Slow and
odd clients").

Opens SLOW connections that send a request's headers one byte at a time (a byte every
--byte-every seconds, never finishing the head) and IDLE connections that send nothing, while
asking GET /health every half second on fresh connections. Reports how many of each the server
closed, and when (seconds after they opened), and how /health answered meanwhile.

    scripts/slow-clients.py --addr 127.0.0.1:8080 [--slow 200] [--idle 500] [--limit 90]

Either give --addr of a running server, or --serve CONFIG (and --drift BINARY, default
`drift` on PATH) to start `drift serve --config CONFIG` (its `api.listen` may use port 0) and
stop it at the end. The process needs a file-descriptor limit above SLOW + IDLE + a few (the
script raises its own soft limit up to the hard one; `ulimit -n` for the server). Exits 1 when a
connection was still open after --limit seconds or /health failed, 0 otherwise.

Only the Python standard library is used.
"""

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import time


async def slow_client(host, port, byte_every, limit, started):
    """A client that sends headers slowly; the time the server closed it, or None."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return ("refused", time.monotonic() - started)
    opened = time.monotonic()
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100_000
    i = 0
    try:
        while time.monotonic() - opened < limit:
            writer.write(head[i : i + 1])
            i += 1
            await writer.drain()
            try:
                data = await asyncio.wait_for(reader.read(1024), timeout=byte_every)
                if not data:
                    return ("closed", time.monotonic() - opened)
                return ("answered", time.monotonic() - opened)
            except asyncio.TimeoutError:
                continue
    except (ConnectionError, OSError):
        return ("closed", time.monotonic() - opened)
    finally:
        writer.close()
    return ("open", None)


async def idle_client(host, port, limit, started):
    """A client that sends nothing; the time the server closed it, or None."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return ("refused", time.monotonic() - started)
    opened = time.monotonic()
    try:
        data = await asyncio.wait_for(reader.read(1024), timeout=limit)
        return ("closed" if not data else "answered", time.monotonic() - opened)
    except asyncio.TimeoutError:
        return ("open", None)
    except (ConnectionError, OSError):
        return ("closed", time.monotonic() - opened)
    finally:
        writer.close()


async def health(host, port, stop):
    """GET /health every half second until `stop`; (status, seconds) of each."""
    out = []
    while not stop.is_set():
        t = time.monotonic()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=5)
            writer.write(f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), timeout=5)
            writer.close()
            status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
        except (OSError, asyncio.TimeoutError, ValueError, IndexError):
            status = 0
        out.append((status, time.monotonic() - t))
        try:
            await asyncio.wait_for(stop.wait(), timeout=0.5)
        except asyncio.TimeoutError:
            pass
    return out


def describe(name, results):
    closed = sorted(t for kind, t in results if kind == "closed")
    counts = {k: sum(1 for kind, _ in results if kind == k) for k in ("closed", "open", "answered", "refused")}
    line = f"{name}: {len(results)} opened, {counts['closed']} closed by the server"
    if closed:
        line += (
            f" after {closed[0]:.2f} s (first), {statistics.median(closed):.2f} s (median),"
            f" {closed[-1]:.2f} s (last)"
        )
    for k in ("open", "answered", "refused"):
        if counts[k]:
            line += f"; {counts[k]} {k}"
    return line, counts


async def main_async(args, host, port):
    started = time.monotonic()
    stop = asyncio.Event()
    health_task = asyncio.create_task(health(host, port, stop))
    slow = [asyncio.create_task(slow_client(host, port, args.byte_every, args.limit, started)) for _ in range(args.slow)]
    idle = [asyncio.create_task(idle_client(host, port, args.limit, started)) for _ in range(args.idle)]
    slow_results = await asyncio.gather(*slow)
    idle_results = await asyncio.gather(*idle)
    stop.set()
    checks = await health_task
    return slow_results, idle_results, checks, time.monotonic() - started


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", help="host:port of a running drift serve")
    p.add_argument("--serve", metavar="CONFIG", help="start drift serve --config CONFIG")
    p.add_argument("--drift", default="drift", help="the drift binary (with --serve)")
    p.add_argument("--slow", type=int, default=200, help="connections sending headers slowly")
    p.add_argument("--idle", type=int, default=500, help="connections sending nothing")
    p.add_argument("--byte-every", type=float, default=1.0, help="seconds between two bytes of a slow client")
    p.add_argument("--limit", type=float, default=90.0, help="seconds after which an open connection counts as never closed")
    args = p.parse_args()
    if bool(args.addr) == bool(args.serve):
        p.error("give --addr or --serve")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.slow + args.idle + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    server = None
    addr = args.addr
    if args.serve:
        server = subprocess.Popen([args.drift, "serve", "--config", args.serve], stdout=subprocess.PIPE, text=True)
        for line in server.stdout:
            if line.startswith("listening on "):
                addr = line.split()[-1]
                break
        if not addr:
            print("drift serve did not start", file=sys.stderr)
            return 2
    host, port = addr.rsplit(":", 1)
    try:
        slow, idle, checks, took = asyncio.run(main_async(args, host, int(port)))
    finally:
        if server:
            server.terminate()
            server.wait(timeout=60)

    print(f"{args.slow} slow clients (a header byte every {args.byte_every} s), {args.idle} idle clients, against {addr}:")
    slow_line, slow_counts = describe("slow headers", slow)
    idle_line, idle_counts = describe("idle", idle)
    print(slow_line)
    print(idle_line)
    ok = [t for status, t in checks if status == 200]
    failed = len(checks) - len(ok)
    print(
        f"/health: {len(checks)} requests during the run, {len(ok)} answered 200"
        + (f" (slowest {max(ok) * 1000:.0f} ms, median {statistics.median(ok) * 1000:.0f} ms)" if ok else "")
        + (f", {failed} failed" if failed else "")
    )
    print(f"run: {took:.1f} s")
    still_open = slow_counts["open"] + idle_counts["open"]
    return 1 if still_open or failed or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
