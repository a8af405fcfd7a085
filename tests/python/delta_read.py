"""Reads a Delta table with the `deltalake` package (delta-rs), a reader asof did not write.

    delta_read.py OUT.arrow APP_ID DIR[@VERSION] [DIR[@VERSION] ...]

Writes the union of the tables' rows (each as of its Delta VERSION if given) to OUT.arrow (an
Arrow IPC file) and prints, as JSON, each table's Delta version and the version its commits
recorded for application APP_ID (the `txn` action).
Used by tests/delta_export.rs.
"""

import json
import os
import sys

import pyarrow as pa
from deltalake import DeltaTable


def main():
    out, app_id, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    tables, info = [], []
    for d in dirs:
        path, _, version = d.partition("@")
        dt = DeltaTable(path, version=int(version) if version else None)
        tables.append(dt.to_pyarrow_table())
        info.append({"dir": path, "version": dt.version(), "txn": dt.transaction_version(app_id)})
    union = pa.concat_tables(tables)
    with pa.OSFile(out, "wb") as sink, pa.ipc.new_file(sink, union.schema) as w:
        w.write_table(union)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
    # deltalake's native threads can abort the interpreter's teardown ("terminate called without
    # an active exception") once in a while; the work is done and flushed, so skip the teardown.
    sys.stdout.flush()
    os._exit(0)
