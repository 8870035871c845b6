"""The Django project: settings, URLs, the Celery app and the WSGI/ASGI entry points.

The top of the layer order (see pyproject's import-linter contracts): it wires the apps together
and nothing imports it but the process entry points.
"""

from tessera.celery import app as celery_app

__all__ = ["celery_app"]
