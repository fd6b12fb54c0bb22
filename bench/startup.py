#!/usr/bin/env python3
"""Start-up and idle cost of `magnetar standalone` and of `magnetar start
--ephemeral`, against nats-server with JetStream measured in the same run
when it is installed (Debian package nats-server).

For each broker, N times on one data directory: exec it, poll its health
endpoint every 0.2 ms until it answers 200 (time to ready), let it idle, read
its resident memory and the CPU time it used while idle, then SIGTERM it and
time the exit. The first run starts on an empty directory (first start,
which creates the default tenant and namespaces); the others are restarts.
An ephemeral node is ready when it prints its JSON line, and every one of
its runs is a first start in a directory of its own under TMPDIR.

    bench/startup.py [--runs 10] [--idle 3] [--json]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))

from memory_watch import rss_bytes  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=0.5) as r:
            return r.status == 200
    except Exception:
        return False


def wait_port(port, deadline):
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.05):
                return True
        except OSError:
            time.sleep(0.0002)
    return False


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def measure(argv, port, health_path, idle_s):
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = t0 + 10
    url = f"http://127.0.0.1:{port}{health_path}"
    ready = None
    while time.monotonic() < deadline:
        if wait_port(port, deadline) and health_ok(url):
            ready = time.monotonic() - t0
            break
    if ready is None:
        proc.kill()
        raise RuntimeError(f"{argv[0]} did not become healthy")
    return idle_then_stop(proc, ready, idle_s)


def idle_then_stop(proc, ready, idle_s):
    time.sleep(0.5)
    cpu0 = cpu_seconds(proc.pid)
    time.sleep(idle_s)
    idle_cpu = (cpu_seconds(proc.pid) - cpu0) / idle_s
    rss = rss_bytes(proc.pid)
    t1 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=20)
    return {"ready_ms": ready * 1000, "rss_mb": rss / 2**20, "idle_cpu_pct": idle_cpu * 100,
            "stop_ms": (time.monotonic() - t1) * 1000, "exit_code": code}


def magnetar(binary, d, idle_s):
    port = free_port()
    return measure([binary, "standalone", "--data-dir", d, "--http-port", str(port),
                    "--pulsar-port", "0", "--kafka-port", "0", "--amqp-port", "0",
                    "--log-level", "warn"], port, "/admin/v2/brokers/health", idle_s)


def magnetar_ephemeral(binary, d, idle_s):
    """`magnetar start --ephemeral` with TMPDIR=d: ready is its JSON line on
    stdout (every listener bound); every run is a first start in a new
    directory, which must be gone once the process exited."""
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, "start", "--ephemeral"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, TMPDIR=d))
    line = proc.stdout.readline()
    ready = time.monotonic() - t0
    if not line:
        raise RuntimeError(f"{binary} start --ephemeral exited with {proc.wait(10)} before its JSON line")
    data_dir = json.loads(line)["dataDir"]
    result = idle_then_stop(proc, ready, idle_s)
    proc.stdout.close()
    if os.path.exists(data_dir):
        raise RuntimeError(f"{data_dir} is still there after the node exited")
    return result


def nats(binary, d, idle_s):
    port = free_port()
    return measure([binary, "-js", "-sd", d, "-a", "127.0.0.1", "-p", str(free_port()),
                    "-m", str(port)], port, "/healthz", idle_s)


def summarize(runs):
    first, rest = runs[0], runs[1:] or runs
    out = {k: statistics.median(r[k] for r in rest) for k in first if k != "exit_code"}
    out["first_start_ready_ms"] = first["ready_ms"]
    out["exit_codes"] = sorted({r["exit_code"] for r in runs})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--idle", type=float, default=3.0, help="seconds of idling measured per run")
    ap.add_argument("--binary", default=os.environ.get("MAGNETAR_BIN", os.path.join(ROOT, "build", "magnetar")))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    results = {}
    contenders = [("magnetar", lambda d: magnetar(args.binary, d, args.idle)),
                  ("magnetar --ephemeral", lambda d: magnetar_ephemeral(args.binary, d, args.idle))]
    nats_bin = shutil.which("nats-server")
    if nats_bin:
        contenders.append(("nats-server -js", lambda d: nats(nats_bin, d, args.idle)))
    for name, fn in contenders:
        runs = []
        d = tempfile.mkdtemp(prefix="startup-bench-")
        try:
            for i in range(args.runs):
                if not args.json:
                    print(f"\r{name}: run {i + 1}/{args.runs}", end="", flush=True)
                runs.append(fn(d))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if not args.json:
            print()
        results[name] = summarize(runs)

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"\nfirst start, then medians of {max(args.runs - 1, 1)} restarts, {args.idle:.0f} s idle each")
    print(f"{'':22}{'first ms':>10}{'ready ms':>10}{'RSS MB':>10}{'idle CPU %':>12}{'stop ms':>10}  exit")
    for name, r in results.items():
        print(f"{name:22}{r['first_start_ready_ms']:10.1f}{r['ready_ms']:10.1f}{r['rss_mb']:10.1f}"
              f"{r['idle_cpu_pct']:12.2f}{r['stop_ms']:10.1f}  {r['exit_codes']}")
    if "nats-server -js" in results:
        m, n = results["magnetar"], results["nats-server -js"]
        print(f"\nmagnetar / nats: ready {m['ready_ms'] / n['ready_ms']:.2f}x, RSS {m['rss_mb'] / n['rss_mb']:.2f}x")


if __name__ == "__main__":
    main()
