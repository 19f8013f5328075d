"""Outputs (records forwarded to receivers, with their cursors and leases) and alert rules with
their alerts."""
