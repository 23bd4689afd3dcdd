"""The gates as the host sees them: a build's gate report, an existing image's gates, a base checked against its
file, the gates as a container-structure-test config."""
