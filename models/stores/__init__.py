"""The record store's seam: the one interface through which the app reads and writes records and
what is derived from them, and the store bound for this process."""
