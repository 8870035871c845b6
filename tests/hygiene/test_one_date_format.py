"""Pages write a moment one way, `2026-12-04 10:17 UTC`, through the `when` filter (issue 16, item 10).

A template may still use `|date:` for a month ("Y-m") or for machine-read ISO ('c', in a datetime
attribute); any other date format is a second way of writing a moment.
"""

import re

from tests.hygiene.repo import ROOT

DATE_FILTER = re.compile(r"""\|date:["']([^"']*)["']""")
ALLOWED = {"Y-m", "c"}
# (template, format): why it writes a moment another way
EXCEPTIONS = {("templates/ui/_job_live.html", "Y-m-d H:i:s"): "the job's timeline orders events seconds apart"}


def test_templates_write_moments_through_when():
    other = [(str(path.relative_to(ROOT)), fmt) for path in sorted((ROOT / "templates").rglob("*.html"))
             for fmt in DATE_FILTER.findall(path.read_text())
             if fmt not in ALLOWED and (str(path.relative_to(ROOT)), fmt) not in EXCEPTIONS]
    assert other == [], "write {{ moment|when }} (ui/templatetags/tessera.py)"


def test_when_writes_the_zone():
    from datetime import UTC, datetime

    from ui.templatetags.tessera import when

    assert when(datetime(2026, 12, 4, 10, 17, 59, tzinfo=UTC)) == "2026-12-04 10:17 UTC"
    assert when(None) == ""


def test_a_job_started_seconds_ago_started_just_now():
    from datetime import timedelta

    from django.utils import timezone

    from ui.templatetags.tessera import ago

    now = timezone.now()
    assert ago(now - timedelta(seconds=20)) == "just now"  # timesince wrote "0 minutes ago"
    assert ago(now - timedelta(hours=3, minutes=1, seconds=5)) == "3\xa0hours, 1\xa0minute ago"
    assert ago(None) == ""
