"""What every Lambda entry point and the admin API share at run time: settings, wiring, observability."""
