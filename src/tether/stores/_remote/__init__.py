"""The remote store: a ``tether server`` used as a store (``tether://``, ``tethers://``)."""
