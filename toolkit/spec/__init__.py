"""Load and check the image specs (images/): the catalog of variants, the schema, the values a spec may hold."""
