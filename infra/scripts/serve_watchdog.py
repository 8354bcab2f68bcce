"""The serve watchdog's probe: one real chat completion with the key, as a client sends it. A server can live while
its engine hangs (a rank stuck in a collective at long contexts, a stopped engine core), and /health then still
answers 200: only a completion proves service.

    python3 -c "$(base64 -d <<< BASE64)" ARG TIMEOUT

ARG is JSON {"url": "http(s)://127.0.0.1:PORT", "keyFile": PATH, "model": NAME}; TIMEOUT the seconds the completion
may take. serve_watchdog.sh, in front of the server in the serve container, runs it every
serve.watchdog.intervalSeconds once the server is healthy. Exit status, with one line on stdout that says why:
  0  a completion answered 200 with choices: serving;
  1  no answer: none within TIMEOUT, a refused or dropped connection, or HTTP 5xx (a miss: enough in a row restart it);
  3  not judged: the server answered but not with a completion (HTTP 4xx: a key rotated while the server still holds
     the old one, a model name that changed), or it generated tokens for others while this one waited (busy, not
     hung: vllm:generation_tokens_total on /metrics grew), or there is no key to send.
The key is read from the file at each probe (a rotated key is used at once), never from a command line or the
environment, and sent only to the server on its own host's loopback.
"""

import json
import os
import ssl
import sys
import urllib.error
import urllib.request

SERVING, MISS, NOT_JUDGED = 0, 1, 3


def read_key(path):
    """The key file's first line: a regular file only, never through a link, never blocking on a FIFO; "" if none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not os.path.isfile(f"/proc/self/fd/{fd}"):
            return ""
        return os.read(fd, 4096).decode("utf-8", "replace").split("\n", 1)[0].strip()
    finally:
        os.close(fd)


def context(url):
    # loopback on its own host: the certificate names the address clients use, not 127.0.0.1
    return ssl._create_unverified_context() if url.startswith("https:") else None


def generated(url):
    """The sum of vllm:generation_tokens_total on /metrics (open, no key); None when it cannot be read."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5, context=context(url)) as r:
            text = r.read(8 << 20).decode("utf-8", "replace")
    except Exception:
        return None
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith("vllm:generation_tokens_total"):
            try:
                total += float(line.rsplit(" ", 1)[1])
                seen = True
            except ValueError:
                pass
    return total if seen else None


def completion(url, key, model, timeout):
    """None when a completion answered 200 with choices within `timeout`; else (status, why)."""
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1, "temperature": 0}
    ).encode()
    req = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context(url)) as r:
            answer = r.read(1 << 20)
            if r.status == 200 and b'"choices"' in answer:
                return None
            return MISS, f"HTTP {r.status} without choices"
    except urllib.error.HTTPError as e:
        return (NOT_JUDGED if 400 <= e.code < 500 else MISS), f"HTTP {e.code}"
    except TimeoutError:
        return MISS, f"no answer within {timeout:g} s"
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, TimeoutError):
            return MISS, f"no answer within {timeout:g} s"
        return MISS, f"no connection ({type(reason).__name__})"
    except Exception as e:  # a dropped connection, a broken answer: no completion
        return MISS, f"no completion ({type(e).__name__})"


def main(argv):
    if len(argv) != 2:
        print("serve_watchdog: usage: ARG-JSON TIMEOUT")
        return 64
    try:
        arg = json.loads(argv[0])
        url, key_file, model = str(arg["url"]), str(arg["keyFile"]), str(arg["model"])
        timeout = float(argv[1])
    except (ValueError, KeyError, TypeError) as e:
        print(f"serve_watchdog: bad arguments ({type(e).__name__})")
        return 64
    if not (url.startswith("http://127.0.0.1:") or url.startswith("https://127.0.0.1:")) or not timeout > 0:
        print("serve_watchdog: the URL must be the server's own loopback address and the timeout positive")
        return 64
    key = read_key(key_file)
    if not key:
        print(f"no API key in {key_file}: not judged")
        return NOT_JUDGED
    before = generated(url)
    failed = completion(url, key, model, timeout)
    if failed is None:
        print("serving")
        return SERVING
    rc, why = failed
    if rc == MISS and before is not None:
        after = generated(url)
        if after is not None and after > before:
            print(f"{why}, but it generated {after - before:g} tokens meanwhile: busy, not hung")
            return NOT_JUDGED
    print(why)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
