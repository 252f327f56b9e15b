"""Testing helpers for tether's users (issue #12): ``drain``, and a pytest plugin
(:mod:`tether.testing.plugin`, loaded by pytest through the ``tether`` entry point) with the
``tether_app`` fixture. Importing this package does not import pytest.
"""

from tether.testing._drain import DrainedJob, DrainFailed, drain

__all__ = ["DrainFailed", "DrainedJob", "drain"]
