"""The fault campaign (`python bench/fault_campaign.py`): the real workers (Celery tasks and the
cycle code over PostgreSQL and Redis, the simulated cluster) under injected faults, with the
invariants checked after each one.

    processes.py   the campaign's own Redis and Celery workers, as processes it can kill and pause
    cluster.py     the cluster it runs on: nodes, GPUs and a team, in the database and the simulation
    injection.py   the kinds of fault and how each is injected
    invariants.py  what must hold after every fault, read from the database and the cluster
    driver.py      Campaign: submit, inject, heal, settle, check, in a seeded loop
    report.py      what a run found, as a table and as JSON
"""
