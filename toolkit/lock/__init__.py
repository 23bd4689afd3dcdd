"""The locks (images/<family>.lock.json): policies, what remotes and package indexes say now, the lock file."""
