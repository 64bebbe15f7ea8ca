"""A Lambda context object for invoking the handlers in process (the devkit's embedded services, the tests)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LambdaContext:
    """What Lambda passes a handler as ``context``: what Powertools' logger reads (name, memory, ARN,
    request id) and the time left: ``remaining_ms`` at every call (a constant, so the test's clock, not
    the wall clock, decides what a wait costs)."""

    function_name: str = "idleshare-test"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "test-request"
    region: str = "us-east-1"
    account: str = "123456789012"
    remaining_ms: int = 300_000
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = "test"
    function_version: str = "$LATEST"

    def __post_init__(self) -> None:
        self.invoked_function_arn = (
            self.invoked_function_arn or f"arn:aws:lambda:{self.region}:{self.account}:function:{self.function_name}"
        )
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
