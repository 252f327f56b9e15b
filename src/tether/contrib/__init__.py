"""Integrations with web frameworks (Django, FastAPI). Each is an optional extra: nothing here
is imported by tether itself, so the core keeps no runtime dependencies."""
