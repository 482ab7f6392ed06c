"""The same stack on every node of a Ray cluster: the driver, the per-node tasks and the long-lived agent."""
