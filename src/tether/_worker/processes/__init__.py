"""The process pool: handlers run in child processes (``pool="process"``)."""
