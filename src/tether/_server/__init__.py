"""``tether server``: the store served to remote workers and producers (issue #21).

An operations layer: it uses the public API and the store contract (``tether.stores``) only,
never a store's private modules, and keeps no state of its own that a restart would lose.
"""
