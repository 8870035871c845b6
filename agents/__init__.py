"""Tessera agents: the node agent, cluster backends and (later) the Celery tasks."""
