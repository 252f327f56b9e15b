"""The wire protocol tether clients and ``tether server`` share (issue #21)."""
