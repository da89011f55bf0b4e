#!/usr/bin/env python3
"""Runs one of wgml's wasm programs in headless Chromium (WebGPU on Dawn) and exits with its
status: serves the source tree over HTTP on 127.0.0.1, opens web/run.html in a fresh headless
Chromium with WebGPU enabled, prints what the program writes as it comes, and fails on a
console error or warning from the page (Dawn's validation messages go there).

    run_browser.py [--file VPATH=PATH ...] [--env K=V ...] [--limit NAME=VALUE ...] \
                   [--timeout S] PROGRAM.wasm [ARGS...]

PATH (a file under the source tree) is put at VPATH in the program's file system before it
starts; PATH:N puts its first N bytes only (a truncated file). open_page() opens any page of
the tree the same way (tests/web/test_api.py: the JavaScript API's page). Only the Python standard
library and Debian's chromium are used."""
import argparse
import http.server
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    sys.exit("run_browser: no chromium on PATH (scripts/setup.sh installs Debian's chromium)")


def url_of(path):
    head = ""
    if re.search(r":\d+$", path):
        path, n = path.rsplit(":", 1)
        head = "?head=" + n
    p = Path(path).resolve()
    try:
        return "/" + urllib.parse.quote(str(p.relative_to(ROOT))) + head
    except ValueError:
        sys.exit("run_browser: %s is not under %s (the server serves the source tree only)" % (p, ROOT))


class Handler(http.server.SimpleHTTPRequestHandler):
    events = None

    def __init__(self, *a, **k):
        super().__init__(*a, directory=str(ROOT), **k)

    def log_message(self, *a):
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def guess_type(self, path):
        return "application/wasm" if str(path).endswith(".wasm") else super().guess_type(path)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        head = urllib.parse.parse_qs(url.query).get("head")
        if not head:
            return super().do_GET()
        data = (ROOT / urllib.parse.unquote(url.path).lstrip("/")).read_bytes()[:int(head[0])]
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.events.put(json.loads(self.rfile.read(n) or b"{}"))
        self.send_response(204)
        self.end_headers()


CONSOLE = re.compile(r":CONSOLE\(\d+\)\] \"(.*)\", source: (\S*)")


def open_page(page, params, timeout=600, echo=True):
    """Opens PAGE (a path under the source tree) in a fresh headless Chromium with params (a dict,
    JSON-encoded into the query; "report" is added) and follows its reports until it exits: the
    exit status (124 when the page says nothing for timeout seconds, 134 when it fails), the
    values of its "result" reports, and the WebGPU messages its console logged."""
    events = queue.Queue()
    Handler.events = events
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    q = urllib.parse.urlencode({**{k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()},
                                "report": base + "/report"})
    profile = tempfile.mkdtemp(prefix="wgml-chromium-")
    log = open(os.path.join(profile, "chromium.log"), "w+")
    cmd = [chromium(), "--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--no-first-run",
           "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0", "--remote-debugging-port=0",
           base + url_of(str(ROOT / page)) + "?" + q]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    code, results = None, []
    try:
        while code is None:
            try:
                ev = events.get(timeout=timeout)
            except queue.Empty:
                print("\nrun_browser: no word from the page for %.0f s: stopped" % timeout, flush=True)
                code = 124
                break
            kind = ev.get("type")
            if kind == "out" and echo:
                (sys.stdout if ev.get("fd") == 1 else sys.stderr).write(ev["text"])
                (sys.stdout if ev.get("fd") == 1 else sys.stderr).flush()
            elif kind == "result":
                results.append(ev.get("value"))
            elif kind == "exit":
                code = ev["code"]
                print("\nrun_browser: %s exited with %d after %.1f s in Chromium" % (ev.get("name", page), code, ev["ms"] / 1000),
                      flush=True)
            elif kind == "error":
                print("\nrun_browser: the page failed: %s" % ev["message"], flush=True)
                code = 134
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        server.shutdown()
        log.seek(0)
        messages = [m for m in CONSOLE.findall(log.read())]
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
    bad = [(msg, src) for msg, src in messages if "WebGPU" in msg or "WGSL" in msg or "warning" in msg.lower()]
    for msg, src in bad:
        print("run_browser: console: %s (%s)" % (msg, src), flush=True)
    if bad and code == 0:
        print("run_browser: the page logged %d WebGPU message(s): failed" % len(bad), flush=True)
        code = 1
    return code, results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--limit", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("program")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()

    files = {}
    for spec in a.file:
        vpath, _, path = spec.partition("=")
        files[vpath] = url_of(path)
    env = dict(kv.split("=", 1) for kv in a.env)
    name = Path(a.program).stem
    code, _ = open_page("web/run.html", {"wasm": url_of(a.program), "args": [name] + a.args, "env": env,
                                         "files": files, "limits": limits_of(a.limit), "name": name}, a.timeout)
    sys.exit(code)


def limits_of(specs):
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in specs)}


if __name__ == "__main__":
    main()
