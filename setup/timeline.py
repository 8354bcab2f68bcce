"""Where the minutes of a `pulumi up` go: the engine's event log of one operation as a table and a Gantt chart.

Usage:
    python3 setup/timeline.py EVENTS.jsonl [--png OUT.png] [--json OUT.json] [--title TEXT] [--all]
    bash setup/timeline.sh EVENTS.jsonl --png OUT.png     (the same; installs Pillow once when --png is given)

For any stack:
    PULUMI_DEBUG_COMMANDS=true pulumi up --event-log /tmp/up-events.jsonl
    bash setup/timeline.sh /tmp/up-events.jsonl --png up.png

EVENTS.jsonl holds one Pulumi EngineEvent (JSON) a line, as `--event-log` writes them or as the Automation API's
onEvent hands them over. A line's time is its `receivedMs` (milliseconds, added by the integration tests when an
event arrives) or else its `timestamp` (whole seconds). Each resourcePreEvent opens a step; the next
resOutputsEvent or resOpFailedEvent of the same URN and op family closes it (a refresh closes with the op it
found). A step never closed (an interrupted operation) ends at the last event and is marked "(no end)". Preview
events (`planning`) count only when the file has nothing else.

Shown by default: custom resources' steps other than same/read/refresh, without the stack, the providers and the
engine's instant "replace" marker of a resource that has its real replacement steps; then a line for the whole
operation (first to last event). --all shows every step, components (thin bars) and plumbing included.
Exit status 2, with one line on stderr, for a missing, empty or malformed file or one with no resource events.
The table needs only the standard library; --png imports Pillow (>= 10.1) when it draws.
"""

import argparse
import json
import math
import sys
from pathlib import Path

HIDDEN_OPS = {"same", "read", "refresh"}
FAMILY = {"create-replacement": "create", "import": "create", "import-replacement": "create",
          "delete-replaced": "delete", "discard": "delete", "discard-replaced": "delete", "read-replacement": "read"}
PRE, END_KINDS = "resourcePreEvent", ("resOutputsEvent", "resOpFailedEvent")
COLOURS = {"create": "#2f9e44", "import": "#2f9e44", "update": "#1c7ed6", "replace": "#f08c00",
           "create-replacement": "#f08c00", "delete": "#e03131", "delete-replaced": "#e03131", "discard": "#e03131"}
FAILED_COLOUR, OTHER_COLOUR, TOTAL_COLOUR = "#7a0f0f", "#adb5bd", "#495057"
WIDTH, ROW, TOP, BOTTOM, LABEL_W, RIGHT_W = 1200, 22, 84, 34, 330, 150  # height: TOP + ROW * (steps + 1) + BOTTOM


class TimelineError(Exception):
    """A problem with the input file: one line on stderr, exit status 2."""


def event_ms(event: dict) -> int | None:
    """The event's time in ms: receivedMs when the recorder added it, else the engine's whole-second timestamp."""
    for key, scale in (("receivedMs", 1), ("timestamp", 1000)):
        value = event.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value * scale)
    return None


def valid(event: object) -> bool:
    """A timed JSON object; resource events also need metadata.urn."""
    if not isinstance(event, dict) or event_ms(event) is None:
        return False
    body = next((event[k] for k in (PRE, *END_KINDS) if k in event), {"metadata": {"urn": ""}})
    return isinstance(body, dict) and isinstance((body.get("metadata") or {}).get("urn"), str)


def read_events(path: Path) -> list[tuple[int, dict]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise TimelineError(f"{path}: no such file") from None
    except (OSError, UnicodeError) as e:
        raise TimelineError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    events = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as e:
            raise TimelineError(f"{path}: line {lineno}: not JSON ({e.msg})") from None
        if not valid(event):
            raise TimelineError(f"{path}: line {lineno}: not an engine event with a timestamp (and a URN)")
        events.append((event_ms(event), event))
    if not events:
        raise TimelineError(f"{path}: empty file, no events")
    return events


def pair_steps(events: list[tuple[int, dict]]) -> list[dict]:
    """One step per resourcePreEvent, closed by the next end event of its URN and op family, in file order."""
    resource = [(ms, e) for ms, e in events if any(k in e for k in (PRE, *END_KINDS))]
    real = [(ms, e) for ms, e in resource if not (e.get(PRE) or e.get("resOutputsEvent") or {}).get("planning")]
    steps: list[dict] = []
    open_steps: dict[str, list[dict]] = {}
    for ms, event in real or resource:
        kind = next(k for k in (PRE, *END_KINDS) if k in event)
        md = event[kind]["metadata"]
        urn, op = md["urn"], md.get("op", "")
        if kind == PRE:
            steps.append({"name": urn.split("::")[-1], "type": md.get("type", ""), "op": op, "urn": urn,
                          "custom": bool(md.get("provider")), "start": ms, "end": None, "failed": False})
            open_steps.setdefault(urn, []).append(steps[-1])
            continue
        pending = open_steps.get(urn, [])
        family = [s for s in pending if s["op"] == "refresh" or FAMILY.get(s["op"], s["op"]) == FAMILY.get(op, op)]
        match = next((s for s in pending if s["op"] == op), None) or next(iter(family), None)
        if match:
            pending.remove(match)
            match.update(end=ms, failed=kind == "resOpFailedEvent")
    return steps


def shown(steps: list[dict], show_all: bool) -> list[dict]:
    replaced = {s["urn"] for s in steps if s["op"] in ("create-replacement", "delete-replaced")}
    plumbing = ("pulumi:pulumi:Stack", "pulumi:providers:")
    return [s for s in steps if show_all or s["custom"] and s["op"] not in HIDDEN_OPS
            and not s["type"].startswith(plumbing) and not (s["op"] == "replace" and s["urn"] in replaced)]


def load(path: Path, show_all: bool, title: str | None) -> dict:
    """The timeline: title, total seconds and the shown steps, in seconds from the first event, sorted by start."""
    events = read_events(path)
    steps = pair_steps(events)
    if not steps:
        raise TimelineError(f"{path}: no resource events")
    first, last = min(ms for ms, _ in events), max(ms for ms, _ in events)
    if title is None:
        parts = steps[0]["urn"].split("::")
        title = f"{parts[1]}/{parts[0].split(':')[-1]}" if len(parts) > 2 else path.name
    rows = []
    for s in sorted(shown(steps, show_all), key=lambda s: s["start"]):
        start, end = s["start"], last if s["end"] is None else s["end"]
        rows.append({"name": s["name"], "type": s["type"], "op": s["op"], "start": round((start - first) / 1000, 3),
                     "end": round((end - first) / 1000, 3), "seconds": round((end - start) / 1000, 3),
                     "failed": s["failed"], "noEnd": s["end"] is None, "component": not s["custom"]})
    return {"title": title, "totalSeconds": round((last - first) / 1000, 3), "steps": rows}


def mark(row: dict) -> str:
    return "  FAILED" if row["failed"] else "  (no end)" if row["noEnd"] else ""


def render_text(tl: dict) -> str:
    rows, total = tl["steps"], tl["totalSeconds"]
    line = "{:>8} {:>8}  {:<18}  {:<%d}  {}" % max([len("(whole operation)")] + [len(r["name"]) for r in rows])
    out = [f"{tl['title']}: {total:.1f} s wall, {len(rows)} steps", line.format("start", "secs", "op", "name", "type")]
    for r in rows:
        out.append(line.format(f"{r['start']:.1f}", f"{r['seconds']:.1f}", r["op"], r["name"], r["type"]) + mark(r))
    out.append(line.format("0.0", f"{total:.1f}", "total", "(whole operation)", ""))
    return "".join(o.rstrip() + "\n" for o in out)


def draw_header(draw, font, big, tl: dict) -> None:
    draw.text((12, 10), tl["title"], fill="#212529", font=big)
    summary = f"{tl['totalSeconds']:.1f} s wall, {len(tl['steps'])} steps, one bar per step"
    draw.text((12, 34), summary, fill="#495057", font=font)
    legend = [(k, COLOURS[k]) for k in ("create", "update", "replace", "delete")]
    legend += [("failed", FAILED_COLOUR), ("other", OTHER_COLOUR)]
    x = WIDTH - 12 - sum(draw.textlength(t, font=font) + 30 for t, _ in legend)
    for text, colour in legend:
        draw.rectangle([x, 14, x + 14, 26], fill=colour)
        draw.text((x + 18, 12), text, fill="#495057", font=font)
        x += draw.textlength(text, font=font) + 30


def draw_axis(draw, font, total: float, x_of, rows: int) -> None:
    """Striped rows, a gridline and a label above and below each tick, a rule above the total."""
    y_end, mag = TOP + ROW * rows, 10 ** math.floor(math.log10(max(total, 1.0) / 10))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag * 10 >= total)  # about ten ticks
    for i in range(1, rows, 2):
        draw.rectangle([0, TOP + ROW * i, WIDTH, TOP + ROW * (i + 1) - 1], fill="#f4f5f7")
    for i in range(int(total / step) + 1):
        x = x_of(i * step)
        draw.line([(x, TOP - 6), (x, y_end + 4)], fill="#dee2e6")
        label = f"{i * step:g} s"
        for y in (TOP - 22, y_end + 8):
            draw.text((x - draw.textlength(label, font=font) / 2, y), label, fill="#495057", font=font)
    draw.line([(12, y_end - ROW), (WIDTH - 12, y_end - ROW)], fill="#868e96")


def hatch(draw, box: tuple[float, float, float, float], colour: str) -> None:
    x0, y0, x1, y1 = box
    h = y1 - y0
    for x in range(int(x0 - h), int(x1), 6):
        t0, t1 = max(0.0, x0 - x), min(h, x1 - x)
        if t0 < t1:
            draw.line([(x + t0, y1 - t0), (x + t1, y1 - t1)], fill=colour, width=2)


def draw_row(draw, font, i: int, row: dict, x_of) -> None:
    y = TOP + ROW * i
    name, op = row["name"], f" ({row['op']})"
    while draw.textlength(name + op, font=font) > LABEL_W - 24 and len(name) > 1:
        name = name[:-2] + "…"  # a long name is cut, its op stays
    draw.text((12, y + 4), name + op, fill="#212529", font=font)
    inset = 8 if row["component"] else 4  # --all: components (the span of their children) as thin bars
    box = (x_of(row["start"]), y + inset, max(x_of(row["end"]), x_of(row["start"]) + 2), y + ROW - inset)
    colour = TOTAL_COLOUR if row["op"] == "total" else COLOURS.get(row["op"], OTHER_COLOUR)
    if row["failed"]:
        draw.rectangle(box, fill=FAILED_COLOUR, outline="#000000")
        hatch(draw, box, "#e8a0a0")
    elif row["noEnd"]:
        draw.rectangle(box, outline=colour, width=2)
    else:
        draw.rectangle(box, fill=colour)
    draw.text((box[2] + 6, y + 4), f"{row['seconds']:.1f} s{mark(row)}", fill="#212529", font=font)


def render_png(tl: dict, out: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font, big = ImageFont.load_default(size=13), ImageFont.load_default(size=17)
    total = tl["totalSeconds"] or 1.0
    whole = {"name": "whole operation", "op": "total", "start": 0.0, "end": tl["totalSeconds"],
             "seconds": tl["totalSeconds"], "failed": False, "noEnd": False, "component": False}
    rows = tl["steps"] + [whole]
    img = Image.new("RGB", (WIDTH, TOP + ROW * len(rows) + BOTTOM), "#ffffff")
    draw = ImageDraw.Draw(img)

    def x_of(seconds: float) -> float:
        return LABEL_W + (WIDTH - RIGHT_W - LABEL_W) * seconds / total

    draw_header(draw, font, big, tl)
    draw_axis(draw, font, total, x_of, len(rows))
    for i, row in enumerate(rows):
        draw_row(draw, font, i, row, x_of)
    img.save(out, "PNG")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Timeline of one Pulumi operation from its engine event log.")
    parser.add_argument("events", type=Path, help="JSONL file, one EngineEvent a line")
    parser.add_argument("--png", type=Path, help="write a Gantt chart here (needs Pillow)")
    parser.add_argument("--json", type=Path, help="write the timeline as JSON here")
    parser.add_argument("--title", help="title (default: project/stack from the URNs)")
    parser.add_argument("--all", action="store_true", help="also components, plumbing and same/read/refresh steps")
    args = parser.parse_args(argv)
    try:
        tl = load(args.events, args.all, args.title)
    except TimelineError as e:
        print(f"timeline: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(render_text(tl))
    try:
        if args.json:
            keys = ("name", "type", "op", "start", "end", "seconds", "failed")
            steps = [{k: r[k] for k in keys} for r in tl["steps"]]
            args.json.write_text(json.dumps({**tl, "steps": steps}, indent=2) + "\n", encoding="utf-8")
        if args.png:
            render_png(tl, args.png)
    except ImportError:
        print("timeline: --png needs Pillow >= 10.1 (setup/timeline.sh installs it)", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"timeline: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
