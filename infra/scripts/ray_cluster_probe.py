"""Cluster readiness probe, run inside the Ray head container: python3 -c "<this file>" '<spec JSON>'.

Polls ray.nodes() until every expected node is alive with its fabric IP and the GPU total matches, bounded by
spec["timeoutSeconds"] (0: look once). Prints one JSON line {"fingerprint", "nodes", "gpus"}; the fingerprint
hashes the Ray node IDs, so it changes exactly when a Ray node restarts. When not ready in time, exits 1 naming
the missing hosts and the hosts registered with a wrong IP (the manual deployment's management-IP failure).

spec: {"address": "<head fabric IP>:<gcs port>", "nodes": [{"name", "fabricIp", "sshHost"}...], "gpus": N,
       "timeoutSeconds": S}
"""
import hashlib
import json
import sys
import time


def fail(msg):
    print("cluster-ready: " + msg, file=sys.stderr)
    sys.exit(1)


def report(spec, alive):
    """(ready, result or problem) for the alive Ray nodes."""
    want = dict((n["fabricIp"], n["name"]) for n in spec["nodes"])
    mgmt = dict((n["sshHost"], n["name"]) for n in spec["nodes"])
    seen = dict((n["NodeManagerAddress"], n) for n in alive)
    gpus = int(sum(n.get("Resources", {}).get("GPU", 0) for n in alive))
    missing = [ip for ip in want if ip not in seen]
    wrong = [ip for ip in seen if ip not in want]
    if not missing and not wrong and gpus == spec["gpus"]:
        ids = sorted("%s=%s" % (want[ip], seen[ip]["NodeID"]) for ip in seen)
        fingerprint = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
        return True, {"fingerprint": fingerprint, "nodes": dict((want[ip], ip) for ip in seen), "gpus": gpus}
    parts = []
    if missing:
        parts.append("missing hosts: " + ", ".join("%s (fabric IP %s)" % (want[ip], ip) for ip in missing))
    if wrong:
        parts.append(
            "hosts registered with a wrong IP: "
            + ", ".join(
                ("%s registered as %s instead of its fabric IP" % (mgmt[ip], ip)) if ip in mgmt else ip for ip in wrong
            )
        )
    if gpus != spec["gpus"]:
        parts.append("Ray sees %d GPUs, expected %d" % (gpus, spec["gpus"]))
    return False, "; ".join(parts)


def main(argv, ray):
    spec = json.loads(argv[1])
    try:
        ray.init(address=spec["address"], logging_level="ERROR", log_to_driver=False)
    except Exception as e:  # noqa: BLE001 - any failure to connect is reported the same way
        fail("cannot connect to Ray at %s: %s" % (spec["address"], e))
    deadline = time.monotonic() + spec["timeoutSeconds"]
    while True:
        ready, result = report(spec, [n for n in ray.nodes() if n.get("Alive")])
        if ready:
            print(json.dumps(result, sort_keys=True))
            return 0
        if time.monotonic() >= deadline:
            fail("not ready after %ds: %s" % (spec["timeoutSeconds"], result))
        time.sleep(1)


if __name__ == "__main__":
    try:
        import ray as ray_module
    except ImportError as e:
        fail("cannot import ray in the head container: %s" % e)
    sys.exit(main(sys.argv, ray_module))
