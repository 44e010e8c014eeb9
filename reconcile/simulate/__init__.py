"""`node-holder simulate`: replay node timelines to choose a hold duration (docs/simulate.md)."""
