"""The worker: claims jobs, runs them in a pool, keeps their leases alive, writes outcomes.

``worker.py`` wires the parts and runs the shutdown (``shutdown.py``); ``fetcher.py`` claims;
``pool.py`` is the one interface to where handlers run: ``threads/`` (a thread pool in this
process) or ``processes/`` (child processes). ``registry.py`` holds the attempts in flight,
``heartbeater.py`` renews their leases, ``deadlines.py`` times them out, ``outcome.py`` decides
how each ended and ``completer.py`` writes it. Every background loop is a
:class:`tether._loop.Loop`.
"""
