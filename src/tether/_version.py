"""The version of this tether (one place, so modules need not import the package)."""

__version__ = "0.1.0"
