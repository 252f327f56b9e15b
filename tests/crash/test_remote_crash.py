"""Crash tests through ``tether server`` (issue #21): real servers, real remote workers.

Every test starts ``tether server --url STORE --listen 127.0.0.1:PORT --token-file FILE``
subprocesses in front of the test's isolated store (SQLite, PostgreSQL, Redis), and
``tether worker tests.crash.apps:app`` subprocesses whose ``TETHER_URL`` is
``tether://TOKEN@127.0.0.1:PORT``: the workers hold no store connection. The test reads the
ledger from the store itself (the ``store`` fixture), never through the server, so what it
checks is what the store holds.

What must hold, as with a direct store (tests/crash/test_crash.py): fencing is the store's, so
a SIGKILLed remote worker's job is re-run within the documented bound ``lease_ttl +
stall_grace + 2 s`` (measured from store timestamps), a SIGSTOPped one's late result is
rejected and the worker told; a server killed mid-drain and restarted on its port costs
nothing but time (workers ride it out, no job is lost or done twice); several servers serve
one store, and a client naming several fails over.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.crash.conftest import MakeCluster, close_all
from tests.crash.harness import (
    Cluster,
    Worker,
    all_in,
    check_zombie_fenced_out,
    enqueue,
    get,
    handlers_started,
    held_by,
    jobs,
    result_of,
    start_zombie,
    wait_for,
)
from tests.crash.remote import Server, Tokens, open_remote
from tether.stores import JobRecord, Store

MakeServer = Callable[..., Server]

pytestmark = [pytest.mark.crash]


@pytest.fixture
def tokens(tmp_path: Path) -> Tokens:
    return Tokens(tmp_path / "auth")


@pytest.fixture
def make_server(request: pytest.FixtureRequest, store_url: str, store: Store, tokens: Tokens,
                tmp_path: Path, crash_clusters: list[Cluster]) -> Iterator[MakeServer]:
    """``make_server(*extra_args, lease_ttl=2.0)``: a started ``tether server
    tests.crash.apps:app`` in front of the test's (migrated) store, its maintenance on the
    workers' settings (``lease_ttl`` must be the cluster's). At teardown the workers die
    first, then the servers, then (the store_url fixture) the store."""
    servers: list[Server] = []
    request.node.crash_servers = servers

    def _make(*extra: str, lease_ttl: float = 2.0) -> Server:
        server = Server(store_url, tmp_path, tokens, f"s{len(servers)}", *extra,
                        lease_ttl=lease_ttl).start()
        servers.append(server)
        return server

    try:
        yield _make
    finally:
        close_all(crash_clusters)
        for server in servers:
            server.close()


def _in_hand(cluster: Cluster, store: Store, w: Worker) -> dict[int, JobRecord]:
    """The jobs ``w`` holds in the store whose handler it started and has not ended (from
    its own records). Once ``w`` is killed or stopped these are settled: a finish it sent
    just before the signal can only be for a handler that had ended."""
    runs = [r for r in cluster.records("runs") if r["pid"] == w.pid]
    ended = {(r["job"], r["attempt"]) for r in runs if r["event"] == "end"}
    started = {(r["job"], r["attempt"]) for r in runs if r["event"] == "start"}
    return {j.id: j for j in held_by(store, w.pid)
            if (j.id, j.attempt) in started and (j.id, j.attempt) not in ended}


def _check_ledger(done: list[JobRecord], records: list[dict[str, Any]]) -> None:
    """Each job done once, by its last attempt: the result names that attempt, every attempt
    is counted (a stall or an interruption per extra attempt, never a failure), and exactly
    one handler of that attempt ended (the one whose result the store kept)."""
    for job in done:
        assert job.status == "done", job
        result = result_of(job)
        assert result["attempt"] == job.attempt, (job, result)
        assert job.failures == 0, job
        assert job.attempt == 1 + job.stall_count + job.interruptions, job
        ends = [r for r in records if r["job"] == job.id and r["event"] == "end"
                and r["attempt"] == job.attempt]
        assert len(ends) == 1, (job, ends)
        assert ends[0]["pid"] == result["pid"], (job, ends)


@pytest.mark.timeout(90)
def test_remote_sigkill_mid_job_is_rerun_within_the_bound(
    make_server: MakeServer, make_cluster: MakeCluster, store: Store
) -> None:
    server = make_server()
    server.wait_ready()
    cluster = make_cluster(server.url)
    a, b = cluster.spawn(2), cluster.spawn(2)
    cluster.wait_registered(store, a, b)
    producer = open_remote(server)
    try:
        [job_id] = enqueue(producer, "crash.work", 30.0, 0.2)
    finally:
        producer.close()

    wait_for(lambda: all_in(store, [job_id], "running"), 15, "the job to be claimed")
    holder, survivor = (a, b) if held_by(store, a.pid) else (b, a)
    assert held_by(store, holder.pid), f"job held by neither worker: {get(store, job_id)}"
    wait_for(lambda: handlers_started(cluster, holder.pid, {job_id}), 10, "the handler to start")
    before = get(store, job_id)
    kill_wall = holder.kill()

    done = wait_for(lambda: all_in(store, [job_id], "done"),
                    cluster.settings.recovery_bound + 15, "the job to be re-run and done")[0]
    took = (done.started_at or 0.0) - kill_wall
    assert (done.attempt, done.stall_count, done.failures, done.interruptions) == (2, 1, 0, 0)
    assert result_of(done) == {"job": job_id, "attempt": 2, "pid": survivor.pid}
    assert took <= cluster.settings.recovery_bound, (
        f"re-claimed {took:.2f}s after the kill; bound {cluster.settings.recovery_bound}s")
    # The fence: nobody got the job back before the dead holder's lease had run out.
    assert before.lease_until is not None
    assert (done.started_at or 0.0) >= before.lease_until - 0.05
    assert survivor.alive() and server.alive()


@pytest.mark.timeout(90)
def test_remote_sigstopped_zombie_is_fenced_out_and_told(
    make_server: MakeServer, make_cluster: MakeCluster, store: Store
) -> None:
    # As test_crash's zombie test, through the server: attempt 1 of each job runs on the
    # worker we pause, one handler blind (time.sleep), one polling current_job().cancelled.
    server = make_server()
    server.wait_ready()
    cluster = make_cluster(server.url)
    zombie, blind, polling = start_zombie(cluster, store)
    held = {j.id: j for j in jobs(store, [blind, polling])}
    zombie.pause(store)
    stop_wall = time.time()

    live = cluster.spawn(2)
    done = wait_for(lambda: all_in(store, [blind, polling], "done"),
                    cluster.settings.recovery_bound + 20, "the live worker to finish both jobs")
    for job in done:
        assert result_of(job) == {"job": job.id, "attempt": 2, "pid": live.pid}
        assert (job.attempt, job.stall_count, job.failures) == (2, 1, 0)
        # Re-claimed only once the paused holder's lease had run out (store timestamps).
        lease = held[job.id].lease_until
        assert lease is not None and (job.started_at or 0.0) >= lease - 0.05
        assert (job.started_at or 0.0) > stop_wall

    zombie.send(signal.SIGCONT)
    # The blind handler did try to complete; the store kept the live worker's result.
    check_zombie_fenced_out(cluster, store, zombie, live, blind, polling, 20,
                            ", through the server")
    assert zombie.alive() and live.alive() and server.alive()


@pytest.mark.timeout(120)
def test_remote_fleet_loses_nothing_when_workers_are_killed_and_paused(
    make_server: MakeServer, make_cluster: MakeCluster, store: Store
) -> None:
    """Many jobs, three remote workers: one SIGKILLed and one SIGSTOPped while they hold
    jobs. Every job ends done once, by the attempt the store counted; the paused worker's
    late results change nothing."""
    server = make_server()
    server.wait_ready()
    cluster = make_cluster(server.url)
    killed, paused, steady = (cluster.spawn(3) for _ in range(3))
    cluster.wait_registered(store, killed, paused, steady)
    producer = open_remote(server)
    try:
        ids = enqueue(producer, "crash.work", 1.5, 0.05, n=30)
    finally:
        producer.close()

    wait_for(lambda: _in_hand(cluster, store, killed) and _in_hand(cluster, store, paused),
             20, "both victims to be running jobs")
    kill_wall = killed.kill()
    kill_held = _in_hand(cluster, store, killed)
    paused.pause(store)
    stop_held = _in_hand(cluster, store, paused)

    done = wait_for(lambda: all_in(store, ids, "done"), 90, "every job to be done")
    _check_ledger(done, cluster.records("runs"))
    bound = cluster.settings.recovery_bound
    for job in done:
        victim = kill_held.get(job.id) or stop_held.get(job.id)
        if victim is None:
            continue
        assert (job.attempt, job.stall_count) == (victim.attempt + 1, 1), (job, victim)
        assert result_of(job)["pid"] == steady.pid, job
        assert victim.lease_until is not None
        assert (job.started_at or 0.0) >= victim.lease_until - 0.05, (job, victim)
        if job.id in kill_held:
            took = (job.started_at or 0.0) - kill_wall
            assert took <= bound, f"job {job.id} re-claimed {took:.2f}s after the kill"
    assert kill_held and stop_held

    # The paused worker wakes up: its handlers finish late and their results are refused.
    paused.send(signal.SIGCONT)

    def stale_refused() -> bool:
        refused = {r["job"] for r in cluster.records("events")
                   if r["pid"] == paused.pid and r["event"] == "lease_lost"}
        return set(stop_held) <= refused

    wait_for(stale_refused, 30, "the paused worker to learn that each of its leases is gone")
    after = {j.id: j for j in jobs(store, ids)}
    for job in done:
        assert (after[job.id].status, after[job.id].attempt, after[job.id].result) == (
            job.status, job.attempt, job.result), "a stale write was applied"
    assert paused.alive() and steady.alive() and server.alive()


@pytest.mark.timeout(150)
def test_server_sigkilled_mid_drain_and_restarted_workers_ride_it_out(
    make_server: MakeServer, make_cluster: MakeCluster, store: Store
) -> None:
    server = make_server(lease_ttl=10.0)
    server.wait_ready()
    # A lease long enough that a server restart fits inside it on a loaded machine.
    cluster = make_cluster(server.url, lease_ttl=10.0)
    workers = [cluster.spawn(4) for _ in range(2)]
    cluster.wait_registered(store, *workers)
    ids = enqueue(store, "crash.work", 0.3, 0.3, n=60)

    def some_done_some_running() -> bool:
        snapshot = jobs(store, ids)
        return (any(j.status == "done" for j in snapshot)
                and any(j.status == "running" for j in snapshot))

    wait_for(some_done_some_running, 30, "the drain to be under way")
    kill_wall = server.kill()
    at_kill = jobs(store, ids)
    assert any(j.status != "done" for j in at_kill), "the drain ended before the kill"
    server.start()
    back = server.wait_ready()
    downtime = back - kill_wall

    done = wait_for(lambda: all_in(store, ids, "done"), 120, "every job to be done")
    for w in workers:
        assert w.alive(), f"{w} did not ride out the server's restart:\n{w.log_text()}"
    # After the restart the same workers take new work, enqueued through the server.
    producer = open_remote(server)
    try:
        more = enqueue(producer, "crash.work", 0.05, 0.05, n=10)
    finally:
        producer.close()
    done += wait_for(lambda: all_in(store, more, "done"), 60, "the jobs after the restart")
    _check_ledger(done, cluster.records("runs"))
    pids = {w.pid for w in workers}
    assert {result_of(j)["pid"] for j in done} <= pids
    # The heartbeats of the jobs running at the kill resumed before their leases ran out
    # whenever the outage was shorter than a lease less one heartbeat interval: then no job
    # was re-run at all (leases decide, and none lapsed).
    s = cluster.settings
    if downtime < s.lease_ttl - s.heartbeat_every - 1.0:
        rerun = [j for j in done if j.attempt != 1]
        assert not rerun, f"re-run although the server was down only {downtime:.1f}s: {rerun}"
    # Spurious lease losses: a finish applied just before the kill whose reply was lost is
    # reported rejected on its retry; the store stays right (checked above). Count them.
    final = {j.id: j for j in done}
    spurious = [r for r in cluster.records("events") if r["event"] == "lease_lost"
                and r["job"] in final and r["attempt"] == final[r["job"]].attempt]
    assert len(spurious) <= 8, spurious  # at most the finishes in flight at the kill
    assert all(w.alive() for w in workers)


@pytest.mark.timeout(120)
def test_two_servers_one_store_workers_spread_across_them(
    make_server: MakeServer, make_cluster: MakeCluster, store: Store
) -> None:
    s1, s2 = make_server(), make_server()
    s1.wait_ready()
    s2.wait_ready()
    c1, c2 = make_cluster(s1.url), make_cluster(s2.url)
    a, b = c1.spawn(2), c1.spawn(2)
    c, d = c2.spawn(2), c2.spawn(2)
    c1.wait_registered(store, a, b, c, d)
    ids: list[int] = []
    for server in (s1, s2):  # producers on both servers
        producer = open_remote(server)
        try:
            ids += enqueue(producer, "crash.work", 1.0, 0.05, n=12)
        finally:
            producer.close()

    wait_for(lambda: held_by(store, a.pid) and held_by(store, c.pid)
             and handlers_started(cluster=c1, pid=a.pid, ids={j.id for j in held_by(store, a.pid)}),
             20, "workers of both servers to hold jobs")
    a_held = {j.id: j for j in held_by(store, a.pid)}
    kill_wall = a.kill()

    done = wait_for(lambda: all_in(store, ids, "done"), 90, "every job to be done")
    records = c1.records("runs") + c2.records("runs")
    _check_ledger(done, records)
    by_pid = {result_of(j)["pid"] for j in done}
    assert by_pid & {a.pid, b.pid}, by_pid  # server 1's workers did work
    assert by_pid & {c.pid, d.pid}, by_pid  # and so did server 2's
    for job in done:
        if job.id in a_held:
            assert (job.attempt, job.stall_count) == (a_held[job.id].attempt + 1, 1), job
            took = (job.started_at or 0.0) - kill_wall
            assert took <= c1.settings.recovery_bound, f"job {job.id} re-run after {took:.2f}s"
    assert all(w.alive() for w in (b, c, d)) and s1.alive() and s2.alive()


@pytest.mark.timeout(150)
def test_client_naming_two_servers_fails_over_when_one_is_killed(
    make_server: MakeServer, make_cluster: MakeCluster, store: Store, tokens: Tokens
) -> None:
    """A worker and a producer whose URL names both servers. Each server is SIGKILLed in
    turn (the other restarted first), so whichever the client was using, it has to move at
    least once; a job running across the switch finishes on its first attempt."""
    from tests.crash.remote import remote_url

    s1, s2 = make_server(lease_ttl=10.0), make_server(lease_ttl=10.0)
    s1.wait_ready()
    s2.wait_ready()
    both = remote_url(tokens.worker, s1.port, s2.port)
    cluster = make_cluster(both, lease_ttl=10.0)
    worker = cluster.spawn(2)
    cluster.wait_registered(store, worker)
    producer = open_remote(s1, s2)
    try:
        ids: list[int] = []
        for victim, other in ((s1, s2), (s2, s1)):
            if not other.alive():
                other.start()
            other.wait_ready()
            [long] = enqueue(producer, "crash.work", 2.0, 0.05)
            wait_for(lambda long=long: handlers_started(cluster, worker.pid, {long}), 20,
                     "the long job to start")
            victim.kill()
            # Enqueued after the kill through the two-host URL: the producer fails over.
            batch = enqueue(producer, "crash.work", 0.05, 0.05, n=5)
            ids += [long, *batch]
            wait_for(lambda batch=batch, long=long: all_in(store, [long, *batch], "done"), 60,
                     "the jobs to be done through the other server")
    finally:
        producer.close()
    done = jobs(store, ids)
    _check_ledger(done, cluster.records("runs"))
    for job in done:
        assert job.attempt == 1, job  # a 10 s lease: the switch cost no attempt
        assert result_of(job)["pid"] == worker.pid
    assert worker.alive(), worker.log_text()
    assert not any(r["event"] == "lease_lost" for r in cluster.records("events"))
    errors = json.dumps(cluster.records("events"))
    assert "rejected" not in errors


@pytest.mark.timeout(150)
def test_client_naming_two_servers_moves_off_a_hung_one_within_the_lease(
    make_server: MakeServer, make_cluster: MakeCluster, store: Store, tokens: Tokens
) -> None:
    """A server that hangs (SIGSTOP: the connection stays open, nothing answers) is worse than
    a dead one: no error comes back, only the call's deadline or a keepalive ends the wait.
    A worker naming two servers, with a per-call deadline shorter than its heartbeat
    interval, must still reach the live one before the leases it holds run out, so its
    running job keeps its first attempt and it keeps taking work."""
    from tests.crash.remote import remote_url

    lease = 10.0
    s1, s2 = make_server(lease_ttl=lease), make_server(lease_ttl=lease)
    s1.wait_ready()
    s2.wait_ready()
    # A per-call deadline (?deadline=) below the heartbeat interval (lease / 3): a call to the
    # hung server gives up in time for the next host to renew the leases.
    hosts = remote_url(tokens.worker, s1.port, s2.port)
    cluster = make_cluster(f"{hosts}?deadline=2", lease_ttl=lease)
    worker = cluster.spawn(2)
    cluster.wait_registered(store, worker)
    producer = open_remote(s2)  # the test's producer talks to the server that stays up
    try:
        [warm] = enqueue(producer, "crash.work", 0.05, 0.05)
        wait_for(lambda: all_in(store, [warm], "done"), 30, "a first job through s1")
        [long] = enqueue(producer, "crash.work", 3.0 * lease, 0.05, interruptible=True)
        wait_for(lambda: handlers_started(cluster, worker.pid, {long}), 20, "the long job to start")
        assert s1.proc is not None
        s1.proc.send_signal(signal.SIGSTOP)
        try:
            batch = enqueue(producer, "crash.work", 0.05, 0.05, n=3)
            wait_for(lambda: all_in(store, [long, *batch], "done"), 6 * lease,
                     "the jobs to be done through s2 while s1 hangs")
        finally:
            s1.proc.send_signal(signal.SIGCONT)
    finally:
        producer.close()
    done = jobs(store, [warm, long, *batch])
    _check_ledger(done, cluster.records("runs"))
    assert [j.attempt for j in done] == [1] * len(done), done
    assert worker.alive()
