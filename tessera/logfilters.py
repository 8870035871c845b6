"""Logging filters the settings' LOGGING names."""

import logging


class ClientErrorWithoutTraceback(logging.Filter):
    """A 4xx is the client's mistake, not the server's: Django logs it with the traceback of the
    PermissionDenied or Http404 behind it, which buried the demo console. Keep the one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) < 500:
            record.exc_info = None
            record.exc_text = None
        return True
