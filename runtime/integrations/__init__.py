"""Where agent frameworks meet memir: a LangGraph store, an MCP server, function-calling tool
schemas and a mem0-style facade — each a thin adapter over the same public :class:`~runtime.Scope`.

Nothing here is imported by ``import runtime``; each module needs the ``integrations`` extra only
for its own framework (``langgraph`` for :mod:`.langgraph_store`, ``mcp`` for :mod:`.mcp_server`);
:mod:`.tools` and :mod:`.mem0` need nothing beyond the runtime.
"""
