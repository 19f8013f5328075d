"""The schema's history: creating a new database and bringing an older one to the current
version, run at start and by a command."""
