"""Feeds: the programs that bring queries in (record files, Pi-hole and AdGuard Home history, the
dnstap collector), each a source of records handed to a sink (the local store, or a remote
service through a spool). They never need the web app: see feeds/cli.py."""
