"""The portal's pages, forms and REST API: the top layer, built on tenancy, scheduling and billing."""
