import trglab  # noqa: F401  (switches JAX to float64 before any test)
