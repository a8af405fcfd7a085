"""asof from Python: an embedded bitemporal store with Databricks AUTO CDC semantics.

    import asof
    db = asof.connect("ledger")
    db.sql("SELECT * FROM balances FOR SYSTEM_TIME AS OF '2025-03-01'").to_pandas()
    db.append("bookings", table)   # a pyarrow.Table, a pandas.DataFrame, or any Arrow stream
"""

from ._asof import Database, AsofError, __version__

__all__ = ["connect", "Database", "AsofError", "__version__"]


def connect(path: str) -> Database:
    """Opens (creating it if needed) the store in the folder `path`."""
    return Database(path)
