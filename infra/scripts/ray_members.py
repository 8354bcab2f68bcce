"""Ray's live members for `npm run status`, run inside the Ray head container (status_probe.bash ships it):
python3 -c "<this file>" <head fabric IP>:<gcs port>

Asks the GCS for its node table directly (a GCS client: no driver is started, about 0.4 s where ray.init takes
about 2 s); a Ray without that client is asked through a driver, as the cluster gate asks. Prints one JSON line
{"via": "gcs" | "driver", "members": [{"ip", "gpus", "head"}...]}: each live node on the address it registered
with. Which node that is, and whether it is the fabric IP, is the status view's to say. Exits 1 naming what failed.
"""
import json
import sys


def fail(msg):
    print("ray-members: " + msg, file=sys.stderr)
    sys.exit(1)


def via_gcs(address):
    from ray._raylet import GcsClient  # noqa: PLC0415 - a private API: absent, the driver is asked instead

    members = []
    for info in GcsClient(address=address).get_all_node_info(timeout=5).values():
        if info.GcsNodeState.Name(info.state) != "ALIVE":
            continue
        members.append(
            {"ip": info.node_manager_address, "gpus": info.resources_total.get("GPU", 0), "head": bool(info.is_head_node)}
        )
    return members


def via_driver(address):
    import ray  # noqa: PLC0415

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    return [
        {
            "ip": n["NodeManagerAddress"],
            "gpus": n.get("Resources", {}).get("GPU", 0),
            "head": "node:__internal_head__" in n.get("Resources", {}),
        }
        for n in ray.nodes()
        if n.get("Alive")
    ]


def main(argv):
    if len(argv) != 2:
        fail("usage: ray_members.py <head fabric IP>:<gcs port>")
    address = argv[1]
    try:
        members, via = via_gcs(address), "gcs"
    except (ImportError, AttributeError, TypeError):
        try:
            members, via = via_driver(address), "driver"
        except Exception as e:  # noqa: BLE001 - any failure to connect is reported the same way
            fail("cannot ask Ray at %s: %s" % (address, e))
    except Exception as e:  # noqa: BLE001
        fail("cannot ask Ray's GCS at %s: %s" % (address, e))
    print(json.dumps({"via": via, "members": sorted(members, key=lambda m: m["ip"])}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
