# The `tessera` image that deploy/ runs: the portal (gunicorn), the Celery worker and beat, and the
# node agent. Only the runtime lock is installed (requirements/runtime.txt, pinned with hashes);
# test and lint tools never enter it.
#   docker build -t tessera:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS dependencies
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements/runtime.txt /tmp/runtime.txt
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r /tmp/runtime.txt

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=tessera.settings
# The uid deploy/ runs as (runAsUser: 10001); no login shell, owns nothing it runs.
RUN groupadd --system --gid 10001 tessera \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin tessera
COPY --from=dependencies /opt/venv /opt/venv
WORKDIR /app
COPY manage.py ./
COPY tessera/ tessera/
COPY ui/ ui/
COPY agents/ agents/
COPY billing/ billing/
COPY checkpoints/ checkpoints/
COPY notifications/ notifications/
COPY whatif/ whatif/
COPY scheduling/ scheduling/
COPY portal/ portal/
COPY templates/ templates/
COPY static/ static/
# Static files are collected at build time and served by WhiteNoise; the settings need a
# SECRET_KEY to load, so a throwaway one is given to this step only.
RUN DEBUG=0 SECRET_KEY=collectstatic-only-never-used-at-run-time-0123456789 \
    python manage.py collectstatic --noinput --verbosity 0 \
    && python -m compileall -q tessera ui agents billing checkpoints scheduling portal
USER 10001:10001
EXPOSE 8000 9400
# deploy/ gives each container its command; alone, the image serves the portal.
CMD ["gunicorn", "tessera.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
