from celery import shared_task

from whatif.services import TIME_LIMIT_S, whatif_execute


# No automatic retry: a run that fails says why on its page, and a person starts another. The soft
# limit frees the worker slot from a replay too big for it (the run says so, see whatif_execute).
@shared_task(name="whatif.run", soft_time_limit=TIME_LIMIT_S, time_limit=TIME_LIMIT_S + 60)
def run_whatif(run_id: int) -> str:
    return whatif_execute(run_id)
