"""The archive of finished runs in PostgreSQL: an I/O layer of its own, off the reconcile path.

row.py (pure: what a finished run becomes), store.py (the SQL, psycopg 3), queue.py (the
writer tasks behind the Plan watch), migrations/ (numbered SQL files). Only this package and
`kubectl plan history` import the database driver.
"""
