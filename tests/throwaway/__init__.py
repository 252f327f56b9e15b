"""Throwaway servers a test starts, owns and stops: PostgreSQL clusters, redis-servers, PgBouncers.

A test that must stop, promote, fill or reconfigure a server never touches the shared servers on
5432 and 6379: it starts its own on a free loopback port (one module per kind of server here),
and kills only the processes it started, by PID.
"""
