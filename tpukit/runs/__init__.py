"""Runs on disk: result records and listing, epoch backups, the trained model's save/load, its export in each format."""
