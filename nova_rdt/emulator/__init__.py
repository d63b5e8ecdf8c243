"""A kernel-faithful resctrl filesystem for hosts without RDT hardware."""
