"""What is counted from the records: the rollups and their counting, first-seen names, the
statistics of clients not logged, and the statistics read."""
