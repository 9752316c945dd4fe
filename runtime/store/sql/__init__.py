"""The SQL both backends share: one tenant core (:mod:`.tenant`), forgetting (:mod:`.forgetting`)
and applying retention decisions (:mod:`.decisions`), written once over a small
:class:`~.dialect.SqlDialect` per backend. ``runtime.store.sqlite`` and ``runtime.store.postgres``
keep only what really differs: connections and transactions, vector formats, search."""
