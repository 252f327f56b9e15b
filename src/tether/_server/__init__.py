"""``tether server`` (issue #21): a store served over gRPC to remote workers and producers.

An operations layer: it uses only the public API and the store contract
(:mod:`tether.stores`), never a store's private modules, and keeps no state a restart would
lose (leases live in the store; a dropped connection is not a dead worker).
"""
