"""The thread pool: handlers run on threads of the worker process (``pool="thread"``)."""
