"""
examples/k8s/ is what a cluster operator applies: each file parses, and the
fields the engines read agree with each other and with what cordon-oci
accepts (the handler, the binary, the annotations, the policy).
"""

import json
import pathlib
import re
import subprocess
import tomllib

import yaml

from conftest import BUILD, REPO

K8S = REPO / "examples" / "k8s"


def load_yaml(name):
    return yaml.safe_load((K8S / name).read_text())


def containerd_runtime():
    cfg = tomllib.loads((K8S / "containerd-config.toml").read_text())
    assert cfg["version"] == 2
    runtimes = cfg["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert list(runtimes) == ["cordon"]
    return runtimes["cordon"]


def test_runtime_class_names_the_containerd_handler():
    rc = load_yaml("runtimeclass.yaml")
    assert rc["apiVersion"] == "node.k8s.io/v1" and rc["kind"] == "RuntimeClass"
    assert rc["metadata"]["name"] == "cordon"
    assert rc["handler"] == "cordon"
    containerd_runtime()  # the handler exists there under the same name
    assert set(rc["overhead"]["podFixed"]) == {"memory", "cpu"}


def test_containerd_runs_cordon_oci_through_the_runc_shim():
    rt = containerd_runtime()
    assert rt["runtime_type"] == "io.containerd.runc.v2"
    assert rt["options"]["BinaryName"].endswith("/cordon-oci")
    assert rt["options"]["SystemdCgroup"] is False
    # The annotations cordon-oci reads must be passed on, pod's and container's.
    for key in ("pod_annotations", "container_annotations"):
        assert "run.cordon.*" in rt[key]


def test_docker_daemon_json():
    cfg = json.loads((K8S / "docker-daemon.json").read_text())
    assert cfg["runtimes"]["cordon"]["path"].endswith("/cordon-oci")


def test_podman_line():
    text = (K8S / "podman.md").read_text()
    assert re.search(r"podman run --runtime /\S+/cordon-oci", text)
    assert 'cordon = ["/usr/local/bin/cordon-oci"]' in text


def test_sandbox_template_uses_the_runtime_class_and_a_real_policy(tmp_path):
    t = load_yaml("sandbox-template.yaml")
    assert t["apiVersion"] == "extensions.agents.x-k8s.io/v1alpha1"
    assert t["kind"] == "SandboxTemplate"
    pod = t["spec"]["podTemplate"]
    assert pod["spec"]["runtimeClassName"] == load_yaml("runtimeclass.yaml")["metadata"]["name"]
    ann = pod["metadata"]["annotations"]
    assert set(ann) <= {"run.cordon.policy", "run.cordon.level", "run.cordon.policy-digest"}
    assert ann["run.cordon.level"] in ("process", "namespace", "gvisor", "microvm")
    name = ann["run.cordon.policy"]
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", name), "cordon-oci takes a plain name"
    # The policy the annotation names is shipped beside it, and cordon accepts it.
    policy = K8S / name
    assert policy.exists()
    # The audit log's directory is the node's (made by whoever installs cordon there).
    doc = yaml.safe_load(policy.read_text())
    assert doc["audit"]["file"].startswith("/var/log/cordon/")
    doc["audit"]["file"] = str(tmp_path / "audit.jsonl")
    here = tmp_path / name
    here.write_text(yaml.safe_dump(doc))
    r = subprocess.run([str(BUILD / "cordon"), "policy", "check", str(here)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    containers = pod["spec"]["containers"]
    assert containers and all("image" in c for c in containers)
