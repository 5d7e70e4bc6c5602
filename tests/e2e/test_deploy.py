"""Deployment artefacts, checked with the real tools and against the metric names.

- promtool (Debian package ``prometheus``): ``check config``, ``check rules``, ``test rules``,
  and a parse of every dashboard expression;
- docker-compose (Debian package ``docker-compose``): ``config -q`` and the resolved model;
- the names in the alert rules and the dashboard against what ``ServiceMetrics`` exports;
- Grafana provisioning, the dashboard JSON, the Kubernetes manifests, the Dockerfile.

A missing tool skips its tests on a developer machine but fails them in CI, where
``.ci/run`` installs it.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from stream_dp.worker.metrics import ServiceMetrics

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
GRAFANA = DEPLOY / "grafana"
KUBERNETES = DEPLOY / "kubernetes"
DASHBOARD = GRAFANA / "dashboards" / "stream-dp.json"
COMPOSE = REPO / "docker-compose.yml"

PROMETHEUS_CONFIGS = ["prometheus.yml", "prometheus-local.yml"]
METRIC_NAME = re.compile(r"\bstream_dp_[a-z_]+")
TOOL_TIMEOUT = 120


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_tool(name: str, package: str) -> str:
    """Path of ``name``; skip without it, except in CI where it must be installed."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} not found on PATH (Debian package {package!r})"
        if in_ci():
            pytest.fail(f"{message}; .ci/run must install it")
        pytest.skip(f"{message}; install it to run this test")
    return path


#: docker-compose.yml has no default Grafana password: compose needs one from the environment.
COMPOSE_ENV = {"GRAFANA_ADMIN_PASSWORD": "a-test-password"}


def run(
    args: list[str], cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False,
        env=None if env is None else {**os.environ, **env},
    )  # fmt: skip


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, (
        f"{' '.join(result.args)} exited {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


@cache
def exported_metric_names() -> frozenset[str]:
    """Every sample name a fresh worker exports, with each labelled metric touched once."""
    metrics = ServiceMetrics()
    for outcome in ("accepted", "invalid", "late"):
        metrics.readings.labels(outcome=outcome)
    metrics.info.info({"epsilon": "1.0", "upper": "65", "resolution": "8", "window": "3600"})
    metrics.set_model_loss(
        {
            "privacy_model": "secret-routes",
            "epsilon_window": 0.1,
            "delta_window": 1e-9,
            "epsilon_period": 0.2,
            "delta_period": 2e-9,
        }
    )
    text = generate_latest(metrics.registry).decode()
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return frozenset(names)


def alert_rules() -> list[dict[str, Any]]:
    groups = load_yaml(PROMETHEUS / "alerts.yml")["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def dashboard_panels() -> list[dict[str, Any]]:
    panels = []
    for panel in dashboard()["panels"]:
        if panel.get("type") == "row":
            panels.extend(panel.get("panels", []))
        else:
            panels.append(panel)
    return panels


def dashboard_expressions() -> list[str]:
    exprs = [t["expr"] for panel in dashboard_panels() for t in panel.get("targets", [])]
    for variable in dashboard().get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and query:
            exprs.append(query)
    return exprs


def metric_names_in(exprs: list[str]) -> set[str]:
    return {name for expr in exprs for name in METRIC_NAME.findall(expr)}


@cache
def compose_model() -> dict[str, Any]:
    """The model docker-compose resolves (interpolation, anchors, defaults applied)."""
    tool = require_tool("docker-compose", "docker-compose")
    result = run([tool, "-f", str(COMPOSE), "config"], env=COMPOSE_ENV)
    assert_ok(result)
    return yaml.safe_load(result.stdout)


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path of a service's bind mounts, in the short syntax that
    docker-compose 1.x prints as well as the long one of Compose v2."""
    mounts = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
            if source.startswith(("/", ".")):
                mounts[target] = Path(source).resolve()
        elif volume.get("type") == "bind":
            mounts[volume["target"]] = Path(volume["source"]).resolve()
    return mounts


def kubernetes_documents() -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for path in sorted(KUBERNETES.glob("*.y*ml")):
        with path.open(encoding="utf-8") as f:
            for document in yaml.safe_load_all(f):
                if document is not None:
                    documents.append((path.name, document))
    return documents


def kubernetes_object(kind: str, name: str) -> dict[str, Any]:
    for _, document in kubernetes_documents():
        if document["kind"] == kind and document["metadata"]["name"] == name:
            return document
    raise AssertionError(f"no {kind}/{name} in {KUBERNETES}")


# --- Prometheus -------------------------------------------------------------------------


@pytest.mark.parametrize("config", PROMETHEUS_CONFIGS)
def test_promtool_check_config(config: str, tmp_path: Path) -> None:
    promtool = require_tool("promtool", "prometheus")
    # Run from elsewhere: rule files must resolve relative to the config file itself.
    result = run([promtool, "check", "config", str(PROMETHEUS / config)], cwd=tmp_path)
    assert_ok(result)
    assert "1 rule files found" in result.stdout + result.stderr


def test_prometheus_configs_scrape_the_worker_and_load_the_alerts() -> None:
    for config in PROMETHEUS_CONFIGS:
        document = load_yaml(PROMETHEUS / config)
        assert document["rule_files"] == ["alerts.yml"], config
        jobs = {job["job_name"]: job for job in document["scrape_configs"]}
        worker = jobs["stream-dp"]
        assert worker.get("metrics_path", "/metrics") == "/metrics"
        targets = [t for sc in worker["static_configs"] for t in sc["targets"]]
        assert targets and all(t.endswith(":8000") for t in targets), (config, targets)
    local = load_yaml(PROMETHEUS / "prometheus-local.yml")
    assert local["scrape_configs"][0]["static_configs"][0]["targets"] == ["127.0.0.1:8000"]


def test_promtool_check_rules() -> None:
    promtool = require_tool("promtool", "prometheus")
    result = run([promtool, "check", "rules", str(PROMETHEUS / "alerts.yml")])
    assert_ok(result)
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


@pytest.mark.slow  # promtool evaluates every alert unit test
def test_promtool_test_rules(tmp_path: Path) -> None:
    promtool = require_tool("promtool", "prometheus")
    result = run([promtool, "test", "rules", str(PROMETHEUS / "alerts_test.yml")], cwd=tmp_path)
    assert_ok(result)
    assert "SUCCESS" in result.stdout


def test_alert_unit_tests_show_alerts_firing_and_staying_quiet() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in load_yaml(PROMETHEUS / "alerts_test.yml")["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert len(firing) >= 2, firing
    assert quiet, "no case shows an alert that must not fire"
    # Every rule has at least one case in which it fires.
    assert {rule["alert"] for rule in alert_rules()} <= firing


def test_alert_unit_tests_use_exported_series() -> None:
    exported = exported_metric_names()
    for case in load_yaml(PROMETHEUS / "alerts_test.yml")["tests"]:
        for series in case["input_series"]:
            name = re.split(r"[{ ]", series["series"], maxsplit=1)[0]
            assert name in exported or name == "up", name
            bucket = re.search(r'le="([^"]+)"', series["series"])
            if bucket and name.endswith("_bucket"):
                exposition = generate_latest(ServiceMetrics().registry).decode()
                assert f'le="{bucket.group(1)}"' in exposition, series["series"]


def test_alert_rules_are_labelled_and_described() -> None:
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) == len(set(names)), names
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    # The budget alerts the operators rely on.
    assert {
        "StreamDpWindowPrivacyLossHigh",
        "StreamDpPrivacyBudgetSpendHigh",
        "StreamDpNoWindowReleased",
        "StreamDpRejectedReadingsHigh",
        "StreamDpWorkerNotReady",
    } <= set(names)


def test_alert_rules_use_only_exported_metric_names() -> None:
    used = metric_names_in([rule["expr"] for rule in alert_rules()])
    assert used, "no stream_dp_ metric in the alert rules"
    assert used <= exported_metric_names(), sorted(used - exported_metric_names())


# --- Grafana ----------------------------------------------------------------------------


def test_dashboard_has_panels_with_targets() -> None:
    board = dashboard()
    assert board["uid"] and board["title"]
    panels = dashboard_panels()
    assert len(panels) >= 8
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip() and target["refId"], panel["title"]
        assert set(panel["gridPos"]) >= {"x", "y", "w", "h"}, panel["title"]


def test_dashboard_uses_the_provisioned_datasource() -> None:
    provisioned = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")
    assert provisioned["apiVersion"] == 1
    (source,) = provisioned["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    for panel in dashboard_panels():
        assert panel["datasource"]["uid"] == source["uid"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == source["uid"], panel["title"]


def test_dashboard_uses_only_exported_metric_names() -> None:
    used = metric_names_in(dashboard_expressions())
    assert used <= exported_metric_names(), sorted(used - exported_metric_names())


def test_dashboard_shows_the_budget_metrics() -> None:
    used = metric_names_in(dashboard_expressions())
    assert {
        "stream_dp_privacy_budget_cumulative_epsilon",
        "stream_dp_window_privacy_loss_epsilon",
        "stream_dp_window_privacy_loss_unclipped_epsilon",
        "stream_dp_window_error_bound",
        "stream_dp_readings_total",
        "stream_dp_windows_released_total",
        "stream_dp_suppressed_pairs_total",
        "stream_dp_release_latency_seconds_bucket",
        "stream_dp_watermark_timestamp_seconds",
    } <= used
    exprs = dashboard_expressions()
    assert any("histogram_quantile" in e for e in exprs)
    assert any(re.search(r"time\(\)\s*-\s*\S*stream_dp_watermark", e) for e in exprs)


def test_dashboard_shows_held_readings_beside_withheld_ones() -> None:
    used = metric_names_in(dashboard_expressions())
    assert {
        "stream_dp_readings_held_total",
        "stream_dp_readings_withheld_total",
        "stream_dp_cells_held",
        "stream_dp_cells_withheld",
    } <= used


def test_dashboard_shows_which_planner_planned_the_windows() -> None:
    exprs = [e for e in dashboard_expressions() if "stream_dp_windows_planned_total" in e]
    assert exprs and all("by (planner)" in e for e in exprs)


def test_dashboard_expressions_are_valid_promql(tmp_path: Path) -> None:
    """promtool parses each panel query, wrapped as a recording rule."""
    promtool = require_tool("promtool", "prometheus")
    rules = []
    for i, expr in enumerate(dashboard_expressions()):
        if expr.startswith("label_values("):  # Grafana's own function, not PromQL
            continue
        expr = expr.replace("$__rate_interval", "5m").replace("$instance", ".*")
        rules.append({"record": f"dashboard:expr_{i}", "expr": expr})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run([promtool, "check", "rules", str(path)])
    assert_ok(result)


def test_dashboard_provider_points_at_the_mounted_dashboards() -> None:
    providers = load_yaml(GRAFANA / "provisioning" / "dashboards" / "dashboards.yml")
    assert providers["apiVersion"] == 1
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    mounts = bind_mounts(compose_model()["services"]["grafana"])
    assert mounts[provider["options"]["path"]] == (GRAFANA / "dashboards").resolve()
    assert mounts["/etc/grafana/provisioning"] == (GRAFANA / "provisioning").resolve()


# --- docker-compose ---------------------------------------------------------------------


def test_docker_compose_config_is_valid() -> None:
    tool = require_tool("docker-compose", "docker-compose")
    assert_ok(run([tool, "-f", str(COMPOSE), "config", "-q"], env=COMPOSE_ENV))


def test_compose_runs_kafka_in_kraft_mode_with_a_healthcheck() -> None:
    kafka = compose_model()["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    assert "zookeeper" not in json.dumps(kafka).lower()
    assert kafka["healthcheck"]["test"]


def test_compose_worker_waits_for_kafka_and_is_configured() -> None:
    services = compose_model()["services"]
    worker = services["stream-dp"]
    assert worker["build"]
    assert worker["command"] == ["serve"]
    assert worker["depends_on"]["kafka"]["condition"] == "service_healthy"
    env = worker["environment"]
    assert env["STREAM_DP_KAFKA_BOOTSTRAP"] == "kafka:9092"
    assert env["STREAM_DP_WEB_PORT"] == "8000"
    for name in ("EPSILON", "UPPER", "RESOLUTION", "WINDOW_SECONDS", "GRACE_SECONDS"):
        assert env[f"STREAM_DP_{name}"], name
    assert any(str(p.get("target")) == "8000" for p in worker["ports"])
    assert "/readyz" in " ".join(worker["healthcheck"]["test"])


def _settings_from(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The worker's settings under exactly ``env`` (no other STREAM_DP_* variable)."""
    from stream_dp.config import load_settings

    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    return load_settings()


def _assert_targeted(settings: Any) -> None:
    """Issue 26: the shipped configurations release accuracy-targeted adaptive cells (T 10 at
    U 65, resolution 8 merging up to 3, no variance), and every value they set is a valid
    setting; issue 34: T is the default's, 10/65 of U, with or without the budget."""
    assert settings.target_mean_error == 10.0 * settings.upper / 65.0
    assert (settings.resolution, settings.coarsest_resolution) == (8, 3)
    assert settings.variance_share == 0.0 and settings.epsilon == 1.0


def test_compose_runs_the_recommended_targeted_mode(monkeypatch) -> None:
    env = compose_model()["services"]["stream-dp"]["environment"]
    _assert_targeted(_settings_from(env, monkeypatch))


def test_the_configmap_runs_the_recommended_targeted_mode(monkeypatch) -> None:
    env = kubernetes_object("ConfigMap", "stream-dp-config")["data"]
    _assert_targeted(_settings_from(env, monkeypatch))


def test_compose_replay_is_one_shot_after_the_worker_is_ready() -> None:
    replay = compose_model()["services"]["replay"]
    assert replay["depends_on"]["stream-dp"]["condition"] == "service_healthy"
    assert replay["restart"] == "no"
    command = " ".join(replay["entrypoint"] + replay["command"])
    assert "stream-dp produce" in command and "--rate 2000" in command
    assert "sample_path()" in command


def test_compose_prometheus_and_grafana_mount_deploy_files() -> None:
    services = compose_model()["services"]
    for name in ("prometheus", "grafana"):
        mounts = bind_mounts(services[name])
        assert mounts, name
        for source in mounts.values():
            assert source.exists() and DEPLOY.resolve() in source.parents, source
    prometheus = services["prometheus"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert bind_mounts(prometheus)["/etc/prometheus"] == PROMETHEUS.resolve()
    scrape = load_yaml(PROMETHEUS / "prometheus.yml")["scrape_configs"]
    assert "stream-dp:8000" in [
        t for job in scrape for sc in job["static_configs"] for t in sc["targets"]
    ]


# --- Kubernetes -------------------------------------------------------------------------


def test_kubernetes_manifests_parse_and_name_every_object() -> None:
    documents = kubernetes_documents()
    kinds = {document["kind"] for _, document in documents}
    assert {"Namespace", "ConfigMap", "Secret", "StatefulSet", "Service", "Job"} <= kinds
    for filename, document in documents:
        assert document.get("apiVersion"), filename
        assert document.get("kind"), filename
        assert document.get("metadata", {}).get("name"), filename
        if document["kind"] not in ("Namespace", "Kustomization"):
            assert document["metadata"].get("namespace") == "stream-dp", filename


def test_kustomization_lists_existing_files_but_not_the_secret_template() -> None:
    kustomization = load_yaml(KUBERNETES / "kustomization.yaml")
    for resource in kustomization["resources"]:
        assert (KUBERNETES / resource).is_file(), resource
    assert not any("secret" in r for r in kustomization["resources"])


def test_kubernetes_worker_probes_resources_and_scrape_annotations() -> None:
    workers = kubernetes_object("StatefulSet", "stream-dp")
    template = workers["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "8000"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert template["spec"]["securityContext"]["runAsNonRoot"] is True
    (container,) = template["spec"]["containers"]
    assert container["args"] == ["serve"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert "memory" in container["resources"]["limits"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == 8000
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/var/lib/stream-dp" in mounts
    # Pods are selected by the Services and the governing Service exists.
    labels = template["metadata"]["labels"]
    assert workers["spec"]["selector"]["matchLabels"].items() <= labels.items()
    kubernetes_object("Service", workers["spec"]["serviceName"])
    service = kubernetes_object("Service", "stream-dp")
    assert service["spec"]["selector"].items() <= labels.items()


def test_kubernetes_env_comes_from_the_configmap_and_the_sasl_secret() -> None:
    config = kubernetes_object("ConfigMap", "stream-dp-config")
    secret = kubernetes_object("Secret", "stream-dp-kafka-sasl")
    assert config["data"]["STREAM_DP_KAFKA_BOOTSTRAP"]
    assert all(key.startswith("STREAM_DP_") for key in config["data"])
    assert all(isinstance(value, str) for value in config["data"].values())
    # The template holds placeholders only, never a credential.
    for key, value in secret["stringData"].items():
        if key.endswith(("USERNAME", "PASSWORD")):
            assert value == "CHANGE-ME", key
    workers = kubernetes_object("StatefulSet", "stream-dp")
    replay = kubernetes_object("Job", "stream-dp-replay")
    for pod in (workers["spec"]["template"], replay["spec"]["template"]):
        (container,) = pod["spec"]["containers"]
        sources = container["envFrom"]
        assert {"configMapRef": {"name": "stream-dp-config"}} in sources
        assert {"secretRef": {"name": "stream-dp-kafka-sasl", "optional": True}} in sources


def _compose_defaults() -> dict[str, str]:
    """The worker's environment in docker-compose.yml with every ``${NAME:-default}`` at its
    default (what compose resolves from an empty shell)."""
    env = load_yaml(COMPOSE)["x-stream-dp-env"]
    return {k: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(v)) for k, v in env.items()}


@pytest.mark.parametrize("where", ["compose", "kubernetes"])
def test_deployments_default_to_the_per_vehicle_budget(where, monkeypatch) -> None:
    """Issue 25 item 7: B = 14 per 7 days, T = 10, spans up to 8 h, as the worker reads it."""
    from stream_dp.config import load_settings
    from stream_dp.release.params import checked_settings

    if where == "compose":
        env = _compose_defaults()
    else:
        env = kubernetes_object("ConfigMap", "stream-dp-config")["data"]
    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = checked_settings(load_settings())
    assert settings.vehicle_budget == 14.0
    assert settings.budget_period_seconds == 7 * 24 * 3600
    assert settings.target_mean_error == 10.0
    assert settings.max_span_hours == 8
    assert settings.budget_cap is None


def test_kubernetes_replay_job_runs_the_producer_once() -> None:
    job = kubernetes_object("Job", "stream-dp-replay")
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] in ("Never", "OnFailure")
    (container,) = pod["containers"]
    command = " ".join(container["command"] + container["args"])
    assert "stream-dp produce" in command and "--rate 2000" in command


def test_kubectl_kustomize_renders_the_manifests() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (optional: the manifests are also parsed above)")
    result = run([kubectl, "kustomize", str(KUBERNETES)])
    assert_ok(result)
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert {d["kind"] for d in rendered} >= {"Namespace", "StatefulSet", "Service", "ConfigMap"}


# --- Image ------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_dockerfile_builds_a_non_root_stream_dp_image() -> None:
    instructions = dockerfile_instructions()
    bases = [rest.split()[0] for keyword, rest in instructions if keyword == "FROM"]
    assert bases and all(base == "python:3.11-slim" for base in bases), bases
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert re.search(r"pip install\s+\S*/src\b|pip install \.", runs), runs
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    entrypoint = [rest for keyword, rest in instructions if keyword == "ENTRYPOINT"]
    assert entrypoint and json.loads(entrypoint[-1]) == ["stream-dp"]
    assert ("EXPOSE", "8000") in instructions


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        candidates = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        if any(fnmatch.fnmatchcase(p, c) for p in prefixes for c in candidates):
            excluded = not negate
    return excluded


def test_dockerignore_keeps_what_the_build_needs_and_nothing_else() -> None:
    readme = "README.md"
    for needed in (
        "pyproject.toml",
        readme,
        "stream_dp/__init__.py",
        "stream_dp/worker/metrics.py",
    ):
        assert not dockerignore_excludes(needed), needed
    for unwanted in (
        ".git/config",
        "tests/e2e/test_deploy.py",
        "deploy/prometheus/alerts.yml",
        "stream_dp/__pycache__/metrics.cpython-311.pyc",
        "stream_dp.egg-info/PKG-INFO",
        ".venv/bin/python",
    ):
        assert dockerignore_excludes(unwanted), unwanted


def test_files_the_image_build_reads_exist_and_reach_the_context() -> None:
    """`pip install .` in the image reads pyproject.toml and the readme it names."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    readme = project.get("readme")
    readme = readme.get("file") if isinstance(readme, dict) else readme
    for needed in filter(None, ["pyproject.toml", readme]):
        assert (REPO / needed).is_file(), f"{needed} is missing: the image build needs it"
        assert not dockerignore_excludes(needed), needed


# --- The commands and settings the artefacts use exist ----------------------------------


def test_every_stream_dp_variable_set_is_a_setting() -> None:
    """A misspelt variable would be ignored silently; each one must name a Settings field."""
    from stream_dp.config import CONFIG_FILE_ENV, Settings

    known = {f"STREAM_DP_{name.upper()}" for name in Settings.model_fields} | {CONFIG_FILE_ENV}
    used: dict[str, set[str]] = {}
    for name, service in compose_model()["services"].items():
        if name.startswith(("stream-dp", "replay")):
            used[f"docker-compose {name}"] = set(service["environment"])
    used["ConfigMap"] = set(kubernetes_object("ConfigMap", "stream-dp-config")["data"])
    used["Secret"] = set(kubernetes_object("Secret", "stream-dp-kafka-sasl")["stringData"])
    used["Dockerfile"] = {
        word.split("=")[0]
        for keyword, rest in dockerfile_instructions()
        if keyword == "ENV"
        for word in rest.split()
        if word.startswith("STREAM_DP_")
    }
    for where, names in used.items():
        names = {n for n in names if n.startswith("STREAM_DP_")}
        assert names, where
        assert names <= known, (where, sorted(names - known))


def test_containers_listen_beyond_loopback() -> None:
    from stream_dp.config import Settings

    if Settings.model_fields["web_host"].default not in ("127.0.0.1", "localhost"):
        return
    assert ("ENV", "STREAM_DP_WEB_HOST=0.0.0.0") in [
        (k, w) for k, rest in dockerfile_instructions() for w in rest.split()
    ]
    assert compose_model()["services"]["stream-dp"]["environment"]["STREAM_DP_WEB_HOST"]
    assert kubernetes_object("ConfigMap", "stream-dp-config")["data"]["STREAM_DP_WEB_HOST"]


def test_bundled_sample_path_used_by_the_replay_exists() -> None:
    sample = importlib.import_module("stream_dp.sources.sample")
    path = Path(sample.sample_path())
    assert path.is_file(), path


def test_cli_accepts_the_commands_the_artefacts_run() -> None:
    from stream_dp.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["serve"]).command == "serve"
    args = parser.parse_args(["produce", "readings.jsonl", "--rate", "2000"])
    assert args.command == "produce"


# --- Prometheus Operator, Alertmanager, Grafana credentials, the ledger (issue 26) ------

MONITORING = KUBERNETES / "monitoring"
ALERTMANAGER = DEPLOY / "alertmanager" / "alertmanager.yml"


def prometheusrule_generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "prometheusrule", PROMETHEUS / "prometheusrule.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prometheusrule_groups_are_the_alert_rules_files() -> None:
    rule = load_yaml(MONITORING / "prometheusrule.yaml")
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["metadata"]["namespace"] == "stream-dp"
    assert rule["spec"]["groups"] == load_yaml(PROMETHEUS / "alerts.yml")["groups"]
    # and the committed manifest is what the generator writes today
    text = (MONITORING / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert text == prometheusrule_generator().manifest_text()


def test_prometheusrule_generator_follows_the_rules_file(tmp_path: Path) -> None:
    rules = load_yaml(PROMETHEUS / "alerts.yml")
    rules["groups"][0]["rules"][0]["expr"] = "vector(1) > 0"
    changed = tmp_path / "alerts.yml"
    changed.write_text(yaml.safe_dump(rules), encoding="utf-8")
    generated = yaml.safe_load(prometheusrule_generator().manifest_text(changed))
    assert generated["spec"]["groups"] == rules["groups"]


def test_promtool_checks_the_prometheusrule_groups(tmp_path: Path) -> None:
    promtool = require_tool("promtool", "prometheus")
    groups = load_yaml(MONITORING / "prometheusrule.yaml")["spec"]
    path = tmp_path / "operator_rules.yml"
    path.write_text(yaml.safe_dump(groups), encoding="utf-8")
    result = run([promtool, "check", "rules", str(path)])
    assert_ok(result)
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_servicemonitor_scrapes_each_worker_once_as_job_stream_dp() -> None:
    monitor = load_yaml(MONITORING / "servicemonitor.yaml")
    assert monitor["kind"] == "ServiceMonitor" and monitor["metadata"]["namespace"] == "stream-dp"
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [d for _, d in kubernetes_documents() if d["kind"] == "Service"]
    selected = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in selected] == ["stream-dp"]  # not the headless one
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in selected[0]["spec"]["ports"]}
    job = selected[0]["metadata"]["labels"][monitor["spec"]["jobLabel"]]
    assert job == "stream-dp"
    down = next(r for r in alert_rules() if r["alert"] == "StreamDpWorkerDown")
    assert f'job="{job}"' in down["expr"]
    kustomization = load_yaml(MONITORING / "kustomization.yaml")
    assert sorted(kustomization["resources"]) == ["prometheusrule.yaml", "servicemonitor.yaml"]


def test_alertmanager_example_passes_amtool() -> None:
    amtool = require_tool("amtool", "prometheus-alertmanager")
    assert_ok(run([amtool, "check-config", str(ALERTMANAGER)]))
    # Each alert of alerts.yml reaches the receivers its labels call for.
    expected = {
        ("privacy", "critical"): "privacy-officer,on-call",
        ("privacy", "warning"): "privacy-officer",
        (None, "critical"): "on-call",
        (None, "warning"): "operators",
    }
    for rule in alert_rules():
        labels = rule["labels"]
        key = (labels.get("team"), labels["severity"])
        args = [f"{k}={v}" for k, v in {"alertname": rule["alert"], **labels}.items()]
        result = run([amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER}", *args])
        assert_ok(result)
        assert result.stdout.strip() == expected[key], (rule["alert"], result.stdout)


def test_alertmanager_example_routes_to_defined_receivers_without_secrets() -> None:
    config = load_yaml(ALERTMANAGER)
    defined = {r["name"] for r in config["receivers"]}
    route = config["route"]
    used = {route["receiver"], *(r["receiver"] for r in route["routes"])}
    assert used == defined
    text = ALERTMANAGER.read_text(encoding="utf-8")
    assert "password:" not in text.replace("password_file:", "")  # secrets come from files
    labels = {(r["labels"].get("team"), r["labels"]["severity"]) for r in alert_rules()}
    matchers = {m for r in route["routes"] for m in r["matchers"]}
    assert {f'team="{t}"' for t, _ in labels if t} <= matchers
    assert 'severity="critical"' in matchers


def test_grafana_has_no_default_credentials_nor_anonymous_viewers() -> None:
    grafana = load_yaml(COMPOSE)["services"]["grafana"]["environment"]
    password = grafana["GF_SECURITY_ADMIN_PASSWORD"]
    # ${VAR:?message}: compose stops when it is unset; no ${VAR:-default}
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}", password), password
    assert re.fullmatch(r"\$\{\w+:-false\}", grafana["GF_AUTH_ANONYMOUS_ENABLED"])


def test_compose_refuses_to_start_grafana_without_a_password() -> None:
    tool = require_tool("docker-compose", "docker-compose")
    env = {k: v for k, v in os.environ.items() if k != "GRAFANA_ADMIN_PASSWORD"}
    result = subprocess.run(
        [tool, "-f", str(COMPOSE), "config", "-q"], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=TOOL_TIMEOUT, check=False,
    )  # fmt: skip
    assert result.returncode != 0 and "GRAFANA_ADMIN_PASSWORD" in result.stderr
    environment = compose_model()["services"]["grafana"]["environment"]
    assert environment["GF_SECURITY_ADMIN_PASSWORD"] == COMPOSE_ENV["GRAFANA_ADMIN_PASSWORD"]
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


def test_deployments_require_an_existing_ledger() -> None:
    config = kubernetes_object("ConfigMap", "stream-dp-config")["data"]
    assert config["STREAM_DP_REQUIRE_EXISTING_LEDGER"] == "true"
    worker = load_yaml(COMPOSE)["x-stream-dp-env"]
    assert worker["STREAM_DP_REQUIRE_EXISTING_LEDGER"] == "true"
    from stream_dp.config import load_settings

    assert load_settings(require_existing_ledger="true").require_existing_ledger is True


def test_the_ledger_jobs_run_commands_the_cli_accepts() -> None:
    from stream_dp.cli import build_parser

    parser = build_parser()
    init = kubernetes_object("Job", "stream-dp-ledger-init")["spec"]["template"]["spec"]
    (container,) = init["containers"]
    assert parser.parse_args(container["args"]).action == "init"
    backup = kubernetes_object("CronJob", "stream-dp-ledger-backup")
    pod = backup["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = " ".join(container["args"])
    assert "stream-dp ledger export " in command
    assert command.startswith("umask 077 && ")  # the backup holds raw readings: owner-only
    assert parser.parse_args(["ledger", "export", "/backups/x.jsonl"]).action == "export"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert '"/backups/ledger-' in command and mounts["backups"] == "/backups"
    claims = {v["name"]: v.get("persistentVolumeClaim", {}) for v in pod["volumes"]}
    kubernetes_object("PersistentVolumeClaim", claims["backups"]["claimName"])


def test_kubectl_kustomize_renders_the_monitoring_objects() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (optional: the manifests are also parsed above)")
    result = run([kubectl, "kustomize", str(MONITORING)])
    assert_ok(result)
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert sorted(d["kind"] for d in rendered) == ["PrometheusRule", "ServiceMonitor"]


def test_dashboard_shows_the_secret_routes_loss_by_model() -> None:
    exprs = dashboard_expressions()
    used = metric_names_in(exprs)
    assert {
        "stream_dp_privacy_model_period_epsilon",
        "stream_dp_privacy_model_window_epsilon",
        "stream_dp_privacy_model_period_delta",
    } <= used
    model = [e for e in exprs if "stream_dp_privacy_model_" in e]
    assert all("by (privacy_model)" in e for e in model)


def test_promtool_lints_the_exported_metrics_with_the_model_gauges_set() -> None:
    """The exposition a worker serves (every labelled metric touched, the secret-routes
    gauges included) passes ``promtool check metrics``."""
    promtool = require_tool("promtool", "prometheus")
    metrics = ServiceMetrics()
    metrics.set_model_loss(
        {
            "privacy_model": "secret-routes",
            "epsilon_window": 0.1,
            "delta_window": 1e-9,
            "epsilon_period": 0.2,
            "delta_period": 2e-9,
        }
    )
    text = generate_latest(metrics.registry).decode()
    assert 'stream_dp_privacy_model_period_epsilon{privacy_model="secret-routes"} 0.2' in text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=TOOL_TIMEOUT, check=False)  # fmt: skip
    assert_ok(result)
