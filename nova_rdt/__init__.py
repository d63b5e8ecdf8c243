"""nova-rdt: Intel RDT (CAT, CDP, MBA, CMT/MBM) isolation for Nova."""
