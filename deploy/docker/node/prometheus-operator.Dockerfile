# prometheus-operator, its config reloader and Prometheus for the real node's
# prometheus-operator test (tests/realnode/prometheus_operator.sh), made
# locally because no registry is reachable. The build context is a directory
# holding the three static binaries that scripts/k8s-tools.sh builds from
# their Go modules (scripts/images.sh monitoring); one target per image. The
# paths are those of the upstream images: the operator's StatefulSet runs
# /bin/prometheus-config-reloader by name and Prometheus by its entrypoint.
FROM scratch AS prometheus-operator
COPY prometheus-operator /bin/operator
USER 65534:65534
ENTRYPOINT ["/bin/operator"]

FROM scratch AS prometheus-config-reloader
COPY prometheus-config-reloader /bin/prometheus-config-reloader
USER 65534:65534
ENTRYPOINT ["/bin/prometheus-config-reloader"]

FROM scratch AS prometheus
COPY prometheus /bin/prometheus
WORKDIR /prometheus
USER 65534:65534
EXPOSE 9090
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
