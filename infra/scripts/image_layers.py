"""Layer-aware image stream, run on the source host between `docker save` and the chain (image_ends.bash):

    docker save REF | python3 image_layers.py SKIP [SPOOL_DIR]

SKIP is a comma-separated list of layer DiffIDs (sha256:<hex>) that every host receiving the stream already holds
at the same place in its layer chain; the program computes it from the hosts' own `docker image inspect`. The
archive goes out as it came in, minus the data of those layers. `docker load` only opens a layer's file when the
host lacks that layer (its chain ID), and verifies every layer it does load against the image config's DiffID,
so a host ends with the image, under the source's image ID, having received only what it lacked.

A layer is recognised by its content, never by its name: its file in the archive is hashed (sha256 of the
uncompressed layer tar, which is its DiffID) while it is spooled to SPOOL_DIR (default: TMPDIR), and it is
forwarded only when its digest is not in SKIP. Archives that name layers by digest (`blobs/sha256/<hex>`, the OCI
layout newer engines save) are decided by name, without a spool. Everything else in the archive (manifest, config,
symlinks of a layer shared by two places) passes unchanged. A summary goes to stderr.
"""

import hashlib
import os
import re
import sys
import tarfile
import tempfile

CHUNK = 1 << 20
BLOB = re.compile(r"^blobs/sha256/([0-9a-f]{64})$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def main(argv):
    if len(argv) not in (2, 3):
        print("image_layers: usage: image_layers.py SKIP [SPOOL_DIR]", file=sys.stderr)
        return 2
    skip = {d for d in argv[1].split(",") if d}
    bad = [d for d in skip if not DIGEST.match(d)]
    if bad:
        print(f"image_layers: not a layer digest: {bad[0]!r}", file=sys.stderr)
        return 2
    spool = argv[2] if len(argv) == 3 else None
    src = tarfile.open(fileobj=sys.stdin.buffer, mode="r|")
    dst = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT)
    sent = held = 0
    sent_bytes = held_bytes = 0
    for m in src:
        if not m.isfile():
            dst.addfile(m)
            continue
        data = src.extractfile(m)
        by_name = BLOB.match(m.name[2:] if m.name.startswith("./") else m.name)
        if by_name:
            if "sha256:" + by_name.group(1) in skip:
                held, held_bytes = held + 1, held_bytes + m.size
                continue  # the stream reader skips the unread data
            dst.addfile(m, data)
            continue
        if not m.name.endswith("/layer.tar") or not skip:
            dst.addfile(m, data)
            continue
        with tempfile.TemporaryFile(dir=spool) as t:
            h = hashlib.sha256()
            n = 0
            while True:
                chunk = data.read(CHUNK)
                if not chunk:
                    break
                h.update(chunk)
                t.write(chunk)
                n += len(chunk)
            if n != m.size:
                print(f"image_layers: {m.name}: read {n} of {m.size} bytes (the save stream ended early)", file=sys.stderr)
                return 1
            if "sha256:" + h.hexdigest() in skip:
                held, held_bytes = held + 1, held_bytes + m.size
                continue
            t.seek(0)
            dst.addfile(m, t)
            sent, sent_bytes = sent + 1, sent_bytes + m.size
    dst.close()
    sys.stdout.buffer.flush()
    print(
        f"image_layers: sent {sent} layer(s), {sent_bytes} bytes; held back {held} the receiving hosts have, {held_bytes} bytes",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv)
    except BrokenPipeError:
        # the next host's connection was cut: say so once, without a traceback or a failed flush at exit
        print("image_layers: the stream to the next host was cut (broken pipe)", file=sys.stderr)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os._exit(1)
    sys.exit(code)
