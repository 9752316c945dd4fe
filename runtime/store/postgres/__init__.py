"""The PostgreSQL + pgvector backend: :class:`~.db.PgDB` owns the pool and scoped transactions
(row-level security confines each to one scope); :class:`~.tenant.PgTenant` gives the shared SQL
core (:mod:`runtime.store.sql`) its PostgreSQL connection hooks; search with pgvector is this
backend's own. Needs the
``postgres`` extra (psycopg 3, psycopg_pool, pgvector); nothing here is imported on the SQLite path."""
