# Cluster DNS for the real node (scripts/real-node.sh): CoreDNS built from
# its Go module by scripts/k8s-tools.sh (a static binary). The build context
# is a directory holding that binary as ./coredns (scripts/images.sh).
FROM scratch
COPY coredns /coredns
USER 65532:65532
EXPOSE 53 53/udp
ENTRYPOINT ["/coredns"]
