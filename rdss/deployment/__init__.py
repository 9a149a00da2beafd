"""A deployment described: its settings, topology, routes, vendors and capacity."""
