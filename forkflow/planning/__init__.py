"""Planning: what each upstream commit touches, risk chains and low-risk bundles.  [pure]"""
