"""Feeds (command line, no HTTP): the Pi-hole and AdGuard Home history importers, the dnstap collector."""
