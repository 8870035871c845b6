"""The workers' small simulated cluster (tests/workers/conftest.py) and a reader for /metrics."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.workers.conftest import cluster, job_add, sim, wait_for, workers  # noqa: F401 (fixtures, helpers)

TOKEN = "metrics-token-for-tests-0123456789abcdef"


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.TESSERA_METRICS_TOKEN = TOKEN


def scrape(client) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} from GET /metrics with the bearer token."""
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode()) for sample in family.samples}


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
