"""The idleshare CDK app (entry point: `python -m infra.app`, see cdk.json)."""
