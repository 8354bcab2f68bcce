"""model.hub's download (infra/providers/hubModel.ts): runs once, on the source node, inside the cluster's own image
(huggingface_hub is a dependency of vLLM), as the login user, with the model directory mounted at the same path.

    python3 hub_download.py REPO COMMIT DEST      (the token, possibly empty, on stdin; never argv or environment)

The client finds the files (model_info), their URLs, headers and HTTP session (hf_hub_url, build_hf_headers,
get_session); each file is fetched into DEST/.cache/vllm-cluster/NAME.partial and a cut transfer continues there
with a Range request on the next run (huggingface_hub itself starts a download over in every new process). Every
file is checked against the Hub's own checksum (the LFS sha256 for LFS files, the git blob id for the others)
before it is moved into DEST as a regular file; any symlink in DEST (a cache layout) is replaced by its file. A file
already in place with the Hub's checksum is not fetched again. Prints one JSON line: what was done.
Exits 3 naming the cause when the Hub refuses (no such repo or revision, a bad token), 4 on a checksum mismatch.
"""

import hashlib
import json
import os
import shutil
import sys

MARKER = ".vllm-cluster-hub.json"


def fail(code, message):
    print(f"hub download: {message}", file=sys.stderr)
    sys.exit(code)


def file_sum(path, algo, prefix=b""):
    h = hashlib.new(algo)
    h.update(prefix)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def matches(path, sibling):
    """Whether the file at path is the Hub's file: its LFS sha256, or its git blob id (sha1 of 'blob <size>\\0' + bytes)."""
    if not os.path.isfile(path) or os.path.islink(path):
        return False
    size = os.path.getsize(path)
    if sibling.lfs is not None:
        return size == sibling.lfs.size and file_sum(path, "sha256") == sibling.lfs.sha256
    if sibling.blob_id is None:
        fail(4, f"{sibling.rfilename}: the Hub gave no checksum for it")
    return file_sum(path, "sha1", b"blob %d\0" % size) == sibling.blob_id


def resolve_links(dest):
    """The served directory holds files only: a link (the Hub's cache layout) becomes a copy of what it points to."""
    for root, _dirs, files in os.walk(dest):
        for name in files:
            p = os.path.join(root, name)
            if os.path.islink(p):
                target = os.path.realpath(p)
                os.unlink(p)
                shutil.copyfile(target, p)


def model_info(api, repo, commit):
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        return api.model_info(repo, revision=commit, files_metadata=True)
    except RevisionNotFoundError:
        fail(3, f"revision {commit} is not in {repo}")
    except GatedRepoError:
        fail(3, f"{repo} is gated: the token (hfToken) must belong to an account that accepted its terms")
    except RepositoryNotFoundError as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status == 401:
            fail(3, f"{repo}: the Hub refused the token (hfToken): 401 invalid credentials, or no such repo")
        fail(3, f"no repo {repo} on the Hub (or it is private and needs hfToken)")
    except HfHubHTTPError as e:
        fail(3, f"{repo}@{commit}: the Hub answered {e}")
    except OSError as e:
        fail(3, f"cannot reach the Hub for {repo}: {e}")


def fetch(repo, commit, sibling, dest, token):
    """Fetches one file into its .partial, continuing one a cut run left, then verifies and moves it into place."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    name = sibling.rfilename
    size = sibling.lfs.size if sibling.lfs is not None else sibling.size
    partial = os.path.join(dest, ".cache", "vllm-cluster", name + ".partial")
    os.makedirs(os.path.dirname(partial), exist_ok=True)
    have = os.path.getsize(partial) if os.path.exists(partial) else 0
    if size is not None and have > size:
        have = 0
    headers = build_hf_headers(token=token)
    headers["Accept-Encoding"] = "identity"
    if have:
        headers["Range"] = f"bytes={have}-"
    url = hf_hub_url(repo, name, revision=commit)
    with open(partial, "r+b" if have else "wb") as out:
        out.seek(have)
        session = get_session()
        if hasattr(session, "stream"):  # huggingface_hub 1.x and later: httpx
            response = session.stream("GET", url, headers=headers, follow_redirects=True, timeout=60)
            chunks = lambda r: r.iter_bytes(1 << 20)  # noqa: E731
        else:  # 0.x: requests
            response = session.get(url, headers=headers, stream=True, timeout=60)
            chunks = lambda r: r.iter_content(1 << 20)  # noqa: E731
        with response as r:
            hf_raise_for_status(r)
            if have and r.status_code != 206:  # the server sent it all again: start over
                out.seek(0)
                out.truncate()
            for chunk in chunks(r):
                out.write(chunk)
                out.flush()
        out.truncate()
    if not matches(partial, sibling):
        want = sibling.lfs.sha256 if sibling.lfs is not None else sibling.blob_id
        os.replace(partial, partial + ".rejected")
        fail(4, f"{name}: downloaded, but its checksum is not the Hub's ({want}); kept aside as {partial}.rejected")
    final = os.path.join(dest, name)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    if os.path.islink(final):
        os.unlink(final)
    os.replace(partial, final)


def main():
    repo, commit, dest = sys.argv[1:4]
    token = sys.stdin.read().strip() or None
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    info = model_info(api, repo, commit)
    if info.sha != commit:
        fail(3, f"{repo}: revision {commit} resolves to commit {info.sha}; give the full commit hash")
    siblings = sorted(info.siblings or [], key=lambda s: s.rfilename)
    if not siblings:
        fail(3, f"{repo}@{commit} has no files")
    os.makedirs(dest, exist_ok=True)
    resolve_links(dest)
    fetched = []
    for s in siblings:
        if matches(os.path.join(dest, s.rfilename), s):
            continue
        fetch(repo, commit, s, dest, token)
        fetched.append(s.rfilename)
    shutil.rmtree(os.path.join(dest, ".cache", "vllm-cluster"), ignore_errors=True)
    try:
        os.rmdir(os.path.join(dest, ".cache"))
    except OSError:
        pass
    total = sum(os.path.getsize(os.path.join(dest, s.rfilename)) for s in siblings)
    marker = os.path.join(dest, MARKER)
    with open(marker + ".tmp", "w") as f:
        json.dump({"repo": repo, "commit": commit, "files": [s.rfilename for s in siblings]}, f)
    os.replace(marker + ".tmp", marker)
    print(json.dumps({"commit": commit, "files": len(siblings), "bytes": total, "fetched": fetched}))


if __name__ == "__main__":
    main()
