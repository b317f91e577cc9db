"""trglab.models (package marker)."""
