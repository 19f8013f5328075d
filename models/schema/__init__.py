"""The tables, and the small rows every room shares: store settings, endpoints, job leases."""
