"""A node's resident memory, read from /proc/<pid>/status (VmRSS), and a
watch that samples it on a thread while a test runs.

Tests assert that the peak stays within a budget. Past a hard cap the watch
kills the node, so that a regression fails its test instead of exhausting
the machine the tests run on. Every wait is bounded."""
import threading
import time

MB = 1024 * 1024


def rss_bytes(pid):
    """VmRSS of process `pid` in bytes; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def metric_value(node, name):
    """The sum of the samples of metric `name` on the node's /metrics; 0
    when it has none."""
    status, body, _ = node.get("/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name) and (len(line) == len(name) or line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


class RssWatch:
    """Samples a node's VmRSS every `interval_s` while in its `with` block.
    `peak` is the largest sample; past `kill_above` bytes the node is killed
    and `killed` says so."""

    def __init__(self, node, kill_above, interval_s=0.05):
        self.node = node
        self.pid = node.proc.pid
        self.kill_above = kill_above
        self.interval_s = interval_s
        self.peak = 0
        self.killed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        rss = rss_bytes(self.pid)
        self.peak = max(self.peak, rss)
        if rss > self.kill_above and not self.killed:
            self.killed = True
            self.node.proc.kill()
        return rss

    def _run(self):
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()

    def settle(self, quiet_s, most_s):
        """Waits until the peak has not grown by a MB for `quiet_s` (the node
        did what it will do), or `most_s` passed, or the node was killed."""
        deadline = time.monotonic() + most_s
        grew_at, seen = time.monotonic(), self.peak
        while time.monotonic() < deadline and time.monotonic() - grew_at < quiet_s and not self.killed:
            time.sleep(0.05)
            if self.peak > seen + MB:
                grew_at, seen = time.monotonic(), self.peak

    def describe(self):
        return f"peak VmRSS {self.peak / MB:.0f} MB" + (" (killed past the hard cap)" if self.killed else "")
