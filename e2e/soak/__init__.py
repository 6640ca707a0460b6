"""The lifecycle soak: a compressed year of a cluster's life with every admission call counted
(README.md; run it with e2e/soak/soak.py)."""
