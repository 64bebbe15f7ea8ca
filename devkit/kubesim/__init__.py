"""A Kubernetes API simulator (loopback HTTP, the REST subset idleshare uses) and a Kueue CRD validator."""
