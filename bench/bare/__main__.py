"""``python -m bench.bare KIND URL N [BATCH] [HEARTBEAT_EVERY] [bare|jobs]``: one bare drain, as
JSON; ``jobs`` runs it over tether's own table (SQL stores)."""

from __future__ import annotations

import sys

from bench.bare import BATCH, HEARTBEAT_EVERY, run_here, to_json


def main(argv: list[str]) -> int:
    kind, url, n = argv[0], argv[1], int(argv[2])
    batch = int(argv[3]) if len(argv) > 3 else BATCH
    every = float(argv[4]) if len(argv) > 4 else HEARTBEAT_EVERY
    table = argv[5] if len(argv) > 5 else "bare"
    print(to_json(run_here(kind, url, n, batch, every, table)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
