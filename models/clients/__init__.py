"""The activity log read, client entries and their last activity, deletion, and the sizes for
the metrics."""
