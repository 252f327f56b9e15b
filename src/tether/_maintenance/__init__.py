"""Maintenance services: the reaper, the pruner, and the leader election they run under."""
