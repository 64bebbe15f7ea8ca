"""Logger, tracer and metrics: one place, one service name."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

from idleshare import names

logger = Logger(service=names.SERVICE)
tracer = Tracer(service=names.SERVICE)
metrics = Metrics(namespace=names.METRICS_NAMESPACE, service=names.SERVICE)
