"""A plan as files: the Dockerfile, the staged build context and its input hash, the gates' payload, the lint."""
