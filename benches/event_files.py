"""Writes the workload's change feed as Parquet files, for measuring `read_files` flows.

    python benches/event_files.py DIR [EVENTS] [PER_FILE] [KEYS]

Writes EVENTS (default 1,000,000) bitemporal events in files of PER_FILE (default 10,000):
KEYS (default 10,000) keys `id`, six value columns `v0..v5`, the business time `seq` and the system time `sys`
(microsecond timestamps), 10% of events late on business time, 1% late on system time, 1%
deletes (`op = 'D'`). The same seed gives the same files. Needs pyarrow (`python/run-tests.sh`
puts it in `target/python-venv`). The flow that reads them:

    CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC
      FROM stream(read_files('DIR', format => 'parquet'))
      KEYS (id) APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq SYSTEM SEQUENCE BY sys
      COLUMNS * EXCEPT (op) STORED AS BITEMPORAL
"""

import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

KEYS = 10_000  # the default
STEP_US = 1_000_000
BASE_US = 1_700_000_000_000_000


def main() -> None:
    out = sys.argv[1]
    events = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    per_file = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    keys = int(sys.argv[4]) if len(sys.argv) > 4 else KEYS
    os.makedirs(out, exist_ok=True)
    rng = random.Random(42)
    n = 0
    file_no = 0
    while n < events:
        rows = min(per_file, events - n)
        ids, seqs, syss, ops = [], [], [], []
        values = [[] for _ in range(6)]
        for i in range(n, n + rows):
            ids.append(rng.randrange(keys))
            late_business = rng.random() < 0.10
            late_system = rng.random() < 0.01
            seq = i - (rng.randrange(1, 5_000) if late_business else 0)
            sysn = i - (rng.randrange(1, 5_000) if late_system else 0)
            seqs.append(BASE_US + seq * STEP_US)
            syss.append(BASE_US + sysn * STEP_US)
            ops.append("D" if rng.random() < 0.01 else "U")
            for c in range(6):
                values[c].append(rng.randrange(1_000_000))
        ts = pa.timestamp("us", tz="UTC")
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                **{f"v{c}": pa.array(values[c], pa.int64()) for c in range(6)},
                "seq": pa.array(seqs, ts),
                "sys": pa.array(syss, ts),
                "op": pa.array(ops, pa.string()),
            }
        )
        pq.write_table(table, os.path.join(out, f"events-{file_no:05}.parquet"))
        n += rows
        file_no += 1


if __name__ == "__main__":
    main()
