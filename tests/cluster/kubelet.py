#!/usr/bin/env python3
"""A kubelet stand-in for the test cluster: runs the Pods of known images as local processes.

The test cluster has no kubelet and no container runtime. For the Gateway API conformance
suite's traffic tests (tests/conformance/run) its echo backends must answer requests, so
this process plays the kubelet's part for them, honestly and minimally:

- it registers one Node (NODE below) and reports it Ready;
- it binds to that Node every unscheduled Pod whose containers all run an image it knows
  (--image IMAGE=BINARY; a prefix ending in ':' matches every tag), the scheduler's part;
  every other Pod is left alone, Pending, as before;
- for each Pod bound to its Node it creates a network namespace with a veth pair to the
  host and one address of its own (the Pod IP, in a /24 of 198.19.128.0/17, the
  benchmarking range, free on this host; its .254, the Pods' gateway, is held on a link of
  its own from the start), and starts each container's binary in it with the container's
  environment (values, and valueFrom fieldRef / secretKeyRef / configMapKeyRef) and args;
- it reports the Pod Running and Ready through pods/status once every declared TCP
  container port (3000 when none is declared) accepts connections; the cluster's own
  EndpointSlice controller then publishes the address, as it would for a real Pod;
- a container that exits is restarted after a second (restartPolicy Always), the Pod
  reported not Ready meanwhile;
- a Pod being deleted has its processes stopped and its namespace removed, and is then
  deleted with grace period 0, as a kubelet confirms a deletion.

What it does not play: images (only the binaries named by --image run), mounts (a Secret
or ConfigMap volume is written to a directory of its own, and an environment value that
starts with the volume's mountPath is rewritten to that directory), probes, resource
limits, init containers, hostNetwork, and Pods of other nodes. It keeps no state but its
processes: on SIGTERM or SIGINT it stops them and removes the namespaces; Pods it ran
stay bound to its Node (a later run of it takes them up again).

Needs root (ip netns), python3's standard library, and KUBECONFIG (a token or client
certificate identity, as tests/cluster/up writes).

    kubelet.py --dir DIR --image registry.k8s.io/gateway-api/conformance/echo-basic:=/path/echo-basic
"""

import argparse
import base64
import datetime
import hashlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

NODE = "gatewright-kubelet"


def log(msg):
    print(f"kubelet: {msg}", file=sys.stderr, flush=True)


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Api:
    """The API server, reached with the current context of KUBECONFIG."""

    def __init__(self, kubectl):
        raw = subprocess.run(
            [kubectl, "config", "view", "--raw", "--minify", "-o", "json"],
            check=True, capture_output=True, text=True,
        ).stdout
        cfg = json.loads(raw)
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0]["user"]
        self.server = cluster["server"].rstrip("/")
        self.ctx = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            self.ctx.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif "certificate-authority" in cluster:
            self.ctx.load_verify_locations(cafile=cluster["certificate-authority"])
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if "token" in user:
            self.headers["Authorization"] = f"Bearer {user['token']}"
        elif "client-certificate-data" in user:
            d = tempfile.mkdtemp(prefix="kubelet-cert.")
            crt, key = os.path.join(d, "crt"), os.path.join(d, "key")
            for path, field in ((crt, "client-certificate-data"), (key, "client-key-data")):
                with open(path, "wb") as f:
                    f.write(base64.b64decode(user[field]))
            self.ctx.load_cert_chain(crt, key)
        elif "client-certificate" in user:
            self.ctx.load_cert_chain(user["client-certificate"], user["client-key"])

    def request(self, method, path, body=None, content_type=None, timeout=30):
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")

    def stream(self, path):
        req = urllib.request.Request(self.server + path, headers=self.headers)
        # A watch ends on its own (the server's timeout); the caller watches again.
        with urllib.request.urlopen(req, context=self.ctx, timeout=600) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)


def ip(*args, check=True):
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


class Pod:
    def __init__(self, kubelet, obj, index):
        self.k = kubelet
        self.obj = obj
        self.uid = obj["metadata"]["uid"]
        self.ns = obj["metadata"]["namespace"]
        self.name = obj["metadata"]["name"]
        self.index = index
        self.netns = f"gwk{kubelet.id}-{index}"
        self.host_if = f"gwk{kubelet.id}h{index}"
        self.addr = f"{kubelet.subnet}.{index}"
        self.dir = os.path.join(kubelet.dir, "pods", self.uid)
        self.procs = {}
        self.stopping = threading.Event()
        self.ready = None
        self.restarts = 0
        self.started_at = now()

    # --- network -------------------------------------------------------------------------
    def network_up(self):
        with open(os.path.join(self.k.netns_dir, self.netns), "w") as f:
            f.write(self.host_if)
        ip("netns", "add", self.netns)
        ip("link", "add", self.host_if, "type", "veth", "peer", "name", "eth0", "netns", self.netns)
        ip("addr", "add", f"{self.k.gateway}/32", "dev", self.host_if)
        ip("link", "set", self.host_if, "up")
        ip("route", "replace", f"{self.addr}/32", "dev", self.host_if)
        ip("-n", self.netns, "link", "set", "lo", "up")
        ip("-n", self.netns, "addr", "add", f"{self.addr}/32", "dev", "eth0")
        ip("-n", self.netns, "link", "set", "eth0", "up")
        ip("-n", self.netns, "route", "add", self.k.gateway, "dev", "eth0")
        ip("-n", self.netns, "route", "add", "default", "via", self.k.gateway, "dev", "eth0")

    def network_down(self):
        ip("netns", "delete", self.netns, check=False)
        ip("link", "delete", self.host_if, check=False)
        try:
            os.remove(os.path.join(self.k.netns_dir, self.netns))
        except FileNotFoundError:
            pass

    # --- what a container sees -----------------------------------------------------------
    def field(self, path):
        m, s = self.obj["metadata"], self.obj["spec"]
        simple = {
            "metadata.name": m["name"], "metadata.namespace": m["namespace"],
            "metadata.uid": m["uid"], "spec.nodeName": NODE,
            "spec.serviceAccountName": s.get("serviceAccountName", "default"),
            "status.podIP": self.addr, "status.podIPs": self.addr, "status.hostIP": "127.0.0.1",
        }
        if path in simple:
            return simple[path]
        for kind in ("labels", "annotations"):
            prefix = f"metadata.{kind}['"
            if path.startswith(prefix) and path.endswith("']"):
                return m.get(kind, {}).get(path[len(prefix):-2], "")
        raise ValueError(f"fieldRef {path} is not supported")

    def data(self, kind, name):
        path = f"/api/v1/namespaces/{self.ns}/{kind}/{urllib.parse.quote(name)}"
        try:
            obj = self.k.api.request("GET", path)
        except urllib.error.HTTPError as e:
            raise ValueError(f"{kind[:-1]} {self.ns}/{name}: {e}") from e
        out = {k: base64.b64decode(v) for k, v in obj.get("data", {}).items()} if kind == "secrets" \
            else {k: v.encode() for k, v in obj.get("data", {}).items()}
        return out

    def volumes(self):
        """Writes Secret and ConfigMap volumes; returns {volume name: directory}."""
        dirs = {}
        for v in self.obj["spec"].get("volumes", []):
            if "secret" in v:
                kind, name, items = "secrets", v["secret"]["secretName"], v["secret"].get("items")
            elif "configMap" in v:
                kind, name, items = "configmaps", v["configMap"]["name"], v["configMap"].get("items")
            else:
                continue
            d = os.path.join(self.dir, "volumes", v["name"])
            os.makedirs(d, exist_ok=True)
            data = self.data(kind, name)
            pairs = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
            for key, rel in pairs:
                with open(os.path.join(d, rel), "wb") as f:
                    f.write(data[key])
            dirs[v["name"]] = d
        return dirs

    def environment(self, c, vols):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOSTNAME": self.name}
        mounts = [(m["mountPath"].rstrip("/"), vols[m["name"]])
                  for m in c.get("volumeMounts", []) if m["name"] in vols]
        for e in c.get("env", []):
            if "value" in e:
                value = e["value"]
            elif "fieldRef" in e.get("valueFrom", {}):
                value = self.field(e["valueFrom"]["fieldRef"]["fieldPath"])
            elif "secretKeyRef" in e.get("valueFrom", {}):
                ref = e["valueFrom"]["secretKeyRef"]
                value = self.data("secrets", ref["name"])[ref["key"]].decode()
            elif "configMapKeyRef" in e.get("valueFrom", {}):
                ref = e["valueFrom"]["configMapKeyRef"]
                value = self.data("configmaps", ref["name"])[ref["key"]].decode()
            else:
                raise ValueError(f"env {e['name']}: its valueFrom is not supported")
            for path, local in mounts:
                if value == path or value.startswith(path + "/"):
                    value = local + value[len(path):]
            env[e["name"]] = value
        return env

    def ports(self, c):
        ports = [p["containerPort"] for p in c.get("ports", []) if p.get("protocol", "TCP") == "TCP"]
        if not c.get("ports"):
            ports = [3000]
        return ports

    # --- life ----------------------------------------------------------------------------
    def start(self):
        """Everything a container needs is read first (a Secret the Pod mounts may not exist
        yet: that raises, and the caller tries again), then the network, then the processes."""
        os.makedirs(self.dir, exist_ok=True)
        vols = self.volumes()
        envs = [(c, self.environment(c, vols)) for c in self.obj["spec"]["containers"]]
        self.network_down()  # what an earlier run of this stand-in may have left
        self.network_up()
        for c, env in envs:
            self.spawn(c, env)
        threading.Thread(target=self.watch_ready, daemon=True).start()

    def spawn(self, c, env):
        binary = self.k.binary(c["image"])
        logf = open(os.path.join(self.k.dir, "logs", f"{self.ns}_{self.name}_{c['name']}.log"), "ab")
        cmd = ["ip", "netns", "exec", self.netns, binary, *c.get("args", [])]
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=logf,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[c["name"]] = proc
        threading.Thread(target=self.supervise, args=(c, env, proc), daemon=True).start()

    def supervise(self, c, env, proc):
        code = proc.wait()
        if self.stopping.is_set():
            return
        log(f"{self.ns}/{self.name}: container {c['name']} exited {code}; restarting in 1 s")
        self.restarts += 1
        self.report(False)
        time.sleep(1)
        if not self.stopping.is_set():
            self.spawn(c, env)
            threading.Thread(target=self.watch_ready, daemon=True).start()

    def listening(self, port):
        try:
            with socket.create_connection((self.addr, port), timeout=0.5):
                return True
        except OSError:
            return False

    def watch_ready(self):
        ports = [p for c in self.obj["spec"]["containers"] for p in self.ports(c)]
        deadline = time.time() + 60
        while not self.stopping.is_set() and time.time() < deadline:
            if all(self.listening(p) for p in ports):
                self.report(True)
                return
            time.sleep(0.1)
        if not self.stopping.is_set():
            log(f"{self.ns}/{self.name}: ports {ports} not listening after 60 s")
            self.report(False)

    def report(self, ready):
        if self.ready == ready:
            return
        self.ready = ready
        t = now()
        flag = "True" if ready else "False"
        conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": self.started_at},
                 {"type": "Initialized", "status": "True", "lastTransitionTime": self.started_at},
                 {"type": "ContainersReady", "status": flag, "lastTransitionTime": t},
                 {"type": "Ready", "status": flag, "lastTransitionTime": t}]
        statuses = [{"name": c["name"], "image": c["image"], "imageID": "",
                     "containerID": f"gatewright://{self.uid}/{c['name']}",
                     "ready": ready, "started": True, "restartCount": self.restarts,
                     "state": {"running": {"startedAt": self.started_at}}}
                    for c in self.obj["spec"]["containers"]]
        body = {"status": {"phase": "Running", "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
                           "podIP": self.addr, "podIPs": [{"ip": self.addr}], "startTime": self.started_at,
                           "conditions": conds, "containerStatuses": statuses}}
        try:
            self.k.api.request("PATCH", f"/api/v1/namespaces/{self.ns}/pods/{self.name}/status", body,
                               content_type="application/merge-patch+json")
            log(f"{self.ns}/{self.name}: {'Ready' if ready else 'not Ready'} at {self.addr}")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                log(f"{self.ns}/{self.name}: status: {e}")

    def stop(self):
        self.stopping.set()
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.network_down()


class Kubelet:
    def __init__(self, args):
        self.api = Api(args.kubectl)
        self.dir = os.path.abspath(args.dir)
        self.netns_dir = args.netns_dir or os.path.join(self.dir, "netns")
        # Names and addresses of this instance's own: another cluster's stand-in (or a
        # traffic test's namespace) on the same host keeps to its own.
        self.id = hashlib.sha1(self.dir.encode()).hexdigest()[:4]
        self.subnet = args.subnet or self.free_subnet()
        self.gateway = f"{self.subnet}.254"
        self.images = [tuple(i.split("=", 1)) for i in args.image]
        for d in (self.dir, self.netns_dir, os.path.join(self.dir, "logs")):
            os.makedirs(d, exist_ok=True)
        self.pods = {}
        self.free = list(range(1, 254))
        self.lock = threading.Lock()

    def free_subnet(self):
        """A /24 of 198.19.128.0/17 (the benchmarking range) no address or route of this host
        is in yet, starting at one this instance's id picks."""
        used = ip("-4", "-o", "addr", "show") + ip("-4", "route", "show")
        start = int(self.id, 16)
        for i in range(127):
            prefix = f"198.19.{128 + (start + i) % 127}"
            if f" {prefix}." not in used and f"\n{prefix}." not in "\n" + used:
                return prefix
        raise RuntimeError("no free /24 in 198.19.128.0/17")

    def reserve(self):
        """Holds the gateway address on a link of its own from the start, so that the
        /24 shows as taken (to the traffic tests' choice of theirs too) before the first Pod."""
        self.dummy = f"gwk{self.id}d"
        with open(os.path.join(self.netns_dir, self.dummy), "w") as f:
            f.write(self.dummy)
        ip("link", "delete", self.dummy, check=False)
        # (a veth pair: the dummy link type is not in every kernel, this one's included)
        ip("link", "add", self.dummy, "type", "veth", "peer", "name", f"gwk{self.id}e")
        ip("addr", "add", f"{self.gateway}/32", "dev", self.dummy)

    def release(self):
        ip("link", "delete", self.dummy, check=False)
        try:
            os.remove(os.path.join(self.netns_dir, self.dummy))
        except FileNotFoundError:
            pass

    def binary(self, image):
        for pattern, path in self.images:
            if image == pattern or (pattern.endswith(":") and image.startswith(pattern)):
                return path
        return None

    def node(self):
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}
        try:
            self.api.request("POST", "/api/v1/nodes", body)
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise
        status = {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "the gatewright test kubelet stand-in runs",
                            "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": NODE}],
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "250"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"}}}
        self.api.request("PATCH", f"/api/v1/nodes/{NODE}/status", status,
                         content_type="application/merge-patch+json")

    def ours(self, obj):
        s = obj["spec"]
        return not s.get("hostNetwork") and all(self.binary(c["image"]) for c in s["containers"])

    def handle(self, kind, obj):
        m, s = obj["metadata"], obj["spec"]
        uid = m["uid"]
        if kind == "DELETED" or m.get("deletionTimestamp"):
            with self.lock:
                pod = self.pods.pop(uid, None)
            if pod:
                pod.stop()
                with self.lock:
                    self.free.append(pod.index)
                log(f"{pod.ns}/{pod.name}: stopped")
            if kind != "DELETED" and s.get("nodeName") == NODE:
                try:
                    self.api.request("DELETE", f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}",
                                     {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
                except urllib.error.HTTPError as e:
                    if e.code not in (404, 409):
                        log(f"{m['namespace']}/{m['name']}: delete: {e}")
            return
        if not s.get("nodeName"):
            if s.get("schedulerName", "default-scheduler") == "default-scheduler" and self.ours(obj):
                binding = {"apiVersion": "v1", "kind": "Binding",
                           "metadata": {"name": m["name"], "namespace": m["namespace"]},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}
                try:
                    self.api.request("POST", f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}/binding",
                                     binding)
                except urllib.error.HTTPError as e:
                    if e.code != 409:
                        log(f"{m['namespace']}/{m['name']}: bind: {e}")
            return
        if s["nodeName"] != NODE or uid in self.pods or not self.ours(obj):
            return
        with self.lock:
            if not self.free:
                log(f"{m['namespace']}/{m['name']}: no address left in {self.subnet}.0/24")
                return
            index = self.free.pop(0)
            pod = self.pods[uid] = Pod(self, obj, index)
        threading.Thread(target=self.start, args=(pod,), daemon=True).start()

    def start(self, pod):
        """Starts the Pod, trying again every 2 s while it cannot (as a kubelet retries a
        volume whose Secret does not exist yet), until it is deleted."""
        said = None
        while not pod.stopping.is_set():
            try:
                pod.start()
                log(f"{pod.ns}/{pod.name}: started at {pod.addr} in {pod.netns}")
                return
            except Exception as e:  # a Pod that cannot start is reported, not fatal
                if str(e) != said:
                    log(f"{pod.ns}/{pod.name}: cannot start yet: {e}")
                    said = str(e)
                pod.network_down()
                pod.stopping.wait(2)

    def run(self):
        self.reserve()
        self.node()
        log(f"node {NODE} Ready; pods get addresses in {self.subnet}.0/24")
        while True:
            try:
                listing = self.api.request("GET", "/api/v1/pods")
                for obj in listing["items"]:
                    self.handle("ADDED", obj)
                rv = listing["metadata"]["resourceVersion"]
                for event in self.api.stream(f"/api/v1/pods?watch=1&resourceVersion={rv}"):
                    if event["type"] == "ERROR":
                        break
                    self.handle(event["type"], event["object"])
            except Exception as e:  # the API server restarting, a watch expiring: watch again
                log(f"watch: {e}; again in 1 s")
                time.sleep(1)

    def shutdown(self, *_):
        with self.lock:
            pods = list(self.pods.values())
            self.pods.clear()
        for pod in pods:
            pod.stop()
        self.release()
        log(f"stopped {len(pods)} pods")
        os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="state: logs, volumes, netns records")
    p.add_argument("--image", action="append", default=[], help="IMAGE=BINARY (IMAGE ending in ':' matches any tag)")
    p.add_argument("--subnet", help="the first three octets of the Pods' /24 (default: a free one of 198.19.128.0/17)")
    p.add_argument("--netns-dir", help="where to record each network namespace (tests/cluster/downstream down removes them)")
    p.add_argument("--kubectl", default=os.environ.get("KUBECTL", "kubectl"))
    args = p.parse_args()
    k = Kubelet(args)
    signal.signal(signal.SIGTERM, k.shutdown)
    signal.signal(signal.SIGINT, k.shutdown)
    k.run()


if __name__ == "__main__":
    main()
