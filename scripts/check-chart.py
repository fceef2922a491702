#!/usr/bin/env python3
"""Offline checks of the Helm chart helm/packyard (no cluster, no helm binary).

Run from anywhere, with a PATH whose python3 has helm-python-sdk and on which the
`kubernetes-validate` and `yamllint` commands are found (scripts/test-requirements.txt):

    python3 scripts/check-chart.py [--kubernetes-version 1.33] [--keep]

Steps, for the default values and for helm/packyard/ci/ha-values.yaml (release "packyard",
namespace "packyard"):
  1. validate the values against values.schema.json, and Helm-lint the chart (strict);
  2. render it with the Helm library, write every rendered document to its own file in a temp
     directory, and run `kubernetes-validate --strict -k <version>` on them (NOTES.txt skipped);
  3. assert the properties the chart promises (probes, rollout, security context, migration
     init containers that make `helm install --wait` complete, HPA, PDB, the rendered
     packyard.toml, ...).
Then it checks that invalid combinations fail to render with a clear message, and runs
`yamllint -s` on the values files (and deploy/prometheus/rules.yaml when present).

CRD kinds: kubernetes-validate only knows the built-in Kubernetes kinds, so for the
monitoring.coreos.com/v1 ServiceMonitor it prints a "couldn't find schema" warning. That one
warning is expected and accepted for CRD kinds only; the ServiceMonitor is then checked
structurally here (its selector must match the management Services, its endpoint must name
their port, ...). Any other warning, or any built-in resource that kubernetes-validate did not
report as passed, fails the check.

Exits non-zero with a message naming what failed; prints a short summary on success.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "packyard"
PROMETHEUS_RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
RELEASE = "packyard"
NAMESPACE = "packyard"

# Custom resource kinds the chart may render, which kubernetes-validate has no schema for.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}

YAMLLINT_CONFIG = """\
extends: default
rules:
  line-length:
    max: 120
  document-start: disable
"""

# The packyard.toml keys the chart may write (Packyard rejects unknown keys at startup).
ALLOWED_TOML_KEYS = {
    "server": {"bind", "management_bind", "max_upload_bytes", "data_dir", "workers", "shutdown_timeout_secs"},
    "database": {"url", "max_connections", "min_connections", "acquire_timeout_ms", "statement_timeout_ms",
                 "migrate_on_start"},
    "blobs": {"kind", "path", "s3"},
    "blobs.s3": {"bucket", "endpoint", "region"},
    "cache": {"watermark_ttl_ms", "snapshot_cache_bytes", "blob_cache_bytes", "blob_cache_max_object_bytes"},
    "events": set(),
    "worker": {"embedded", "debounce_ms", "max_delay_ms", "poll_ms"},
    "proxy": {"allow_private_addresses", "connect_timeout_ms", "read_timeout_ms"},
    "log": {"format"},
    "security": {"anonymous_read"},
}
# Secrets never belong in the ConfigMap; they come from Secret-backed environment variables.
SECRET_TOML_KEYS = {("security", "secret"), ("security", "admin_password"), ("blobs.s3", "access_key_id"),
                    ("blobs.s3", "secret_access_key"), ("cache", "redis_url"), ("events", "amqp_url")}


class CheckFailed(Exception):
    pass


def fail(message: str) -> None:
    raise CheckFailed(message)


def require(condition: Any, message: str) -> None:
    if not condition:
        fail(message)


# --------------------------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------------------------

def import_helm() -> Any:
    try:
        import helm_python  # noqa: PLC0415
    except ImportError as e:
        sys.exit(f"check-chart: cannot import helm_python ({e}); run with a python3 whose venv has "
                 f"helm-python-sdk first on PATH (see scripts/test-requirements.txt)")
    return helm_python


def find_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        sys.exit(f"check-chart: `{name}` is not on PATH (see scripts/test-requirements.txt)")
    return path


def load_yaml_documents(text: str, helm: Any) -> list[dict]:
    """Parses a multi-document YAML string; PyYAML when present, else Helm's own parser."""
    try:
        import yaml  # noqa: PLC0415
    except ImportError:
        docs = re.split(r"(?m)^---\s*$", text)
        return [d for d in (helm.values_from_yaml(doc) for doc in docs if doc.strip()) if d]
    return [d for d in yaml.safe_load_all(text) if d]


def latest_kubernetes_version(tool: str) -> str:
    """The newest Kubernetes version the installed kubernetes-validate has schemas for."""
    try:
        with open(tool, "rb") as f:
            first = f.readline().decode(errors="replace").strip()
        if first.startswith("#!"):
            interpreter = first[2:].strip().split()
            out = subprocess.run(
                [*interpreter, "-c", "import kubernetes_validate.utils as u; print(u.latest_version())"],
                capture_output=True, text=True, check=True, timeout=60)
            version = out.stdout.strip()
            if re.fullmatch(r"\d+\.\d+(\.\d+)?", version):
                return version
    except (OSError, subprocess.SubprocessError):
        pass
    out = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60)
    match = re.search(r"Defaults to\s+(\d+\.\d+(?:\.\d+)?)", out.stdout.replace("\n", " "))
    if not match:
        sys.exit("check-chart: cannot tell which Kubernetes versions kubernetes-validate supports; "
                 "pass --kubernetes-version")
    return match.group(1)


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

class Rendered:
    """The documents of one render, indexed by kind and name."""

    def __init__(self, label: str, manifests: dict[str, str], helm: Any):
        self.label = label
        self.notes = ""
        self.docs: list[tuple[str, dict]] = []  # (template path, document)
        for template, text in sorted(manifests.items()):
            if template.endswith("NOTES.txt"):
                self.notes = text
                continue
            for doc in load_yaml_documents(text, helm):
                self.docs.append((template, doc))

    def all(self, kind: str) -> list[dict]:
        return [d for _, d in self.docs if d.get("kind") == kind]

    def get(self, kind: str, name: str) -> dict:
        found = [d for d in self.all(kind) if d["metadata"]["name"] == name]
        require(len(found) == 1, f"[{self.label}] expected one {kind} {name}, found {len(found)}")
        return found[0]

    def absent(self, kind: str, name: str | None = None) -> None:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        require(not found, f"[{self.label}] expected no {kind} {name or ''}, found "
                           f"{[d['metadata']['name'] for d in found]}")


def render(chart: Any, values: dict, label: str, helm: Any) -> Rendered:
    try:
        manifests = chart.render(values=values, name=RELEASE, namespace=NAMESPACE)
    except helm.HelmError as e:
        fail(f"[{label}] rendering failed: {e}")
    return Rendered(label, manifests, helm)


def write_documents(rendered: Rendered, directory: Path) -> list[tuple[Path, dict]]:
    """One file per document, so a validator message names exactly one resource. Written as JSON
    (which is YAML) to need no YAML emitter."""
    directory.mkdir(parents=True)
    files = []
    for i, (template, doc) in enumerate(rendered.docs):
        stem = Path(template).stem
        path = directory / f"{i:02d}-{stem}-{doc['kind'].lower()}-{doc['metadata']['name']}.yaml"
        path.write_text(json.dumps(doc, indent=2) + "\n")
        files.append((path, doc))
    return files


# --------------------------------------------------------------------------------------------
# kubernetes-validate
# --------------------------------------------------------------------------------------------

def kubernetes_validate(tool: str, version: str, files: list[tuple[Path, dict]], label: str) -> dict[str, int]:
    out = subprocess.run([tool, "--strict", "-k", version, *[str(p) for p, _ in files]],
                         capture_output=True, text=True, timeout=600)
    lines = (out.stdout + out.stderr).splitlines()
    errors = [line for line in lines if line.startswith(("ERROR", "FATAL"))]
    if out.returncode != 0 or errors:
        fail(f"[{label}] kubernetes-validate --strict -k {version} failed:\n  " + "\n  ".join(errors or lines))
    counts = {"validated": 0, "crd": 0}
    for path, doc in files:
        mine = [line for line in lines if f" {path} " in f" {line} "]
        passed = [line for line in mine if line.startswith("INFO") and "passed" in line]
        warned = [line for line in mine if line.startswith("WARN")]
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            # Expected: no schema for a custom resource; checked structurally instead.
            require(warned and not passed, f"[{label}] {path.name}: expected kubernetes-validate to report "
                                           f"no schema for the CRD kind {doc['kind']}, got {mine}")
            counts["crd"] += 1
        else:
            require(passed and not warned, f"[{label}] {path.name} ({doc['kind']}) was not validated by "
                                           f"kubernetes-validate: {mine or 'no output'}")
            counts["validated"] += 1
    return counts


# --------------------------------------------------------------------------------------------
# Assertions
# --------------------------------------------------------------------------------------------

def parse_toml(text: str, label: str) -> dict:
    try:
        import tomllib  # noqa: PLC0415  (Python 3.11+)
    except ImportError:
        sys.exit("check-chart: needs Python 3.11+ (tomllib) to check the rendered packyard.toml")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        fail(f"[{label}] packyard.toml is not valid TOML: {e}\n{text}")
    return {}


def check_toml_keys(cfg: dict, label: str, prefix: str = "") -> None:
    for key, value in cfg.items():
        section = prefix or key
        if not prefix:
            require(key in ALLOWED_TOML_KEYS and isinstance(value, dict),
                    f"[{label}] packyard.toml: unexpected top-level key {key!r}")
            check_toml_keys(value, label, key)
            continue
        require(key in ALLOWED_TOML_KEYS[section], f"[{label}] packyard.toml: unknown key {section}.{key}")
        require((section, key) not in SECRET_TOML_KEYS, f"[{label}] packyard.toml carries the secret {section}.{key}")
        if isinstance(value, dict):
            check_toml_keys(value, label, f"{section}.{key}")


def container(pod_spec: dict, name: str, label: str, init: bool = False) -> dict:
    found = [c for c in pod_spec.get("initContainers" if init else "containers", []) if c["name"] == name]
    require(len(found) == 1, f"[{label}] no {'init ' if init else ''}container {name}")
    return found[0]


def check_pod(pod_spec: dict, what: str, label: str, probes: bool = True) -> None:
    pod_sc = pod_spec.get("securityContext", {})
    require(pod_sc.get("runAsNonRoot") is True, f"[{label}] {what}: pod runAsNonRoot is not true")
    require(pod_sc.get("runAsUser") == 10001, f"[{label}] {what}: pod runAsUser is not 10001")
    require(pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
            f"[{label}] {what}: pod seccompProfile is not RuntimeDefault")
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    for c in pod_spec.get("initContainers", []) + pod_spec["containers"]:
        where = f"{what}/{c['name']}"
        sc = c.get("securityContext", {})
        require(sc.get("readOnlyRootFilesystem") is True, f"[{label}] {where}: readOnlyRootFilesystem is not true")
        require(sc.get("allowPrivilegeEscalation") is False, f"[{label}] {where}: allowPrivilegeEscalation is not false")
        require(sc.get("runAsNonRoot") is True, f"[{label}] {where}: runAsNonRoot is not true")
        require(sc.get("runAsUser") == 10001, f"[{label}] {where}: runAsUser is not 10001")
        require(sc.get("capabilities", {}).get("drop") == ["ALL"], f"[{label}] {where}: capabilities not drop [ALL]")
        require(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
                f"[{label}] {where}: seccompProfile is not RuntimeDefault")
        resources = c.get("resources", {})
        require(resources.get("requests") and resources.get("limits"),
                f"[{label}] {where}: resource requests and limits are required")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        for path in ("/var/lib/packyard", "/tmp", "/etc/packyard"):
            require(path in mounts and mounts[path] in volumes, f"[{label}] {where}: nothing mounted at {path}")
        require(volumes[mounts["/tmp"]].get("emptyDir") is not None, f"[{label}] {where}: /tmp is not an emptyDir")
        env = {e["name"]: e for e in c.get("env", [])}
        require(env.get("PACKYARD_CONFIG", {}).get("value") == "/etc/packyard/packyard.toml",
                f"[{label}] {where}: PACKYARD_CONFIG does not point at the mounted packyard.toml")
        for secret_env in ("PACKYARD_SECURITY__SECRET", "PACKYARD_SECURITY__ADMIN_PASSWORD"):
            require("secretKeyRef" in env.get(secret_env, {}).get("valueFrom", {}),
                    f"[{label}] {where}: {secret_env} does not come from a Secret")
        for name, e in env.items():
            if name.startswith("PACKYARD_") and name != "PACKYARD_CONFIG":
                require("value" not in e, f"[{label}] {where}: {name} is a plain value, not a Secret reference")
    if probes:
        main = pod_spec["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in main.get("ports", [])}
        require(ports.get("management") == 8081, f"[{label}] {what}: no management port 8081")
        for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            get = main.get(probe, {}).get("httpGet", {})
            require(get.get("path") == path and get.get("port") in ("management", 8081),
                    f"[{label}] {what}: {probe} is not GET {path} on the management port (got {get})")


def configmap_toml(r: Rendered, name: str) -> dict:
    cm = r.get("ConfigMap", name)
    require("packyard.toml" in cm.get("data", {}), f"[{r.label}] ConfigMap {name} has no packyard.toml")
    cfg = parse_toml(cm["data"]["packyard.toml"], r.label)
    check_toml_keys(cfg, r.label)
    require(cfg.get("database", {}).get("migrate_on_start") is False,
            f"[{r.label}] {name}: database.migrate_on_start is not false (replicas must wait for the migration)")
    require(cfg.get("server", {}).get("data_dir") == "/var/lib/packyard", f"[{r.label}] {name}: server.data_dir")
    require(cfg.get("server", {}).get("bind") == "0.0.0.0:8080", f"[{r.label}] {name}: server.bind")
    require(cfg.get("server", {}).get("management_bind") == "0.0.0.0:8081", f"[{r.label}] {name}: management_bind")
    require(cfg.get("log", {}).get("format") in ("json", "text"), f"[{r.label}] {name}: log.format")
    return cfg


def check_common(r: Rendered) -> None:
    check_install_wait(r)
    api = r.get("Deployment", "packyard-api")
    check_pod(api["spec"]["template"]["spec"], "api", r.label)
    require(container(api["spec"]["template"]["spec"], "api", r.label)["command"] == ["/usr/local/bin/packyard-api"],
            f"[{r.label}] api: command is not packyard-api")
    svc = r.get("Service", "packyard")
    require([p["targetPort"] for p in svc["spec"]["ports"]] == ["http"], f"[{r.label}] public Service ports")
    mgmt = r.get("Service", "packyard-api-management")
    require([p["targetPort"] for p in mgmt["spec"]["ports"]] == ["management"], f"[{r.label}] management Service ports")
    require(mgmt["spec"]["selector"] == api["spec"]["selector"]["matchLabels"],
            f"[{r.label}] management Service does not select the api pods")
    require(svc["spec"]["selector"] == api["spec"]["selector"]["matchLabels"],
            f"[{r.label}] public Service does not select the api pods")
    secret = r.get("Secret", "packyard")
    require({"security-secret", "admin-password"} <= set(secret.get("data", {})),
            f"[{r.label}] the chart Secret lacks security-secret / admin-password")
    require("base64 -d" in r.notes and "admin-password" in r.notes,
            f"[{r.label}] NOTES.txt does not tell how to read the admin password")
    require("port-forward" in r.notes or "https://" in r.notes or "http://" in r.notes,
            f"[{r.label}] NOTES.txt does not tell how to reach the service")


def check_install_wait(r: Rendered) -> None:
    """`helm install --wait` completes: Helm creates the release's resources, waits until every
    Deployment's pods are ready, and only then runs post-install hooks. A pod whose process waits
    for the migrations (database.migrate_on_start=false) must therefore get them from inside the
    pod: an init container running `packyard-api migrate` with the same configuration and
    database as the process; and no hook may be one the pods wait for."""
    for _, doc in r.docs:
        hooks = (doc.get("metadata", {}).get("annotations") or {}).get("helm.sh/hook", "")
        require("post-install" not in hooks,
                f"[{r.label}] {doc['kind']} {doc['metadata']['name']} is a post-install hook: "
                "`helm install --wait` waits for the pods before it runs one")
    for deployment in r.all("Deployment"):
        name = deployment["metadata"]["name"]
        spec = deployment["spec"]["template"]["spec"]
        main = spec["containers"][0]
        config = [v for v in spec["volumes"] if v["name"] == "config"][0]["configMap"]["name"]
        cfg = configmap_toml(r, config)
        require(cfg["database"].get("migrate_on_start") is False, f"[{r.label}] {name}: migrate_on_start")
        init = container(spec, "migrate", r.label, init=True)
        require(init["command"] == ["/usr/local/bin/packyard-api"] and init.get("args") == ["migrate"],
                f"[{r.label}] {name}: the init container does not run `packyard-api migrate`")
        require(spec["initContainers"][-1]["name"] == "migrate",
                f"[{r.label}] {name}: migrate must be the last init container, right before the process")
        env_of = lambda c: {e["name"]: e for e in c.get("env", [])}
        for var in ("PACKYARD_CONFIG", "PACKYARD_DATABASE__URL", "PACKYARD_SECURITY__SECRET"):
            require(env_of(init).get(var) == env_of(main).get(var),
                    f"[{r.label}] {name}: the migrate init container's {var} differs from the process's")
        mounts = lambda c: sorted((m["name"], m["mountPath"]) for m in c.get("volumeMounts", []))
        require(mounts(init) == mounts(main), f"[{r.label}] {name}: the migrate init container mounts differently")


def check_default(r: Rendered) -> None:
    check_common(r)
    cfg = configmap_toml(r, "packyard-config")
    require(cfg["database"].get("url", "").startswith("sqlite:///var/lib/packyard/"),
            f"[{r.label}] default database.url is not SQLite on the volume")
    require(cfg["worker"].get("embedded") is True, f"[{r.label}] default worker.embedded is not true")
    api = r.get("Deployment", "packyard-api")
    require(api["spec"].get("replicas") == 1, f"[{r.label}] default api replicas is not 1")
    require(api["spec"]["strategy"]["type"] == "Recreate", f"[{r.label}] SQLite mode must use Recreate")
    spec = api["spec"]["template"]["spec"]
    data = [v for v in spec["volumes"] if v["name"] == "data"][0]
    claim = data.get("persistentVolumeClaim", {}).get("claimName")
    require(claim, f"[{r.label}] default: /var/lib/packyard is not a PersistentVolumeClaim")
    r.get("PersistentVolumeClaim", claim)
    r.absent("Deployment", "packyard-worker")
    r.absent("HorizontalPodAutoscaler")
    r.absent("Job")
    r.absent("Ingress")
    r.absent("ServiceMonitor")
    r.get("PodDisruptionBudget", "packyard-api")


def check_ha(r: Rendered) -> None:
    check_common(r)
    cfg = configmap_toml(r, "packyard-config")
    require("url" not in cfg["database"], f"[{r.label}] database.url must come from the Secret, not the ConfigMap")
    require(cfg["worker"].get("embedded") is False, f"[{r.label}] api must run with worker.embedded=false")
    require(cfg["blobs"].get("kind") == "s3" and cfg["blobs"].get("s3", {}).get("bucket"),
            f"[{r.label}] blobs are not on S3")

    api = r.get("Deployment", "packyard-api")
    strategy = api["spec"]["strategy"]
    require(strategy["type"] == "RollingUpdate" and strategy["rollingUpdate"]["maxUnavailable"] == 0,
            f"[{r.label}] api rollout is not RollingUpdate with maxUnavailable 0: {strategy}")
    require("replicas" not in api["spec"], f"[{r.label}] api replicas must be left to the HPA")
    spec = api["spec"]["template"]["spec"]
    pre_stop = spec["containers"][0].get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
    require(pre_stop and pre_stop[0] == "sleep",
            f"[{r.label}] api pods need a preStop sleep so that rollouts drop no request: {pre_stop}")
    require(spec.get("affinity", {}).get("podAntiAffinity"), f"[{r.label}] api has no podAntiAffinity")
    tsc = spec.get("topologySpreadConstraints", [])
    require(tsc and tsc[0]["labelSelector"]["matchLabels"] == api["spec"]["selector"]["matchLabels"],
            f"[{r.label}] api topologySpreadConstraints missing or not selecting the api pods")
    env = {e["name"]: e for e in container(spec, "api", r.label)["env"]}
    ref = env.get("PACKYARD_DATABASE__URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
    require(ref.get("name") == "packyard-db", f"[{r.label}] PACKYARD_DATABASE__URL not from the existing Secret")
    for name in ("PACKYARD_BLOBS__S3__ACCESS_KEY_ID", "PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY",
                 "PACKYARD_CACHE__REDIS_URL", "PACKYARD_EVENTS__AMQP_URL"):
        require("secretKeyRef" in env.get(name, {}).get("valueFrom", {}), f"[{r.label}] {name} not from a Secret")
    data = [v for v in spec["volumes"] if v["name"] == "data"][0]
    require("emptyDir" in data, f"[{r.label}] HA: server.data_dir should be an emptyDir")
    r.absent("PersistentVolumeClaim")

    worker = r.get("Deployment", "packyard-worker")
    require(worker["spec"].get("replicas") == 2, f"[{r.label}] expected 2 workers")
    wspec = worker["spec"]["template"]["spec"]
    check_pod(wspec, "worker", r.label)
    require(container(wspec, "worker", r.label)["command"] == ["/usr/local/bin/packyard-worker"],
            f"[{r.label}] worker: command is not packyard-worker")

    r.absent("Job")

    hpa = r.get("HorizontalPodAutoscaler", "packyard-api")
    require(hpa["apiVersion"] == "autoscaling/v2", f"[{r.label}] HPA apiVersion is {hpa['apiVersion']}")
    require(hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "packyard-api"},
            f"[{r.label}] HPA does not target the api Deployment")
    require(hpa["spec"]["minReplicas"] >= 3, f"[{r.label}] HPA minReplicas below 3")

    pdb = r.get("PodDisruptionBudget", "packyard-api")
    require(pdb["spec"].get("minAvailable") == 2 and "maxUnavailable" not in pdb["spec"],
            f"[{r.label}] api PDB is not minAvailable 2: {pdb['spec']}")
    require(pdb["spec"]["selector"]["matchLabels"] == api["spec"]["selector"]["matchLabels"],
            f"[{r.label}] api PDB does not select the api pods")
    r.get("PodDisruptionBudget", "packyard-worker")

    ingress = r.get("Ingress", "packyard")
    require(ingress["apiVersion"] == "networking.k8s.io/v1", f"[{r.label}] Ingress apiVersion")
    require(ingress["spec"].get("tls"), f"[{r.label}] Ingress has no TLS")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    require(backend == {"name": "packyard", "port": {"name": "http"}}, f"[{r.label}] Ingress backend {backend}")

    check_service_monitor(r)


def check_service_monitor(r: Rendered) -> None:
    """Structural checks for the ServiceMonitor, which kubernetes-validate has no schema for."""
    sm = r.get("ServiceMonitor", "packyard")
    require(sm["apiVersion"] == "monitoring.coreos.com/v1", f"[{r.label}] ServiceMonitor apiVersion")
    allowed_spec = {"endpoints", "selector", "namespaceSelector", "jobLabel", "targetLabels", "podTargetLabels",
                    "sampleLimit", "attachMetadata"}
    require(set(sm["spec"]) <= allowed_spec, f"[{r.label}] ServiceMonitor: unknown spec fields "
                                             f"{set(sm['spec']) - allowed_spec}")
    selector = sm["spec"]["selector"].get("matchLabels", {})
    require(selector, f"[{r.label}] ServiceMonitor has no selector.matchLabels")
    matched = [s for s in r.all("Service")
               if all(s["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())]
    names = sorted(s["metadata"]["name"] for s in matched)
    require(names == ["packyard-api-management", "packyard-worker-management"],
            f"[{r.label}] ServiceMonitor selects {names}, not the api and worker management Services")
    namespaces = sm["spec"].get("namespaceSelector", {}).get("matchNames", [NAMESPACE])
    require(NAMESPACE in namespaces, f"[{r.label}] ServiceMonitor namespaceSelector misses {NAMESPACE}")
    endpoints = sm["spec"].get("endpoints", [])
    require(endpoints, f"[{r.label}] ServiceMonitor has no endpoints")
    duration = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")
    for ep in endpoints:
        require(ep.get("path") == "/metrics", f"[{r.label}] ServiceMonitor endpoint path {ep.get('path')}")
        for s in matched:
            require(ep.get("port") in [p.get("name") for p in s["spec"]["ports"]],
                    f"[{r.label}] ServiceMonitor port {ep.get('port')!r} is not a port of {s['metadata']['name']}")
        for field in ("interval", "scrapeTimeout"):
            if field in ep:
                require(isinstance(ep[field], str) and duration.match(ep[field]),
                        f"[{r.label}] ServiceMonitor {field} {ep[field]!r} is not a Prometheus duration")
        require(ep.get("scheme", "http") in ("http", "https"), f"[{r.label}] ServiceMonitor scheme")


# Values that must not render, and a fragment of the message each must give.
MUST_FAIL = [
    ({"api": {"replicaCount": 3}}, "SQLite"),
    ({"worker": {"enabled": True}}, "SQLite"),
    ({"persistence": {"enabled": False}}, "persistence.enabled=true"),
    ({"database": {"url": "postgres://u:p@db/packyard"}, "api": {"replicaCount": 2}}, "ReadWriteMany"),
    ({"database": {"url": "postgres://u:p@db/packyard"}, "api": {"replicaCount": 2},
      "persistence": {"enabled": False}}, "emptyDir"),
]


def check_must_fail(chart: Any, helm: Any) -> int:
    for values, fragment in MUST_FAIL:
        try:
            chart.render(values=values, name=RELEASE, namespace=NAMESPACE)
        except helm.HelmError as e:
            require(fragment in str(e), f"rendering {values} failed, but without {fragment!r}: {e}")
            continue
        fail(f"rendering {values} should have failed (an unworkable combination)")
    return len(MUST_FAIL)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubernetes-version", "-k",
                        help="validate against this Kubernetes version (default: the newest the installed "
                             "kubernetes-validate supports)")
    parser.add_argument("--keep", action="store_true", help="keep the rendered manifests and print where")
    parser.add_argument("--chart", type=Path, default=CHART, help=f"chart directory (default: {CHART})")
    parser.add_argument("--toml-out", type=Path,
                        help="write each rendered packyard.toml here (for checking with the real binary)")
    parser.add_argument("--pods-out", type=Path,
                        help="write each Deployment's pod (init containers, then the process: command, args, "
                             "environment variable names, its packyard.toml's ConfigMap) here as JSON, to run "
                             "it with the real binaries")
    args = parser.parse_args()
    chart_dir = args.chart.resolve()
    ha_values = chart_dir / "ci" / "ha-values.yaml"

    helm = import_helm()
    kv_tool = find_tool("kubernetes-validate")
    yamllint_tool = find_tool("yamllint")
    version = (args.kubernetes_version or latest_kubernetes_version(kv_tool)).lstrip("v")

    workdir = Path(tempfile.mkdtemp(prefix="check-chart-"))
    summary: list[str] = []
    try:
        chart = helm.Chart.load(chart_dir)
        value_sets: list[tuple[str, dict, Callable[[Rendered], None]]] = [
            ("default values", {}, check_default),
            ("ci/ha-values.yaml", helm.values_from_yaml(ha_values.read_text()), check_ha),
        ]
        for label, values, checks in value_sets:
            try:
                chart.validate_schema(values)
            except helm.HelmError as e:
                fail(f"[{label}] values do not match values.schema.json: {e}")
            report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE, kube_version=f"v{version}")
            problems = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2]
            require(not problems and not report.get("errors"),
                    f"[{label}] helm lint (strict): " + "; ".join(
                        f"{m['path']}: {m['error']}" for m in problems) + "; ".join(report.get("errors", [])))
            rendered = render(chart, values, label, helm)
            files = write_documents(rendered, workdir / re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-"))
            counts = kubernetes_validate(kv_tool, version, files, label)
            if args.toml_out:
                args.toml_out.mkdir(parents=True, exist_ok=True)
                slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
                for cm in rendered.all("ConfigMap"):
                    text = (cm.get("data") or {}).get("packyard.toml")
                    if text is not None:
                        (args.toml_out / f"{slug}--{cm['metadata']['name']}.toml").write_text(text)
            if args.pods_out:
                args.pods_out.mkdir(parents=True, exist_ok=True)
                slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
                for deployment in rendered.all("Deployment"):
                    spec = deployment["spec"]["template"]["spec"]
                    run = lambda c: {"name": c["name"], "command": c.get("command", []), "args": c.get("args", []),
                                     "env": [e["name"] for e in c.get("env", [])]}
                    config = [v for v in spec["volumes"] if v["name"] == "config"][0]["configMap"]["name"]
                    pod = {"init": [run(c) for c in spec.get("initContainers", [])],
                           "main": run(spec["containers"][0]), "configMap": config}
                    name = deployment["metadata"]["name"]
                    (args.pods_out / f"{slug}--{name}.json").write_text(json.dumps(pod, indent=1))
            checks(rendered)
            summary.append(f"{label}: schema ok, lint ok, {len(files)} resources rendered, "
                           f"{counts['validated']} valid for Kubernetes {version} (strict), "
                           f"{counts['crd']} CRD resource(s) checked structurally, assertions ok")
        summary.append(f"invalid combinations: {check_must_fail(chart, helm)} rejected with a clear message")

        lint_files = [chart_dir / "values.yaml", ha_values]
        if PROMETHEUS_RULES.exists():
            lint_files.append(PROMETHEUS_RULES)
        out = subprocess.run([yamllint_tool, "-s", "-d", YAMLLINT_CONFIG, *[str(f) for f in lint_files]],
                             capture_output=True, text=True, timeout=300)
        require(out.returncode == 0, f"yamllint -s failed:\n{out.stdout}{out.stderr}")
        summary.append("yamllint -s: " + ", ".join(os.path.relpath(f, ROOT) for f in lint_files))
    except CheckFailed as e:
        print(f"check-chart: FAILED: {e}", file=sys.stderr)
        if args.keep:
            print(f"check-chart: rendered manifests kept in {workdir}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    print("check-chart: helm/packyard OK")
    for line in summary:
        print(f"  - {line}")
    if args.keep:
        print(f"  rendered manifests: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
