"""Records coming in: a batch stored, imports' resume points, feeds' losses."""
