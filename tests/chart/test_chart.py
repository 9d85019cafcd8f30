# Copyright 2026 The Larder Authors.
"""The Helm chart (charts/larder) checked with the real helm binary and the built larder.

No Kubernetes API server or container engine runs here: these tests lint and render the
chart, check what the manifests promise (probes, memory, propagation, secrets, TLS, network
policies, security contexts), run every `larder` command line of the rendered containers
against the binary of this build, so the chart cannot ask for a flag the binary does not
have, run the certificate hook Job's script against a stand-in for the Kubernetes API, and
start the daemons (and etcd) with exactly the rendered command lines and those certificates.
"""
import base64
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "charts", "larder")
HELM = os.path.join(ROOT, "tests", "servers", "bin", "helm")
LARDER = os.environ.get("LARDER_CLI", os.path.join(ROOT, "build", "cli", "larder"))
ALL_ON = os.path.join(CHART, "ci", "all-on-values.yaml")
# default: one master; ha: the defaults plus ha.enabled (three masters, the chart's etcd).
VALUE_SETS = {"default": [], "ha": ["--set", "ha.enabled=true"], "all-on": ["-f", ALL_ON]}


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


def by_name(docs):
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


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
    expected = {"master", "worker", "fuse", "csi"} | ({"mount"} if name == "all-on" else set())
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
    # No mounts declared: no mounts Job (the one Job is the certificate hook).
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Job"] == ["t-larder-certs"]


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
    # Bidirectional propagation is allowed only in privileged containers (the API server
    # refuses it otherwise): fuse.privileged=false, which this file used to set, cannot work.
    assert fuse["securityContext"]["privileged"] is True
    job = by[("Job", "t-larder-mounts-1")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    inits = pod_spec(job)["initContainers"]
    assert [i["args"][1] for i in inits] == [
        "/datasets/imagenet", "/datasets/shared", "/checkpoints"]
    assert "--writable" in inits[2]["args"] and "--writable" not in inits[0]["args"]
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
                ["--set", "worker.memoryOverhead=lots"],
                ["--set", "networkPolicy.enabled=yes"], ["--set", "nonRoot.uid=0"],
                ["--set", "certJob.validityDays=0"],
                ["--set", "networkPolicy.clientSelector.podName=x"],
                ["--set", "networkPolicy.extraClients[0].cidr=10.0.0.0/8"],
                # Cannot work (Bidirectional propagation needs a privileged container).
                ["--set", "fuse.privileged=false"],
                # Half of the chart's etcd's certificates: both must come from one CA.
                ["--set", "ha.enabled=true", "--set", "ha.etcd.tlsSecret=etcd-client"],
                ["--set", "ha.enabled=true", "--set", "ha.etcd.serverTlsSecret=etcd-server"]):
        r = helm("template", "t", CHART, *bad)
        assert r.returncode != 0, bad


NON_ROOT_COMPONENTS = {"master", "etcd", "mounts", "certs"}


def component(doc):
    return doc["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_pod_and_container_has_a_security_context(name):
    """Masters, etcd and both Jobs: not root, no privilege, no capability, read-only root,
    seccomp RuntimeDefault. Workers: root (they must own their host directories), but no
    capability (CHOWN with shortCircuitAllowedGids) and no privilege. FUSE: the one privileged
    container (mounting, and Bidirectional propagation)."""
    docs = render(VALUE_SETS[name])
    seen = set()
    for d in docs:
        spec = pod_spec(d)
        if not spec:
            continue
        comp = component(d)
        seen.add(comp)
        psc = spec["securityContext"]
        assert spec["automountServiceAccountToken"] is (comp == "certs"), d["metadata"]["name"]
        for c in spec.get("initContainers", []) + spec["containers"]:
            csc = c["securityContext"]
            where = f"{d['kind']}/{d['metadata']['name']}/{c['name']}"
            if comp in NON_ROOT_COMPONENTS:
                assert psc["runAsNonRoot"] is True and csc["runAsNonRoot"] is True, where
                assert psc["runAsUser"] != 0 and psc["runAsGroup"] != 0, where
                assert psc["fsGroup"] == psc["runAsGroup"], where
                assert psc["seccompProfile"] == {"type": "RuntimeDefault"}, where
                assert csc == {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                               "readOnlyRootFilesystem": True,
                               "capabilities": {"drop": ["ALL"]}}, where
            elif comp == "worker":
                assert psc["seccompProfile"] == {"type": "RuntimeDefault"}, where
                assert csc["runAsUser"] == 0 and csc["privileged"] is False, where
                assert csc["allowPrivilegeEscalation"] is False, where
                assert csc["readOnlyRootFilesystem"] is True, where
                assert csc["capabilities"]["drop"] == ["ALL"], where
                added = csc["capabilities"].get("add", [])
                gids = name == "all-on"  # shortCircuitAllowedGids set: the socket's group.
                assert added == (["CHOWN"] if gids else []), where
            elif c["name"] == "node-driver-registrar":
                # Root (it writes the kubelet's registration directory), nothing else.
                assert comp == "fuse", where
                assert csc["privileged"] is False and csc["runAsUser"] == 0, where
                assert csc["allowPrivilegeEscalation"] is False, where
                assert csc["readOnlyRootFilesystem"] is True, where
                assert csc["capabilities"] == {"drop": ["ALL"]}, where
            else:
                # The FUSE daemon and the CSI plugin (mounting, Bidirectional propagation).
                assert comp == "fuse" and c["name"] in ("fuse", "csi"), where
                assert psc["runAsUser"] == 0 and psc["runAsNonRoot"] is False, where
                assert csc["privileged"] is True and csc["readOnlyRootFilesystem"] is True
    expected = {"master", "worker", "fuse", "certs"} | ({"etcd"} if name != "default" else set())
    assert seen == expected | ({"mounts"} if name == "all-on" else set())
    if name == "all-on":  # nonRoot.uid / gid
        master = pod_spec(by_name(docs)[("StatefulSet", "t-larder-master")])
        assert master["securityContext"]["runAsUser"] == 10001


@pytest.mark.parametrize("persistence", ["true", "false"])
def test_with_a_read_only_root_the_daemons_write_only_to_volumes(persistence):
    """The state directory (a claim, or an emptyDir without persistence), the socket and the
    NVMe directories are volumes: nothing a daemon writes is on the read-only root."""
    docs = render(["--set", f"master.persistence.enabled={persistence}",
                   "--set-json",
                   'worker.nvme=[{"hostPath": "/mnt/nvme0/larder", "capacity": "1TiB"}]'])
    for d, c in containers(docs):
        if c.get("command") != ["larder"]:
            continue
        if c["args"][0] == "csi":  # It writes its socket, and mounts in the pods directory.
            sock = [a.split("unix://", 1)[1] for a in c["args"]
                    if a.startswith("--csi_endpoint=")][0]
            assert os.path.dirname(sock) in [m["mountPath"] for m in c["volumeMounts"]]
            continue
        if c["args"][0] not in ("master", "worker", "fuse"):
            continue
        mounts = [m["mountPath"] for m in c["volumeMounts"]]
        written = [a.split("=", 1)[1] for a in c["args"]
                   if a.startswith(("--state_dir=", "--short_circuit_socket="))]
        written += [x.split(":")[0] for a in c["args"] if a.startswith("--nvme=")
                    for x in a.split("=", 1)[1].split(",")]
        if c["args"][0] == "fuse":
            written.append(c["args"][1])  # The mount point.
        for path in written:
            assert any(path == m or path.startswith(m + "/") for m in mounts), (path, mounts)
        assert "/tmp" in mounts
    assert len([d for d, c in containers(docs) if c.get("command") == ["larder"]]) == 4


def test_tls_is_on_by_default_and_each_pod_gets_only_the_files_it_uses():
    docs = render([])
    by = by_name(docs)
    ca = "--tls_ca_file=/etc/larder/tls/ca.crt"
    name = "--tls_server_name=t-larder-master.ml.svc"
    server = ["--tls_cert_file=/etc/larder/tls/tls.crt", "--tls_key_file=/etc/larder/tls/tls.key"]
    for kind, obj, tokens, cert in (("StatefulSet", "t-larder-master", ["tokens", "admin"], True),
                                    ("DaemonSet", "t-larder-worker", ["tokens", "admin"], True),
                                    ("DaemonSet", "t-larder-fuse", ["reader"], False)):
        spec = pod_spec(by[(kind, obj)])
        args = spec["containers"][0]["args"]
        assert ca in args and name in args, obj
        assert all(a in args for a in server) == cert, obj
        vols = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
        assert vols["tls"]["secretName"] == "t-larder-tls"
        assert [i["key"] for i in vols["tls"]["items"]] == (
            ["ca.crt", "tls.crt", "tls.key"] if cert else ["ca.crt"]), obj
        assert [i["key"] for i in vols["tokens"]["items"]] == tokens, obj
    # A Secret of the user's: used as is, no certificate Job.
    docs = render(["--set", "tls.secretName=mine"])
    assert not [d for d in docs if d["kind"] in ("Job", "Role", "ServiceAccount")]
    master = pod_spec(by_name(docs)[("StatefulSet", "t-larder-master")])
    assert {v["name"]: v.get("secret", {}).get("secretName") for v in master["volumes"]}[
        "tls"] == "mine"
    assert not [a for a in master["containers"][0]["args"] if "tls_server_name" in a]
    # Off: no TLS flag anywhere.
    docs = render(["--set", "tls.enabled=false"])
    for d, c in containers(docs):
        assert not [a for a in c.get("args", []) if a.startswith("--tls")], c["name"]


def test_the_certificate_job_is_a_pre_install_hook_with_a_narrow_role():
    docs = render(["--set", "ha.enabled=true"])
    by = by_name(docs)
    hooks = {}
    for kind in ("ServiceAccount", "ConfigMap", "Role", "RoleBinding", "Job"):
        d = by[(kind, "t-larder-certs")]
        a = d["metadata"]["annotations"]
        assert a["helm.sh/hook"] == "pre-install,pre-upgrade", kind
        assert a["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded", kind
        hooks[kind] = int(a["helm.sh/hook-weight"])
    # Its ServiceAccount, Role and script exist before the Job runs.
    assert max(v for k, v in hooks.items() if k != "Job") < hooks["Job"]
    role = by[("Role", "t-larder-certs")]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"],
         "resourceNames": ["t-larder-tls", "t-larder-etcd-tls"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]
    binding = by[("RoleBinding", "t-larder-certs")]
    assert binding["roleRef"]["name"] == "t-larder-certs"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "t-larder-certs", "namespace": "ml"}]
    job = by[("Job", "t-larder-certs")]
    spec = pod_spec(job)
    assert spec["serviceAccountName"] == "t-larder-certs"
    c = spec["containers"][0]
    assert c["image"] == "larder:0.1.0"
    assert c["command"] == ["/bin/sh", "/etc/larder/certs/certs.sh"]
    script = by[("ConfigMap", "t-larder-certs")]["data"]["certs.sh"]
    assert script == open(os.path.join(CHART, "files", "certs.sh")).read()
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["LARDER_TLS_SECRET"] == "t-larder-tls"
    assert env["LARDER_ETCD_SECRET"] == "t-larder-etcd-tls"
    # No Secret named by the user for the chart's etcd: the Job makes them, and only those
    # the user did not name.
    docs = render(["--set", "ha.enabled=true", "--set", "tls.secretName=mine"])
    env = {e["name"]: e["value"] for e in
           pod_spec(by_name(docs)[("Job", "t-larder-certs")])["containers"][0]["env"]}
    assert env["LARDER_TLS_SECRET"] == "" and env["LARDER_ETCD_SECRET"] == "t-larder-etcd-tls"
    docs = render(["--set", "tls.enabled=false"])
    assert not [d for d in docs if d["metadata"]["name"] == "t-larder-certs"]


def test_the_charts_etcd_speaks_only_tls_with_client_certificates():
    docs = render(["--set", "ha.enabled=true"])
    by = by_name(docs)
    etcd = pod_spec(by[("StatefulSet", "t-larder-etcd")])
    args = etcd["containers"][0]["args"]
    for flag in ("--client-cert-auth", "--trusted-ca-file=/etc/etcd/tls/ca.crt",
                 "--cert-file=/etc/etcd/tls/tls.crt", "--key-file=/etc/etcd/tls/tls.key",
                 "--peer-client-cert-auth", "--peer-trusted-ca-file=/etc/etcd/tls/ca.crt",
                 "--peer-cert-file=/etc/etcd/tls/tls.crt",
                 "--peer-key-file=/etc/etcd/tls/tls.key",
                 "--listen-client-urls=https://0.0.0.0:2379",
                 "--listen-peer-urls=https://0.0.0.0:2380"):
        assert flag in args, flag
    assert "http://" not in " ".join(args)
    assert "--initial-cluster=t-larder-etcd-0=https://t-larder-etcd-0.t-larder-etcd.ml.svc:2380," \
        in " ".join(args)
    vol = [v for v in etcd["volumes"] if v["name"] == "tls"][0]["secret"]
    assert vol["secretName"] == "t-larder-etcd-tls"
    assert {i["key"]: i["path"] for i in vol["items"]} == {
        "ca.crt": "ca.crt", "server.crt": "tls.crt", "server.key": "tls.key"}
    master = pod_spec(by[("StatefulSet", "t-larder-master")])
    margs = master["containers"][0]["args"]
    for flag in ("--etcd_ca_file=/etc/larder/etcd/ca.crt",
                 "--etcd_cert_file=/etc/larder/etcd/tls.crt",
                 "--etcd_key_file=/etc/larder/etcd/tls.key"):
        assert flag in margs, flag
    vol = [v for v in master["volumes"] if v["name"] == "etcd-tls"][0]["secret"]
    assert vol["secretName"] == "t-larder-etcd-tls"
    assert {i["key"]: i["path"] for i in vol["items"]} == {
        "ca.crt": "ca.crt", "client.crt": "tls.crt", "client.key": "tls.key"}
    # Secrets of the user's (cert-manager's, say): used as they are.
    docs = render(["--set", "ha.enabled=true", "--set", "ha.etcd.tlsSecret=etcd-client",
                   "--set", "ha.etcd.serverTlsSecret=etcd-server"])
    by = by_name(docs)
    etcd = pod_spec(by[("StatefulSet", "t-larder-etcd")])
    assert [v for v in etcd["volumes"] if v["name"] == "tls"][0]["secret"][
        "secretName"] == "etcd-server"
    master = pod_spec(by[("StatefulSet", "t-larder-master")])
    assert [v for v in master["volumes"] if v["name"] == "etcd-tls"][0]["secret"] == {
        "secretName": "etcd-client", "defaultMode": 0o400}
    env = {e["name"]: e["value"] for e in
           pod_spec(by[("Job", "t-larder-certs")])["containers"][0]["env"]}
    assert env["LARDER_ETCD_SECRET"] == ""
    # An external etcd: the client certificate only when a Secret is named.
    docs = render(["--set", "ha.enabled=true", "--set", "ha.etcd.endpoints=etcd.example:2379"])
    assert ("StatefulSet", "t-larder-etcd") not in by_name(docs)
    margs = pod_spec(by_name(docs)[("StatefulSet", "t-larder-master")])["containers"][0]["args"]
    assert "--etcd=etcd.example:2379" in margs
    assert not [a for a in margs if a.startswith("--etcd_ca_file")]


LARDER_PODS = {"podSelector": {
    "matchLabels": {"app.kubernetes.io/name": "larder", "app.kubernetes.io/instance": "t"},
    "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                          "values": ["master", "worker", "fuse", "mounts"]}]}}


def selector(comp):
    return {"matchLabels": {"app.kubernetes.io/name": "larder",
                            "app.kubernetes.io/instance": "t",
                            "app.kubernetes.io/component": comp}}


def test_network_policies_admit_only_larder_and_the_named_clients():
    docs = render(["--set", "ha.enabled=true"])
    policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    assert set(policies) == {"t-larder-master", "t-larder-worker", "t-larder-fuse",
                             "t-larder-etcd"}
    for p in policies.values():
        assert p["policyTypes"] == ["Ingress"]
    etcd = policies["t-larder-etcd"]
    assert etcd["podSelector"] == selector("etcd")
    assert etcd["ingress"] == [
        {"ports": [{"port": 2379, "protocol": "TCP"}],
         "from": [{"podSelector": selector("master")}]},
        {"ports": [{"port": 2380, "protocol": "TCP"}],
         "from": [{"podSelector": selector("etcd")}]}]
    for comp, grpc, metrics in (("master", 7060, 7061), ("worker", 7070, 7071)):
        p = policies[f"t-larder-{comp}"]
        assert p["podSelector"] == selector(comp)
        assert p["ingress"] == [
            {"ports": [{"port": grpc, "protocol": "TCP"}], "from": [LARDER_PODS]},
            {"ports": [{"port": metrics, "protocol": "TCP"}]}]  # Metrics: anyone.
    assert policies["t-larder-fuse"]["ingress"] == [
        {"ports": [{"port": 7072, "protocol": "TCP"}]}]
    # The pods the policies name carry those labels.
    for d in docs:
        spec = pod_spec(d)
        if spec and component(d) != "certs":
            labels = d["spec"]["template"]["metadata"]["labels"]
            assert labels["app.kubernetes.io/instance"] == "t"
            assert labels["app.kubernetes.io/component"] in {"master", "worker", "fuse",
                                                              "mounts", "etcd"}
    # Clients and a metrics scraper named in values.
    docs = render(["-f", ALL_ON])
    master = [d for d in docs if d["kind"] == "NetworkPolicy" and
              d["metadata"]["name"] == "t-larder-master"][0]["spec"]
    assert master["ingress"][0]["from"] == [
        LARDER_PODS,
        {"podSelector": {"matchLabels": {"larder-client": "true"}},
         "namespaceSelector": {"matchExpressions": [
             {"key": "kubernetes.io/metadata.name", "operator": "In",
              "values": ["training", "research"]}]}},
        {"ipBlock": {"cidr": "10.20.0.0/16"}}]
    assert master["ingress"][1]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    docs = render(["--set", "networkPolicy.enabled=false"])
    assert not [d for d in docs if d["kind"] == "NetworkPolicy"]


class FakeKubeApi:
    """The part of the Kubernetes API the certificate Job uses: GET and POST of Secrets in
    one namespace, with the ServiceAccount's bearer token checked."""

    def __init__(self, namespace="ml", token="service-account-token-0123456789"):
        self.namespace, self.token = namespace, token
        self.secrets, self.requests = {}, []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def check(self):
                api.requests.append((self.command, self.path))
                if self.headers.get("Authorization") != f"Bearer {api.token}":
                    self.answer(401, {"kind": "Status", "code": 401})
                    return None
                base = f"/api/v1/namespaces/{api.namespace}/secrets"
                if not self.path.startswith(base):
                    self.answer(403, {"kind": "Status", "code": 403})
                    return None
                return self.path[len(base):].lstrip("/")

            def do_GET(self):
                name = self.check()
                if name is None:
                    return
                if name in api.secrets:
                    self.answer(200, api.secrets[name])
                else:
                    self.answer(404, {"kind": "Status", "reason": "NotFound", "code": 404})

            def do_POST(self):
                if self.check() != "":
                    return
                obj = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                name = obj["metadata"]["name"]
                if name in api.secrets:
                    self.answer(409, {"kind": "Status", "reason": "AlreadyExists",
                                      "code": 409})
                    return
                api.secrets[name] = obj
                self.answer(201, obj)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def write_tokens_and_run_cert_job(docs, pods, tmp_path):
    """Writes the chart's token Secret under pods/tokens and runs the
    certificate hook Job against a fake API; returns the API with its
    Secrets."""
    tokens = [d for d in docs if d["kind"] == "Secret"][0]["stringData"]
    (pods / "tokens").mkdir()
    for key in ("admin", "reader", "tokens"):
        (pods / "tokens" / key).write_text(tokens[key])
    api = FakeKubeApi()
    try:
        r = run_cert_job(docs, api, tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        api.close()
    return api


def run_cert_job(docs, api, tmp_path, token=None):
    """The certificate Job's container, its command, script and environment as rendered,
    against `api` (its ServiceAccount files in a temp dir)."""
    by = by_name(docs)
    c = pod_spec(by[("Job", "t-larder-certs")])["containers"][0]
    mount = [m for m in c["volumeMounts"] if m["name"] == "script"][0]["mountPath"]
    work = tmp_path / "certjob"
    work.mkdir(exist_ok=True)
    (work / "certs.sh").write_text(by[("ConfigMap", "t-larder-certs")]["data"]["certs.sh"])
    sa = work / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text(token or api.token)
    (sa / "namespace").write_text(api.namespace)
    (sa / "ca.crt").write_text("")
    command = [a.replace(mount, str(work)) for a in c["command"]]
    env = {e["name"]: e["value"] for e in c["env"]}
    env.update(PATH=os.environ["PATH"], TMPDIR=str(work), LARDER_KUBE_API=api.url,
               LARDER_SA_DIR=str(sa))
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def write_secret(secret, directory, items=None):
    """A Secret's files as a secret volume with `items` (key: path) would show them."""
    directory.mkdir(parents=True, exist_ok=True)
    items = items or {k: k for k in secret["data"]}
    for key, path in items.items():
        (directory / path).write_bytes(base64.b64decode(secret["data"][key]))
        os.chmod(directory / path, 0o600)
    return directory


def openssl(*args):
    r = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


def names_host(cert, host):
    code, out = openssl("x509", "-in", str(cert), "-noout", "-checkhost", host)
    return code == 0 and "does match" in out


def test_the_certificate_job_makes_each_secret_once_and_the_certificates_fit(tmp_path):
    """The hook Job's script as rendered, against a stand-in for the Kubernetes API: each
    Secret is made once (an upgrade changes nothing; only a missing one is made again), a
    refusal fails the Job; the certificates chain to their own CA only, name what the
    rendered command lines dial, and carry the key usages gRPC and etcd check."""
    docs = render(["--set", "ha.enabled=true"])
    api = FakeKubeApi()
    try:
        r = run_cert_job(docs, api, tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert set(api.secrets) == {"t-larder-tls", "t-larder-etcd-tls"}
        assert [m for m, _ in api.requests] == ["GET", "POST", "GET", "POST"]
        # Again (an upgrade): both exist, nothing is made or written.
        before = json.dumps(api.secrets, sort_keys=True)
        api.requests.clear()
        r = run_cert_job(docs, api, tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert [m for m, _ in api.requests] == ["GET", "GET"]
        assert json.dumps(api.secrets, sort_keys=True) == before
        assert "Secret t-larder-tls exists: kept" in r.stdout
        # Only the missing one is made.
        del api.secrets["t-larder-etcd-tls"]
        api.requests.clear()
        r = run_cert_job(docs, api, tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert [m for m, _ in api.requests] == ["GET", "GET", "POST"]
        made = dict(api.secrets)
        # A refusal of the API server fails the Job, with the status.
        api.requests.clear()
        del api.secrets["t-larder-tls"]
        r = run_cert_job(docs, api, tmp_path, token="not-the-service-account-token")
        assert r.returncode != 0 and "reading Secret t-larder-tls: HTTP 401" in r.stderr, r
        assert [m for m, _ in api.requests] == ["GET"]
    finally:
        api.close()
    larder = made["t-larder-tls"]
    assert larder["type"] == "kubernetes.io/tls"
    assert larder["metadata"]["labels"] == {"app.kubernetes.io/name": "larder",
                                            "app.kubernetes.io/instance": "t",
                                            "app.kubernetes.io/component": "certs"}
    assert set(larder["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    etcd = made["t-larder-etcd-tls"]
    assert set(etcd["data"]) == {"ca.crt", "server.crt", "server.key", "client.crt",
                                 "client.key"}
    l = write_secret(larder, tmp_path / "larder")
    e = write_secret(etcd, tmp_path / "etcd")
    # Each set verifies against its own CA and not the other's: a Larder certificate (on
    # every GPU node) is no key to etcd.
    for ca, cert, ok in ((l / "ca.crt", l / "tls.crt", True),
                         (e / "ca.crt", e / "server.crt", True),
                         (e / "ca.crt", e / "client.crt", True),
                         (e / "ca.crt", l / "tls.crt", False),
                         (l / "ca.crt", e / "client.crt", False)):
        code, out = openssl("verify", "-CAfile", str(ca), str(cert))
        assert (code == 0) == ok, (ca, cert, out)
    # The names clients dial: the master Service, each HA master (and the server name the
    # chart passes, for workers dialled by IP); each etcd endpoint of --etcd.
    by = by_name(docs)
    margs = pod_spec(by[("StatefulSet", "t-larder-master")])["containers"][0]["args"]
    fuse = pod_spec(by[("DaemonSet", "t-larder-fuse")])["containers"][0]["args"]
    master_hosts = [h.rsplit(":", 1)[0] for a in fuse if a.startswith("--master=")
                    for h in a.split("=", 1)[1].split(",")]
    assert len(master_hosts) == 3
    server_name = [a.split("=", 1)[1] for a in fuse if a.startswith("--tls_server_name=")][0]
    for host in master_hosts + [server_name, "t-larder-master.ml.svc", "localhost"]:
        assert names_host(l / "tls.crt", host), host
    etcd_hosts = [h.rsplit(":", 1)[0] for a in margs if a.startswith("--etcd=")
                  for h in a.split("=", 1)[1].split(",")]
    assert len(etcd_hosts) == 3
    for host in etcd_hosts + [h + ".cluster.local" for h in etcd_hosts]:
        assert names_host(e / "server.crt", host), host
    assert not names_host(e / "server.crt", "t-larder-master.ml.svc")
    both = "TLS Web Server Authentication, TLS Web Client Authentication"
    for cert, usage in ((l / "tls.crt", both), (e / "server.crt", both),
                        (e / "client.crt", "TLS Web Client Authentication")):
        code, out = openssl("x509", "-in", str(cert), "-noout", "-ext", "extendedKeyUsage")
        assert usage in out, (cert, out)
    # The masters' client certificate names no host: etcd would check it against the
    # master's address.
    code, out = openssl("x509", "-in", str(e / "client.crt"), "-noout", "-ext",
                        "subjectAltName")
    assert "DNS:" not in out and "IP" not in out, out


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_the_pod(doc, container):
    """A setpriv prefix that runs a process as the rendered securityContext says (when this
    test runs as root): its uid and gid, no capability when all are dropped (but those added),
    no_new_privs without privilege escalation. Empty when not root or for a privileged
    container."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return []
    psc = pod_spec(doc).get("securityContext", {})
    csc = container.get("securityContext", {})
    if csc.get("privileged"):
        return []
    uid = csc.get("runAsUser", psc.get("runAsUser", 0))
    gid = csc.get("runAsGroup", psc.get("runAsGroup", 0))
    prefix = ["setpriv"]
    if uid != 0 or gid != 0:
        prefix += [f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    caps = csc.get("capabilities", {})
    if caps.get("drop") == ["ALL"]:
        keep = "".join(f",+{c.lower()}" for c in caps.get("add", []))
        prefix += ["--inh-caps=-all", f"--bounding-set=-all{keep}"]
    if csc.get("allowPrivilegeEscalation") is False:
        prefix.append("--no-new-privs")
    return prefix + ["--"]


def shared_dir():
    """A temp dir every user may pass through (pytest's tmp_path is root's alone), for what
    the pods that do not run as root read."""
    import tempfile
    from pathlib import Path
    d = Path(tempfile.mkdtemp(prefix="larder-chart-"))
    os.chmod(d, 0o755)
    return d


def as_the_kubelet_gives_it(path, fs_group, secret):
    """Ownership as the kubelet sets it for a pod with fsGroup (when this test runs as root):
    a Secret volume root's, group fsGroup, read-only; another volume group-writable."""
    if os.geteuid() != 0:
        return
    os.chown(path, 0, fs_group)
    os.chmod(path, 0o750 if secret else 0o2770)
    if secret:
        for f in path.iterdir():
            os.chown(f, 0, fs_group)
            os.chmod(f, 0o440)


def test_the_rendered_command_lines_run_a_cluster_that_serves_a_file(tmp_path):
    """master, worker, FUSE daemon and the mounts Job started with exactly the rendered
    command lines, only addresses and paths remapped to this machine, with the certificates
    the certificate Job makes (TLS is on by default), each as its securityContext says (the
    master and the Job as uid 65532, the worker as root without capabilities; their files as
    the kubelet shows them, group fsGroup), and a file read through the mount."""
    import signal
    import time
    docs = render(["--set", "master.allowedFileRoots={/data}",
                   "--set", "mounts[0].path=/datasets/ds",
                   "--set", "mounts[0].uri=file:///data/ds"])
    fs_group = pod_spec(by_name(docs)[("StatefulSet", "t-larder-master")])[
        "securityContext"]["fsGroup"]
    # The master's volumes, and the file:// root, which it must be able to read.
    pods = shared_dir()
    data = pods / "data" / "ds"
    data.mkdir(parents=True)
    (data / "hello.txt").write_bytes(b"served through the chart's command lines\n")
    api = write_tokens_and_run_cert_job(docs, pods, tmp_path)
    write_secret(api.secrets["t-larder-tls"], pods / "tls")
    (pods / "state").mkdir()
    for d in ("tokens", "tls"):
        as_the_kubelet_gives_it(pods / d, fs_group, secret=True)
    as_the_kubelet_gives_it(pods / "state", fs_group, secret=False)
    (tmp_path / "mnt").mkdir()
    ports = {p: free_port() for p in (7060, 7061, 7070, 7071, 7072)}
    svc = "t-larder-master.ml.svc"
    mapping = [
        (f"{svc}:7060", f"127.0.0.1:{ports[7060]}"),
        ("10.0.0.7:7070", f"127.0.0.1:{ports[7070]}"),
        ("/etc/larder/tokens", str(pods / "tokens")),
        ("/etc/larder/tls", str(pods / "tls")),
        ("/run/larder", str(tmp_path)),
        ("/var/lib/larder/master", str(pods / "state")),
        ("/mnt/larder", str(tmp_path / "mnt")),
        ("file:///data", f"file://{pods}/data"),
        ("=/data", f"={pods}/data"),
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
        return as_the_pod(doc, c) + [LARDER, *args]

    if os.geteuid() == 0 and shutil.which("setpriv"):
        assert command_line("StatefulSet", "t-larder-master")[:4] == [
            "setpriv", "--reuid=65532", "--regid=65532", "--clear-groups"]
        assert command_line("DaemonSet", "t-larder-worker")[:4] == [
            "setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
        assert command_line("DaemonSet", "t-larder-fuse")[0] == LARDER  # Privileged.

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
        job = "t-larder-mounts-1"
        r = subprocess.run(command_line("Job", job, "mount-0"), capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        # Applied again (an upgrade): nothing changes, the Job still succeeds.
        r = subprocess.run(command_line("Job", job, "mount-0"), capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        if os.geteuid() == 0 and shutil.which("setpriv"):
            # The master wrote its state as uid 65532, in the volume fsGroup gave it.
            owners = {f.stat().st_uid for f in (pods / "state").rglob("*")}
            assert owners == {65532}, owners
        # The port speaks TLS: the same command without the CA is refused.
        plain = [a for a in command_line("Job", job, "mount-0") if not a.startswith("--tls")]
        assert len(plain) == len(command_line("Job", job, "mount-0")) - 2
        r = subprocess.run(plain, capture_output=True, text=True, timeout=30)
        assert r.returncode != 0, r.stdout + r.stderr
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
        shutil.rmtree(pods, ignore_errors=True)


@pytest.mark.skipif(shutil.which("etcd") is None, reason="no etcd (scripts/install-deps.sh)")
def test_the_rendered_etcd_and_master_run_on_tls_and_etcd_refuses_others(tmp_path):
    """The chart's etcd (three members, peer TLS) and an HA master started with exactly the
    rendered command lines, as their securityContext says (uid 65532, no capability), and the
    certificate Job's certificates (member names remapped to localhost, which the certificate
    also names): the members form a cluster, the master leads and a mount is stored through
    it; etcd refuses plain HTTP, a caller without a client certificate and one with a
    certificate of Larder's CA, and admits the masters' certificate."""
    import signal
    import time
    import urllib.request
    docs = render(["--set", "ha.enabled=true",
                   "--set", "master.allowedFileRoots={/data}",
                   "--set", "mounts[0].path=/datasets/ds",
                   "--set", "mounts[0].uri=file:///data/ds"])
    by = by_name(docs)
    members = by[("StatefulSet", "t-larder-etcd")]["spec"]["replicas"]
    assert members == 3
    fs_group = pod_spec(by[("StatefulSet", "t-larder-etcd")])["securityContext"]["fsGroup"]
    pods = shared_dir()
    (pods / "data" / "ds").mkdir(parents=True)
    api = write_tokens_and_run_cert_job(docs, pods, tmp_path)

    def volume_items(kind, name, volume):
        spec = pod_spec(by[(kind, name)])
        v = [v for v in spec["volumes"] if v["name"] == volume][0]["secret"]
        return api.secrets[v["secretName"]], {i["key"]: i["path"] for i in v["items"]}

    write_secret(api.secrets["t-larder-tls"], pods / "tls")
    server, items = volume_items("StatefulSet", "t-larder-etcd", "tls")
    write_secret(server, pods / "etcd-tls", items)
    client, items = volume_items("StatefulSet", "t-larder-master", "etcd-tls")
    write_secret(client, pods / "master-etcd-tls", items)
    for d in ("tokens", "tls", "etcd-tls", "master-etcd-tls"):
        as_the_kubelet_gives_it(pods / d, fs_group, secret=True)
    for i in range(members):  # Each member's volume; etcd makes its data directory in it.
        (pods / f"etcd-volume-{i}").mkdir()
        as_the_kubelet_gives_it(pods / f"etcd-volume-{i}", fs_group, secret=False)
    client_ports = [free_port() for _ in range(members)]
    peer_ports = [free_port() for _ in range(members)]
    ports = {7060: free_port(), 7061: free_port()}
    dead = [free_port(), free_port()]  # Masters 1 and 2: nobody there.
    mapping = [
        ("t-larder-master-0.t-larder-master-headless.ml.svc:7060", f"127.0.0.1:{ports[7060]}"),
        ("t-larder-master-1.t-larder-master-headless.ml.svc:7060", f"127.0.0.1:{dead[0]}"),
        ("t-larder-master-2.t-larder-master-headless.ml.svc:7060", f"127.0.0.1:{dead[1]}"),
        ("/etc/etcd/tls", str(pods / "etcd-tls")),
        ("/etc/larder/etcd", str(pods / "master-etcd-tls")),
        ("/etc/larder/tokens", str(pods / "tokens")),
        ("/etc/larder/tls", str(pods / "tls")),
        ("file:///data", f"file://{pods}/data"),
        ("=/data", f"={pods}/data"),
    ] + [(f"0.0.0.0:{p}", f"127.0.0.1:{q}") for p, q in ports.items()]
    for i in range(members):  # Every member's name is localhost, with ports of its own.
        member = f"t-larder-etcd-{i}.t-larder-etcd.ml.svc"
        mapping += [(f"{member}:2379", f"localhost:{client_ports[i]}"),
                    (f"{member}:2380", f"localhost:{peer_ports[i]}")]

    def command_line(kind, name, container=None, ordinal=0):
        doc = by[(kind, name)]
        spec = pod_spec(doc)
        c = [c for c in spec.get("initContainers", []) + spec["containers"]
             if container is None or c["name"] == container][0]
        own = [("$(POD_NAME)", f"{name}-{ordinal}")]
        if c["command"] == ["etcd"]:  # This member's listeners and volume.
            own += [("0.0.0.0:2379", f"127.0.0.1:{client_ports[ordinal]}"),
                    ("0.0.0.0:2380", f"127.0.0.1:{peer_ports[ordinal]}"),
                    ("/var/lib/etcd", str(pods / f"etcd-volume-{ordinal}"))]
        args = []
        for a in c["args"]:
            for old, new in own + mapping:
                a = a.replace(old, new)
            args.append(a)
        binary = shutil.which("etcd") if c["command"] == ["etcd"] else LARDER
        return as_the_pod(doc, c) + [binary, *args]

    def leader():
        url = f"http://127.0.0.1:{ports[7061]}/metrics"
        try:
            text = urllib.request.urlopen(url, timeout=2).read().decode()
        except OSError:
            return False
        return any(l.startswith("larder_master_leader ") and l.split()[1] in ("1", "1.0")
                   for l in text.splitlines())

    def etcd_get(*curl_args, scheme="https", member=0):
        r = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}",
                            "--max-time", "10", *curl_args,
                            f"{scheme}://localhost:{client_ports[member]}/version"],
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout + r.stderr

    def logs():
        return "".join(f"--- {f.name}\n{f.read_text()[-3000:]}"
                       for f in sorted(tmp_path.glob("*.log")))

    master_cert = ["--cert", str(pods / "master-etcd-tls" / "tls.crt"),
                   "--key", str(pods / "master-etcd-tls" / "tls.key")]
    etcd_ca = str(pods / "etcd-tls" / "ca.crt")
    procs = []
    try:
        for i in range(members):
            etcd_cmd = command_line("StatefulSet", "t-larder-etcd", ordinal=i)
            joined = " ".join(etcd_cmd)
            assert "--client-cert-auth" in etcd_cmd and "--peer-client-cert-auth" in etcd_cmd
            assert f"--initial-advertise-peer-urls=https://localhost:{peer_ports[i]}" in joined
            log = open(tmp_path / f"etcd-{i}.log", "w")
            procs.append(subprocess.Popen(etcd_cmd, stdout=log, stderr=subprocess.STDOUT))
        master_cmd = command_line("StatefulSet", "t-larder-master")
        assert "--etcd=" + ",".join(f"localhost:{p}" for p in client_ports) in master_cmd
        log = open(tmp_path / "master.log", "w")
        procs.append(subprocess.Popen(master_cmd, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 60
        while not leader():
            assert all(p.poll() is None for p in procs), logs()
            assert time.time() < deadline, logs()
            time.sleep(0.2)
        # A mount, stored in etcd through the master, as the mounts Job makes it.
        r = subprocess.run(command_line("Job", "t-larder-mounts-1", "mount-0"),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        # The members formed one cluster over peer TLS: each answers, with the same
        # cluster ID and three members.
        ids = set()
        for i in range(members):
            r = subprocess.run(
                ["curl", "-sS", "--max-time", "10", "--cacert", etcd_ca, *master_cert,
                 "-X", "POST", "-d", "{}",
                 f"https://localhost:{client_ports[i]}/v3/cluster/member/list"],
                capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr + logs()
            listed = json.loads(r.stdout)
            assert len(listed["members"]) == members, listed
            assert all(u.startswith("https://") for m in listed["members"]
                       for u in m["peerURLs"]), listed
            ids.add(listed["header"]["cluster_id"])
        assert len(ids) == 1, ids
        # etcd: plain HTTP, no client certificate, Larder's certificate: refused.
        code, out = etcd_get(scheme="http")
        assert "etcdserver" not in out, out
        code, out = etcd_get("--cacert", etcd_ca)
        assert code != 0 and "etcdserver" not in out, out
        code, out = etcd_get("--cacert", etcd_ca, "--cert", str(pods / "tls" / "tls.crt"),
                             "--key", str(pods / "tls" / "tls.key"))
        assert code != 0 and "etcdserver" not in out, out
        # The masters' certificate: admitted.
        code, out = etcd_get("--cacert", etcd_ca, *master_cert)
        assert code == 0 and "etcdserver" in out and out.endswith("200"), out
        if os.geteuid() == 0 and shutil.which("setpriv"):
            # etcd ran as the chart's uid: its data directory is its own, 0700.
            st = (pods / "etcd-volume-0" / "data").stat()
            assert (st.st_uid, st.st_mode & 0o777) == (65532, 0o700)
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(pods, ignore_errors=True)


def test_the_dockerfile_builds_with_the_scripts_ci_runs():
    """No container engine here: the Dockerfile's steps are the repository's scripts, which CI
    runs, and its runtime stage installs what runtime-packages.sh finds for the built binary."""
    text = open(os.path.join(ROOT, "Dockerfile")).read()
    for step in ("scripts/install-deps.sh", "scripts/build.sh",
                 "scripts/runtime-packages.sh /build/cli/larder", "FROM debian:12 AS build",
                 "FROM debian:12-slim", "fuse3", "COPY --from=build /build/cli/larder",
                 # The certificate Job's tools.
                 "fuse3 ca-certificates openssl curl $(cat /tmp/runtime-packages)",
                 # Not root by default; numeric, so that runAsNonRoot can check it.
                 "useradd --system --uid 65532 --gid 65532", "\nUSER 65532:65532\n"):
        assert step in text, step
    # The last USER wins: nothing after it switches back to root.
    assert text.rstrip().split("\nUSER ")[-1].startswith("65532:65532\n")
    values = yaml.safe_load(open(os.path.join(CHART, "values.yaml")))
    assert values["nonRoot"] == {"uid": 65532, "gid": 65532}
    # The tools the certificate Job runs, here as in the image (Debian 12).
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\n", "openssl", "curl",
                        "coreutils", "dash"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
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


def test_the_csi_driver_the_plugin_and_the_registrar_agree_on_names_and_paths():
    """The CSIDriver object, `larder csi` in the FUSE pods and the node-driver-registrar: one
    driver name, the plugin's socket where the registrar looks and where it tells the kubelet
    (under the kubelet's directory), the pods directory mounted Bidirectional at the same
    path as on the host (the kubelet names target paths there), the FUSE mount seen from the
    host; no attach, both volume lifecycle modes. csi.enabled=false leaves all of it out."""
    for values, kubelet in (([], "/var/lib/kubelet"),
                            (["--set", "csi.kubeletDir=/data/kubelet",
                              "--set", "csi.driverName=larder.example.com"], "/data/kubelet")):
        docs = render(values)
        drivers = [d for d in docs if d["kind"] == "CSIDriver"]
        assert len(drivers) == 1
        driver = drivers[0]
        name = driver["metadata"]["name"]
        assert driver["spec"]["attachRequired"] is False
        # Inline volumes only when asked for (any pod's author names their path).
        assert driver["spec"]["volumeLifecycleModes"] == ["Persistent"]
        fuse = pod_spec(by_name(docs)[("DaemonSet", "t-larder-fuse")])
        cs = {c["name"]: c for c in fuse["containers"]}
        assert set(cs) == {"fuse", "csi", "node-driver-registrar"}
        csi, reg = cs["csi"], cs["node-driver-registrar"]
        assert f"--csi_driver_name={name}" in csi["args"]
        assert "--csi_endpoint=unix:///csi/csi.sock" in csi["args"]
        assert "--fuse_mountpoint=/mnt/larder" in csi["args"]
        assert "--csi_node_id=$(NODE_NAME)" in csi["args"]
        assert "--csi_allowed_paths=/" in csi["args"]
        assert "--csi_ephemeral" not in csi["args"]
        mounts = {m["name"]: m for m in csi["volumeMounts"]}
        assert mounts["kubelet-pods"]["mountPath"] == f"{kubelet}/pods"
        assert mounts["kubelet-pods"]["mountPropagation"] == "Bidirectional"
        assert mounts["mountpoint"]["mountPath"] == "/mnt/larder"
        assert mounts["mountpoint"]["mountPropagation"] == "HostToContainer"
        assert mounts["csi-plugin"]["mountPath"] == "/csi"
        assert "--csi-address=/csi/csi.sock" in reg["args"]
        assert "--http-endpoint=:9809" in reg["args"]
        assert reg["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "registrar"}
        assert {"name": "registrar", "containerPort": 9809} in reg["ports"]
        assert f"--kubelet-registration-path={kubelet}/plugins/{name}/csi.sock" in reg["args"]
        assert {m["name"]: m["mountPath"] for m in reg["volumeMounts"]} == {
            "csi-plugin": "/csi", "csi-registration": "/registration"}
        vols = {v["name"]: v["hostPath"]["path"] for v in fuse["volumes"] if "hostPath" in v}
        assert vols["csi-plugin"] == f"{kubelet}/plugins/{name}"
        assert vols["csi-registration"] == f"{kubelet}/plugins_registry"
        assert vols["kubelet-pods"] == f"{kubelet}/pods"
    inline = render(["--set", "csi.ephemeral=true",
                     "--set-json", 'csi.allowedPaths=["/datasets","/ckpt"]'])
    driver = [d for d in inline if d["kind"] == "CSIDriver"][0]
    assert driver["spec"]["volumeLifecycleModes"] == ["Persistent", "Ephemeral"]
    csi = [c for c in pod_spec(by_name(inline)[("DaemonSet", "t-larder-fuse")])["containers"]
           if c["name"] == "csi"][0]
    assert "--csi_ephemeral" in csi["args"]
    assert "--csi_allowed_paths=/datasets,/ckpt" in csi["args"]
    off = render(["--set", "csi.enabled=false"])
    assert not [d for d in off if d["kind"] == "CSIDriver"]
    fuse = pod_spec(by_name(off)[("DaemonSet", "t-larder-fuse")])
    assert [c["name"] for c in fuse["containers"]] == ["fuse"]
    assert not [v for v in fuse["volumes"] if v["name"].startswith(("csi-", "kubelet-"))]


def test_the_csi_examples_are_valid_manifests_of_this_driver():
    """docs/kubernetes.md's example (a static PersistentVolume, its claim, a pod using it, and
    a pod with an inline volume), as charts/larder/examples/csi-volumes.yaml."""
    path = os.path.join(CHART, "examples", "csi-volumes.yaml")
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    r = validate(docs)
    assert r.returncode == 0, r.stdout + r.stderr
    kinds = [d["kind"] for d in docs]
    assert kinds.count("PersistentVolume") == 1 and kinds.count("PersistentVolumeClaim") == 1
    pv = [d for d in docs if d["kind"] == "PersistentVolume"][0]
    assert pv["spec"]["csi"]["driver"] == "csi.larder.io"
    assert pv["spec"]["csi"]["volumeAttributes"]["path"].startswith("/")
    inline = [v for d in docs if d["kind"] == "Pod" for v in d["spec"]["volumes"] if "csi" in v]
    assert inline and inline[0]["csi"]["driver"] == "csi.larder.io"
    doc = open(os.path.join(ROOT, "docs", "kubernetes.md")).read()
    assert "examples/csi-volumes.yaml" in doc


def exported_metric_names():
    """Every larder_* series name the C++ sources register."""
    import re
    names = set()
    for d in ("worker", "fuse", "master", "common", "client", "understore"):
        for f in os.listdir(os.path.join(ROOT, d)):
            if f.endswith(".cc") and not f.endswith("_test.cc"):
                names |= set(re.findall(r'"(larder_[a-z_]+)"', open(os.path.join(ROOT, d, f)).read()))
    return names


def test_the_dashboard_is_a_configmap_grafana_loads_and_asks_only_for_exported_series():
    import re
    docs = render([])
    cm = by_name(docs)[("ConfigMap", "t-larder-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dash = json.loads(cm["data"]["larder.json"])
    assert dash["uid"] == "larder-overview"
    titles = " ".join(p["title"] for p in dash["panels"])
    for want in ("Hit ratio", "by tier", "by path", "latency", "Cache used", "FUSE operations",
                 "Master RPCs", "Leader"):
        assert want in titles, want
    exported = exported_metric_names()
    used = set()
    for p in dash["panels"]:
        for t in p.get("targets", []):
            for m in re.findall(r"\b(larder_[a-z_]+)", t["expr"]):
                used.add(re.sub(r"_(bucket|sum|count)$", "", m))
    assert used, "no series in the dashboard"
    assert used <= exported, f"series nothing exports: {sorted(used - exported)}"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    annotated = render(["--set", "metrics.dashboard.annotations.grafana_folder=Larder"])
    cm = by_name(annotated)[("ConfigMap", "t-larder-dashboard")]
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Larder"}
    off = render(["--set", "metrics.dashboard.enabled=false"])
    assert ("ConfigMap", "t-larder-dashboard") not in by_name(off)
