"""The deployment files say what runs: valid Kubernetes manifests and compose commands the real CLI accepts."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import kubernetes_validate
import pytest
import yaml

from qsite.config import load_config
from qsite.cli import cli

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def parse_qsite(argv: list[str]) -> str:
    """Parse ``argv`` with the real ``qsite`` command, without running it; returns the command path.

    :raises click.UsageError: an unknown command or option, as ``qsite`` itself would refuse it.
    """
    assert argv[0] == "qsite", argv
    command, args, names = cli, list(argv[1:]), []
    ctx = cli.make_context("qsite", list(args))
    while isinstance(command, click.Group):
        name, command, args = command.resolve_command(ctx, args)
        names.append(name)
        ctx = command.make_context(name, list(args), parent=ctx)
    return " ".join(names)


def containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    template = spec.get("jobTemplate", {}).get("spec", spec).get("template", {})
    return template.get("spec", {}).get("containers", [])


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: path.name)
def test_kubernetes_manifests_validate_strictly(path):
    for doc in documents(path):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_sketch_runs_the_commands_run_here(tmp_path):
    commands = {
        parse_qsite(container["command"]): container["command"]
        for path in MANIFESTS
        for doc in documents(path)
        for container in containers(doc)
        if container["command"][0] == "qsite"
    }
    assert set(commands) == {"serve", "ingest all"}
    assert "--follow" in commands["serve"] and "--publish" in commands["ingest all"]
    (config_map,) = [doc for doc in documents(ROOT / "deploy" / "k8s" / "config.yaml") if doc["kind"] == "ConfigMap"]
    (tmp_path / "qsite.yml").write_text(config_map["data"]["qsite.yml"])
    config = load_config(tmp_path / "qsite.yml")
    assert config.snapshots.store.startswith("s3://")


def test_compose_runs_the_commands_run_here():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert parse_qsite(services["writer"]["command"]) == "schedule"
    assert parse_qsite(services["api"]["command"]) == "serve" and "--follow" in services["api"]["command"]
    assert services["store"]["command"][0] == "mini"  # SeaweedFS, as `make cluster` runs it
    config = load_config(ROOT / "deploy" / "qsite.yml")
    assert config.snapshots.store.startswith("s3://") and config.snapshots.endpoint_url == "http://store:8333"
    assert config.api.rate_limit_storage.startswith("redis://")


def test_the_image_alone_ingests_and_serves_with_nothing_else():
    """The Dockerfile's default command and config make one container a whole deployment."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    (config_path,) = re.findall(r"^ +QSITE_CONFIG=(\S+) \\$", dockerfile, re.MULTILINE)  # in ENV
    assert config_path.startswith("/app/")
    config = load_config(ROOT / config_path.removeprefix("/app/"))
    # nothing a lone container lacks: no compose service, no store to publish to
    assert config.snapshots.store is None
    assert config.api.rate_limit_storage == "memory://"
    assert str(config.database_path).startswith("/data/")
    (cmd,) = re.findall(r"^CMD (.+)$", dockerfile, re.MULTILINE)
    shell, flag, script = json.loads(cmd)
    assert (shell, flag) == ("sh", "-c")
    argv = shlex.split(script.replace('"$QSITE_PORT"', "8001"))
    assert argv[0] == "exec"
    assert parse_qsite(argv[1:]) == "up"  # migrates, ingests once, schedules and serves
    # compose and the Kubernetes sketch name their own config, not the image's
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["x-qsite"]["environment"]["QSITE_CONFIG"] == "/app/deploy/qsite.yml"
    for path in MANIFESTS:
        for doc in documents(path):
            for container in containers(doc):
                if container["command"][0] == "qsite":
                    assert {"name": "QSITE_CONFIG", "value": "/etc/qsite/qsite.yml"} in container["env"]


def test_a_command_the_cli_does_not_know_is_refused():
    with pytest.raises(click.UsageError):
        parse_qsite(["qsite", "serve", "--folow"])
    with pytest.raises(click.UsageError):
        parse_qsite(["qsite", "publish-all"])
