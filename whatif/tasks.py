from celery import shared_task

from whatif.services import whatif_execute


# No automatic retry: a run that fails says why on its page, and a person starts another.
@shared_task(name="whatif.run")
def run_whatif(run_id: int) -> str:
    return whatif_execute(run_id)
