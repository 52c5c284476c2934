"""Model arithmetic shared by the cdma elements, the topologies and the closed-form model:
link bandwidths, compression-ratio estimates, GPU presets."""
