"""History importers (command line): Pi-hole's FTL database and AdGuard Home's query log."""
