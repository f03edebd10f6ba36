"""Helpers of tests/install/run over Kubernetes objects as JSON (kubectl's -o json output).

  objects.py compare A.json B.json     chart vs kustomize: same objects, same content
  objects.py pod DEPLOY.json NAME      a Pod made from the Deployment's pod template
  objects.py unrestrict POD.json       the same Pod with its securityContexts removed
  objects.py summary A.json            kind/name of every object, one line each
  objects.py rvs A.json                namespace/kind/name resourceVersion, sorted
"""
import difflib
import json
import sys


def load(path):
    """Every object in a file of kubectl JSON output (one object, a List, or several)."""
    text = open(path, encoding="utf-8").read()
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        if obj.get("kind", "").endswith("List") and "items" in obj:
            out.extend(obj["items"])
        else:
            out.append(obj)
    return out


# What only one of the two installers adds, and so is left out of the comparison.
INSTALLER_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by"}
INSTALLER_ANNOTATIONS = {"helm.sh/resource-policy"}


def normal(obj):
    obj = json.loads(json.dumps(obj))
    meta = obj.get("metadata", {})
    for key, drop in (("labels", INSTALLER_LABELS), ("annotations", INSTALLER_ANNOTATIONS)):
        m = {k: v for k, v in (meta.get(key) or {}).items() if k not in drop}
        if m:
            meta[key] = m
        else:
            meta.pop(key, None)
    meta.pop("creationTimestamp", None)
    return obj


def key(obj):
    group = obj["apiVersion"].rsplit("/", 1)[0] if "/" in obj["apiVersion"] else ""
    return (group, obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def compare(a_path, b_path):
    # The kustomize base also creates its Namespace (as `helm install --create-namespace`
    # does for the chart); Namespaces are left out on both sides.
    a = {key(o): normal(o) for o in load(a_path) if o["kind"] != "Namespace"}
    b = {key(o): normal(o) for o in load(b_path) if o["kind"] != "Namespace"}
    bad = 0
    for k in sorted(set(a) - set(b)):
        print(f"only in {a_path}: {k}")
        bad += 1
    for k in sorted(set(b) - set(a)):
        print(f"only in {b_path}: {k}")
        bad += 1
    for k in sorted(set(a) & set(b)):
        if a[k] != b[k]:
            bad += 1
            x = json.dumps(a[k], indent=1, sort_keys=True).splitlines()
            y = json.dumps(b[k], indent=1, sort_keys=True).splitlines()
            print(f"differs: {k}")
            print("\n".join(difflib.unified_diff(x, y, a_path, b_path, lineterm="", n=2)))
    print(f"{len(set(a) & set(b))} objects in both, {bad} differences")
    return 1 if bad else 0


def pod(deploy_path, name):
    (dep,) = [o for o in load(deploy_path) if o["kind"] == "Deployment"]
    tpl = dep["spec"]["template"]
    p = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": tpl["metadata"].get("labels", {})},
        "spec": tpl["spec"],
    }
    json.dump(p, sys.stdout)
    return 0


def unrestrict(pod_path):
    (p,) = load(pod_path)
    p["metadata"]["name"] += "-unrestricted"
    p["spec"].pop("securityContext", None)
    for c in p["spec"]["containers"]:
        c.pop("securityContext", None)
    json.dump(p, sys.stdout)
    return 0


def summary(path):
    for o in load(path):
        ns = o["metadata"].get("namespace")
        print(f"{o['kind']:<28} {(ns + '/') if ns else ''}{o['metadata']['name']}")
    return 0


def rvs(path):
    lines = []
    for o in load(path):
        m = o["metadata"]
        lines.append(f"{m.get('namespace', '')}/{o['kind']}/{m['name']} {m['resourceVersion']}")
    print("\n".join(sorted(lines)))
    return 0


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    sys.exit({"compare": compare, "pod": pod, "unrestrict": unrestrict, "summary": summary, "rvs": rvs}[cmd](*args))
