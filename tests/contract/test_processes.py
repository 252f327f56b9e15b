"""What a store shares with other processes: jobs enqueued in one process are seen, claimed and
finished in another (a worker is a process of its own). The memory store is one process by
design (issue #12): these run on it as strict xfails, so the day they pass they fail."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.contract.helpers import lacks, must_get
from tether.stores import NewJob, Store

ONE_PROCESS = "one process: memory://NAME in another process is a store of its own, empty"

OTHER = '''
import json, sys
from tether.stores import open_store
from tether.stores import Outcome

store = open_store(sys.argv[1])
jobs = store.claim("other-process", ["default"], 10, 30.0)
for job in jobs:
    store.finish([Outcome(job.lease, "done", result=job.payload)])
print(json.dumps([job.id for job in jobs]))
store.close()
'''


def test_another_process_claims_and_finishes_the_jobs(
    store: Store, store_url: str, store_kind: str, request: pytest.FixtureRequest
) -> None:
    lacks(request, store_kind, memory=ONE_PROCESS)
    ids = store.enqueue([NewJob("t", payload='[[1], {}]'), NewJob("t", payload='[[2], {}]')])
    done = subprocess.run([sys.executable, "-c", OTHER, store_url], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ids
    assert [must_get(store, i).status for i in ids] == ["done", "done"]
