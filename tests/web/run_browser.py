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
import base64
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
    devtools = None

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
        ev = json.loads(self.rfile.read(n) or b"{}")
        if ev.get("type") == "shot" and self.devtools:  # answered when the picture is saved
            ev["path"] = self.devtools.screenshot(ev["name"])
        self.events.put(ev)
        self.send_response(204)
        self.end_headers()


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe (fds 3 and 4 of the browser:
    JSON messages ended by NUL): screenshots of the page into shots_dir."""

    def __init__(self, shots_dir):
        self.shots_dir = shots_dir
        os.makedirs(shots_dir, exist_ok=True)
        self.to_child, self.w = os.pipe()      # the browser reads commands from fd 3
        self.r, self.from_child = os.pipe()    # and writes answers to fd 4
        self.next, self.lock, self.answers = 1, threading.Lock(), {}
        self.cv = threading.Condition()
        self.session = None

    def child_fds(self):
        hi_in, hi_out = os.dup(self.to_child), os.dup(self.from_child)
        os.dup2(hi_in, 3)
        os.dup2(hi_out, 4)

    def started(self):
        os.close(self.to_child)
        os.close(self.from_child)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        buf = b""
        with os.fdopen(self.r, "rb", buffering=0) as f:
            while True:
                chunk = f.read(1 << 16)
                if not chunk:
                    break
                buf += chunk
                while b"\0" in buf:
                    msg, buf = buf.split(b"\0", 1)
                    m = json.loads(msg)
                    if "id" in m:
                        with self.cv:
                            self.answers[m["id"]] = m
                            self.cv.notify_all()

    def call(self, method, params=None, session=None):
        with self.lock:
            i = self.next
            self.next += 1
            m = {"id": i, "method": method, "params": params or {}}
            if session:
                m["sessionId"] = session
            os.write(self.w, json.dumps(m).encode() + b"\0")
        with self.cv:
            self.cv.wait_for(lambda: i in self.answers, timeout=60)
            a = self.answers.pop(i, None)
        if not a or "error" in a:
            raise RuntimeError("devtools %s: %s" % (method, a and a.get("error")))
        return a["result"]

    def screenshot(self, name):
        if not self.session:
            page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
            self.session = self.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        r = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, self.session)
        path = os.path.join(self.shots_dir, re.sub(r"[^A-Za-z0-9_-]", "_", name) + ".png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return path


CONSOLE = re.compile(r":CONSOLE\(\d+\)\] \"(.*)\", source: (\S*)")


def open_page(page, params, timeout=600, echo=True, shots_dir=None):
    """Opens PAGE (a path under the source tree) in a fresh headless Chromium with params (a dict,
    JSON-encoded into the query; "report" is added) and follows its reports until it exits: the
    exit status (124 when the page says nothing for timeout seconds, 134 when it fails), the
    values of its "result" reports, and the WebGPU messages its console logged. With shots_dir,
    a report {"type": "shot", "name": N} saves a screenshot of the page there as N.png before
    its POST is answered."""
    events = queue.Queue()
    Handler.events = events
    devtools = Handler.devtools = DevTools(shots_dir) if shots_dir else None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    q = urllib.parse.urlencode({**{k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()},
                                "report": base + "/report"})
    profile = tempfile.mkdtemp(prefix="wgml-chromium-")
    os.makedirs(os.path.join(profile, "Default"))
    with open(os.path.join(profile, "Default", "Preferences"), "w") as f:  # a page's downloads stay in the profile
        json.dump({"download": {"default_directory": os.path.join(profile, "downloads"), "prompt_for_download": False}}, f)
    log = open(os.path.join(profile, "chromium.log"), "w+")
    cmd = [chromium(), "--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--no-first-run",
           "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0", "--window-size=1100,900",
           "--remote-debugging-pipe" if devtools else "--remote-debugging-port=0", base + url_of(str(ROOT / page)) + "?" + q]
    # Chromium keeps its singleton socket in $TMPDIR and leaves it there when it is killed: inside
    # the profile, it goes with the profile
    env = dict(os.environ, TMPDIR=profile)
    if devtools:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, pass_fds=(3, 4), preexec_fn=devtools.child_fds, env=env)
        devtools.started()
    else:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
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
