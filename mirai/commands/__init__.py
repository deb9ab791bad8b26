"""Subcommands of the `mirai` command line."""
