# A static banlieue binary on a distroless base: the product only (-tags
# release leaves out "banlieue dev", its control plane and the simulators;
# TestReleaseBuildHoldsTheProductOnly checks what it links).
#   docker build -t ghcr.io/firestoned/banlieue:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd cmd
COPY pkg pkg
# The manifests banlieue bootstrap installs (embedded).
COPY artifacts artifacts
RUN CGO_ENABLED=0 go build -tags release -trimpath -ldflags="-s -w" -o /out/banlieue ./cmd/banlieue

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/banlieue /banlieue
USER 65532:65532
ENTRYPOINT ["/banlieue"]
