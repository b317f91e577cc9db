"""trglab.experiments (package marker)."""
