#!/usr/bin/env python3
"""deploy/k8s/ without a cluster: every file parses as YAML (PyYAML, Debian's python3-yaml) and the
invariants docs/operations.md states hold: the probes are on the admin port that admin.listen
names, a preStop step and a grace period longer than it plus the drain, CPU and memory requests
and limits, a Service and an HPA that point at the Deployment, a non-root user.
Usage: k8s_manifests_test.py <deploy/k8s dir>. Exit 77 (skipped) without PyYAML."""
import pathlib
import sys

try:
    import yaml
except ImportError:
    print("k8s_manifests_test: no PyYAML (apt-get install python3-yaml): skipped")
    sys.exit(77)


def fail(msg):
    print(f"k8s_manifests_test: {msg}", file=sys.stderr)
    sys.exit(1)


def main(directory):
    docs = {}
    for path in sorted(pathlib.Path(directory).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                docs[doc["kind"]] = doc
    for kind in ("Deployment", "Service", "HorizontalPodAutoscaler"):
        if kind not in docs:
            fail(f"no {kind} in {directory}")
    dep, svc, hpa = docs["Deployment"], docs["Service"], docs["HorizontalPodAutoscaler"]
    name = dep["metadata"]["name"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    if dep["spec"]["selector"]["matchLabels"] != labels:
        fail("the Deployment's selector does not match its pod labels")
    if any(labels.get(k) != v for k, v in svc["spec"]["selector"].items()):
        fail("the Service's selector does not select the Deployment's pods")
    ref = hpa["spec"]["scaleTargetRef"]
    if (ref["kind"], ref["name"]) != ("Deployment", name):
        fail(f"the HPA scales {ref}, not Deployment/{name}")
    if hpa["spec"]["minReplicas"] > hpa["spec"]["maxReplicas"]:
        fail("the HPA's minReplicas is above its maxReplicas")

    pod = dep["spec"]["template"]["spec"]
    if not pod.get("securityContext", {}).get("runAsNonRoot"):
        fail("the pod does not require a non-root user")
    (c,) = pod["containers"]
    args = c["args"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    admin = next((a.split("=", 2)[2] for a in args if a.startswith("--set=admin.listen=")), None)
    if admin is None or int(admin.rsplit(":", 1)[1]) != ports.get("admin"):
        fail(f"admin.listen ({admin}) is not the admin containerPort ({ports.get('admin')})")
    listen = next((a.split("=", 1)[1] for a in args if a.startswith("--listen=")), None)
    if listen is None or int(listen.rsplit(":", 1)[1]) != ports.get("http"):
        fail(f"--listen ({listen}) is not the http containerPort ({ports.get('http')})")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in ("admin", ports.get("admin")):
            fail(f"{probe} is not GET {path} on the admin port: {get}")
    for kind in ("requests", "limits"):
        for res in ("cpu", "memory"):
            if res not in c.get("resources", {}).get(kind, {}):
                fail(f"no resources.{kind}.{res}")
    pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    if pre[:1] != ["sleep"]:
        fail(f"no preStop sleep: {pre}")
    shutdown_ms = next((int(a.rsplit("=", 1)[1]) for a in args if a.startswith("--set=shutdown_timeout_ms=")), 10000)
    if pod["terminationGracePeriodSeconds"] <= int(pre[1]) + shutdown_ms / 1000:
        fail("terminationGracePeriodSeconds leaves no room for the preStop sleep plus the drain")
    print(f"k8s_manifests_test: ok: {', '.join(sorted(docs))}")


if __name__ == "__main__":
    main(sys.argv[1])
