"""Headless Chromium driven over the DevTools protocol, for the web UI's
test (webui_e2e_test.py) and scripts/webui-screenshots: a child process
whose log is read line by line, a page session (calls, evaluation, bounded
DOM waits, keys, screenshots), and Chromium's start.

Every wait is a bounded poll of the DOM (in the page, on animation frames)
or of a process's log; nothing sleeps.
"""
import base64
import json
import queue
import re
import shutil
import subprocess
import sys
import threading
import urllib.request


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


class LogProcess:
    """A child process whose stderr lines are read into a queue."""

    def __init__(self, argv, **kwargs):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True,
                                     **kwargs)
        self.lines = queue.Queue()
        self.log = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern, timeout_s):
        """Returns the first match of `pattern` in a new log line."""
        while True:
            try:
                line = self.lines.get(timeout=timeout_s)
            except queue.Empty:
                line = None
            if line is None:
                fail(f"no log line matching {pattern!r}:\n" + "".join(self.log[-30:]))
            m = re.search(pattern, line)
            if m:
                return m

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Page:
    """A DevTools protocol session on one page target."""

    def __init__(self, ws_url):
        try:
            import websocket
        except ImportError:
            fail("no python3-websocket module (scripts/install-deps installs "
                 f"it) for {sys.executable}")
        self.ws = websocket.create_connection(ws_url, timeout=60,
                                              suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method,
                                 "params": params}))
        while True:  # events in between are not needed
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    fail(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression,
                      awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            fail(f"{expression[:200]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, condition, what, timeout_ms=20000):
        """Polls `condition` (a JS expression) on each animation frame until
        it is truthy; fails naming `what` after `timeout_ms`."""
        ok = self.eval(f"""new Promise((resolve) => {{
            const t0 = performance.now();
            const check = () => {{
              let v = false;
              try {{ v = ({condition}); }} catch (e) {{}}
              if (v) resolve(typeof v === "object" ? true : v);
              else if (performance.now() - t0 > {timeout_ms}) resolve(false);
              else requestAnimationFrame(check);
            }};
            check();
          }})""")
        if not ok:
            state = self.eval("document.getElementById('server-status').textContent + ' | ' +"
                              " document.getElementById('model-name').textContent")
            fail(f"timed out waiting for {what} ({condition}); status | model: {state}")
        return ok

    def key(self, key, code, text="", modifiers=0):
        common = {"key": key, "code": code, "modifiers": modifiers,
                  "windowsVirtualKeyCode": {"Enter": 13, "Tab": 9}.get(key, 0)}
        self.call("Input.dispatchKeyEvent", type="keyDown", text=text, **common)
        self.call("Input.dispatchKeyEvent", type="keyUp", **common)

    def screenshot(self, path, selector=None):
        params = {"format": "png"}
        if selector:
            rect = self.eval(f"""(() => {{
                const r = document.querySelector('{selector}').getBoundingClientRect();
                return {{x: r.x, y: r.y, width: r.width, height: r.height}}; }})()""")
            params["clip"] = dict(rect, scale=1)
        data = self.call("Page.captureScreenshot", **params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        print(f"screenshot: {path}", flush=True)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def start_chromium(chromium, profile):
    browser = LogProcess([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                          "--disable-dev-shm-usage", "--no-first-run",
                          "--no-default-browser-check", "--remote-debugging-port=0",
                          "--remote-allow-origins=*", "--user-data-dir=" + profile,
                          "--window-size=1400,900", "about:blank"])
    port = int(browser.wait_for(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", 60).group(1))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
        targets = json.load(r)
    page = next(t for t in targets if t["type"] == "page")
    return browser, Page(page["webSocketDebuggerUrl"])
