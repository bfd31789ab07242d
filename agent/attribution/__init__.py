"""Who holds each GPU: kubelet pod-resources, /proc cgroups, Slurm job files, manual."""
