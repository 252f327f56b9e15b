"""The worker: fetcher, executor, heartbeater, completer, deadlines and shutdown."""
