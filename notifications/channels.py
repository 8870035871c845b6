"""The two ways a notice leaves: a mail through Django's mail settings, a Slack-compatible POST.

Both raise DeliveryFailed with a message fit to show a team lead: never the URL (its path is
usually the receiver's secret) and never a traceback.
"""

import json
import smtplib
import urllib.error
import urllib.request

from django.core.mail import send_mail

WEBHOOK_TIMEOUT_S = 10


class DeliveryFailed(Exception):
    """One attempt failed; the task retries it with backoff."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is refused: it would send the notice, unchecked, to a URL nobody entered."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def email_send(address: str, subject: str, text: str) -> None:
    try:
        send_mail(subject, text, None, [address], fail_silently=False)
    except (smtplib.SMTPException, OSError) as error:
        raise DeliveryFailed(f"mail server: {type(error).__name__}: {error}"[:500]) from error


def webhook_post(url: str, subject: str, text: str) -> None:
    """POST {"text": …} as Slack's incoming webhooks (and Mattermost's, Rocket.Chat's …) take it."""
    body = json.dumps({"text": f"*{subject}*\n{text}"}).encode()
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "Tessera"})
    try:
        with _opener.open(request, timeout=WEBHOOK_TIMEOUT_S) as response:
            response.read(1024)
    except urllib.error.HTTPError as error:  # 3xx (refused above), 4xx and 5xx
        raise DeliveryFailed(f"receiver answered HTTP {error.code}") from None
    except urllib.error.URLError as error:
        raise DeliveryFailed(f"receiver not reached: {error.reason}"[:500]) from None
    except OSError as error:  # a timeout while reading, a reset connection
        raise DeliveryFailed(f"receiver not reached: {type(error).__name__}: {error}"[:500]) from None
