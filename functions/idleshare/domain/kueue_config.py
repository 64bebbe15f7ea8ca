"""What the cluster's Kueue manager is configured to do, against what the SchedulerConfig asks of it.

Fair sharing is a setting of the whole Kueue manager (its ``Configuration``, kept by an install in the ConfigMap
``kueue-system/kueue-manager-config``), while ``FairShare`` is per cluster in HyperPod's SchedulerConfig: idleshare
cannot switch Kueue's, so it reads it and names the mismatch in the pool's issues. The mapping idleshare writes:

=========================  ====================================================  ===================================
SchedulerConfig             Kueue object / field idleshare writes                 Kueue Configuration it needs
=========================  ====================================================  ===================================
``FairShare: Enabled``      each ClusterQueue's ``spec.fairSharing.weight`` =      ``fairSharing`` present (v1beta2;
                            the team's ``FairShareWeight`` (0-100, as is; none     v1beta1: ``fairSharing.enable``)
                            given: no weight, Kueue's default 1)
``FairShare: Disabled``     no weight (every team Kueue's default 1)              ``fairSharing`` absent: borrowing is
                                                                                  first come, first served
``FairShareWeight: 0``      ``weight: "0"``: Kueue's "infinite share": the team   fair sharing on
                            borrows only what nobody else wants, and its
                            borrowed work is the first any other team's
                            fair-sharing preemption takes (HyperPod's "lowest")
``PriorityClasses``         a ``WorkloadPriorityClass`` ``<Name>-priority`` with   --
                            ``value`` = ``Weight``
``PreemptTeamTasks``        ``spec.preemption.withinClusterQueue``:               --
                            ``LowerPriority`` / ``Never``
=========================  ====================================================  ===================================

Why ``Disabled`` on a Kueue with fair sharing on is an issue and not something idleshare writes around: with
fair sharing on, Kueue orders the cohort's admissions by dominant-resource share and lets a borrower preempt
another's borrowed work until the shares are even (``reclaimWithinCohort``, which every lender needs to get its
quota back, is also what enables that); no ClusterQueue field turns it back into first come, first served.
"""

from __future__ import annotations

from dataclasses import dataclass

from idleshare.domain.model import SchedulerConfig
from idleshare.domain.pool import Issue, PoolResult

KUEUE_CONFIG_NAMESPACE = "kueue-system"
KUEUE_CONFIG_NAME = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_CONFIG_SUBJECT = f"{KUEUE_CONFIG_NAMESPACE}/{KUEUE_CONFIG_NAME}"
REQUIRED_FRAMEWORKS = ("batch/job",)
"""Kueue integrations the teams' workloads need: HyperPod task governance submits ``batch/v1`` Jobs."""
DEFAULT_FRAMEWORKS = ("batch/job",)
"""What Kueue enables when the Configuration lists no framework."""


@dataclass(frozen=True, slots=True)
class KueueConfig:
    """The parts of Kueue's manager ``Configuration`` idleshare checks."""

    fair_sharing: bool
    preemption_strategies: tuple[str, ...] = ()
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS


@dataclass(frozen=True, slots=True)
class KueueConfigReading:
    """One read of Kueue's configuration: the config, or why there is none (``problem``: 403, 404, garbage)."""

    config: KueueConfig | None
    problem: str = ""


# The pool's issues about Kueue's configuration (:func:`kueue_config_issues`).
FAIR_SHARE_WITHOUT_KUEUE_FAIR_SHARING = "FairShareWithoutKueueFairSharing"
"""FairShare Enabled while Kueue's fair sharing is off: the weights do nothing (a warning)."""
KUEUE_FAIR_SHARING_WITH_FAIR_SHARE_DISABLED = "KueueFairSharingWithFairShareDisabled"
"""FairShare Disabled while Kueue's fair sharing is on: borrowing is evened out anyway (a warning)."""
KUEUE_INTEGRATION_MISSING = "KueueIntegrationMissing"
"""A framework of :data:`REQUIRED_FRAMEWORKS` not enabled: the teams' Jobs are not queued (an error)."""
KUEUE_CONFIG_UNREADABLE = "KueueConfigUnreadable"
"""Kueue's Configuration could not be read: nothing above is checked (a warning)."""


def kueue_config_issues(reading: KueueConfigReading | None, scheduler: SchedulerConfig) -> list[Issue]:
    """The named issues of a SchedulerConfig that this Kueue will not honour. ``None``: not read (no issue)."""
    if reading is None:
        return []
    config = reading.config
    if config is None:
        return [
            Issue(
                "warning",
                KUEUE_CONFIG_UNREADABLE,
                KUEUE_CONFIG_SUBJECT,
                f"cannot read Kueue's configuration ({reading.problem or 'no Configuration'}): idleshare cannot "
                f"check that Kueue's fair sharing matches FairShare {'Enabled' if scheduler.fair_share else 'Disabled'}"
                f" and that the {', '.join(REQUIRED_FRAMEWORKS)} integration is on",
            )
        ]
    issues: list[Issue] = []
    if scheduler.fair_share and not config.fair_sharing:
        issues.append(
            Issue(
                "warning",
                FAIR_SHARE_WITHOUT_KUEUE_FAIR_SHARING,
                KUEUE_CONFIG_SUBJECT,
                "FairShare is Enabled but Kueue's fair sharing is off (no fairSharing section in its Configuration): "
                "the teams' FairShareWeight do nothing and idle capacity goes first come, first served; add "
                "fairSharing.preemptionStrategies to the Kueue manager's Configuration",
            )
        )
    if not scheduler.fair_share and config.fair_sharing:
        issues.append(
            Issue(
                "warning",
                KUEUE_FAIR_SHARING_WITH_FAIR_SHARE_DISABLED,
                KUEUE_CONFIG_SUBJECT,
                "FairShare is Disabled but Kueue's fair sharing is on (manager-wide): Kueue still evens out borrowing "
                "by dominant-resource share (every team at the default weight 1; a weight of 0 would be always "
                "last) and preempts a borrower's work for another's, not first come, first served; remove the "
                "fairSharing section from the Kueue manager's Configuration",
            )
        )
    missing = [f for f in REQUIRED_FRAMEWORKS if f not in config.frameworks]
    if missing:
        issues.append(
            Issue(
                "error",
                KUEUE_INTEGRATION_MISSING,
                KUEUE_CONFIG_SUBJECT,
                f"Kueue's integrations.frameworks lacks {', '.join(missing)}: the teams' Jobs are not queued by the "
                f"limits idleshare writes (enabled: {', '.join(config.frameworks) or 'none'})",
            )
        )
    return issues


def with_kueue_config(result: PoolResult, reading: KueueConfigReading | None, scheduler: SchedulerConfig) -> PoolResult:
    """``result`` with the issues of :func:`kueue_config_issues` among its own (sorted as ``compute`` sorts)."""
    return result.with_issues(kueue_config_issues(reading, scheduler))
