"""Development kit: never deployed, never imported by the Lambda code.

``devkit.kubesim`` — a loopback Kubernetes API server that validates Kueue objects like a real
apiserver with the Kueue CRDs installed (used by the tests and by ``idleshare replay --local``);
``devkit.embedded`` — the real handlers on in-process services (moto + the simulator);
``devkit.scenario`` — replay scenarios with expectations; ``devkit.demo`` — ``make demo``.
Needs the ``dev`` dependency group (moto, cel-python, pyyaml).
"""
