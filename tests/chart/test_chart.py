# Copyright 2026 The Larder Authors.
"""The Helm chart (charts/larder) checked with the real helm binary and the built larder.

No Kubernetes API server or container engine runs here: these tests lint and render the
chart, check what the manifests promise (probes, memory, propagation, secrets), and run every
`larder` command line of the rendered containers against the binary of this build, so the
chart cannot ask for a flag the binary does not have.
"""
import os
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "charts", "larder")
HELM = os.path.join(ROOT, "tests", "servers", "bin", "helm")
LARDER = os.environ.get("LARDER_CLI", os.path.join(ROOT, "build", "cli", "larder"))
ALL_ON = os.path.join(CHART, "ci", "all-on-values.yaml")
VALUE_SETS = {"default": [], "all-on": ["-f", ALL_ON]}


def helm(*args):
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120)


def render(values):
    r = helm("template", "t", CHART, "--namespace", "ml", *values)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def pod_spec(doc):
    if doc["kind"] in ("DaemonSet", "StatefulSet", "Job"):
        return doc["spec"]["template"]["spec"]
    return None


def containers(docs):
    for d in docs:
        spec = pod_spec(d)
        if spec:
            for c in spec.get("initContainers", []) + spec["containers"]:
                yield d, c


@pytest.mark.parametrize("name", VALUE_SETS)
def test_lint_strict(name):
    r = helm("lint", "--strict", CHART, *VALUE_SETS[name])
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_larder_command_line_is_one_the_binary_takes(name):
    """Each container's `larder` arguments, with the downward-API variables filled in, parsed by
    the binary (`--help` after them: flags are checked, nothing starts). An unknown flag, a
    flag of another command or a bad value exits 2."""
    seen = set()
    for doc, c in containers(render(VALUE_SETS[name])):
        if c.get("command") != ["larder"]:
            continue
        args = [a.replace("$(POD_IP)", "10.0.0.7").replace("$(NODE_NAME)", "gpu-node-1")
                .replace("$(POD_NAME)", "t-larder-master-0") for a in c["args"]]
        assert "$(" not in " ".join(args), args
        r = subprocess.run([LARDER, *args, "--help"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, f"{doc['kind']}/{c['name']}: {args}: {r.stderr}"
        seen.add(args[0])
    expected = {"master", "worker", "fuse"} | ({"mount"} if name == "all-on" else set())
    assert seen == expected


def validate(docs):
    """Runs validate_manifests.js (offline Kubernetes schemas) on `docs`."""
    import json
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "validate_manifests.js")
    return subprocess.run(["node", script], input=json.dumps(docs), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_manifest_is_valid_against_the_kubernetes_schemas(name):
    docs = render(VALUE_SETS[name])
    r = validate(docs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("valid   ") == len(docs)


def test_the_schema_check_catches_a_bad_manifest():
    docs = render([])
    worker = [d for d in docs if d["kind"] == "DaemonSet" and
              d["metadata"]["name"] == "t-larder-worker"][0]
    worker["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "x"
    r = validate([worker])
    assert r.returncode == 1
    assert "INVALID apps/v1 DaemonSet/t-larder-worker" in r.stdout


def test_defaults_promise_what_the_readme_says():
    docs = render([])
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    worker = by[("DaemonSet", "t-larder-worker")]
    spec = pod_spec(worker)
    assert {"key": "nvidia.com/gpu", "operator": "Exists",
            "effect": "NoSchedule"} in spec["tolerations"]
    res = spec["containers"][0]["resources"]
    # RAM tier 8Gi + 1Gi overhead, request equal to limit.
    assert res["requests"]["memory"] == res["limits"]["memory"] == "9216Mi"
    assert "--ram_capacity=8Gi" in spec["containers"][0]["args"]
    assert spec["terminationGracePeriodSeconds"] >= 60
    fuse = pod_spec(by[("DaemonSet", "t-larder-fuse")])
    c = fuse["containers"][0]
    mount = [m for m in c["volumeMounts"] if m["mountPath"] == "/mnt/larder"][0]
    assert mount["mountPropagation"] == "Bidirectional"
    assert c["lifecycle"]["preStop"]["exec"]["command"][0] == "fusermount3"
    assert "--auto_unmount=true" in c["args"]
    master = by[("StatefulSet", "t-larder-master")]
    mc = pod_spec(master)["containers"][0]
    assert mc["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert mc["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert master["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "state"
    # Every gRPC port beyond loopback authenticates: tokens from a Secret.
    for d, c in containers(docs):
        if c.get("command") == ["larder"] and c["args"][0] in ("master", "worker"):
            assert "--auth_tokens_file=/etc/larder/tokens/tokens" in c["args"]
    assert ("PodDisruptionBudget", "t-larder-worker") in by
    assert not [d for d in docs if d["kind"] == "Job"]  # No mounts declared.


def test_all_on_values_render_ha_nvme_tls_and_secrets_by_reference():
    docs = render(["-f", ALL_ON])
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    master = by[("StatefulSet", "t-larder-master")]
    assert master["spec"]["replicas"] == 3
    args = pod_spec(master)["containers"][0]["args"]
    assert any(a.startswith("--etcd=t-larder-etcd-0.t-larder-etcd.ml.svc:2379,") for a in args)
    assert "--tls_cert_file=/etc/larder/tls/tls.crt" in args
    assert ("StatefulSet", "t-larder-etcd") in by
    assert ("PodDisruptionBudget", "t-larder-master") in by
    worker = pod_spec(by[("DaemonSet", "t-larder-worker")])
    wargs = worker["containers"][0]["args"]
    assert "--nvme=/nvme/0:1500GiB,/nvme/1:1500GiB" in wargs
    assert worker["priorityClassName"] == "system-node-critical"
    fuse = pod_spec(by[("DaemonSet", "t-larder-fuse")])["containers"][0]
    assert fuse["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    assert any(m["mountPath"] == "/dev/fuse" for m in fuse["volumeMounts"])
    job = [d for d in docs if d["kind"] == "Job"][0]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    inits = pod_spec(job)["initContainers"]
    assert [i["args"][1] for i in inits] == ["/datasets/imagenet", "/datasets/shared"]
    # Credentials only by reference: no Secret is rendered with an existingSecret, and the
    # under-store Secrets are envFrom references.
    assert not [d for d in docs if d["kind"] == "Secret"]
    env_from = pod_spec(master)["containers"][0]["envFrom"]
    assert [e["secretRef"]["name"] for e in env_from] == [
        "larder-aws", "larder-azure", "larder-hdfs"]
    assert len([d for d in docs if d["kind"] == "PodMonitor"]) == 3


def test_generated_tokens_are_a_secret_and_a_tokens_file():
    docs = render([])
    secret = [d for d in docs if d["kind"] == "Secret"][0]
    data = secret["stringData"]
    assert len(data["admin"]) == 40 and len(data["reader"]) == 40
    assert data["tokens"] == f"admin {data['admin']}\nreader {data['reader']}\n"


def test_bad_values_are_refused_by_the_schema():
    for bad in (["--set", "worker.ramCapacity=8"], ["--set", "ha.replicas=2"],
                ["--set", "tls.enabled=true"], ["--set", "worker.memoryOverhead=lots"]):
        r = helm("template", "t", CHART, *bad)
        assert r.returncode != 0, bad


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_rendered_command_lines_run_a_cluster_that_serves_a_file(tmp_path):
    """master, worker, FUSE daemon and the mounts Job started with exactly the rendered
    command lines, only addresses and paths remapped to this machine, and a file read through
    the mount."""
    import signal
    import time
    data = tmp_path / "data" / "ds"
    data.mkdir(parents=True)
    (data / "hello.txt").write_bytes(b"served through the chart's command lines\n")
    docs = render(["--set", "master.allowedFileRoots={/data}",
                   "--set", "mounts[0].path=/datasets/ds",
                   "--set", "mounts[0].uri=file:///data/ds"])
    tokens = [d for d in docs if d["kind"] == "Secret"][0]["stringData"]
    (tmp_path / "tokens").mkdir()
    for key in ("admin", "reader", "tokens"):
        (tmp_path / "tokens" / key).write_text(tokens[key])
    (tmp_path / "mnt").mkdir()
    ports = {p: free_port() for p in (7060, 7061, 7070, 7071, 7072)}
    svc = "t-larder-master.ml.svc"
    mapping = [
        (f"{svc}:7060", f"127.0.0.1:{ports[7060]}"),
        ("10.0.0.7:7070", f"127.0.0.1:{ports[7070]}"),
        ("/etc/larder/tokens", str(tmp_path / "tokens")),
        ("/run/larder", str(tmp_path)),
        ("/var/lib/larder/master", str(tmp_path / "state")),
        ("/mnt/larder", str(tmp_path / "mnt")),
        ("file:///data", f"file://{tmp_path}/data"),
        ("=/data", f"={tmp_path}/data"),
    ] + [(f"0.0.0.0:{p}", f"127.0.0.1:{q}") for p, q in ports.items()]

    def command_line(kind, name, container=None):
        doc = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name][0]
        spec = pod_spec(doc)
        c = [c for c in spec.get("initContainers", []) + spec["containers"]
             if container is None or c["name"] == container][0]
        args = []
        for a in c["args"]:
            a = a.replace("$(NODE_NAME)", "node-1").replace("$(POD_IP)", "10.0.0.7")
            for old, new in mapping:
                a = a.replace(old, new)
            args.append(a)
        return [LARDER, *args]

    procs = []
    try:
        for kind, name in (("StatefulSet", "t-larder-master"), ("DaemonSet", "t-larder-worker")):
            log = open(tmp_path / f"{name}.log", "w")
            procs.append(subprocess.Popen(command_line(kind, name), stdout=log,
                                          stderr=subprocess.STDOUT))
            ready = f"larder {'master' if 'master' in name else 'worker'}: gRPC port"
            deadline = time.time() + 30
            while ready not in (tmp_path / f"{name}.log").read_text():
                assert procs[-1].poll() is None, (tmp_path / f"{name}.log").read_text()
                assert time.time() < deadline, (tmp_path / f"{name}.log").read_text()
                time.sleep(0.1)
        job = [d["metadata"]["name"] for d in docs if d["kind"] == "Job"][0]
        r = subprocess.run(command_line("Job", job, "mount-0"), capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        # Applied again (an upgrade): nothing changes, the Job still succeeds.
        r = subprocess.run(command_line("Job", job, "mount-0"), capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        log = open(tmp_path / "fuse.log", "w")
        procs.append(subprocess.Popen(command_line("DaemonSet", "t-larder-fuse"), stdout=log,
                                      stderr=subprocess.STDOUT))
        target = tmp_path / "mnt" / "datasets" / "ds" / "hello.txt"
        deadline = time.time() + 30
        while True:
            try:
                got = target.read_bytes()
                break
            except OSError:
                assert procs[-1].poll() is None, (tmp_path / "fuse.log").read_text()
                assert time.time() < deadline, (tmp_path / "fuse.log").read_text()
                time.sleep(0.2)
        assert got == (data / "hello.txt").read_bytes()
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["fusermount3", "-u", "-z", str(tmp_path / "mnt")],
                       capture_output=True)


def test_the_dockerfile_builds_with_the_scripts_ci_runs():
    """No container engine here: the Dockerfile's steps are the repository's scripts, which CI
    runs, and its runtime stage installs what runtime-packages.sh finds for the built binary."""
    text = open(os.path.join(ROOT, "Dockerfile")).read()
    for step in ("scripts/install-deps.sh", "scripts/build.sh",
                 "scripts/runtime-packages.sh /build/cli/larder", "FROM debian:12 AS build",
                 "FROM debian:12-slim", "fuse3", "COPY --from=build /build/cli/larder"):
        assert step in text, step
    r = subprocess.run([os.path.join(ROOT, "scripts", "runtime-packages.sh"), LARDER],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    packages = r.stdout.split()
    for needed in ("libgrpc++1.51", "libfuse3-3", "libprotobuf32", "libjemalloc2"):
        assert needed in packages, packages
    # Each is a package apt knows here (the runtime stage installs them by name).
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\\n", *packages],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
