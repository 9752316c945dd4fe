"""The PostgreSQL + pgvector backend: :class:`~.db.PgDB` owns the pool and scoped transactions
(row-level security confines each to one scope); :class:`~.tenant.PgTenant` runs one scope's
statements; search, forgetting and the decision log are built on those two. Needs the
``postgres`` extra (psycopg 3, psycopg_pool, pgvector); nothing here is imported on the SQLite path."""
