# syntax=docker/dockerfile:1
# Herald: one static binary, run as `herald api`, `herald worker` or `herald migrate`.
#   docker build -t herald .

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/herald ./cmd/herald

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/herald /usr/local/bin/herald
ENV HERALD_HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/herald"]
CMD ["api"]
