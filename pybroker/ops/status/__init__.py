"""The status page: the sampler's history, the page's model, and its HTML and SVG drawing."""
