"""Test-side Kubernetes machinery: Kueue CRD validator, a loopback kube-apiserver simulator, fixtures.

The product code never imports this package.
"""
