"""Development kit: never deployed, never imported by the Lambda code.

``devkit.kube`` — the real Kubernetes stack (etcd, kube-apiserver, kubectl and the Kueue manager built from
pinned Go modules, started on 127.0.0.1), an admin client and a recording fault proxy in front of it;
``devkit.embedded`` — the real handlers on in-process services (moto + that stack);
``devkit.scenario`` — replay scenarios with expectations; ``devkit.demo`` — ``make demo``.
Used by the tests and by ``idleshare replay --local``; needs the ``dev`` dependency group (moto, pyyaml).
"""
