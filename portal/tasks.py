from celery import shared_task


@shared_task(name="portal.ping")
def ping(value: str) -> str:
    """A round trip through the broker; the smoke test uses it to prove a worker is alive."""
    return f"pong:{value}"
