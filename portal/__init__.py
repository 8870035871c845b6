"""Tessera's Django project and its tenancy + UI app."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
