"""Headless Chromium, driven over the DevTools protocol, for the tests whose client is a browser."""

import base64
import json
import shutil
import subprocess
import time
import urllib.request

import websocket

from support import processes, servers

FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests may run as root, where the sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
    # Only loopback exists for this browser: a page that reached for any other host would
    # fail to load something, and the request log below would show it.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",  # Chromium picks a free port and writes it to DevToolsActivePort
)
MISSING = (
    "chromium not found: the browser tests need Debian's chromium package "
    "(apt-get install chromium; scripts/test installs it when run as root or with CI=true)"
)


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """One headless browser with one tab; the URLs the tab requests since it last opened a
    page are in `requests`, its console and browser messages in `console`."""

    def __init__(self, tmp_path, timeout: float = 20, flags: tuple = ()):
        servers.refuse_in_fast_lane("Chromium")
        binary = find_chromium()
        if binary is None:
            raise RuntimeError(MISSING)
        profile = tmp_path / "chromium-profile"
        self.log_path = tmp_path / "chromium.log"
        self.log = open(self.log_path, "wb")
        self.requests: list[str] = []
        self.console: list[str] = []
        self.socket = None
        self._last_id = 0
        self._loaded = False
        # A session of its own, so that stopping it ends its renderer and helper processes too.
        self.process = subprocess.Popen(
            [binary, *FLAGS, *flags, f"--user-data-dir={profile}", "about:blank"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            port = self._wait_for_port(profile / "DevToolsActivePort", timeout)
            self.socket = websocket.create_connection(
                self._page_socket_url(port, timeout), timeout=timeout, suppress_origin=True
            )
            for domain in ("Log", "Network", "Page", "Runtime"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _wait_for_port(self, path, timeout: float) -> int:
        def written() -> bool:
            return path.exists() and path.read_text().split("\n", 1)[0].isdigit()

        if processes.started(self.process, written, timeout):
            return int(path.read_text().split("\n", 1)[0])
        if self.process.poll() is not None:
            raise RuntimeError(f"chromium exited:\n{self.log_path.read_text(errors='replace')}")
        raise RuntimeError(f"chromium did not open its DevTools port:\n{self.log_path.read_text(errors='replace')}")

    def _page_socket_url(self, port: int, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as response:
                pages = [t for t in json.load(response) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.05)
        raise RuntimeError("chromium opened no tab")

    def call(self, method: str, **params):
        """Send one DevTools command and return its result; events that come first are kept."""
        self._last_id += 1
        self.socket.send(json.dumps({"id": self._last_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self._last_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self._event(message.get("method"), message.get("params", {}))

    def _event(self, method, params):
        if method == "Page.loadEventFired":
            self._loaded = True
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            self.console.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Log.entryAdded":  # the browser's own messages, e.g. a CORS refusal
            self.console.append(params["entry"]["text"])

    def open(self, url: str, timeout: float = 20):
        """Navigate the tab and wait for the new page's load event; the logs start afresh."""
        self._loaded = False
        self.requests.clear()
        self.console.clear()
        result = self.call("Page.navigate", url=url)
        if "errorText" in result:
            raise RuntimeError(f"{url}: {result['errorText']}")
        deadline = time.monotonic() + timeout
        while not self._loaded:
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} did not finish loading in {timeout} s")
            message = json.loads(self.socket.recv())
            self._event(message.get("method"), message.get("params", {}))

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the tab (promises are awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20):
        """Poll until the expression is truthy; on time-out fail with what the page shows."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        text = self.evaluate("document.body ? document.body.innerText.slice(0, 2000) : ''")
        raise AssertionError(
            f"timed out after {timeout} s waiting for {expression}\n"
            f"page text: {text!r}\nconsole: {self.console}\nrequests: {self.requests}"
        )

    def resize(self, width: int, height: int, mobile: bool = False):
        """Make the tab a screen of this size (a phone's with mobile: touch, small viewport); on
        return the page has seen it and its resize handlers have run."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=2 if mobile else 1,
            mobile=mobile,
        )
        self._settle(f"innerWidth === {width} && innerHeight === {height}")

    def color_scheme(self, scheme: str):
        """Make the page see the user's preference for a "light" or "dark" colour scheme; on
        return its handlers of the change have run."""
        self.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": scheme}])
        self._settle(f"matchMedia('(prefers-color-scheme: {scheme})').matches")

    def _settle(self, seen: str):
        """Wait until the page sees a change (`seen` is true), then two frames: a frame
        dispatches the resize and media-change events before its animation-frame callbacks."""
        frames = "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"
        self.wait_for(f"({seen}) && {frames}")

    def screenshot(self, path, full_page: bool = False, scale: float = 1, max_height: int | None = None):
        """Save what the tab shows as a PNG file (the whole page with full_page, at most
        max_height CSS pixels of it), its CSS pixels times `scale` (times the screen's pixel ratio)."""
        params = {"format": "png"}
        if full_page or scale != 1:
            width, height = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
                if full_page
                else "[innerWidth, innerHeight]"
            )
            clip = {"x": 0, "y": 0, "width": width, "height": min(height, max_height or height), "scale": scale}
            params.update(captureBeyondViewport=full_page, clip=clip)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))
        return path

    def close(self):
        if self.socket is not None:
            self.socket.close()
        # The whole session: renderers and helpers may outlive the browser process.
        processes.stop(self.process, timeout=10, group=True)
        self.log.close()
