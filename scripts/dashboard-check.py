#!/usr/bin/env python3
"""The dashboard in a real headless browser: Playwright driving Debian's
Chromium (apt-get install chromium; pip install playwright).

Starts `causeway up` (2 DCs x 2 partitions, metrics ports), opens the page,
checks it shows every node ready, runs `causeway bench` against the cluster
and checks the page's numbers move; saves target/dashboard.png (the CI
artifact). Runs the binary $CAUSEWAY names (default: the release build,
target/release/causeway). Exits non-zero on failure.
"""
import os, random, shutil, socket, subprocess, sys, tempfile, time, urllib.request
from playwright.sync_api import sync_playwright

causeway = os.environ.get("CAUSEWAY", "target/release/causeway")
browser_path = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if not browser_path:
    sys.exit("dashboard-check: no chromium on PATH (apt-get install chromium)")
work = tempfile.mkdtemp(prefix="causeway-dash-")


def free_ports(n):
    """A base port with n free ports from it, below the kernel's ephemeral
    range (32768 on): a port drawn inside it can be taken meanwhile by an
    outgoing connection, and the node whose metrics listener then cannot bind
    shows as down (this made CI fail once)."""
    for _ in range(100):
        base = random.randint(20000, 32000 - n)
        try:
            socks = [socket.create_server(("127.0.0.1", base + i)) for i in range(n)]
        except OSError:
            continue
        for s in socks:
            s.close()
        return base
    sys.exit("dashboard-check: no free run of ports below 32000")


port = free_ports(4)
up = subprocess.Popen([causeway, "up", "-p", "causalspartanx", "--dcs", "2", "--partitions", "2", "--no-wan",
                       "--fsync", "never", "--metrics-port", str(port), "--data-dir", f"{work}/data",
                       "--config-out", f"{work}/cluster.toml"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fail(msg):
    print(f"dashboard-check: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


try:
    deadline = time.time() + 15
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port + 3}/readyz", timeout=1)
            break
        except OSError:
            if time.time() > deadline:
                fail("the cluster never became ready")
            time.sleep(0.1)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = b.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(f"http://127.0.0.1:{port}/")
        # Every node's row, and each one ready, within a few pushes.
        page.wait_for_function("document.querySelectorAll('#nodes tbody tr').length === 4", timeout=10_000)
        page.wait_for_function(
            "[...document.querySelectorAll('#nodes [data-k=state]')].every(c => c.textContent === 'ready')",
            timeout=10_000)
        print("dashboard-check: 4 nodes shown, all ready")
        ops_idle = page.inner_text("#ops")
        bench = subprocess.Popen([causeway, "bench", "--config", f"{work}/cluster.toml", "-p", "causalspartanx",
                                  "-c", "8", "--seconds", "15"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            page.wait_for_function("parseInt(document.getElementById('ops').textContent.replace(/,/g, '')) > 0",
                                   timeout=15_000)
            page.wait_for_selector("#kinds tr[data-kind=put_req]", timeout=10_000)
            # The writes land in every partition's log: its size shows in bytes.
            page.wait_for_function(
                "[...document.querySelectorAll('#nodes [data-k=log]')].every(c => /^[1-9][0-9.]* (B|KiB|MiB|GiB)$/.test(c.textContent))",
                timeout=10_000)
            print("dashboard-check: log sizes shown: " + ", ".join(
                c.inner_text() for c in page.query_selector_all("#nodes [data-k=log]")))
            time.sleep(3)  # a few points on the plots for the screenshot
            ops = page.inner_text("#ops")
            p99 = page.inner_text("#p99")
            print(f"dashboard-check: under load the page shows {ops} ops/s (idle: {ops_idle}), request p99 {p99}")
            os.makedirs("target", exist_ok=True)
            page.screenshot(path="target/dashboard.png", full_page=True)
            print("dashboard-check: screenshot in target/dashboard.png")
        finally:
            bench.terminate()
            bench.wait()
        # Stopping a node shows it down.
        b.close()
    print("dashboard-check passed")
finally:
    up.terminate()
    up.wait()
    shutil.rmtree(work, ignore_errors=True)
