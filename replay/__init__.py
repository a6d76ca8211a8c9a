"""Local replay, snapshots, time travel, the audit engine and its reports."""
