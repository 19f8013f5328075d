"""What every process of the service needs before any store: the clock, the installation's
settings, how a long-running process runs. Imports nothing of models/."""
