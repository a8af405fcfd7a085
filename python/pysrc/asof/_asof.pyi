"""Type stubs of the native module (python/src/lib.rs)."""

from typing import Any

import pyarrow

__version__: str

class AsofError(Exception):
    """An error of asof, with the message `asof sql` prints."""

class Database:
    """A store, open in this process. Another process opening it waits up to 2 s for it to
    close, then fails."""

    def __init__(self, path: str) -> None: ...
    def sql(self, statements: str) -> pyarrow.Table:
        """Runs `;`-separated statements, as `asof sql` does. Returns the last query's rows, or,
        if the last statement changed something, a one-column table (`result`) of the lines
        `asof sql` prints for the statements."""
    def sql_reader(self, statements: str) -> pyarrow.RecordBatchReader:
        """Runs `;`-separated statements as `sql` does, and returns the last query's rows as a
        reader that computes them a batch at a time as it is read (a result larger than memory
        can be written to a file batch by batch). It reads the tables as they were when it was
        made (an ERASE, VACUUM or DROP of one of them meanwhile stops it with an error), and keeps
        the store open until it is read to its end or released. If the last statement changed something, it reads the lines `sql` returns."""
    def append(self, source: str, data: Any) -> int:
        """Appends rows to source table `source` as one commit: a pyarrow.Table or RecordBatch,
        a pandas.DataFrame, or any object with `__arrow_c_stream__`. Columns are matched by name.
        Returns the table's row count."""
    def tables(self) -> list[str]:
        """The streaming tables."""
    def close(self) -> None:
        """Closes the store; the object can no longer be used."""
    def __enter__(self) -> Database: ...
    def __exit__(self, *args: object) -> None: ...
