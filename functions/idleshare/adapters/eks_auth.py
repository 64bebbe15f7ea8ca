"""How idleshare reaches an EKS cluster's API: its endpoint and CA, and a bearer token.

The token is the one ``aws eks get-token`` / aws-iam-authenticator produce: a presigned STS
``GetCallerIdentity`` URL with the header ``x-k8s-aws-id: <cluster name>`` signed into it,
``X-Amz-Expires=60``, base64url-encoded without padding behind the prefix ``k8s-aws-v1.``. EKS
accepts such a token for 15 minutes after its signing time, the wall-clock ``X-Amz-Date`` signed
into it, so a token is aged by the wall clock too: reused for 10 minutes
(:data:`TOKEN_REFRESH_SECONDS`) and then re-signed, well before EKS refuses it.
:meth:`EksConnector.invalidate` drops it at once (the Kubernetes adapter does so after a 401, then
retries the request once with a fresh token). Signing is local (no call to STS); ``DescribeCluster``
is called once per cluster per warm Lambda.

Why the wall clock: a Lambda's monotonic clock does not advance while its sandbox is frozen between
invocations, so a token kept by monotonic age can be hours old by the time it is sent. The wall
clock can jump (an NTP step) — so a token is reused only while *both* its wall-clock age is within
``[0, TOKEN_REFRESH_SECONDS)`` (a clock stepped back makes the age negative: sign anew) and its
monotonic age is under the same bound.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from idleshare.adapters.errors import translate_aws
from idleshare.errors import PermanentError, RetryableError

if TYPE_CHECKING:  # pragma: no cover
    import boto3

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_EXPIRES_SECONDS = 60
TOKEN_REFRESH_SECONDS = 10 * 60
"""EKS accepts a token for 15 minutes after it was signed (by the wall clock); use it for 10, then sign a new
one: 5 minutes of margin for a request in flight, a skewed clock, a frozen sandbox."""


@dataclass(frozen=True, slots=True)
class ClusterEndpoint:
    """What ``eks:DescribeCluster`` says about reaching a cluster's API server."""

    name: str
    endpoint: str  # https://<id>.<gr7>.<region>.eks.amazonaws.com
    ca_data: str  # base64 of the PEM bundle, exactly as EKS returns it

    @property
    def ca_pem(self) -> str:
        return base64.b64decode(self.ca_data).decode("ascii")


class EksConnector:
    """Endpoint, CA and bearer token of EKS clusters, cached for the life of a warm Lambda.

    ``eks_client`` is a boto3 EKS client. ``sts``: a boto3 STS client of the same region, or a
    ``boto3.Session`` to build one from (also accepted as ``session=``); omitted, the default
    session. A built client is in the EKS client's region, and botocore resolves it to the
    *regional* endpoint ``sts.<region>.amazonaws.com``, which EKS expects, with ``config`` (the
    function's ``botocore.config.Config``) when given. ``clock``: the wall clock (epoch seconds, what
    the token's ``X-Amz-Date`` is); ``monotonic``: a clock that never steps (both age a token).
    """

    def __init__(
        self,
        eks_client: Any,
        sts: Any | None = None,
        *,
        session: boto3.Session | None = None,
        config: Any = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._eks = eks_client
        sts_client = sts
        if sts is not None and not hasattr(sts, "meta"):  # a Session, not a client
            session, sts_client = sts, None
        if sts_client is None:
            region = eks_client.meta.region_name
            if session is None:
                import boto3

                sts_client = boto3.client("sts", region_name=region, config=config)
            else:
                sts_client = session.client("sts", region_name=region, config=config)
        self._sts = sts_client
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._endpoints: dict[str, ClusterEndpoint] = {}
        self._tokens: dict[str, tuple[str, float, float]] = {}  # cluster -> (token, signed at: wall, monotonic)
        events = self._sts.meta.events
        # The AWS CLI's recipe (awscli/customizations/eks/get_token.py): carry the cluster name
        # from the call's params into the request context, then into a signed header.
        events.register(
            "provide-client-params.sts.GetCallerIdentity", _cluster_name_to_context, unique_id="idleshare-k8s-aws-id-1"
        )
        events.register("before-sign.sts.GetCallerIdentity", _cluster_name_header, unique_id="idleshare-k8s-aws-id-2")

    @property
    def sts_endpoint(self) -> str:
        return str(self._sts.meta.endpoint_url)

    def describe(self, cluster_name: str) -> ClusterEndpoint:
        """Endpoint and CA of ``cluster_name`` (``eks:DescribeCluster``, once per cluster)."""
        cached = self._endpoints.get(cluster_name)
        if cached is not None:
            return cached
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            cluster = self._eks.describe_cluster(name=cluster_name)["cluster"]
        except (ClientError, BotoCoreError) as exc:
            raise translate_aws(exc, operation="eks:DescribeCluster", subject=f"cluster {cluster_name!r}") from exc
        endpoint = cluster.get("endpoint")
        ca_data = (cluster.get("certificateAuthority") or {}).get("data")
        if not endpoint or not ca_data:
            status = cluster.get("status", "?")
            message = f"EKS cluster {cluster_name!r} has no API endpoint yet (status {status})"
            if status in ("CREATING", "UPDATING", "PENDING"):
                raise RetryableError(message, operation="eks:DescribeCluster")
            raise PermanentError(message, operation="eks:DescribeCluster")
        result = ClusterEndpoint(name=cluster_name, endpoint=endpoint, ca_data=ca_data)
        self._endpoints[cluster_name] = result
        return result

    def token(self, cluster_name: str) -> str:
        """A bearer token for ``cluster_name``: the cached one while younger than
        :data:`TOKEN_REFRESH_SECONDS` by the wall clock (and by the monotonic clock), else a new one."""
        with self._lock:
            wall, mono = self._clock(), self._monotonic()
            cached = self._tokens.get(cluster_name)
            if (
                cached is not None
                and 0 <= wall - cached[1] < TOKEN_REFRESH_SECONDS
                and mono - cached[2] < TOKEN_REFRESH_SECONDS
            ):
                return cached[0]
            token = self._sign(cluster_name)
            self._tokens[cluster_name] = (token, wall, mono)
            return token

    def invalidate(self, cluster_name: str) -> None:
        """Forget the token of ``cluster_name`` (after a 401): the next :meth:`token` signs anew."""
        with self._lock:
            self._tokens.pop(cluster_name, None)

    def _sign(self, cluster_name: str) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            url = self._sts.generate_presigned_url(
                "get_caller_identity",
                Params={CLUSTER_ID_HEADER: cluster_name},
                ExpiresIn=PRESIGN_EXPIRES_SECONDS,
                HttpMethod="GET",
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate_aws(
                exc, operation="sts:GetCallerIdentity (presign)", subject=f"cluster {cluster_name!r}"
            ) from exc
        encoded = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
        return TOKEN_PREFIX + encoded


def _cluster_name_to_context(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    if CLUSTER_ID_HEADER in params:
        context[CLUSTER_ID_HEADER] = params.pop(CLUSTER_ID_HEADER)


def _cluster_name_header(request: Any, **_: Any) -> None:
    name = request.context.get(CLUSTER_ID_HEADER)
    if name is not None:
        request.headers[CLUSTER_ID_HEADER] = name
