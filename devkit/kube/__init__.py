"""The real Kubernetes + Kueue stack (etcd, kube-apiserver, the Kueue manager) on 127.0.0.1.

``build.sh`` builds the pinned binaries into a cache outside the repository; :mod:`devkit.kube.stack`
starts them; :mod:`devkit.kube.client` is a small admin client for tests and the demo.
"""
