"""The two ways a notice leaves: a mail through Django's mail settings, a Slack-compatible POST.

Both raise DeliveryFailed with a message fit to show a team lead: never the URL (its path is
usually the receiver's secret) and never a traceback.
"""

import ipaddress
import json
import smtplib
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail

WEBHOOK_TIMEOUT_S = 10


class DeliveryFailed(Exception):
    """One attempt failed; the task retries it with backoff."""


class DeliveryRefused(DeliveryFailed):
    """Never to be sent: trying again would change nothing."""


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


def _public_only(url: str) -> None:
    """Team leads, not admins, choose webhook URLs: unless TESSERA_WEBHOOKS_TO_PRIVATE allows it, the
    workers post to no loopback, private or link-local address (node agents, the cloud's metadata
    service). A host that resolves differently by the time urllib connects is not caught."""
    if settings.TESSERA_WEBHOOKS_TO_PRIVATE:
        return
    parts = urlsplit(url)
    try:
        found = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise DeliveryFailed(f"receiver not reached: {error}"[:500]) from None
    if any(not ipaddress.ip_address(info[4][0].split("%")[0]).is_global for info in found):
        raise DeliveryRefused("receiver refused: its address is not public (an operator may allow that with "
                              "TESSERA_WEBHOOKS_TO_PRIVATE)")


def webhook_post(url: str, subject: str, text: str) -> None:
    """POST {"text": …} as Slack's incoming webhooks (and Mattermost's, Rocket.Chat's …) take it."""
    _public_only(url)
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
