"""A built environment: its on-disk layout, generations, build and flip, the env profile, the fingerprint."""
