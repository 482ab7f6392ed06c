"""Jobs that span stages: ``up`` (lock check, build, verify) and adoption of a hand-built environment."""
