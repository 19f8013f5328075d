"""Background jobs the workers run (a lease in the store lets one at a time run each)."""
