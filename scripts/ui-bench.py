#!/usr/bin/env python3
"""Page weight and time to first render of the page of `drift serve`, on loopback.

Starts `drift serve` over the demo (examples/demo: a folder of manifests and a snapshot of the
cluster, SQLite, 8 drifts), fetches every asset of the page (bytes as served, and gzip -9 as a
compressing proxy would send them), then loads the page N times in a fresh headless Chromium
through chromedriver (WebDriver over HTTP, Python's standard library only) and reads the
browser's own timings: first contentful paint (the page's frame drawn) and the `drift:rendered`
mark (the overview drawn with the API's data). Prints medians and the machine's load.

    scripts/ui-bench.py [--drift PATH] [--loads N]

The drift binary defaults to $CARGO_TARGET_DIR/release/drift (build it with
`cargo build --release -p drift-bin`). Needs chromium and chromedriver (apt-get install chromium
chromium-driver). Results: docs/benchmarks.md.
"""

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = ["/", "/ui/app.js", "/ui/app.css", "/ui/icon.svg"]


def webdriver(addr, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{addr}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"null")["value"]


def start_serve(binary, workdir):
    cfg = os.path.join(workdir, "drift.yaml")
    with open(cfg, "w") as f:
        f.write(
            f"cluster: demo\ninterval: 1h\nwatch: false\ndatabase: sqlite://{workdir}/drift.db\n"
            f"api:\n  listen: 127.0.0.1:0\nrepositories:\n  - name: demo\n"
            f"    url: {ROOT}/examples/demo/desired\nlive:\n  snapshot: {ROOT}/examples/demo/live\n")
    proc = subprocess.Popen([binary, "serve", "--config", cfg], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        sys.exit(f"drift serve did not start: {line!r}")
    addr = line.removeprefix("listening on ")
    deadline = time.time() + 60
    while time.time() < deadline:
        with urllib.request.urlopen(f"http://{addr}/drifts?status=open") as r:
            if len(json.load(r)["items"]) == 8:
                return proc, addr
        time.sleep(0.1)
    proc.kill()
    sys.exit("the first pass was not recorded within 60 s")


def weight(addr):
    rows = []
    for path in ASSETS:
        with urllib.request.urlopen(f"http://{addr}{path}") as r:
            body = r.read()
        rows.append((path, len(body), len(gzip.compress(body, compresslevel=9))))
    return rows


def start_browser(profile):
    driver = subprocess.Popen(["chromedriver", "--port=0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    while True:
        line = driver.stdout.readline()
        if not line:
            sys.exit("chromedriver ended before saying its port")
        if "started successfully on port " in line:
            port = line.rsplit(" ", 1)[1].strip().rstrip(".")
            break
    addr = f"127.0.0.1:{port}"
    caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
        "binary": "/usr/bin/chromium",
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--window-size=1280,1000", f"--user-data-dir={profile}"]}}}}
    session = webdriver(addr, "POST", "/session", caps)["sessionId"]
    return driver, addr, session


TIMINGS = """
const paint = performance.getEntriesByName('first-contentful-paint')[0];
const mark = performance.getEntriesByName('drift:rendered')[0];
const nav = performance.getEntriesByType('navigation')[0];
if (!paint || !mark) return null;
return {fcp: paint.startTime, rendered: mark.startTime, dcl: nav.domContentLoadedEventEnd,
        transfer: performance.getEntriesByType('resource').reduce((a, r) => a + r.transferSize, nav.transferSize)};
"""


def load(addr, session, url):
    webdriver(addr, "POST", f"/session/{session}/url", {"url": "about:blank"})
    webdriver(addr, "POST", f"/session/{session}/url", {"url": url})
    deadline = time.time() + 30
    while time.time() < deadline:
        t = webdriver(addr, "POST", f"/session/{session}/execute/sync", {"script": TIMINGS, "args": []})
        if t:
            return t
        time.sleep(0.02)
    sys.exit(f"{url}: no render within 30 s")


def main():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--drift", default=os.path.join(target, "release", "drift"))
    p.add_argument("--loads", type=int, default=20)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        serve, addr = start_serve(args.drift, work)
        driver = None
        try:
            rows = weight(addr)
            print("asset            bytes   gzip -9")
            for path, raw, gz in rows:
                print(f"{path:14} {raw:7} {gz:9}")
            print(f"{'total':14} {sum(r[1] for r in rows):7} {sum(r[2] for r in rows):9}")
            load_before = os.getloadavg()
            driver, wd, session = start_browser(os.path.join(work, "profile"))
            # The first load fills the cache (ETag); the others revalidate (304), as a user's do.
            first = load(wd, session, f"http://{addr}/")
            runs = [load(wd, session, f"http://{addr}/?load={i}") for i in range(args.loads)]
            load_after = os.getloadavg()
            med = lambda k: statistics.median(r[k] for r in runs)
            print(f"first load (cold cache): first contentful paint {first['fcp']:.0f} ms, "
                  f"overview with data {first['rendered']:.0f} ms, {first['transfer']} bytes transferred")
            print(f"median of {args.loads} loads (warm cache): first contentful paint {med('fcp'):.0f} ms, "
                  f"DOMContentLoaded {med('dcl'):.0f} ms, overview with data {med('rendered'):.0f} ms "
                  f"(min {min(r['rendered'] for r in runs):.0f}, max {max(r['rendered'] for r in runs):.0f}), "
                  f"{med('transfer'):.0f} bytes transferred")
            print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
                  f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
                  f"binary {args.drift}")
            webdriver(wd, "DELETE", f"/session/{session}")
        finally:
            if driver:
                driver.kill()
            serve.terminate()
            serve.wait()


if __name__ == "__main__":
    main()
