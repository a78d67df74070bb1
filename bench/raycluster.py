"""A real single-node Ray cluster on loopback, for the tests and the Ray benchmark.

``start_cluster()`` runs ``ray start --head --block`` on 127.0.0.1 with its own temp folder and
worker cache, waits until a driver can connect (directly and through Ray Client) and sees the
head's CPUs, and returns the address; ``stop()`` ends the head and every Ray process it started
(its process group).

Run alone to start one and keep it until Ctrl+C (then point ``ray_address`` at it)::

    python -m bench.raycluster
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.daemon import free_port


@dataclass
class Cluster:
    address: str  # host:port of the head, for a driver on this machine
    client_address: str  # ray://host:port, Ray Client (how a machine outside connects)
    proc: subprocess.Popen
    temp: Path
    cache: Path
    log: Path

    def workers(self) -> list[int]:
        """Pids of this cluster's task workers (``ray::`` processes) now alive."""
        import psutil

        head = psutil.Process(self.proc.pid)
        return [
            p.pid
            for p in head.children(recursive=True)
            if p.is_running() and any("ray::" in part for part in p.cmdline()[:1])
        ]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)  # the head often lingers; nothing here needs saving
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # the raylet's children (workers) may outlive the head by a moment
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)


# the ports Ray takes when none is given; a port we pick must not be one of them
_RAY_DEFAULT_PORTS = {6379, 8265, 10001, 52365}


def _ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports, none of them one of Ray's fixed defaults (a GCS port
    that the OS happened to pick as 52365 once collided with the dashboard agent's)."""
    chosen: list[int] = []
    while len(chosen) < n:
        port = free_port()
        if port not in chosen and port not in _RAY_DEFAULT_PORTS:
            chosen.append(port)
    return chosen


def start_cluster(
    num_cpus: int = 2, cache: Path | None = None, object_store_mb: int = 256, timeout: float = 180
) -> Cluster:
    """Start the head; ``cache`` becomes the workers' CLAWD_WORKER_CACHE."""
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's sockets live here
    cache = cache or temp / "worker-cache"
    port, client_port, agent_port = _ports(3)
    ray = Path(sys.executable).with_name("ray")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "CLAWD_WORKER_CACHE": str(cache)}
    log = temp / "head.log"
    proc = subprocess.Popen(
        [
            str(ray),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            f"--ray-client-server-port={client_port}",
            f"--dashboard-agent-listen-port={agent_port}",
            f"--num-cpus={num_cpus}",
            "--num-gpus=0",
            f"--object-store-memory={object_store_mb * 1024 * 1024}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        env=env,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stop() ends all of it
    )
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}: {log.read_text()}")
        # the GCS comes up first, Ray Client's server after it: a ray:// driver needs both
        if _listening(port) and _listening(client_port):
            break
        time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError(f"Ray head not up after {timeout}s: {log.read_text()}")
    cluster = Cluster(address, f"ray://127.0.0.1:{client_port}", proc, temp, cache, log)
    # and the raylet must have registered its CPUs, or a driver sees an empty cluster
    left = max(deadline - time.monotonic(), 10.0)
    if not _registered(address, num_cpus, left):
        text = log.read_text()
        cluster.stop()
        raise RuntimeError(f"Ray head showed no {num_cpus} CPUs within {left:.0f}s: {text}")
    return cluster


_WAIT_FOR_CPUS = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + float(sys.argv[3])
while ray.cluster_resources().get("CPU", 0) < float(sys.argv[2]):
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.2)
"""


def _registered(address: str, num_cpus: int, timeout: float) -> bool:
    """Whether a driver connecting to ``address`` sees ``num_cpus`` CPUs within ``timeout``
    seconds (in a child process, so this process never becomes a Ray driver)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _WAIT_FOR_CPUS, address, str(num_cpus), str(timeout)],
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
            capture_output=True,
            timeout=timeout + 60,  # the driver's own start, on a busy machine
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    cluster = start_cluster()
    print(f"Ray cluster at {cluster.address} and {cluster.client_address} (Ctrl+C stops it)")
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C is how it is meant to end
            cluster.proc.wait()
    finally:
        cluster.stop()
