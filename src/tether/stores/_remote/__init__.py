"""The ``tether://`` store: the store contract spoken to a ``tether server`` over gRPC
(issue #21). ``url`` parses the URL, ``channel`` makes the calls (failover, deadlines, error
mapping), ``store`` is the contract's methods.
"""
