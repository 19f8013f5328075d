"""The privacy settings applied at ingest, stored records made coarser (rewrites), and the
strings nothing refers to any more."""
