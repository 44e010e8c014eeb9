"""karpenter-node-holder: hold every node while the cluster has just scaled up."""

__version__ = "0.1.0"
