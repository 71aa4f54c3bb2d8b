#!/usr/bin/env python3
"""Appends a run's JSON lines to the records (bench/results/<machine>/<op>.jsonl).

  python3 bench/record.py RUN.jsonl [RUN2.jsonl ...] --machine h200 [--command "what ran"]

Each line goes to the record of its "op"; a line gets "date" (from its "timestamp", else today, UTC)
and "command" (from --command) where it has none. A line without "op", "harness" or "commit" is
refused: a record must say what measured it and on which code. Lines are appended, never edited.
Standard library only.
"""
import argparse
import datetime
import json
import os
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--command", default=None)
    a = ap.parse_args()
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    by_op, bad = {}, 0
    for path in a.runs:
        for n, line in enumerate(open(path), 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            missing = [f for f in ("op", "harness", "commit") if not r.get(f)]
            if missing:
                print(f"{path}:{n}: no {', '.join(missing)}: not recorded", file=sys.stderr)
                bad += 1
                continue
            r.setdefault("date", (r.get("timestamp") or today)[:10])
            if a.command and not r.get("command"):
                r["command"] = a.command
            by_op.setdefault(r["op"], []).append(r)
    os.makedirs(os.path.join(RESULTS, a.machine), exist_ok=True)
    for op, rs in by_op.items():
        with open(os.path.join(RESULTS, a.machine, op + ".jsonl"), "a") as f:
            for r in rs:
                f.write(json.dumps(r) + "\n")
        print(f"{a.machine}/{op}.jsonl: {len(rs)} lines appended")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
