"""What the tests share: helpers, and the real servers and programs they run (see docs/testing.md)."""
