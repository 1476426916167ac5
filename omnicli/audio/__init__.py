"""Audio inside omni: samples, file formats, resampling, sound devices and where speech goes."""
