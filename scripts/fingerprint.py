#!/usr/bin/env python3
"""A run's fingerprint: the digest of every column of every table and of one checkpoint's weights.

    python scripts/fingerprint.py RESULTS --check tests/fingerprints/smoke.json   # one line per mismatch
    python scripts/fingerprint.py RESULTS --write tests/fingerprints/smoke.json   # after a change that
                                                                                 # is meant to move numbers

The committed fingerprint of the smoke run is recomputed by tests/test_fingerprint.py on every
machine that runs the tests (lostmid.tables.compare). Exit status 0 when it matches (or was
written), 1 on a mismatch, 2 on unreadable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lostmid import pin_numerics
from lostmid.errors import LostmidError
from lostmid.tables.compare import fingerprint, fingerprint_mismatches, read_fingerprint

# The checkpoint whose weights the smoke fingerprint holds: the baseline's last step, seed 1.
SMOKE_CHECKPOINT = "checkpoints/baseline/L8_M1_seed1/step20.pt"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the run's results folder")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", type=Path, metavar="FILE", help="compare with this fingerprint")
    action.add_argument("--write", type=Path, metavar="FILE", help="write the run's fingerprint here")
    parser.add_argument("--checkpoint", default=SMOKE_CHECKPOINT, help="checkpoint under RESULTS to digest")
    args = parser.parse_args(argv)
    try:
        expected = read_fingerprint(args.check) if args.check else None
        found = fingerprint(args.results, args.checkpoint)
    except (LostmidError, OSError) as err:
        print(f"fingerprint: {err}", file=sys.stderr)
        return 2
    if args.write:
        args.write.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.write}: {len(found['tables'])} tables")
        return 0
    lines = fingerprint_mismatches(expected, found)
    for line in lines:
        print(line)
    print(f"{len(expected['tables'])} tables in the fingerprint, {len(lines)} mismatches")
    return 1 if lines else 0


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    sys.exit(main())
