"""Property-based fuzzing of the API from /api/schema/ (Schemathesis), for each role.

Every operation gets EXAMPLES generated requests per role, half of them aimed at rows that exist
(a team, a job, a rate) so they get past the 404 into the code behind it. Deterministic (fixed
seed) and bounded: ~700 requests, well under a minute. Asserted: no 5xx, and every response
whose status the schema documents matches the schema.
"""

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from billing.models import Rate, UsageInterval
from portal.models import Team
from scheduling.models import Job

pytestmark = pytest.mark.django_db
EXAMPLES = 8
ROLES = ["member", "lead", "staff", "anonymous"]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])


def _existing_rows() -> dict[str, dict]:
    """Path parameters of rows that exist, by the path's prefix."""
    team = Team.objects.get(name="search")
    job = Job.objects.filter(team=team, status__in=Job.WAITING_STATUSES).first()
    return {"/api/v1/teams/": {"name": team.name}, "/api/v1/jobs/": {"id": job.pk},
            "/api/v1/billing/rates/": {"id": Rate.objects.first().pk},
            "/api/v1/billing/intervals/": {"id": UsageInterval.objects.first().pk}}


def _strategy(operation, rows):
    strategy = operation.as_strategy()
    if "{" not in operation.path:
        return strategy
    existing = next(params for prefix, params in rows.items() if operation.path.startswith(prefix))
    return st.one_of(strategy, operation.as_strategy(path_parameters=existing))


def fuzz(api, role) -> tuple[int, int, list[str]]:
    """(examples sent, 5xx answers, failures) over every operation of the schema."""
    rows, sent, errors, failures = _existing_rows(), [0], [0], []
    for result in api.schema.get_all_operations():
        operation = result.ok()

        @FUZZ
        @given(case=_strategy(operation, rows))
        def example(case):
            sent[0] += 1
            response = api.call(case, role)
            errors[0] += response.status_code >= 500
            case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])

        try:
            example()
        except (Exception, BaseExceptionGroup) as failure:  # noqa: BLE001 - fuzz all, then show all failures
            failures.append(f"{operation.label} as {role}: {failure}")
    return sent[0], errors[0], failures


@pytest.mark.parametrize("role", ROLES)
def test_no_5xx_and_every_response_as_the_schema_says(api, role, record_property):
    sent, server_errors, failures = fuzz(api, role)
    record_property("examples", sent)
    record_property("server_errors", server_errors)
    print(f"\nfuzz {role}: {sent} examples, {server_errors} 5xx")
    assert sent >= EXAMPLES * 15
    assert not failures, "\n\n".join(failures)
