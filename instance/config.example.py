# Copy to instance/config.py. Environment variables of the same names override these.
# ANALYTICS_DATABASE = "/var/lib/dns-analytics/analytics.db"
# ANALYTICS_API_KEY = "a-long-random-secret"
# ANALYTICS_RETENTION_DAYS = 33
# ANALYTICS_MAX_BODY_MB = 16
# ANALYTICS_MAX_BATCH = 50000
