"""Feeds (command line, no HTTP): history importers for Pi-hole's FTL database and AdGuard Home's query log."""
