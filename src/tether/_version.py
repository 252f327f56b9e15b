"""The version of this tether (one place, so modules need not import the package)."""

__version__ = "0.2.0.dev0"  # the next release; docs/releases.md
