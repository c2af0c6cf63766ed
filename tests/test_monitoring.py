"""What ships for monitoring (deploy/monitoring/, the scrape annotations) is checked by Prometheus's own tool:
the alert rules load and their unit tests pass, every dashboard query parses, and every metric either names
is one ``/metrics`` exposes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from qsite.service.metrics.exported import METRICS

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
#: What Grafana puts in a query before Prometheus sees it.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$instance": ".*"}
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")

pytestmark = pytest.mark.requires("promtool")


def promtool(*args: str, cwd: Path = MONITORING) -> str:
    done = subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def dashboard_queries() -> list[tuple[str, str]]:
    """``(panel title, query)`` of every panel, with Grafana's variables as Grafana fills them."""
    queries = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", ()):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            queries.append((panel["title"], expr))
    return queries


def metric_names(text: str) -> set[str]:
    names = set(re.findall(r"\bqsite_[a-z_]+", text))
    exposed = {metric.name for metric in METRICS}
    return {name for name in names if not any(name == f"{n}{s}" for n in exposed for s in SUFFIXES)} - exposed


def test_the_alert_rules_load_and_their_unit_tests_pass():
    assert "SUCCESS: 5 rules found" in promtool("check", "rules", "alerts.yml")
    promtool("test", "rules", "alerts.test.yml")


def test_every_dashboard_query_parses_and_names_only_metrics_qsite_exposes(tmp_path):
    queries = dashboard_queries()
    assert len(queries) >= 15
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{number}", "expr": expr} for number, (_title, expr) in enumerate(queries)
    ]}]}
    (tmp_path / "dashboard-rules.yml").write_text(yaml.safe_dump(rules))
    promtool("check", "rules", "dashboard-rules.yml", cwd=tmp_path)
    assert metric_names(DASHBOARD.read_text()) == set()
    assert metric_names((MONITORING / "alerts.yml").read_text()) == set()


def test_the_dashboard_shows_what_operators_need():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    text = DASHBOARD.read_text()
    for needed in ("qsite_http_requests_total", "qsite_http_request_duration_seconds_bucket", "qsite_response_cache_total",
                   "qsite_http_rate_limited_total", "qsite_ingest_consecutive_failures", "qsite_replica_latest_data_version"):
        assert needed in text, needed
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]


def test_the_compose_prometheus_config_is_valid_and_scrapes_the_replicas_port(tmp_path):
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    config["rule_files"] = [str(MONITORING / "alerts.yml")]  # mounted at /etc/prometheus in the container
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["prometheus"]["profiles"] == ["monitoring"]
    assert "--port" in compose["services"]["api"]["command"]
    port = compose["services"]["api"]["command"][compose["services"]["api"]["command"].index("--port") + 1]
    assert config["scrape_configs"][0]["dns_sd_configs"][0]["port"] == int(port)
    (deployment, *_rest) = [d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "api.yaml").read_text()) if d]
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert int(pod["metadata"]["annotations"]["prometheus.io/port"]) == pod["spec"]["containers"][0]["ports"][0]["containerPort"]
