"""The serve command line, checked by the image's own vLLM before the running server is replaced.

    python3 serve_args_check.py < ARGV.json     the serve container's command, ["vllm", "serve", MODEL, FLAG, ...]
    python3 serve_args_check.py MODEL [FLAG ...] the arguments after `vllm serve`, for a person at a shell

Run in the cluster's image on the host that will run serve (docker run --rm, no network, nothing loaded, no port
opened): vLLM's own serve parser (make_arg_parser, so its flags, choices and types are the image's, whatever version
it is), the checks `vllm serve` makes before it loads anything (validate_parsed_serve_args), the tool call and
reasoning parser names against the image's registries (which vLLM resolves only once the server starts). The model
itself is not looked at (it is not in this container): a model that is missing or broken fails at start, and the
crash budget bounds that.

Prints one JSON line: {"ok": true, "vllm": VERSION} or {"ok": false, "vllm": VERSION, "error": TEXT, "flag": FLAG,
"value": VALUE, "accepted": [...]} (flag, value and accepted when known), and exits 0 when the line is printed (ok or
not) and 2 when vLLM's parser cannot even be found in the image. The arguments never carry a secret (the API key is
read from its file by the serve entrypoint), but a value is shown only for the flag that is refused.
"""

import argparse
import difflib
import importlib
import json
import os
import re
import sys


class Refused(Exception):
    """argparse's error, taken instead of printing usage and exiting."""


def first_module(*names):
    """The first of the modules that imports: vLLM moved its serve parser between releases."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


# The verdict's own stream: the process's stdout as it started. Everything else written to stdout from here on (vLLM
# logs to stdout) goes to stderr, so the verdict is the only thing on stdout: `docker run` carries a container's stdout
# and stderr as two streams, and a warning interleaved with the verdict in one pipe split its line once (seen under
# load: the line cut after '"flag": ', the rest after a warning).
_VERDICT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)


def say(**fields):
    _VERDICT.write(json.dumps(fields, sort_keys=True) + "\n")
    _VERDICT.flush()


def options_of(parser):
    """Every option string of the parser, and the action of each."""
    out = {}
    for action in parser._actions:
        for opt in action.option_strings:
            out[opt] = action
    return out


def refusal(message, parser, version):
    """argparse's message as the check's answer: which flag, which value, what the image's vLLM accepts."""
    options = options_of(parser)
    m = re.match(r"unrecognized arguments: (.*)$", message, re.S)
    if m:
        tokens = m.group(1).split()
        flag = next((t for t in tokens if t.startswith("-")), tokens[0] if tokens else "")
        name = flag.split("=", 1)[0]
        close = difflib.get_close_matches(name, [o for o in options if o.startswith("--")], n=3, cutoff=0.6)
        hint = f" (closest: {', '.join(close)})" if close else ""
        return {"error": f"{name} is not a flag of vLLM {version}{hint}", "flag": name}
    m = re.match(r"argument ([^:]+): (.*)$", message, re.S)
    if m:
        flags, why = m.group(1), m.group(2).strip()
        flag = flags.split("/")[-1] if flags.startswith("-") else flags
        action = options.get(flag)
        value = None
        v = re.search(r"'([^']*)'", why)
        if v:
            value = v.group(1)
        fields = {"error": f"{flag}: {why}", "flag": flag}
        if value is not None:
            fields["value"] = value
        if action is not None and action.choices:
            fields["accepted"] = sorted(str(c) for c in action.choices)
        return fields
    return {"error": message}


def registered(manager_module, manager_class):
    mod = first_module(manager_module)
    manager = getattr(mod, manager_class, None) if mod else None
    return manager.list_registered() if manager is not None and hasattr(manager, "list_registered") else None


def main(argv):
    try:
        import vllm  # noqa: F401  (its version, and that it imports at all in this image)

        version = getattr(vllm, "__version__", "unknown")
    except Exception as e:  # the image's vLLM is broken: serve would not start either
        say(ok=False, vllm=None, error=f"vLLM does not import in the image ({type(e).__name__}: {e})")
        return 0
    cli = first_module("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args")
    argparse_utils = first_module("vllm.utils.argparse_utils", "vllm.utils")
    base = getattr(argparse_utils, "FlexibleArgumentParser", None)
    if cli is None or not hasattr(cli, "make_arg_parser") or base is None:
        print(f"serve_args_check: vLLM {version} in the image has no serve parser this check knows", file=sys.stderr)
        return 2

    class Parser(base):
        def print_usage(self, file=None):
            pass

        def exit(self, status=0, message=None):
            raise Refused((message or "").strip().replace(f"{self.prog}: error: ", "", 1))

    parser = cli.make_arg_parser(Parser(prog="vllm serve"))
    try:
        args = parser.parse_args(argv)
    except Refused as e:
        say(ok=False, vllm=version, **refusal(str(e), parser, version))
        return 0

    checks = []
    validate = getattr(cli, "validate_parsed_serve_args", None)
    if validate is not None:
        checks.append(lambda: validate(args))
    try:
        for check in checks:
            check()
    except (TypeError, ValueError, KeyError) as e:
        say(ok=False, vllm=version, error=str(e).removeprefix("Error: "))
        return 0

    # names vLLM looks up only when the server starts; a plugin may register more, so then they are left to it
    for flag, dest, plugin, module, manager in (
        ("--tool-call-parser", "tool_call_parser", "tool_parser_plugin", "vllm.tool_parsers", "ToolParserManager"),
        ("--reasoning-parser", "reasoning_parser", "reasoning_parser_plugin", "vllm.reasoning", "ReasoningParserManager"),
    ):
        name = getattr(args, dest, None)
        if not name or getattr(args, plugin, None):
            continue
        names = registered(module, manager)
        if names is not None and name not in names:
            say(
                ok=False,
                vllm=version,
                error=f"{flag} {name}: not a {flag[2:].replace('-', ' ')} of vLLM {version}",
                flag=flag,
                value=name,
                accepted=list(names),
            )
            return 0

    # Not AsyncEngineArgs.from_cli_args: it resolves the model (its path, else the Hub), which this container has not
    # got; a model that is missing or broken is a failure at start, which the crash budget bounds.
    say(ok=True, vllm=version)
    return 0


def command_line():
    """The arguments after `vllm serve`: from the command line, else the serve command as JSON on stdin."""
    if len(sys.argv) > 1:
        return sys.argv[1:]
    argv = json.load(sys.stdin)
    if not (isinstance(argv, list) and argv[:2] == ["vllm", "serve"] and all(isinstance(a, str) for a in argv)):
        raise SystemExit('serve_args_check: stdin must be the serve command as a JSON list ["vllm", "serve", ...]')
    return argv[2:]


if __name__ == "__main__":
    sys.exit(main(command_line()))
