"""Make the simulator fixtures available to the tests of this package."""

from tests.kube.fixtures import kube_sim, kube_sim_tls, kubeconfig, make_kubeconfig

__all__ = ["kube_sim", "kube_sim_tls", "kubeconfig", "make_kubeconfig"]
