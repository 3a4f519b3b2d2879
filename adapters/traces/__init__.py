"""Job traces in: the Alibaba GPU trace, Philly and ITP job traces read into instances, and
synthetic fat-tree instances drawn from the traces' statistics."""
