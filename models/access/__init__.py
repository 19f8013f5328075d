"""Keys and signed tokens, the audit of changes (admin actions) and of reads (access log)."""
